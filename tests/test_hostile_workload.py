"""Hostile generate, train and diffuse workloads (issue 32): numbers that are finite and within any
integer a workload holds, but nonsense for their field (a batch of 10**15, a learning rate of
1e15, a sequence beyond the model's context, 10**9 denoising steps, a negative rms_norm_eps) end
in one line naming file:line and field, exit 2, no traceback, through `tpubench validate`
(docs/workloads.md#limits). Non-finite and 64-bit-overflowing numbers are tests/test_hostile_traffic.py's."""

from __future__ import annotations

import copy
import functools
import importlib.util
import re
from pathlib import Path

import pytest
import yaml
from helpers_cli import click_command, numeric_leaves, validate  # noqa: F401 (fixtures)

from tpubench.models.config_check import HEADS_DIVIDE_HIDDEN
from tpubench.models.config_table import load_table

REPO = Path(__file__).resolve().parents[1]
WORKLOADS = REPO / "workloads"
SHIPPED = sorted(WORKLOADS.glob("*.yaml"))
KIND = {p: (yaml.safe_load(p.read_text())["scenario"].get("kind") or "generate") for p in SHIPPED}
# The kinds this file is about; serve's leaves are bounded by serving/traffic/bounds.py.
OURS = [p for p in SHIPPED if KIND[p] in ("generate", "train", "diffuse")]




