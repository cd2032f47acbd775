"""Model shapes: parameter counts by role and attention dimensions of a decoder-only LM, from its config.

Pure functions over a transformers-style config dict (the keys of `XxxConfig.to_dict()` or of a
checkpoint's config.json); no torch. Families with exact parameter accounting: `qwen3_moe`,
`qwen3`, `gemma2` (alternating sliding/global layers), `gemma4_text` (and `gemma4`, whose
`text_config` is used), `deepseek_v3` (MLA, 671.0B for DeepSeek-V3/R1 without its MTP layer, 36.6B
active; also `deepseek_v2`, `kimi_k2`, and `glm_moe_dsa` with its sparse-attention indexer), `gpt_oss`
(sliding/full layers, sinks, biased experts), `glm4_moe`, `minimax_m2`, `mimo_v2_flash` (sliding/full
layers with their own KV heads, narrower values than keys), `llama4_text` (interleaved MoE, chunked
attention) and the hybrid `qwen3_5_moe_text` / `qwen3_next` (Gated DeltaNet linear attention: a
fixed-size state, no KV cache, beside full-attention layers); multimodal configs are read through
their `text_config` (vision towers left out). Anything else is read as a llama-like decoder (q/k/v/o
attention, gated MLP, optional uniform MoE: exact for llama, qwen2 and mixtral, approximate beyond).

The shape is what the FLOP and byte counts (`hardware.counts`) and the efficiency of a run
(`hardware.roofline`) are computed from; it also sizes weights for memory-fit checks and plans.
Replicated and sharded roles are kept apart (attention, dense MLP, per-layer-input, router, experts,
norms and biases) because a multi-chip world shards some and replicates the others.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
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

    def train_attention_flops_per_token(self, seq_len: int) -> float:
        """PaLM's 12 H Q T: QK^T and PV over all `seq_len` keys, forward and backward."""
        return 12 * self.n_heads * self.head_dim * seq_len


@dataclass(frozen=True)
class LatentAttentionLayerShape(LayerShape):
    """A DeepSeek-V2/V3 layer with multi-head latent attention (MLA): the cache holds one compressed
    latent (kv_lora_rank) plus the shared rotary key (qk_rope_head_dim) per token, not K and V per
    head, and a query attends over qk_nope + qk_rope dims and reads v_head_dim values per head."""

    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # DeepSeek sparse attention (GLM-5's glm_moe_dsa): a lightweight indexer scores every cached key
    # (index_n_heads x index_head_dim per key) and caches one index_head_dim key per token; the MLA
    # then attends only the index_topk best keys. That selection is not modelled: attention is
    # counted over the whole context, exact up to index_topk tokens and an upper bound beyond.
    indexer_heads: int = 0
    indexer_head_dim: int = 0

    def attention_flops_per_token(self, attended_len: float) -> float:
        # head_dim holds qk_nope + qk_rope: QK^T over it, PV over v_head_dim (2 FLOPs per MAC).
        return 2 * (self.n_heads * (self.head_dim + self.v_head_dim)
                    + self.indexer_heads * self.indexer_head_dim) * attended_len

    def kv_bytes_per_token(self, kv_dtype_bytes: int) -> int:
        return (self.kv_lora_rank + self.qk_rope_head_dim + self.indexer_head_dim) * kv_dtype_bytes


