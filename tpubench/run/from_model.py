"""`tpubench run --model Qwen/Qwen3-30B-A3B`: the workload a model's own config describes, written
out as a workload file beside the results and run from it, so the run is reproducible
(`tpubench run THAT_FILE` measures the same points) and editable.

The config is read by transformers' AutoConfig: a Hub id is fetched once into Hugging Face's own
cache (and read from it offline after), a local folder (or its config.json) is read as it is. No
weights are read: the model is built from its architecture with random weights, as from any
workload file. Remote code is never run (trust_remote_code=False).

What the file holds, from the config:
- `model.family` (the text model's model_type: a multimodal config's text decoder), `hub_id`,
  `dtype` (the config's, where it is one tpubench builds in), and `model.config`: for a family the
  table of transformers' config classes covers (models/config_table.py), every key of its config
  class as the config sets it (the keys a workload may hold); for any other family, the keys the
  config sets apart from its class's defaults. Left out: bookkeeping (architectures, versions),
  token ids (the benchmark ignores end-of-sequence and draws random prompts; they name the real
  tokenizer's vocabulary, which a smaller scale does not keep) and `use_cache`.
- `scenario`: the kind asked for (generate or train) with the batch sizes and lengths given, or
  the defaults below.
- `scales.small`: the same architecture shrunk to run on a laptop CPU in seconds (as the shipped
  workloads have one; `tpubench run` picks it where no accelerator is present), when the shrunk
  config passes the same checks as any workload's; otherwise none, and the note says why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import yaml

from tpubench.errors import UserError
from tpubench.models.config_check import ConfigProblem, check_model_config, covered_family, known_family
from tpubench.models.config_table import load_table
from tpubench.scenarios.registry import SCENARIOS, schema_of
from tpubench.workload_spec.point import DEFAULT_KIND
from tpubench.workload_spec.vocabulary import Dtype

# What each common flag sets, by the field names a scenario's section may have for it.
_FIELDS = {"batch_size": ("batch_size",), "input_length": ("input_length", "sequence_length"),
           "output_length": ("output_length",)}
# Defaults at full scale, per field (the shipped workloads' orders of size), and the lengths the
# small scale runs where the flag did not set them (the shipped small scales').
DEFAULTS = {"batch_size": [1, 8], "input_length": 1024, "sequence_length": 2048, "output_length": 128}
SMALL_LENGTHS = {"input_length": 128, "sequence_length": 128, "output_length": 32}
# Keys of a config that describe a checkpoint, a runtime or a training head, not the architecture.
_NOT_ARCHITECTURE = {"model_type", "dtype", "torch_dtype", "transformers_version", "architectures", "_name_or_path",
                     "name_or_path", "pad_token_id", "bos_token_id", "eos_token_id", "use_cache", "quantization_config",
                     "auto_map", "tie_encoder_decoder", "output_hidden_states", "output_attentions", "return_dict",
                     "chunk_size_feed_forward", "is_encoder_decoder", "id2label", "label2id", "problem_type",
                     "torchscript"}
# The small scale: each size at most this (the shipped small scales': hidden 512, 4 layers, 8
# heads of 64, 32 experts of which 4 routed, a vocabulary of 8,192 and a context of 4,096).
_SMALL = {"hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8, "head_dim": 64,
          "global_head_dim": 128, "intermediate_size": 1536, "moe_intermediate_size": 192,
          "shared_expert_intermediate_size": 192, "num_experts": 32, "num_local_experts": 32,
          "n_routed_experts": 32, "num_experts_per_tok": 4, "top_k_experts": 4, "vocab_size": 8192,
          "vocab_size_per_layer_input": 8192, "hidden_size_per_layer_input": 64, "max_position_embeddings": 4096,
          "kv_lora_rank": 128, "q_lora_rank": 192, "qk_rope_head_dim": 32, "qk_nope_head_dim": 32,
          "v_head_dim": 32, "n_group": 4, "topk_group": 2}
# Sizes that count layers: at most the small scale's layers (less one where a layer must be left).
_LAYER_COUNTS = {"max_window_layers": 0, "first_k_dense_replace": 1, "num_kv_shared_layers": 1}


@dataclass(frozen=True)
class ModelRun:
    """`tpubench run --model`'s request: the model and the common flags (None: the default)."""

    model: str
    kind: str = DEFAULT_KIND
    batch_size: tuple[int, ...] = ()
    input_length: int | None = None
    output_length: int | None = None


@dataclass(frozen=True)
class Architecture:
    family: str
    config: dict[str, Any]
    dtype: str | None
    transformers_version: str


