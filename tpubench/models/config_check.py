"""Checking a workload's `model.config` values before anything is built, without transformers.

Every key must be one the family's config class knows (with a "did you mean"), every value of the
type that class declares, every size within bounds that a model can have (a layer count of 1e15
would otherwise keep transformers busy forever), every real-valued setting within the range where
it means something (an epsilon above zero, a dropout a probability, a softcap above zero), and the
values must agree with one another (layer_types per layer, heads divisible into KV groups and,
where the family requires it, into the hidden size, top-k within the experts, expert groups,
token ids inside the vocabulary, rope settings per rope type, an even rotary dimension). The facts
about each family come from the table in `config_table`; docs/workloads.md#limits lists the bounds.
"""

from __future__ import annotations

import difflib
from typing import Any

from tpubench.models.config_table import load_table

# Inclusive bounds for sizes, whatever the family. Generous: the largest open models are far inside
# them; what lies outside is a typo or a unit slip, and would take minutes to build, if ever.
SIZE_BOUNDS: dict[str, tuple[int, int]] = {
    "hidden_size": (1, 1 << 17),
    "num_hidden_layers": (1, 1024),
    "num_attention_heads": (1, 4096),
    "num_key_value_heads": (1, 4096),
    "num_global_key_value_heads": (1, 4096),
    "head_dim": (1, 8192),
    "global_head_dim": (1, 8192),
    "intermediate_size": (1, 1 << 20),
    "moe_intermediate_size": (1, 1 << 20),
    "shared_expert_intermediate_size": (0, 1 << 20),
    "num_experts": (1, 1 << 16),
    "num_local_experts": (1, 1 << 16),
    "n_routed_experts": (1, 1 << 16),
    "n_shared_experts": (0, 1 << 10),
    "num_experts_per_tok": (1, 1 << 16),
    "top_k_experts": (1, 1 << 16),
    "vocab_size": (1, 1 << 23),
    "vocab_size_per_layer_input": (1, 1 << 23),
    "hidden_size_per_layer_input": (0, 1 << 17),
    "max_position_embeddings": (1, 1 << 24),
    "sliding_window": (1, 1 << 24),
    "num_kv_shared_layers": (0, 1024),
    "decoder_sparse_step": (1, 1024),
    "first_k_dense_replace": (0, 1024),
    "kv_lora_rank": (1, 1 << 16),
    "q_lora_rank": (1, 1 << 16),
    "qk_rope_head_dim": (1, 8192),
    "qk_nope_head_dim": (1, 8192),
    "v_head_dim": (1, 8192),
    "n_group": (1, 1 << 16),
    "topk_group": (1, 1 << 16),
    "num_mtp_layers": (0, 1024),
    "max_window_layers": (0, 1024),
    "original_max_position_embeddings": (1, 1 << 24),
    "pretraining_tp": (1, 1024),
    "query_pre_attn_scalar": (1, 1 << 20),
}
# Real-valued settings: key -> (low, high, whether low itself is allowed). A value outside is
# finite but meaningless, and transformers takes most of them silently: a negative rms_norm_eps
# gives NaN logits, a softcap of 0 divides by zero, a negative initializer_range fails deep in
# torch's init, a dropout above 1 fails the first training step. The highs are generous (real
# models use 1e-6 eps, 30-50 softcaps, rope_theta up to about 1e7) and catch unit slips.
NUMBER_BOUNDS: dict[str, tuple[float, float, bool]] = {
    "rms_norm_eps": (0.0, 1.0, False),
    "layer_norm_eps": (0.0, 1.0, False),
    "initializer_range": (0.0, 1.0, False),       # the std of random weights: 0 makes every router tie
    "attention_dropout": (0.0, 1.0, True),
    "hidden_dropout": (0.0, 1.0, True),
    "embd_pdrop": (0.0, 1.0, True),
    "resid_pdrop": (0.0, 1.0, True),
    "router_jitter_noise": (0.0, 1.0, True),
    "router_aux_loss_coef": (0.0, 1e3, True),
    "routed_scaling_factor": (0.0, 1e3, False),
    "final_logit_softcapping": (0.0, 1e6, False),  # null turns softcapping off
    "attn_logit_softcapping": (0.0, 1e6, False),
    "clip_qkv": (0.0, 1e6, False),
    "attention_multiplier": (0.0, 1e6, False),
    "embedding_multiplier": (0.0, 1e6, False),
    "residual_multiplier": (0.0, 1e6, False),
    "logits_scaling": (0.0, 1e6, False),           # logits are divided by it
    "swiglu_alpha": (0.0, 1e6, False),
    "swiglu_limit": (0.0, 1e6, False),
    "rope_theta": (0.0, 1e12, False),
    "partial_rotary_factor": (0.0, 1.0, False),
}
# Keys a model's own config.json carries (written for its original modelling code, as the Hub and
# DeepSeek's repository publish DeepSeek-V3's) that transformers' class for the family never reads:
# accepted at the value that class builds, refused at any other (it would be ignored, and the model
# built would not be the one the file describes). transformers' DeepseekV3 makes every layer from
# first_k_dense_replace on a mixture of experts: moe_layer_freq 1.
BUILT_AS: dict[str, dict[str, Any]] = {"deepseek_v3": {"moe_layer_freq": 1}}
# Families whose config class itself requires hidden_size to be a multiple of num_attention_heads
# (their validate_architecture; tests/test_hostile_workload.py reads transformers to keep this in step).
HEADS_DIVIDE_HIDDEN = frozenset({"llama", "gemma3_text"})
# transformers' own threshold: an odd head_dim of at most 4 (tiny test checkpoints) is allowed.
_ODD_ROTARY_ALLOWED = 4
_EXPERT_COUNTS = ("num_experts", "num_local_experts", "n_routed_experts")
_TOP_KS = ("num_experts_per_tok", "top_k_experts")
_TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id")
_ROPE_NUMBERS = {"rope_theta", "factor", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
                 "low_freq_factor", "high_freq_factor", "partial_rotary_factor"}