@dataclass(frozen=True)
class LinearAttentionLayerShape(LayerShape):
    """A linear-attention layer (Gated DeltaNet: Qwen3-Next, Qwen3.5). It keeps no KV cache: each
    sequence holds a fixed-size state, per value head a key_head_dim x value_head_dim matrix, plus
    the short convolution's last conv_kernel - 1 inputs (conv_dim channels), and every decode step
    reads (and rewrites) that whole state however long the context is; nothing grows per token.

    The counts (`hardware.counts`) charge a layer `kv_bytes_per_token x attended` cache bytes and
    `attention_flops_per_token(attended)`, attended summed over the positions of a prefill. This
    layer is one fixed slot: `window = 1`, so it attends 1 "token" at any context (the count of
    positions over a prompt), that slot's bytes are the state's, and its FLOPs the recurrence's.
    n_heads = n_kv_heads = the value heads, so chips of a tensor-parallel group split the state.
    The recurrent state is kept in the cache dtype, as vLLM does by default (its mamba_ssm_cache_dtype
    'auto' follows the cache; the config's mamba_ssm_dtype float32 would double it)."""

    value_head_dim: int = 0
    conv_dim: int = 0
    conv_kernel: int = 0

    def attention_flops_per_token(self, attended_len: float) -> float:
        # Per token and value head, three state-sized products (retrieve S^T k, the rank-1 delta
        # update of S, read out S^T q), 2 FLOPs per MAC; the decay and gates are elementwise and,
        # like the convolution and norms, left out. `attended_len` counts the tokens (1 per step).
        return 6 * self.n_heads * self.head_dim * self.value_head_dim * attended_len

    def kv_bytes_per_token(self, kv_dtype_bytes: int) -> int:
        """Bytes of the state one sequence keeps in this layer (the one slot)."""
        state = self.n_heads * self.head_dim * self.value_head_dim
        return (state + self.conv_dim * (self.conv_kernel - 1)) * kv_dtype_bytes

    def train_attention_flops_per_token(self, seq_len: int) -> float:
        # Forward and backward, 3x the forward recurrence per token whatever the sequence length.
        return 3 * self.attention_flops_per_token(1)


@dataclass(frozen=True)
class ModelShape:
    """Parameter accounting of a decoder-only LM, derived from its config. Its sums over layers
    are cached (it is frozen): the estimate asks them of a few shapes thousands of times."""

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
        # A multimodal config (Gemma 4's `gemma4`, Qwen3.5's `qwen3_5_moe`, Llama 4's `llama4`)
        # nests the language model's config; some state tie_word_embeddings only at the top.
        if isinstance(text, Mapping) and (family == "gemma4" or "hidden_size" not in config):
            inner = text.get("model_type") or ("gemma4_text" if family == "gemma4" else family)
            if text.get("tie_word_embeddings") is None and config.get("tie_word_embeddings") is not None:
                text = {**text, "tie_word_embeddings": config["tie_word_embeddings"]}
            return cls.from_config(inner, text)
        return _BUILDERS.get(family, _llama_like)(family, config)

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    @cached_property
    def total_params(self) -> int:
        """All stored parameters (a tied lm_head counted once), as `sum(p.numel())` reports."""
        return (sum(layer.total_params for layer in self.layers) + self.embedding_params
                + (0 if self.tied_embeddings else self.lm_head_params)
                + self.per_layer_embedding_params + self.global_matmul_params
                + self.global_other_params)

    @cached_property
    def active_params(self) -> int:
        """Matmul weights one token multiplies: top-k experts, lm_head included, embeddings not."""
        return (sum(layer.active_matmul_params for layer in self.layers)
                + self.global_matmul_params + self.lm_head_params)

    @cached_property
    def layer_counts(self) -> tuple[tuple[LayerShape, int], ...]:
        """Each distinct layer with how many times it repeats, in order of first appearance: most
        models repeat one or two layers, so a sum over these is a sum over the layers at a few
        terms' cost (the estimate's rooflines ran a thousand such sums a second)."""
        return tuple(Counter(self.layers).items())

    @cached_property
    def sharded_matmul_params(self) -> int:
        """Weights tensor parallelism splits over chips: attention, dense MLP and the lm_head."""
        return sum(layer.attn_matmul_params + layer.mlp_matmul_params for layer in self.layers) + self.lm_head_params

    @cached_property
    def replicated_params(self) -> int:
        """Weights every chip holds whole: extra matmuls, routers, norms and the weights outside the layers."""
        return (sum(layer.extra_matmul_params + layer.router_params + layer.other_params for layer in self.layers)
                + self.global_matmul_params + self.global_other_params)

    @cached_property
    def moe_layers(self) -> tuple[LayerShape, ...]:
        return tuple(layer for layer in self.layers if layer.is_moe)

    @cached_property
    def n_experts(self) -> int:
        return max((layer.n_experts for layer in self.layers), default=0)

    @cached_property
    def top_k(self) -> int:
        return max((layer.top_k for layer in self.layers), default=0)

    @cached_property
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


