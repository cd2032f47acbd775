"""Model shapes: parameter counts by role and attention dimensions of a decoder-only LM, from its config.

Pure functions over a transformers-style config dict (the keys of `XxxConfig.to_dict()` or of a
checkpoint's config.json); no torch. Families with exact parameter accounting: `qwen3_moe`,
`qwen3`, `gemma4_text` (and `gemma4`, whose `text_config` is used), `deepseek_v3` (MLA, 671.0B
for DeepSeek-V3/R1 without its MTP layer, 36.6B active); anything else is read as a
llama-like decoder (q/k/v/o attention, gated MLP, optional uniform MoE), which is approximate.

The shape is what the FLOP and byte counts (`hardware.counts`) and the efficiency of a run
(`hardware.roofline`) are computed from; it also sizes weights for memory-fit checks and plans.
Replicated and sharded roles are kept apart (attention, dense MLP, per-layer-input, router, experts,
norms and biases) because a multi-chip world shards some and replicates the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from tpubench.errors import UserError

_DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "fp8": 1, "int8": 1,
}


def bytes_per_element(dtype: str | int) -> int:
    """Bytes of one element: `"bfloat16"` -> 2, `"float32"` -> 4 (an int passes through)."""
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        if dtype <= 0:
            raise UserError(f"element size must be positive, got {dtype}")
        return dtype
    name = str(dtype).lower().removeprefix("torch.")
    if name not in _DTYPE_BYTES:
        known = ", ".join(sorted(_DTYPE_BYTES))
        raise UserError(f"unknown dtype {dtype!r} for the roofline: expected one of {known}")
    return _DTYPE_BYTES[name]


@dataclass(frozen=True)
class LayerShape:
    """One decoder layer, as parameter counts by role and attention dimensions."""

    attention_type: str           # "full_attention" | "sliding_attention"
    n_heads: int
    n_kv_heads: int
    head_dim: int
    window: int | None            # tokens a sliding layer attends to; None = the whole context
    kv_shared: bool = False       # Gemma 4: reuses an earlier layer's K/V (no k/v weights, no cache)
    attn_matmul_params: int = 0   # q, k, v, o weights
    mlp_matmul_params: int = 0    # dense MLP weights (Gemma 4 keeps one beside its MoE block)
    extra_matmul_params: int = 0  # other per-token matmuls (Gemma 4 per-layer-input gate/projection)
    router_params: int = 0        # router matmul weight (hidden x experts)
    n_experts: int = 0
    top_k: int = 0
    params_per_expert: int = 0
    other_params: int = 0         # norm scales, biases, router scales: stored and read, not matmuls

    def attended(self, context_len: float) -> float:
        return min(context_len, self.window) if self.window else context_len

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def dense_matmul_params(self) -> int:
        return (self.attn_matmul_params + self.mlp_matmul_params + self.extra_matmul_params
                + self.router_params)

    @property
    def active_matmul_params(self) -> int:
        return self.dense_matmul_params + self.top_k * self.params_per_expert

    @property
    def expert_params(self) -> int:
        return self.n_experts * self.params_per_expert

    @property
    def non_expert_params(self) -> int:
        return self.dense_matmul_params + self.other_params

    @property
    def total_params(self) -> int:
        return self.non_expert_params + self.expert_params

    def attention_flops_per_token(self, attended_len: float) -> float:
        """QK^T and PV for one query token over `attended_len` keys (already windowed)."""
        return 4 * self.n_heads * self.head_dim * attended_len

    def kv_bytes_per_token(self, kv_dtype_bytes: int) -> int:
        """Bytes of K and V one cached token holds in this layer."""
        return 2 * self.n_kv_heads * self.head_dim * kv_dtype_bytes


@dataclass(frozen=True)
class LatentAttentionLayerShape(LayerShape):
    """A DeepSeek-V2/V3 layer with multi-head latent attention (MLA): the cache holds one compressed
    latent (kv_lora_rank) plus the shared rotary key (qk_rope_head_dim) per token, not K and V per
    head, and a query attends over qk_nope + qk_rope dims and reads v_head_dim values per head."""

    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0

    def attention_flops_per_token(self, attended_len: float) -> float:
        # head_dim holds qk_nope + qk_rope: QK^T over it, PV over v_head_dim (2 FLOPs per MAC).
        return 2 * self.n_heads * (self.head_dim + self.v_head_dim) * attended_len

    def kv_bytes_per_token(self, kv_dtype_bytes: int) -> int:
        return (self.kv_lora_rank + self.qk_rope_head_dim) * kv_dtype_bytes


@dataclass(frozen=True)
class ModelShape:
    """Parameter accounting of a decoder-only LM, derived from its config."""

    family: str
    hidden_size: int
    vocab_size: int
    layers: tuple[LayerShape, ...]
    embedding_params: int             # token embedding table
    lm_head_params: int               # hidden x vocab; the embedding table itself when tied
    tied_embeddings: bool
    per_layer_embedding_params: int = 0  # Gemma 4 per-layer-input (PLE) table
    per_layer_embedding_width: int = 0   # elements of one token's PLE row (layers x PLE dim)
    global_matmul_params: int = 0     # per-token matmuls outside the layers (Gemma 4 PLE projection)
    global_other_params: int = 0      # final norm and other non-matmul weights outside the layers

    @classmethod
    def from_config(cls, family: str | None, config: Mapping[str, Any]) -> "ModelShape":
        """Build from `family` (a transformers model_type; None reads `config["model_type"]`)."""
        family = family or config.get("model_type") or ""
        text = config.get("text_config")
        # A multimodal config (Gemma 4's `gemma4`) nests the language model's config.
        if isinstance(text, Mapping) and (family == "gemma4" or "hidden_size" not in config):
            inner = text.get("model_type") or ("gemma4_text" if family == "gemma4" else family)
            return cls.from_config(inner, text)
        return _BUILDERS.get(family, _llama_like)(family, config)

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @property
    def total_params(self) -> int:
        """All stored parameters (a tied lm_head counted once), as `sum(p.numel())` reports."""
        return (sum(layer.total_params for layer in self.layers) + self.embedding_params
                + (0 if self.tied_embeddings else self.lm_head_params)
                + self.per_layer_embedding_params + self.global_matmul_params
                + self.global_other_params)

    @property
    def active_params(self) -> int:
        """Matmul weights one token multiplies: top-k experts, lm_head included, embeddings not."""
        return (sum(layer.active_matmul_params for layer in self.layers)
                + self.global_matmul_params + self.lm_head_params)

    @property
    def moe_layers(self) -> tuple[LayerShape, ...]:
        return tuple(layer for layer in self.layers if layer.is_moe)

    @property
    def n_experts(self) -> int:
        return max((layer.n_experts for layer in self.layers), default=0)

    @property
    def top_k(self) -> int:
        return max((layer.top_k for layer in self.layers), default=0)

    @property
    def expert_params(self) -> int:
        return sum(layer.expert_params for layer in self.layers)


# --- config readers ---------------------------------------------------------------------------


def _get(config: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = config.get(key)
    return default if value is None else value


def _require(config: Mapping[str, Any], family: str, *keys: str) -> None:
    missing = [k for k in keys if config.get(k) is None]
    if missing:
        raise UserError(f"{family or 'model'} config lacks {', '.join(missing)}: cannot derive its roofline")


def _attention(hidden: int, n_heads: int, n_kv: int, head_dim: int, bias: bool,
               with_k: bool = True, with_v: bool = True, o_bias: bool = True) -> tuple[int, int]:
    """(matmul weights, bias elements) of q, k, v, o projections."""
    kv_out = n_kv * head_dim
    n_kv_proj = int(with_k) + int(with_v)
    weights = 2 * hidden * n_heads * head_dim + n_kv_proj * hidden * kv_out
    biases = (n_heads * head_dim + n_kv_proj * kv_out + (hidden if o_bias else 0)) if bias else 0
    return weights, biases


def _window(layer_type: str, sliding_window: int | None) -> int | None:
    return sliding_window if layer_type == "sliding_attention" and sliding_window else None


def _head_dim(config: Mapping[str, Any]) -> int:
    return int(_get(config, "head_dim", config["hidden_size"] // config["num_attention_heads"]))


def _qwen3_layer_types(config: Mapping[str, Any], sliding_window: int | None) -> list[str]:
    n_layers = int(config["num_hidden_layers"])
    types = config.get("layer_types")
    if types:
        return list(types)
    max_window_layers = int(_get(config, "max_window_layers", 28))
    return ["sliding_attention" if sliding_window is not None and i >= max_window_layers
            else "full_attention" for i in range(n_layers)]


def _qwen3(family: str, config: Mapping[str, Any]) -> ModelShape:
    _require(config, family, "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size", "vocab_size")
    hidden, n_heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    n_kv = int(_get(config, "num_key_value_heads", n_heads))
    head_dim = _head_dim(config)
    # config.json may carry a sliding_window that `use_sliding_window: false` switches off.
    sliding_window = config.get("sliding_window") if config.get("use_sliding_window") else None
    attn_w, attn_b = _attention(hidden, n_heads, n_kv, head_dim, bool(config.get("attention_bias")))
    layers = tuple(
        LayerShape(
            attention_type=t, n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim,
            window=_window(t, sliding_window), attn_matmul_params=attn_w,
            mlp_matmul_params=3 * hidden * int(config["intermediate_size"]),
            other_params=attn_b + 2 * head_dim + 2 * hidden,  # q/k norms, two layer norms
        )
        for t in _qwen3_layer_types(config, sliding_window)
    )
    return _finish(family, config, layers, tied_default=False)


def _qwen3_moe(family: str, config: Mapping[str, Any]) -> ModelShape:
    _require(config, family, "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
    hidden, n_heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    n_layers = int(config["num_hidden_layers"])
    n_kv = int(_get(config, "num_key_value_heads", n_heads))
    head_dim = _head_dim(config)
    # to_dict() writes num_experts under its attribute_map alias num_local_experts.
    n_experts = int(_get(config, "num_experts", _get(config, "num_local_experts", 128)))
    top_k = int(_get(config, "num_experts_per_tok", 8))
    moe_inter = int(_get(config, "moe_intermediate_size", 768))
    inter = int(_get(config, "intermediate_size", 6144))
    sparse_step = int(_get(config, "decoder_sparse_step", 1))
    mlp_only = set(_get(config, "mlp_only_layers", []))
    # Qwen3-MoE applies one window to every layer when sliding is switched on.
    sliding_window = config.get("sliding_window") if config.get("use_sliding_window") else None
    layer_type = "sliding_attention" if sliding_window else "full_attention"
    attn_w, attn_b = _attention(hidden, n_heads, n_kv, head_dim, bool(config.get("attention_bias")))
    layers = []
    for i in range(n_layers):
        sparse = i not in mlp_only and n_experts > 0 and (i + 1) % sparse_step == 0
        layers.append(LayerShape(
            attention_type=layer_type, n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim,
            window=sliding_window, attn_matmul_params=attn_w,
            mlp_matmul_params=0 if sparse else 3 * hidden * inter,
            router_params=hidden * n_experts if sparse else 0,
            n_experts=n_experts if sparse else 0, top_k=top_k if sparse else 0,
            params_per_expert=3 * hidden * moe_inter if sparse else 0,
            other_params=attn_b + 2 * head_dim + 2 * hidden,
        ))
    return _finish(family, config, tuple(layers), tied_default=False)


def _gemma4_layer_types(config: Mapping[str, Any]) -> list[str]:
    n_layers = int(config["num_hidden_layers"])
    types = list(config.get("layer_types") or [
        "sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n_layers)])
    if types:
        types[-1] = "full_attention"  # transformers forces the last layer global
    return types


def _gemma4_layer_overrides(config: Mapping[str, Any], types: list[str]) -> dict[int, dict]:
    """Per-layer head_dim / kv heads: `per_layer_config` (to_dict) or the config.json keys."""
    if config.get("per_layer_config") is not None:
        return {int(k): dict(v) for k, v in config["per_layer_config"].items()}
    override: dict[str, Any] = {"head_dim": int(_get(config, "global_head_dim", 512))}
    global_kv = config.get("num_global_key_value_heads")
    if global_kv is not None and config.get("attention_k_eq_v", False):
        override["num_key_value_heads"] = int(global_kv)
    return {i: override for i, t in enumerate(types) if t == "full_attention"}


def _gemma4_kv_shared(n_layers: int, n_shared: int) -> list[bool]:
    return [i >= n_layers - n_shared for i in range(n_layers)]


def _gemma4_text(family: str, config: Mapping[str, Any]) -> ModelShape:
    _require(config, family, "hidden_size", "num_hidden_layers", "num_attention_heads",
             "intermediate_size", "vocab_size")
    hidden, n_heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    n_layers = int(config["num_hidden_layers"])
    base_kv = int(_get(config, "num_key_value_heads", n_heads))
    base_head_dim = _head_dim(config)
    bias = bool(config.get("attention_bias"))
    k_eq_v = bool(config.get("attention_k_eq_v"))
    sliding_window = int(_get(config, "sliding_window", 512))
    types = _gemma4_layer_types(config)
    overrides = _gemma4_layer_overrides(config, types)
    shared = _gemma4_kv_shared(n_layers, int(_get(config, "num_kv_shared_layers", 0)))
    # Per-layer inputs (PLE) are on unless the config says 0/None (transformers' default is 256).
    ple_dim = int(config.get("hidden_size_per_layer_input", 256) or 0)
    moe = bool(config.get("enable_moe_block"))
    n_experts = int(_get(config, "num_experts", 0)) if moe else 0
    top_k = int(_get(config, "top_k_experts", 0)) if moe else 0
    moe_inter = int(_get(config, "moe_intermediate_size", 0)) if moe else 0
    double_wide = bool(config.get("use_double_wide_mlp"))
    inter = int(config["intermediate_size"])

    layers = []
    for i, t in enumerate(types):
        over = overrides.get(i, {})
        head_dim = int(over.get("head_dim", base_head_dim))
        n_kv = int(over.get("num_key_value_heads", base_kv))
        is_shared = shared[i]
        # k_eq_v: global layers reuse the key projection as values (the cache still holds K and V).
        with_v = not is_shared and not (k_eq_v and t != "sliding_attention")
        attn_w, attn_b = _attention(hidden, n_heads, n_kv, head_dim, bias,
                                    with_k=not is_shared, with_v=with_v)
        # Norm scales: q_norm; k_norm unless shared (v_norm has no scale); 4 layer norms.
        other = attn_b + head_dim + (0 if is_shared else head_dim) + 4 * hidden
        extra = 0
        if ple_dim:
            extra = 2 * hidden * ple_dim  # per_layer_input_gate, per_layer_projection
            other += hidden               # post_per_layer_input_norm
        router = 0
        if moe:
            router = hidden * n_experts
            other += hidden + n_experts + 3 * hidden  # router scale, per-expert scale, 3 norms
        layers.append(LayerShape(
            attention_type=t, n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim,
            window=_window(t, sliding_window), kv_shared=is_shared, attn_matmul_params=attn_w,
            mlp_matmul_params=3 * hidden * inter * (2 if double_wide and is_shared else 1),
            extra_matmul_params=extra, router_params=router, n_experts=n_experts, top_k=top_k,
            params_per_expert=3 * hidden * moe_inter, other_params=other,
        ))
    ple_table = ple_width = ple_projection = ple_norm = 0
    if ple_dim:
        ple_width = n_layers * ple_dim
        ple_table = int(_get(config, "vocab_size_per_layer_input", 262_144)) * ple_width
        ple_projection = hidden * ple_width  # per_layer_model_projection
        ple_norm = ple_dim                   # per_layer_projection_norm
    return _finish(family, config, tuple(layers), tied_default=True,
                   per_layer_embedding_params=ple_table, per_layer_embedding_width=ple_width,
                   global_matmul_params=ple_projection, extra_global_other=ple_norm)


def _llama_like(family: str, config: Mapping[str, Any]) -> ModelShape:
    _require(config, family, "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
    hidden, n_heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    n_layers = int(config["num_hidden_layers"])
    n_kv = int(_get(config, "num_key_value_heads", n_heads))
    head_dim = _head_dim(config)
    inter = int(_get(config, "intermediate_size", 4 * hidden))
    n_experts = int(_get(config, "num_local_experts", _get(config, "num_experts", 0)))
    top_k = int(_get(config, "num_experts_per_tok", 0)) if n_experts else 0
    moe_inter = int(_get(config, "moe_intermediate_size", inter))
    mlp_bias = bool(config.get("mlp_bias"))
    sliding_window = (config.get("sliding_window")
                      if config.get("use_sliding_window", True) else None)
    types = list(config.get("layer_types") or
                 ["sliding_attention" if sliding_window else "full_attention"] * n_layers)
    # Qwen2 always biases q, k and v (not o) and has no attention_bias key.
    qkv_bias = family == "qwen2"
    attn_w, attn_b = _attention(hidden, n_heads, n_kv, head_dim,
                                qkv_bias or bool(config.get("attention_bias")), o_bias=not qkv_bias)
    layers = tuple(
        LayerShape(
            attention_type=t, n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim,
            window=_window(t, sliding_window), attn_matmul_params=attn_w,
            mlp_matmul_params=0 if n_experts else 3 * hidden * inter,
            router_params=hidden * n_experts, n_experts=n_experts, top_k=top_k,
            params_per_expert=3 * hidden * moe_inter if n_experts else 0,
            other_params=attn_b + 2 * hidden
            + (0 if n_experts or not mlp_bias else 2 * inter + hidden),
        )
        for t in types
    )
    return _finish(family, config, layers, tied_default=False)


def _finish(family: str, config: Mapping[str, Any], layers: tuple[LayerShape, ...], *,
            tied_default: bool, extra_global_other: int = 0, **extra: int) -> ModelShape:
    hidden, vocab = int(config["hidden_size"]), int(config["vocab_size"])
    return ModelShape(
        family=family, hidden_size=hidden, vocab_size=vocab, layers=layers,
        embedding_params=vocab * hidden, lm_head_params=vocab * hidden,
        tied_embeddings=bool(_get(config, "tie_word_embeddings", tied_default)),
        global_other_params=hidden + extra_global_other,  # final norm
        **extra,
    )


def _deepseek_v3(family: str, config: Mapping[str, Any]) -> ModelShape:
    """DeepSeek-V3 / R1 (transformers' deepseek_v3 keys): MLA attention, the first
    `first_k_dense_replace` layers dense, the rest routed experts plus `n_shared_experts` shared
    ones (always active, so counted as a dense MLP). The multi-token-prediction layer is left out."""
    _require(config, family, "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
             "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    hidden, n_heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    q_rank = config.get("q_lora_rank")
    kv_rank, nope = int(config["kv_lora_rank"]), int(config["qk_nope_head_dim"])
    rope, v_dim = int(config["qk_rope_head_dim"]), int(config["v_head_dim"])
    q_dim = n_heads * (nope + rope)
    # q (through its low-rank pair when q_lora_rank is set), kv_a, kv_b, o.
    q_weights = hidden * int(q_rank) + int(q_rank) * q_dim if q_rank else hidden * q_dim
    attn_w = q_weights + hidden * (kv_rank + rope) + kv_rank * n_heads * (nope + v_dim) + n_heads * v_dim * hidden
    norms = (int(q_rank) if q_rank else 0) + kv_rank + 2 * hidden
    n_experts = int(_get(config, "n_routed_experts", 0))
    top_k = int(_get(config, "num_experts_per_tok", 0))
    moe_inter = int(_get(config, "moe_intermediate_size", 0))
    shared = int(_get(config, "n_shared_experts", 0))
    first_dense = int(_get(config, "first_k_dense_replace", 0))
    freq = int(_get(config, "moe_layer_freq", 1))
    layers = []
    for i in range(int(config["num_hidden_layers"])):
        sparse = n_experts > 0 and i >= first_dense and i % freq == 0
        layers.append(LatentAttentionLayerShape(
            attention_type="full_attention", n_heads=n_heads, n_kv_heads=1, head_dim=nope + rope,
            window=None, attn_matmul_params=attn_w,
            mlp_matmul_params=(3 * hidden * moe_inter * shared if sparse
                               else 3 * hidden * int(config["intermediate_size"])),
            router_params=hidden * n_experts if sparse else 0,
            n_experts=n_experts if sparse else 0, top_k=top_k if sparse else 0,
            params_per_expert=3 * hidden * moe_inter if sparse else 0,
            other_params=norms + (n_experts if sparse else 0),  # + the router's score-correction bias
            kv_lora_rank=kv_rank, qk_rope_head_dim=rope, v_head_dim=v_dim,
        ))
    return _finish(family, config, tuple(layers), tied_default=False)


_BUILDERS: dict[str, Callable[[str, Mapping[str, Any]], ModelShape]] = {
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "gemma4_text": _gemma4_text,
    "deepseek_v3": _deepseek_v3,
}


__all__ = ["LatentAttentionLayerShape", "LayerShape", "ModelShape", "bytes_per_element"]