def read_architecture(model: str) -> Architecture:
    """The text model's family, its config values (module notes) and dtype, as transformers reads them."""
    import transformers
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model, trust_remote_code=False, local_files_only=_cached(model))
    except (OSError, ValueError, KeyError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:240]
        where = "folder" if Path(model).exists() else "Hub id (fetched once into Hugging Face's cache, then offline)"
        raise UserError(f"cannot read the config of '{model}' as a {where}: {first}", field="--model") from None
    text = config.get_text_config()
    family = str(text.model_type)
    if not known_family(family):
        raise UserError(f"'{model}' is a {family} model, not a model_type transformers builds", field="--model")
    dtype = str(getattr(text, "dtype", None) or getattr(config, "dtype", None) or "").removeprefix("torch.")
    return Architecture(family, _architecture_values(family, text), dtype or None, transformers.__version__)


def _cached(model: str) -> bool:
    """Whether `model` is a local folder or a Hub id whose config.json Hugging Face's cache holds:
    then it is read without asking the Hub (fetched once, offline after)."""
    if Path(model).exists():
        return True
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(model, "config.json"), str)
    except ValueError:      # not a repo id at all: AutoConfig says what is wrong with it
        return False


def _architecture_values(family: str, config) -> dict[str, Any]:
    """The config's values a workload holds: its class's keys (the table's, for a covered family),
    named as the workload names them (a key the class stores under another name, e.g. Qwen3-MoE's
    num_experts as num_local_experts, under the table's name)."""
    values = config.to_dict() if covered_family(family) else config.to_diff_dict()
    if covered_family(family):
        entry = load_table()["families"][family]
        allowed = set(entry["keys"]) | set(entry["aliases"])
        for name, stored in getattr(type(config), "attribute_map", {}).items():
            if stored in values and stored not in allowed and name in allowed:
                values[name] = values.pop(stored)
        values = {k: v for k, v in values.items() if k in allowed}
    return {k: v for k, v in values.items() if k not in _NOT_ARCHITECTURE}


def workload_data(run: ModelRun, arch: Architecture) -> tuple[dict, str | None]:
    """(the workload file's data, a note when it has no small scale and why)."""
    scenario = _scenario(run)
    small, why_not = small_scale(arch, scenario, run)
    dtype = arch.dtype if arch.dtype in get_args(Dtype) else "bfloat16"
    data: dict[str, Any] = {
        "name": workload_name(run.model),
        "description": f"{run.model} ({arch.family}) from its config, random weights, {run.kind}",
        "model": {"family": arch.family, "hub_id": run.model if not Path(run.model).exists() else None,
                  "weights": "random", "dtype": dtype, "config": arch.config},
    }
    if data["model"]["hub_id"] is None:
        del data["model"]["hub_id"]
    if small is not None:
        data["scales"] = {"small": small}
    data["scenario"] = scenario
    return data, why_not


def _scenario(run: ModelRun) -> dict[str, Any]:
    """The scenario section: the kind, then each common flag under the field that kind names it by."""
    kinds = [k for k, s in SCENARIOS.items() if s.builds_model and _field(k, "input_length")]
    if run.kind not in kinds:
        raise UserError(f"'{run.kind}' is not a scenario --model runs (one of {', '.join(kinds)})", field="--scenario")
    section: dict[str, Any] = {"kind": run.kind}
    given = {"batch_size": list(run.batch_size) or None, "input_length": run.input_length,
             "output_length": run.output_length}
    for flag, value in given.items():
        field = _field(run.kind, flag)
        if field is None:
            if value is not None:
                raise UserError(f"scenario {run.kind} has no {flag.replace('_', ' ')}", field=f"--{flag.replace('_', '-')}")
            continue
        value = DEFAULTS[field] if value is None else value
        section[field] = value[0] if isinstance(value, list) and len(value) == 1 else value
    return section


def _field(kind: str, flag: str) -> str | None:
    fields = schema_of(kind).model_fields
    return next((name for name in _FIELDS[flag] if name in fields), None)


def workload_name(model: str) -> str:
    """A workload name (a safe name) for a model id or folder: its last part, lower-cased."""
    last = Path(model.rstrip("/")).name if Path(model).exists() else model.rstrip("/").rsplit("/", 1)[-1]
    name = re.sub(r"[^a-z0-9._-]+", "-", last.lower()).strip("-._")[:64]
    return name or "model"