def _gqa_sizes(config: Mapping[str, Any], family: str, *required: str) -> tuple[int, int, int, int, int]:
    """(hidden size, attention heads, layers, key/value heads, head dim) of a grouped-query attention
    config, after `_require` of `required` (the keys its family cannot do without)."""
    _require(config, family, *required)
    hidden, n_heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    return (hidden, n_heads, int(config["num_hidden_layers"]), int(_get(config, "num_key_value_heads", n_heads)),
            _head_dim(config))


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
    hidden, n_heads, n_layers, n_kv, head_dim = _gqa_sizes(
        config, family, "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
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


def _gemma2(family: str, config: Mapping[str, Any]) -> ModelShape:
    """Gemma 2 (gemma2): GQA attention and a gated MLP like llama's, but four norms per layer (before
    and after attention and the MLP), embeddings tied by default, and layers alternating a sliding
    window (`sliding_window` tokens: the even layers) and global attention as `layer_types` says. Its
    soft-capping of attention and final logits (a tanh per score) and query_pre_attn_scalar are
    elementwise, left out like the softmax."""
    hidden, n_heads, n_layers, n_kv, head_dim = _gqa_sizes(
        config, family, "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
    sliding_window = config.get("sliding_window")
    types = list(config.get("layer_types") or ["sliding_attention" if (i + 1) % 2 else "full_attention"
                                               for i in range(n_layers)])
    attn_w, attn_b = _attention(hidden, n_heads, n_kv, head_dim, bool(config.get("attention_bias")))
    layers = tuple(
        LayerShape(
            attention_type=t, n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim,
            window=_window(t, sliding_window), attn_matmul_params=attn_w,
            mlp_matmul_params=3 * hidden * int(config["intermediate_size"]),
            other_params=attn_b + 4 * hidden,
        )
        for t in types
    )
    return _finish(family, config, layers, tied_default=True)


def _llama_like(family: str, config: Mapping[str, Any]) -> ModelShape:
    hidden, n_heads, n_layers, n_kv, head_dim = _gqa_sizes(
        config, family, "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
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
    """DeepSeek-V3 / R1 (transformers' deepseek_v3 keys; Kimi K2's kimi_k2 is the same architecture):
    MLA attention, the first `first_k_dense_replace` layers dense, the rest routed experts plus
    `n_shared_experts` shared ones (always active, so counted as a dense MLP); DeepSeek-V2's
    deepseek_v2 is the same but for its router (greedy top-k: no score-correction bias). GLM-5's
    glm_moe_dsa adds a sparse-attention indexer per layer (`index_n_heads` x `index_head_dim`: its
    query from the q latent, one key and per-head weights from the hidden state;
    LatentAttentionLayerShape notes). The multi-token-prediction layer is left out."""
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
    idx_heads, idx_dim = int(_get(config, "index_n_heads", 0)), int(_get(config, "index_head_dim", 0))
    if idx_heads and idx_dim:
        # wq_b (from the q latent, or the hidden state without one), wk, weights_proj; k_norm (w, b).
        attn_w += (int(q_rank) if q_rank else hidden) * idx_heads * idx_dim + hidden * (idx_dim + idx_heads)
        norms += 2 * idx_dim
    n_experts = int(_get(config, "n_routed_experts", 0))
    top_k = int(_get(config, "num_experts_per_tok", 0))
    moe_inter = int(_get(config, "moe_intermediate_size", 0))
    shared = int(_get(config, "n_shared_experts", 0))
    first_dense = int(_get(config, "first_k_dense_replace", 0))
    freq = int(_get(config, "moe_layer_freq", 1))
    correction_bias = 0 if family == "deepseek_v2" else n_experts
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
            other_params=norms + (correction_bias if sparse else 0),  # + the router's score-correction bias
            kv_lora_rank=kv_rank, qk_rope_head_dim=rope, v_head_dim=v_dim,
            indexer_heads=idx_heads if idx_dim else 0, indexer_head_dim=idx_dim if idx_heads else 0,
        ))
    return _finish(family, config, tuple(layers), tied_default=False)


def _gpt_oss(family: str, config: Mapping[str, Any]) -> ModelShape:
    """OpenAI gpt-oss: every layer an MoE block (num_local_experts, experts_per_token of them per
    token), attention alternating sliding-window (sliding_window tokens) and full layers as
    `layer_types` says, biases on q/k/v/o, on the router and on each expert's projections, and one
    learned sink logit per head (`sinks`: stored and read, no matmul; its softmax term is left out).
    An expert's biases are read with it, so they count in its size (0.03%)."""
    hidden, n_heads, n_layers, n_kv, head_dim = _gqa_sizes(
        config, family, "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size")
    inter = int(config["intermediate_size"])
    n_experts = int(_get(config, "num_local_experts", _get(config, "num_experts", 0)))
    top_k = int(_get(config, "num_experts_per_tok", _get(config, "experts_per_token", 0)))
    sliding_window = config.get("sliding_window")
    types = list(config.get("layer_types") or ["sliding_attention" if i % 2 == 0 else "full_attention"
                                               for i in range(n_layers)])
    attn_w, attn_b = _attention(hidden, n_heads, n_kv, head_dim, bool(_get(config, "attention_bias", True)))
    layers = tuple(
        LayerShape(
            attention_type=t, n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim,
            window=_window(t, sliding_window), attn_matmul_params=attn_w,
            router_params=hidden * n_experts, n_experts=n_experts, top_k=top_k,
            params_per_expert=3 * hidden * inter + 2 * inter + hidden,  # gate_up, down and their biases
            other_params=attn_b + n_heads + n_experts + 2 * hidden,      # sinks, router bias, 2 norms
        )
        for t in types
    )
    return _finish(family, config, layers, tied_default=False)


def _glm4_moe(family: str, config: Mapping[str, Any]) -> ModelShape:
    """GLM-4.5 / 4.6 (glm4_moe): GQA attention with q/k/v biases (attention_bias; none on o) and,
    with use_qk_norm, per-head q/k norms; the first `first_k_dense_replace` layers dense, the rest
    `n_routed_experts` experts (top num_experts_per_tok) plus `n_shared_experts` always-active ones,
    the router with a score-correction bias. The multi-token-prediction layer is left out."""
    _require(config, family, "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
             "intermediate_size", "moe_intermediate_size")
    hidden, n_heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    n_kv = int(_get(config, "num_key_value_heads", n_heads))
    head_dim = _head_dim(config)
    attn_w, attn_b = _attention(hidden, n_heads, n_kv, head_dim, bool(config.get("attention_bias")),
                                o_bias=False)
    qk_norm = 2 * head_dim if config.get("use_qk_norm") else 0
    n_experts = int(_get(config, "n_routed_experts", 0))
    top_k = int(_get(config, "num_experts_per_tok", 0))
    moe_inter = int(config["moe_intermediate_size"])
    shared = int(_get(config, "n_shared_experts", 0))
    first_dense = int(_get(config, "first_k_dense_replace", 0))
    layers = []
    for i in range(int(config["num_hidden_layers"])):
        sparse = n_experts > 0 and i >= first_dense
        layers.append(LayerShape(
            attention_type="full_attention", n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim,
            window=None, attn_matmul_params=attn_w,
            mlp_matmul_params=(3 * hidden * moe_inter * shared if sparse
                               else 3 * hidden * int(config["intermediate_size"])),
            router_params=hidden * n_experts if sparse else 0,
            n_experts=n_experts if sparse else 0, top_k=top_k if sparse else 0,
            params_per_expert=3 * hidden * moe_inter if sparse else 0,
            other_params=attn_b + qk_norm + 2 * hidden + (n_experts if sparse else 0),
        ))
    return _finish(family, config, tuple(layers), tied_default=False)


def _minimax_m2(family: str, config: Mapping[str, Any]) -> ModelShape:
    """MiniMax-M2 / M2.5 (minimax_m2): GQA attention without biases, q and k normed over all heads
    at once (qk_norm_type per_layer: n_heads x head_dim and n_kv x head_dim scales), every layer
    `num_local_experts` experts of `intermediate_size` (top num_experts_per_tok), a router with a
    score-correction bias, and no shared expert. The multi-token-prediction modules are left out."""
    _require(config, family, "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
             "intermediate_size", "num_local_experts")
    hidden, n_heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    n_kv = int(_get(config, "num_key_value_heads", n_heads))
    head_dim = _head_dim(config)
    n_experts, top_k = int(config["num_local_experts"]), int(_get(config, "num_experts_per_tok", 0))
    attn_w, attn_b = _attention(hidden, n_heads, n_kv, head_dim, bool(config.get("attention_bias")))
    qk_norm = (n_heads + n_kv) * head_dim if config.get("use_qk_norm", True) else 0
    shared = int(_get(config, "shared_intermediate_size", 0))
    layers = tuple(
        LayerShape(
            attention_type="full_attention", n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim,
            window=None, attn_matmul_params=attn_w, mlp_matmul_params=3 * hidden * shared,
            router_params=hidden * n_experts, n_experts=n_experts, top_k=top_k,
            params_per_expert=3 * hidden * int(config["intermediate_size"]),
            other_params=attn_b + qk_norm + n_experts + 2 * hidden,
        )
        for _ in range(int(config["num_hidden_layers"]))
    )
    return _finish(family, config, layers, tied_default=False)


def _mimo_v2_flash(family: str, config: Mapping[str, Any]) -> ModelShape:
    """Xiaomi MiMo-V2-Flash (mimo_v2_flash): `layer_types` mixes full-attention layers
    (num_key_value_heads) with sliding-window ones (swa_num_key_value_heads, transformers' default
    twice as many, and a learned sink logit per head, stored and read like gpt-oss's); queries and keys
    are head_dim wide, values v_head_dim. A sliding layer attends sliding_window_size previous tokens
    plus its own (transformers' sliding_window). `mlp_layer_types` makes the first layer a dense MLP
    and the rest `n_routed_experts` experts of moe_intermediate_size (top num_experts_per_tok), no
    shared expert, the router with a score-correction bias. Attention FLOPs (QK^T over the key width,
    PV over the value width) and a cached token's bytes (a key and a value per KV head) are both
    linear in key + value width, so the layer carries their mean as head_dim ((192 + 128) / 2 = 160
    for MiMo-V2-Flash): exact for both. The multi-token-prediction layers are left out."""
    _require(config, family, "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
             "intermediate_size", "moe_intermediate_size", "n_routed_experts")
    hidden, n_heads = int(config["hidden_size"]), int(config["num_attention_heads"])
    n_layers = int(config["num_hidden_layers"])
    full_kv = int(_get(config, "num_key_value_heads", n_heads))
    swa_kv = int(_get(config, "swa_num_key_value_heads", 2 * full_kv))
    qk_dim = _head_dim(config)
    v_dim = int(_get(config, "v_head_dim", qk_dim))
    window = (int(config["sliding_window_size"]) + 1 if config.get("sliding_window_size") is not None
              else _get(config, "sliding_window"))
    types = list(config.get("layer_types") or ["full_attention" if i == 0 or (i + 1) % 6 == 0
                                               else "sliding_attention" for i in range(n_layers)])
    mlp_types = list(config.get("mlp_layer_types") or ["dense"] + ["sparse"] * (n_layers - 1))
    bias = bool(config.get("attention_bias"))
    n_experts, top_k = int(config["n_routed_experts"]), int(_get(config, "num_experts_per_tok", 0))
    moe_inter = int(config["moe_intermediate_size"])
    layers = []
    for t, mlp in zip(types, mlp_types):
        sliding = t == "sliding_attention"
        n_kv = swa_kv if sliding else full_kv
        # q, k (qk_dim), v (v_dim), o back from the values; biases on q, k, v only.
        attn_w = hidden * (n_heads + n_kv) * qk_dim + hidden * n_kv * v_dim + n_heads * v_dim * hidden
        attn_b = (n_heads + n_kv) * qk_dim + n_kv * v_dim if bias else 0
        sparse = mlp == "sparse"
        layers.append(LayerShape(
            attention_type=t, n_heads=n_heads, n_kv_heads=n_kv, head_dim=(qk_dim + v_dim) // 2,
            window=_window(t, window), attn_matmul_params=attn_w,
            mlp_matmul_params=0 if sparse else 3 * hidden * int(config["intermediate_size"]),
            router_params=hidden * n_experts if sparse else 0,
            n_experts=n_experts if sparse else 0, top_k=top_k if sparse else 0,
            params_per_expert=3 * hidden * moe_inter if sparse else 0,
            other_params=attn_b + (n_heads if sliding else 0) + (n_experts if sparse else 0) + 2 * hidden,
        ))
    return _finish(family, config, tuple(layers), tied_default=False)


def _llama4_text(family: str, config: Mapping[str, Any]) -> ModelShape:
    """Llama 4 (llama4_text): MoE layers every `interleave_moe_layer_step` (or as `moe_layers` lists
    them) with `num_local_experts` experts of `intermediate_size` (top num_experts_per_tok) plus one
    shared expert of the same size, dense layers of `intermediate_size_mlp` between them; q/k norms
    without weights. Three layers in four (the RoPE ones, `no_rope_layers` 1) attend within chunks
    of `attention_chunk_size` tokens: counted as a sliding window of the chunk size, exact up to one
    chunk of context and an upper bound beyond (a chunked query sees 1 to chunk-size tokens)."""
    hidden, n_heads, n_layers, n_kv, head_dim = _gqa_sizes(
        config, family, "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size", "intermediate_size")
    inter, dense_inter = int(config["intermediate_size"]), int(_get(config, "intermediate_size_mlp", 16384))
    n_experts, top_k = int(_get(config, "num_local_experts", 0)), int(_get(config, "num_experts_per_tok", 1))
    step = int(_get(config, "interleave_moe_layer_step", 1))
    moe_layers = set(_get(config, "moe_layers", range(step - 1, n_layers, step)) if n_experts else ())
    chunk = config.get("attention_chunk_size")
    rope = _get(config, "no_rope_layers", [int((i + 1) % 4 != 0) for i in range(n_layers)])
    types = list(config.get("layer_types") or
                 ["chunked_attention" if rope[i] and chunk else "full_attention" for i in range(n_layers)])
    attn_w, attn_b = _attention(hidden, n_heads, n_kv, head_dim, bool(config.get("attention_bias")))
    layers = []
    for i, t in enumerate(types):
        sparse = i in moe_layers
        layers.append(LayerShape(
            attention_type=t, n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim,
            window=int(chunk) if t == "chunked_attention" and chunk else None,
            attn_matmul_params=attn_w,
            mlp_matmul_params=3 * hidden * (inter if sparse else dense_inter),  # shared expert or dense MLP
            router_params=hidden * n_experts if sparse else 0,
            n_experts=n_experts if sparse else 0, top_k=top_k if sparse else 0,
            params_per_expert=3 * hidden * inter if sparse else 0,
            other_params=attn_b + 2 * hidden,
        ))
    return _finish(family, config, tuple(layers), tied_default=False)


def _qwen3_5_moe(family: str, config: Mapping[str, Any]) -> ModelShape:
    """Qwen3.5 MoE (qwen3_5_moe_text) and Qwen3-Next (qwen3_next): `layer_types` mixes Gated DeltaNet
    linear-attention layers (LinearAttentionLayerShape: a fixed-size state per sequence, no KV cache)
    with full-attention ones (every `full_attention_interval`-th when layer_types is absent), whose
    q_proj also yields a sigmoid output gate (attn_output_gate) and whose q/k are normed per head.
    Every layer (bar mlp_only_layers) is an MoE: `num_experts` of moe_intermediate_size (top
    num_experts_per_tok) plus one always-active shared expert of shared_expert_intermediate_size behind
    a hidden -> 1 gate. Linear layers: q, k (linear_num_key_heads x linear_key_head_dim) and v, z
    (linear_num_value_heads x linear_value_head_dim) projections, two per-head scalars (b, a), a
    depthwise convolution of linear_conv_kernel_dim taps over q, k, v, a gated norm and out_proj.
    The vision tower and the multi-token-prediction layer are left out."""
    hidden, n_heads, n_layers, n_kv, head_dim = _gqa_sizes(
        config, family, "hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
        "linear_num_key_heads", "linear_key_head_dim", "linear_num_value_heads", "linear_value_head_dim")
    interval = int(_get(config, "full_attention_interval", 4))
    types = list(config.get("layer_types") or ["full_attention" if (i + 1) % interval == 0
                                               else "linear_attention" for i in range(n_layers)])
    gate = 2 if _get(config, "attn_output_gate", True) else 1
    attn_w = hidden * n_heads * head_dim * gate + 2 * hidden * n_kv * head_dim + n_heads * head_dim * hidden
    k_heads, k_dim = int(config["linear_num_key_heads"]), int(config["linear_key_head_dim"])
    v_heads, v_dim = int(config["linear_num_value_heads"]), int(config["linear_value_head_dim"])
    key_dim, value_dim = k_heads * k_dim, v_heads * v_dim
    conv_dim, kernel = 2 * key_dim + value_dim, int(_get(config, "linear_conv_kernel_dim", 4))
    linear_w = hidden * (2 * key_dim + 2 * value_dim + 2 * v_heads) + value_dim * hidden
    linear_other = conv_dim * kernel + 2 * v_heads + v_dim   # conv taps, dt_bias and A_log, gated norm
    n_experts = int(_get(config, "num_experts", 0))
    top_k = int(_get(config, "num_experts_per_tok", 0))
    moe_inter = int(_get(config, "moe_intermediate_size", 0))
    shared_inter = int(_get(config, "shared_expert_intermediate_size", 0))
    sparse_step = int(_get(config, "decoder_sparse_step", 1))
    mlp_only = set(_get(config, "mlp_only_layers", []))
    layers = []
    for i, t in enumerate(types):
        sparse = i not in mlp_only and n_experts > 0 and (i + 1) % sparse_step == 0
        mlp = dict(
            mlp_matmul_params=3 * hidden * (shared_inter if sparse else int(_get(config, "intermediate_size", 0))),
            router_params=hidden * (n_experts + (1 if shared_inter else 0)) if sparse else 0,
            n_experts=n_experts if sparse else 0, top_k=top_k if sparse else 0,
            params_per_expert=3 * hidden * moe_inter if sparse else 0,
        )
        if t == "linear_attention":
            layers.append(LinearAttentionLayerShape(
                attention_type=t, n_heads=v_heads, n_kv_heads=v_heads, head_dim=k_dim, window=1,
                attn_matmul_params=linear_w, other_params=linear_other + 2 * hidden,
                value_head_dim=v_dim, conv_dim=conv_dim, conv_kernel=kernel, **mlp))
        else:
            layers.append(LayerShape(
                attention_type=t, n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim, window=None,
                attn_matmul_params=attn_w, other_params=2 * head_dim + 2 * hidden, **mlp))
    return _finish(family, config, tuple(layers), tied_default=False)


_BUILDERS: dict[str, Callable[[str, Mapping[str, Any]], ModelShape]] = {
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "qwen3_vl_moe_text": _qwen3_moe,     # Qwen3-VL's language model: Qwen3-MoE layers
    "qwen3_5_moe_text": _qwen3_5_moe,
    "qwen3_next": _qwen3_5_moe,
    "gemma2": _gemma2,
    "gemma4_text": _gemma4_text,
    "deepseek_v3": _deepseek_v3,
    "deepseek_v2": _deepseek_v3,         # DeepSeek-V2 / V2-Lite: MLA + MoE, no score-correction bias
    "kimi_k2": _deepseek_v3,             # Kimi K2 / K2.5: DeepseekV3ForCausalLM
    "glm_moe_dsa": _deepseek_v3,         # GLM-5: MLA + sparse-attention indexer
    "gpt_oss": _gpt_oss,
    "glm4_moe": _glm4_moe,
    "minimax_m2": _minimax_m2,
    "mimo_v2_flash": _mimo_v2_flash,
    "llama4_text": _llama4_text,
}


__all__ = ["LatentAttentionLayerShape", "LayerShape", "LinearAttentionLayerShape", "ModelShape",
           "bytes_per_element"]