class ConfigProblem(Exception):
    """A bad value at `path` inside the model config (e.g. ("rope_parameters", "factr"))."""

    def __init__(self, path: tuple, message: str):
        self.path = tuple(path)
        self.message = message
        super().__init__(message)


def known_family(family: str) -> bool:
    if family in load_table()["model_types"]:
        return True
    # A transformers newer than the table may know it: asked only on this rare path (it costs seconds).
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    except ImportError:
        return False
    return family in CONFIG_MAPPING_NAMES


def covered_family(family: str) -> bool:
    """Whether the table knows this family's keys (otherwise transformers checks them at build)."""
    return family in load_table()["families"]


def family_problem(family: str) -> str | None:
    """Why `family` is not a transformers model_type, with a suggestion; None when it is one. The
    message names the transformers that was asked: the installed one (known_family asks it for a
    name the table lacks), the table's only where none is installed."""
    if known_family(family):
        return None
    table = load_table()
    guess = difflib.get_close_matches(family, table["model_types"], n=1)
    hint = f"; did you mean '{guess[0]}'?" if guess else ""
    version = _installed_transformers() or table["transformers_version"]
    return f"unknown model family '{family}' (not a model_type of transformers {version}){hint}"


def _installed_transformers() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformers")
    except PackageNotFoundError:
        return None


def check_model_config(family: str, config: dict[str, Any], *, tensor=(1,), expert=(1,)) -> None:
    """Raise ConfigProblem for the first problem in `config` (the resolved values of one scale),
    or in the parallel layouts (`tensor`, `expert`: the sizes swept) it must shard into."""
    table = load_table()
    entry = table["families"].get(family)
    if entry is not None:
        allowed = {**entry["keys"], **{alias: entry["keys"][real] for alias, real in entry["aliases"].items()}}
        implied = BUILT_AS.get(family, {})
        for key, value in config.items():
            if key in implied and key not in allowed:
                _check_built_as(key, value, implied[key], entry["config_class"])
                continue
            if key not in allowed:
                raise ConfigProblem((key,), f"unknown key '{key}' for {entry['config_class']}{_did_you_mean(key, allowed)}")
            _check_type((key,), value, allowed[key])
    for key, (lo, hi) in SIZE_BOUNDS.items():
        value = config.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigProblem((key,), f"expected an integer, got {_show(value)}")
        if not lo <= value <= hi:
            raise ConfigProblem((key,), f"{value} is out of range [{lo}, {hi}]")
    for key, bounds in NUMBER_BOUNDS.items():
        if config.get(key) is not None:
            _check_number((key,), config[key], bounds)
    _check_consistency(config, table, entry)
    _check_shapes(family, config, entry)
    _check_layouts(config, tensor, expert)


def _check_built_as(key: str, value: Any, built: Any, config_class: str) -> None:
    """A key the class does not read (BUILT_AS): only the value it builds anyway."""
    if isinstance(value, bool) or value != built:
        raise ConfigProblem((key,), f"{config_class} does not read {key}: it builds the model as {key}={built!r}, "
                                    f"so {_show(value)} would be ignored (give {built!r} or leave it out)")


def _check_number(path: tuple, value: Any, bounds: tuple[float, float, bool]) -> None:
    lo, hi, closed = bounds
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigProblem(path, f"expected a number, got {_show(value)}")
    if not ((lo <= value) if closed else (lo < value)) or not value <= hi:
        raise ConfigProblem(path, f"{value:g} is out of range {'[' if closed else '('}{lo:g}, {hi:g}]")