def small_scale(arch: Architecture, scenario: dict, run: ModelRun) -> tuple[dict | None, str | None]:
    """(the small scale's section, None) or (None, why there is none)."""
    config = {**arch.config, **_shrunk(arch.config)}
    lengths = {k: v for k, v in SMALL_LENGTHS.items() if k in scenario and getattr(run, k, None) is None}
    longest = sum(max(v) if isinstance(v, list) else v for k, v in {**scenario, **lengths}.items() if k in SMALL_LENGTHS)
    if "max_position_embeddings" in config:
        config["max_position_embeddings"] = max(min(arch.config["max_position_embeddings"], 4096), longest)
    changed = {k: v for k, v in config.items() if arch.config.get(k) != v}
    if not changed:
        return None, None     # small already: the full scale runs on a CPU as it is
    try:
        check_model_config(arch.family, config)
    except ConfigProblem as exc:
        return None, f"no small scale: the shrunk config fails at {'.'.join(map(str, exc.path))}: {exc.message}"
    small = {"description": "the same architecture shrunk to run on a CPU in seconds", "dtype": "float32",
             "config": changed}
    if lengths:
        small["scenario"] = lengths
    return small, None


def _shrunk(config: dict) -> dict:
    """The sizes the small scale changes: each at most its _SMALL bound, heads kept divisible into
    key-value groups, expert groups into experts, and per-layer lists cut to the layers kept."""
    out = {k: min(v, _SMALL[k]) for k, v in config.items()
           if k in _SMALL and isinstance(v, int) and not isinstance(v, bool)}
    layers = out.get("num_hidden_layers", config.get("num_hidden_layers"))
    heads, kv = config.get("num_attention_heads"), config.get("num_key_value_heads")
    if heads and kv and "num_attention_heads" in out:
        small_kv = max(1, out["num_attention_heads"] * kv // heads)
        while out["num_attention_heads"] % small_kv:
            small_kv -= 1
        out["num_key_value_heads"] = small_kv
    experts = next((out[k] for k in ("num_experts", "num_local_experts", "n_routed_experts") if k in out), None)
    if experts and "n_group" in out:
        out["n_group"] = max(g for g in range(1, out["n_group"] + 1) if experts % g == 0 and experts // g >= 2)
        out["topk_group"] = min(out.get("topk_group", 1), out["n_group"])
    for key, keep in _LAYER_COUNTS.items():
        if isinstance(config.get(key), int) and layers:
            out[key] = min(config[key], layers - keep)
    for key, value in config.items():
        if isinstance(value, list) and layers and len(value) == config.get("num_hidden_layers"):
            out[key] = value[:layers]                                 # layer_types and the like
        elif key == "mlp_only_layers" and isinstance(value, list) and layers:
            out[key] = [i for i in value if i < layers]
    return out


def write_workload(data: dict, note: str | None, run: ModelRun, version: str, out_dir: Path) -> Path:
    """The workload file in `out_dir`: an identical one already there is reused, else a new name
    (never overwriting: results name the file they were measured from)."""
    flags = " ".join(_flags(run))
    header = [f"Written by `tpubench run --model {run.model}{' ' + flags if flags else ''}` from the model's config",
              f"(transformers {version}): its architecture with random weights; no weights were read.",
              "Edit it and run it again with `tpubench run THIS_FILE`; `tpubench validate THIS_FILE` checks it."]
    if note:
        header.append(note + ".")
    text = "".join(f"# {line}\n" for line in header) + yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True)
    name = data["name"]
    out_dir = Path(out_dir)
    for existing in sorted(out_dir.glob(f"{name}*.yaml")):
        if re.fullmatch(rf"{re.escape(name)}(-\d+)?\.yaml", existing.name) and existing.read_text(encoding="utf-8") == text:
            return existing
    from tpubench.records.result import write_new_file

    return write_new_file(out_dir, f"{name}.yaml", text.encode("utf-8"))


class _Dumper(yaml.SafeDumper):
    """A list of plain values on one line (`batch_size: [1, 8]`), as the shipped workloads write them."""


_Dumper.add_representer(list, lambda dumper, value: dumper.represent_sequence(
    "tag:yaml.org,2002:seq", value, flow_style=all(not isinstance(v, (list, dict)) for v in value)))


def _flags(run: ModelRun) -> list[str]:
    flags = [f"--scenario {run.kind}"] if run.kind != DEFAULT_KIND else []
    flags += [f"--batch-size {b}" for b in run.batch_size]
    flags += [f"--input-length {run.input_length}"] if run.input_length is not None else []
    flags += [f"--output-length {run.output_length}"] if run.output_length is not None else []
    return flags


def workload_for(run: ModelRun, out_dir: Path) -> tuple[Path, str | None]:
    """(the workload file written for `run` in `out_dir`, the note on its small scale or None)."""
    arch = read_architecture(run.model)
    data, note = workload_data(run, arch)
    return write_workload(data, note, run, arch.transformers_version, out_dir), note


__all__ = ["Architecture", "ModelRun", "read_architecture", "small_scale", "workload_data", "workload_for",
           "workload_name", "write_workload"]