# libyaml where PyYAML has it: a few hundred workloads are written here.
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@functools.lru_cache(maxsize=None)
def shipped(source: Path) -> dict:
    return yaml.load(source.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def write(tmp_path: Path, data: dict, name: str = "w.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.dump(data, Dumper=_Dumper, sort_keys=False))
    return path


def changed(source: Path | dict, *edits: tuple) -> dict:
    """A shipped workload (or a dict) with (path..., value) edits; a value of DROP removes the key."""
    data = copy.deepcopy(source if isinstance(source, dict) else shipped(source))
    for *path, value in edits:
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(node, dict) else node[part]
        if value is DROP:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = value
    return data


DROP = object()
QWEN_DENSE = WORKLOADS / "qwen3_dense.yaml"          # context 40,960; its small scale 4,096
QWEN_MOE = WORKLOADS / "qwen3_moe.yaml"
GEMMA = WORKLOADS / "gemma4_moe.yaml"
TRAIN = WORKLOADS / "qwen3_dense_train.yaml"
FLUX = WORKLOADS / "flux_diffuse.yaml"
SDXL = WORKLOADS / "sdxl_diffuse.yaml"
# Small workloads of families no shipped workload has: llama (its config requires heads dividing the
# hidden size) and DeepSeek-V3 (group-limited routing).
LLAMA = {"name": "llama_tiny", "model": {"family": "llama", "config": {
    "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 512}},
    "scenario": {"kind": "generate", "batch_size": 1, "input_length": 16, "output_length": 4}}
DEEPSEEK = {"name": "deepseek_tiny", "model": {"family": "deepseek_v3", "config": {
    "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4,
    "intermediate_size": 64, "moe_intermediate_size": 16, "n_routed_experts": 8, "n_group": 4, "topk_group": 2,
    "num_experts_per_tok": 2, "first_k_dense_replace": 0, "kv_lora_rank": 16, "q_lora_rank": 16,
    "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 8, "vocab_size": 256,
    "max_position_embeddings": 512}},
    "scenario": {"kind": "generate", "batch_size": 1, "input_length": 16, "output_length": 4}}


# ----------------------------------------------------------------------------- the shipped files


@pytest.mark.parametrize("source", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_workload_still_validates(validate, source):
    code, err = validate(source)
    assert code == 0, err


@pytest.mark.parametrize("data", [LLAMA, DEEPSEEK], ids=["llama", "deepseek_v3"])
def test_the_small_test_workloads_validate(tmp_path, validate, data):
    code, err = validate(write(tmp_path, data))
    assert code == 0, err


# ----------------------------------------------------------------------------- every leaf



def _huge(value):
    # Far inside a signed 64-bit integer (which tests/test_hostile_traffic.py covers), far outside any field.
    return 10 ** 15 if isinstance(value, int) else 1e15


def _negative(value):
    return -1 if isinstance(value, int) else -1.0


# Any non-negative integer is a seed: 10**15 is not nonsense there (a negative one is: numpy refuses it).
ANY_SIZE = {("measurement", "seed")}
LEAF_CASES = [pytest.param(source, path, make(value),
                           id=f"{source.stem}:{'.'.join(map(str, path))}={make.__name__[1:]}")
              for source in OURS
              for path, value in numeric_leaves(shipped(source))
              for make in (_huge, _negative) if not (make is _huge and path in ANY_SIZE)]


@pytest.mark.parametrize("source, path, value", LEAF_CASES)
def test_every_numeric_leaf_refuses_huge_and_negative_numbers(tmp_path, validate, source, path, value):
    """Each number of every shipped generate, train and diffuse workload (model config values,
    scales and measurement included) in turn replaced by 10**15 (1e15) or -1: a clear error naming
    its field (a list's item by the list)."""
    target = write(tmp_path, changed(source, (*path, value)), source.name)
    code, err = validate(target)
    named = path[:max(i for i, part in enumerate(path) if isinstance(part, str)) + 1]
    assert code == 2 and f"{target}:" in err and f": {'.'.join(map(str, named))}" in err, err


# ----------------------------------------------------------------------------- scenario values

GENERATE_CASES = [
    (QWEN_DENSE, [("scenario", "batch_size", 10 ** 15)], "scenario.batch_size", "less than or equal to 65536"),
    (QWEN_DENSE, [("scenario", "input_length", 40_000), ("scenario", "output_length", 1_000)],
     "scenario.input_length", "40,000 prompt + 1,000 output tokens exceed the model's context of 40,960 tokens "
                              "(model.config.max_position_embeddings, scale 'full')"),
    (QWEN_DENSE, [("scenario", "output_length", [256, 40_960])], "scenario.output_length",
     "1,024 prompt + 40,960 output tokens exceed"),
    # The small scale's own lengths against its own (smaller) context.
    (QWEN_DENSE, [("scales", "small", "scenario", "input_length", 4_080)], "scales.small.scenario.input_length",
     "4,080 prompt + 32 output tokens exceed the model's context of 4,096 tokens"),
    # A scale without lengths of its own runs the section's, against its own context.
    (QWEN_DENSE, [("scales", "small", "scenario", DROP), ("scenario", "input_length", 8_000)],
     "scenario.input_length", "scale 'small'"),
    (QWEN_DENSE, [("scenario", "batch_size", [1, 65_536]), ("scenario", "input_length", 4096)], "scenario.batch_size",
     "a batch of 65,536 sequences of 4,352 tokens holds 285,212,672 tokens, more than a batch's 268,435,456"),
    (QWEN_DENSE, [("scenario", "batch_size", [1, 10 ** 15])], "scenario.batch_size.1", "less than or equal to 65536"),
    (QWEN_DENSE, [("scales", "small", "scenario", "batch_size", 10 ** 6)], "scales.small.scenario.batch_size",
     "less than or equal to 65536"),
    (QWEN_DENSE, [("scenario", "input_length", 10 ** 9)], "scenario.input_length", "less than or equal to 16777216"),
    (QWEN_DENSE, [("measurement", "seed", -1)], "measurement.seed", "greater than or equal to 0"),
]
TRAIN_CASES = [
    (TRAIN, [("scenario", "optimizer", "lr", 1e15)], "scenario.optimizer.lr", "less than or equal to 10"),
    (TRAIN, [("scenario", "optimizer", "lr", 0)], "scenario.optimizer.lr", "greater than 0"),
    (TRAIN, [("scenario", "optimizer", "betas", [0.9, 1.0])], "scenario.optimizer.betas.1", "less than 1"),
    (TRAIN, [("scenario", "optimizer", "betas", [-0.1, 0.95])], "scenario.optimizer.betas.0", "greater than or equal"),
    (TRAIN, [("scenario", "optimizer", "eps", 5.0)], "scenario.optimizer.eps", "less than or equal to 1"),
    (TRAIN, [("scenario", "optimizer", "weight_decay", 1e9)], "scenario.optimizer.weight_decay", "less than or equal"),
    (TRAIN, [("scenario", "gradient_accumulation", 10 ** 6)], "scenario.gradient_accumulation",
     "less than or equal to 4096"),
    (TRAIN, [("scenario", "batch_size", 10 ** 15)], "scenario.batch_size", "less than or equal to 65536"),
    (TRAIN, [("scenario", "sequence_length", 50_000)], "scenario.sequence_length",
     "50000 tokens exceed the model's max_position_embeddings (40960, scale 'full')"),
    (TRAIN, [("scenario", "batch_size", 65_536), ("scenario", "sequence_length", 8192)], "scenario.batch_size",
     "a micro-batch of 65,536 sequences of 8,192 tokens holds 536,870,912 tokens"),
    (TRAIN, [("scenario", "gradient_accumulation", 4096), ("scenario", "batch_size", [4, 128])],
     "scenario.gradient_accumulation", "4,096 micro-steps of 524,288 tokens: 2,147,483,648 tokens an optimizer step"),
    (TRAIN, [("scales", "small", "scenario", "sequence_length", 8192)], "scales.small.scenario.sequence_length",
     "(4096, scale 'small')"),
]
DIFFUSE_CASES = [
    (FLUX, [("scenario", "guidance", 1e15)], "scenario.guidance", "less than or equal to 100"),
    (FLUX, [("scenario", "guidance", [3.5, -1.0])], "scenario.guidance.1", "greater than or equal to 0"),
    (FLUX, [("scenario", "resolution", 10 ** 6)], "scenario.resolution", "less than or equal to 8192"),
    (FLUX, [("scenario", "steps", 10 ** 9)], "scenario.steps", "less than or equal to 1000"),
    (FLUX, [("scenario", "images_per_prompt", 10 ** 5)], "scenario.images_per_prompt", "less than or equal to 1024"),
    (FLUX, [("scenario", "prompt_words", 10 ** 6)], "scenario.prompt_words", "less than or equal to 1024"),
    (FLUX, [("scenario", "max_sequence_length", 4096)], "scenario.max_sequence_length", "less than or equal to 512"),
    (FLUX, [("scenario", "images_per_prompt", 1024), ("scenario", "resolution", 2048)], "scenario.images_per_prompt",
     "1,024 images of 2,048 x 2,048 px in one call: 4,294,967,296 pixels"),
    (FLUX, [("scales", "small", "config", "resolution", 10 ** 6)], "scales.small.config.resolution",
     "1,000,000 is more than resolution's limit of 8,192"),
    (FLUX, [("scales", "small", "config", "steps", [4, 5000])], "scales.small.config.steps",
     "5,000 is more than steps's limit of 1,000"),
    (FLUX, [("scales", "small", "config", "guidance", 1e9)], "scales.small.config.guidance", "limit of 100"),
    (FLUX, [("scales", "small", "config", "max_sequence_length", 10 ** 6)], "scales.small.config.max_sequence_length",
     "limit of 512"),
    (FLUX, [("scales", "small", "scenario", "batch_size", 5000)], "scales.small.scenario.batch_size",
     "5,000 images in one call, more than a call's 1,024"),
    (FLUX, [("scenario", "components", {"transformer": {"num_layers": 10 ** 6}})],
     "scenario.components.transformer.num_layers", "expected an integer in [1, 1,024]"),
    (FLUX, [("scenario", "components", {"transformer": {"joint_attention_dim": 0}})],
     "scenario.components.transformer.joint_attention_dim", "expected an integer in [1, 262,144]"),
    (FLUX, [("scenario", "components", {"vae": {"scaling_factor": 1e12}})], "scenario.components.vae.scaling_factor",
     "expected a number within"),
    (FLUX, [("scenario", "components", {"vae": {"block_out_channels": [8, -16]}})],
     "scenario.components.vae.block_out_channels.1", "expected an integer"),
    (FLUX, [("scenario", "components", {"transformer": {"guidance_embeds": 1}})],
     "scenario.components.transformer.guidance_embeds", "expected true or false"),
    (FLUX, [("scales", "small", "config", "text_encoder", {"num_hidden_layers": 100_000})],
     "scales.small.config.text_encoder.num_hidden_layers", "expected an integer in [1, 1,024]"),
    (SDXL, [("scenario", "components", {"unet": {"transformer_layers_per_block": [1, 2, 10 ** 5]}})],
     "scenario.components.unet.transformer_layers_per_block.2", "expected an integer in [1, 1,024]"),
]


@pytest.mark.parametrize("source, edits, field, words", GENERATE_CASES + TRAIN_CASES + DIFFUSE_CASES,
                         ids=lambda v: None if not isinstance(v, str) or "." not in v else v)
def test_scenario_values_out_of_their_limits(tmp_path, validate, source, edits, field, words):
    target = write(tmp_path, changed(source, *edits))
    code, err = validate(target)
    assert code == 2 and f"{target}:" in err and f": {field}: " in err and words in err, err


def test_a_scale_shrinking_lengths_into_its_context_is_fine(tmp_path, validate):
    # The section's 1,024 + 256 tokens exceed a 1,024-token small scale; its own 128 + 32 fit.
    data = changed(QWEN_DENSE, ("scales", "small", "config", "max_position_embeddings", 1024))
    assert validate(write(tmp_path, data))[0] == 0
    data = changed(data, ("scales", "small", "scenario", "output_length", DROP),
                   ("scales", "small", "scenario", "input_length", DROP))
    code, err = validate(write(tmp_path, data))
    assert code == 2 and "1,024 prompt + 256 output tokens exceed the model's context of 1,024" in err, err


# ----------------------------------------------------------------------------- model config values

_C = ("model", "config")
MODEL_CASES = [
    (QWEN_DENSE, [(*_C, "rms_norm_eps", -1e-6)], "model.config.rms_norm_eps", "out of range (0, 1]"),
    (QWEN_DENSE, [(*_C, "rms_norm_eps", 0)], "model.config.rms_norm_eps", "out of range (0, 1]"),
    (QWEN_DENSE, [("scales", "small", "config", "rms_norm_eps", 5.0)], "scales.small.config.rms_norm_eps",
     "out of range"),
    (GEMMA, [(*_C, "final_logit_softcapping", -30.0)], "model.config.final_logit_softcapping", "out of range (0,"),
    (GEMMA, [(*_C, "final_logit_softcapping", 0)], "model.config.final_logit_softcapping", "out of range (0,"),
    (LLAMA, [(*_C, "hidden_size", 62)], "model.config.num_attention_heads",
     "llama needs hidden_size (62) to be a multiple of num_attention_heads (4)"),
    (QWEN_MOE, [(*_C, "num_experts_per_tok", 129)], "model.config.num_experts_per_tok",
     "exceeds the number of experts (128)"),
    (GEMMA, [(*_C, "top_k_experts", 200)], "model.config.top_k_experts", "exceeds the number of experts"),
    (QWEN_DENSE, [(*_C, "head_dim", 0)], "model.config.head_dim", "out of range [1,"),
    (QWEN_DENSE, [(*_C, "head_dim", -128)], "model.config.head_dim", "out of range [1,"),
    (QWEN_DENSE, [(*_C, "head_dim", 127)], "model.config.head_dim", "rotary embeddings turn pairs of dimensions"),
    (DEEPSEEK, [(*_C, "qk_rope_head_dim", 7)], "model.config.qk_rope_head_dim", "qk_rope_head_dim 7 is odd"),
    (QWEN_DENSE, [(*_C, "vocab_size", -151936)], "model.config.vocab_size", "out of range [1,"),
    (QWEN_DENSE, [(*_C, "rope_parameters", "rope_theta", 0)], "model.config.rope_parameters.rope_theta",
     "expected a positive number"),
    (QWEN_DENSE, [(*_C, "rope_parameters", "rope_theta", -1e6)], "model.config.rope_parameters.rope_theta",
     "expected a positive number"),
    (QWEN_DENSE, [(*_C, "rope_parameters", "rope_theta", 1e15)], "model.config.rope_parameters.rope_theta",
     "out of range (0, 1e+12]"),
    (GEMMA, [(*_C, "rope_parameters", "full_attention", "rope_theta", 1e15)],
     "model.config.rope_parameters.full_attention.rope_theta", "out of range"),
    (QWEN_DENSE, [(*_C, "initializer_range", -0.02)], "model.config.initializer_range", "out of range (0, 1]"),
    (QWEN_DENSE, [(*_C, "attention_dropout", 1.5)], "model.config.attention_dropout", "out of range [0, 1]"),
    (QWEN_MOE, [(*_C, "router_aux_loss_coef", -0.001)], "model.config.router_aux_loss_coef", "out of range [0,"),
    (QWEN_DENSE, [(*_C, "pad_token_id", 151936)], "model.config.pad_token_id",
     "token id 151936 is outside the vocabulary: [0, 151936)"),
    (QWEN_DENSE, [(*_C, "eos_token_id", [151645, -1])], "model.config.eos_token_id.1", "outside the vocabulary"),
    (GEMMA, [(*_C, "num_global_key_value_heads", 3)], "model.config.num_global_key_value_heads",
     "num_attention_heads (16) is not a multiple of num_global_key_value_heads (3)"),
    (GEMMA, [(*_C, "num_kv_shared_layers", 30)], "model.config.num_kv_shared_layers",
     "leave none of the 30 layers"),
    (DEEPSEEK, [(*_C, "n_group", 3)], "model.config.n_group", "8 experts do not split into 3 equal groups"),
    (DEEPSEEK, [(*_C, "n_group", 8)], "model.config.n_group", "groups of at least two"),
    (DEEPSEEK, [(*_C, "topk_group", 5)], "model.config.topk_group", "topk_group (5) exceeds n_group (4)"),
    (DEEPSEEK, [(*_C, "routed_scaling_factor", 0)], "model.config.routed_scaling_factor", "out of range (0,"),
]


@pytest.mark.parametrize("source, edits, field, words", MODEL_CASES,
                         ids=lambda v: None if not isinstance(v, str) or "." not in v else v)
def test_model_config_values_that_are_finite_but_invalid(tmp_path, validate, source, edits, field, words):
    target = write(tmp_path, changed(source, *edits))
    code, err = validate(target)
    assert code == 2 and f"{target}:" in err and f": {field}: " in err and words in err, err


def test_the_rotary_check_follows_transformers_exemptions(tmp_path, validate):
    """transformers lets an odd head of at most 4 dims through (tiny test checkpoints), and a head
    only partly rotated may be odd: so does validate."""
    assert validate(write(tmp_path, changed(LLAMA, (*_C, "head_dim", 3))))[0] == 0
    partial = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
    assert validate(write(tmp_path, changed(LLAMA, (*_C, "head_dim", 63), (*_C, "rope_parameters", partial))))[0] == 0


def _class_source(transformers_dir: Path, name: str, files: dict[str, str]) -> str:
    """A config class's own text and its transformers bases' (read, not imported: importing
    transformers' config classes loads torch)."""
    for text in files.values():
        match = re.search(rf"^class {name}\(([^)]*)\):\n(.*?)(?=^\S)", text, re.M | re.S)
        if match:
            bases = [b.strip() for b in match.group(1).split(",") if b.strip().endswith("Config")]
            return match.group(2) + "".join(_class_source(transformers_dir, b, files) for b in bases
                                            if b != "PreTrainedConfig")
    return ""


def test_families_requiring_heads_to_divide_the_hidden_size_are_transformers_own():
    """HEADS_DIVIDE_HIDDEN is the covered families whose config class (or a base) checks
    hidden_size % num_attention_heads: kept in step with the installed transformers."""
    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("transformers is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    files = {str(p): p.read_text(encoding="utf-8") for p in (root / "models").glob("*/configuration_*.py")}
    table = load_table()["families"]
    requiring = {family for family, entry in table.items()
                 if "hidden_size % self.num_attention_heads" in _class_source(root, entry["config_class"], files)}
    assert requiring == HEADS_DIVIDE_HIDDEN