def _check_shapes(family: str, config: dict, entry: dict | None) -> None:
    """Values each within bounds that still cannot build or run a model together."""
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if family in HEADS_DIVIDE_HIDDEN and hidden and heads and hidden % heads:
        raise ConfigProblem(("num_attention_heads",), f"{family} needs hidden_size ({hidden}) to be a multiple "
                                                      f"of num_attention_heads ({heads})")
    global_kv = config.get("num_global_key_value_heads")
    if heads and global_kv and heads % global_kv:
        raise ConfigProblem(("num_global_key_value_heads",), f"num_attention_heads ({heads}) is not a multiple of "
                                                             f"num_global_key_value_heads ({global_kv})")
    layers, shared = config.get("num_hidden_layers"), config.get("num_kv_shared_layers")
    if layers and shared and shared >= layers:
        raise ConfigProblem(("num_kv_shared_layers",), f"{shared} layers sharing another layer's KV cache leave "
                                                       f"none of the {layers} layers to compute one")
    _check_expert_groups(config)
    _check_token_ids(config)
    _check_rotary_dim(config, entry)


def _check_expert_groups(config: dict) -> None:
    """Group-limited routing (DeepSeek-V3, GLM-4 MoE): the experts split into n_group equal groups,
    each scored by its best two experts, and topk_group groups kept."""
    groups = config.get("n_group")
    if not groups:
        return
    experts = next((config[k] for k in _EXPERT_COUNTS if config.get(k)), None)
    if experts and (experts % groups or experts // groups < 2):
        raise ConfigProblem(("n_group",), f"{experts} experts do not split into {groups} equal groups of at "
                                          "least two (each group is scored by its best two experts)")
    kept = config.get("topk_group")
    if kept and kept > groups:
        raise ConfigProblem(("topk_group",), f"topk_group ({kept}) exceeds n_group ({groups})")


def _check_token_ids(config: dict) -> None:
    """Special token ids inside the vocabulary: a pad id outside it fails the embedding's build."""
    vocab = config.get("vocab_size")
    for key in _TOKEN_IDS:
        value = config.get(key)
        for i, token in enumerate(value if isinstance(value, list) else [value]):
            if token is None:
                continue
            path = (key, i) if isinstance(value, list) else (key,)
            if isinstance(token, bool) or not isinstance(token, int):
                raise ConfigProblem(path, f"expected a token id (an integer), got {_show(token)}")
            if token < 0 or (vocab and token >= vocab):
                within = f"[0, {vocab})" if vocab else "0 or more"
                raise ConfigProblem(path, f"token id {token} is outside the vocabulary: {within}")


def _check_rotary_dim(config: dict, entry: dict | None) -> None:
    """Rotary embeddings turn pairs of dimensions: a fully rotated head of odd size cannot be built
    (transformers' validate_rope, mirrored: the same head_dim and the same exemption)."""
    if entry is None or "rope_parameters" not in entry["keys"]:
        return
    head_dim = config.get("qk_rope_head_dim") if "qk_rope_head_dim" in entry["keys"] else config.get("head_dim")
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim <= _ODD_ROTARY_ALLOWED \
            or not head_dim % 2:
        return
    rope = config.get("rope_parameters") or {}
    nested = rope and all(isinstance(v, dict) or v is None for v in rope.values())
    for block in (rope.values() if nested else [rope]):
        if block is None:
            continue   # a layer type without rotary embeddings
        factor = block.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
        if int(head_dim * factor) == head_dim:
            key = "qk_rope_head_dim" if "qk_rope_head_dim" in entry["keys"] else "head_dim"
            raise ConfigProblem((key,), f"rotary embeddings turn pairs of dimensions: {key} {head_dim} is odd")


def _check_layouts(config: dict, tensor, expert) -> None:
    """transformers shards attention heads over tensor-parallel ranks and experts over
    expert-parallel ranks: both must divide evenly."""
    for n in tensor:
        for key in ("num_attention_heads", "num_key_value_heads"):
            if n > 1 and config.get(key) and config[key] % n:
                raise ConfigProblem(("parallel", "tensor"), f"{n} ranks cannot split {key}={config[key]} evenly")
    experts = next((config[k] for k in _EXPERT_COUNTS if config.get(k)), None)
    for n in expert:
        if n > 1 and not experts:
            raise ConfigProblem(("parallel", "expert"), "expert parallel needs a mixture-of-experts model")
        if n > 1 and experts % n:
            raise ConfigProblem(("parallel", "expert"), f"{n} ranks cannot split {experts} experts evenly")


def _check_consistency(config: dict, table: dict, entry: dict | None) -> None:
    heads, kv = config.get("num_attention_heads"), config.get("num_key_value_heads")
    if heads and kv and heads % kv:
        raise ConfigProblem(("num_key_value_heads",),
                            f"num_attention_heads ({heads}) is not a multiple of num_key_value_heads ({kv})")
    experts = next((config[k] for k in _EXPERT_COUNTS if config.get(k)), None)
    for key in _TOP_KS:
        if experts and config.get(key) and config[key] > experts:
            raise ConfigProblem((key,), f"{key} ({config[key]}) exceeds the number of experts ({experts})")
    layers = config.get("num_hidden_layers")
    for key, allowed in (("layer_types", table["layer_types"]), ("mlp_layer_types", table["mlp_layer_types"])):
        types = config.get(key)
        if types is None:
            continue
        if not isinstance(types, list):
            raise ConfigProblem((key,), f"expected a list with one entry per layer, got {_show(types)}")
        for i, t in enumerate(types):
            if t not in allowed:
                raise ConfigProblem((key, i), f"unknown layer type {_show(t)}{_did_you_mean(str(t), allowed)}")
        if layers is not None and len(types) != layers:
            raise ConfigProblem((key,), f"{len(types)} entries for num_hidden_layers={layers}; give one per layer")
    dense = config.get("mlp_only_layers")
    if isinstance(dense, list) and layers is not None:
        for i, layer in enumerate(dense):
            if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < layers:
                raise ConfigProblem(("mlp_only_layers", i), f"{_show(layer)} is not a layer index in [0, {layers})")
    rope = config.get("rope_parameters")
    if rope is not None:
        _check_rope(rope, table, entry)


def _check_rope(rope: Any, table: dict, entry: dict | None) -> None:
    if not isinstance(rope, dict):
        raise ConfigProblem(("rope_parameters",), f"expected a mapping, got {_show(rope)}")
    nested = rope and all(isinstance(v, dict) or v is None for v in rope.values())
    blocks = rope.items() if nested else [(None, rope)]
    for layer_type, block in blocks:
        base = ("rope_parameters",) if layer_type is None else ("rope_parameters", layer_type)
        if layer_type is not None and layer_type not in table["layer_types"]:
            raise ConfigProblem(base, f"'{layer_type}' is not a layer type{_did_you_mean(layer_type, table['layer_types'])}")
        if block is None:
            continue  # a layer type without rotary embeddings
        rope_type = block.get("rope_type", block.get("type", "default"))
        # A mapping or list here is unhashable: check the type before looking it up.
        if not isinstance(rope_type, str) or rope_type not in table["rope_types"]:
            raise ConfigProblem(base + ("rope_type",),
                                f"unknown rope_type {_show(rope_type)}{_did_you_mean(str(rope_type), table['rope_types'])}")
        spec = table["rope_types"][rope_type]
        ignore = set(entry["rope_ignore_keys"]) if entry else set()
        allowed = set(spec["required"]) | set(spec["optional"]) | {"type"} | ignore
        for key, value in block.items():
            if key not in allowed:
                raise ConfigProblem(base + (key,), f"unknown key '{key}' for rope_type '{rope_type}'"
                                                   f"{_did_you_mean(key, allowed)}")
            if key in _ROPE_NUMBERS and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ConfigProblem(base + (key,), f"expected a positive number, got {_show(value)}")
            if key == "rope_theta":
                _check_number(base + (key,), value, NUMBER_BOUNDS["rope_theta"])
        missing = set(spec["required"]) - set(block) - {"rope_type"}
        if missing:
            raise ConfigProblem(base, f"rope_type '{rope_type}' needs {', '.join(sorted(missing))}")
        factor = block.get("partial_rotary_factor")
        if factor is not None and factor > 1:
            raise ConfigProblem(base + ("partial_rotary_factor",), f"must be at most 1, got {factor}")


def _check_type(path: tuple, value: Any, spec: list) -> None:
    kind = _kind(value)
    for allowed in spec:
        if allowed == "any" or allowed == kind or (allowed == "float" and kind == "int"):
            return
        if isinstance(allowed, dict) and value in allowed["literal"]:
            return
    wanted = " or ".join(_spec_name(s) for s in spec)
    raise ConfigProblem(path, f"expected {wanted}, got {_show(value)}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    for python_type, name in ((int, "int"), (float, "float"), (str, "str"), (list, "list"), (dict, "dict")):
        if isinstance(value, python_type):
            return name
    return type(value).__name__


def _spec_name(spec) -> str:
    if isinstance(spec, dict):
        return "one of " + ", ".join(repr(v) for v in spec["literal"])
    return {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
            "list": "a list", "dict": "a mapping", "null": "null"}.get(spec, spec)


def _did_you_mean(key: str, allowed) -> str:
    guess = difflib.get_close_matches(key, sorted(allowed), n=1)
    return f"; did you mean '{guess[0]}'?" if guess else ""


def _show(value: Any) -> str:
    text = repr(value)
    return f"{_kind(value)} {text[:60]}{'...' if len(text) > 60 else ''}"
