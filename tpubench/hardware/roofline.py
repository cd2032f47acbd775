"""Roofline arithmetic: FLOPs and bytes a generate workload must move, and MFU / MBU per run.

Pure functions over a transformers-style config dict (the keys of `XxxConfig.to_dict()` or of a
checkpoint's config.json); no torch. Families with exact parameter accounting: `qwen3_moe`,
`qwen3`, `gemma4_text` (and `gemma4`, whose `text_config` is used); anything else is read as a
llama-like decoder (q/k/v/o attention, gated MLP, optional uniform MoE), which is approximate.

Counting conventions (docs/definitions.md#roofline), chosen so that an efficiency above 1.0 can only mean a timing bug:
- FLOPs are *model* FLOPs, the least work the generate call needs: 2 per matmul weight per token,
  plus attention (QK^T and PV: 4 * heads * head_dim * attended tokens per layer). Embedding lookups
  are not FLOPs; the lm_head is. Norms, activations, softmax and rotary are left out (< 1%).
- Prefill needs logits for the last prompt position only (generate asks for `logits_to_keep=1`),
  so the lm_head counts once per sequence; Gemma 4's KV-shared layers write no cache, so only the
  last prompt position's pass through them is needed either. `logits_all_positions=True` counts
  the lm_head at every position instead.
- Decode bytes are the bytes one step must read: every non-expert weight once (the lm_head in
  full, tied or not), per MoE layer the distinct experts the batch routes to, K and V of each
  attending layer over the tokens it attends to (a Gemma 4 KV-shared layer re-reads its producer's
  cache), and the batch's embedding rows. Activations and the new K/V writes are left out.
- A decode step at `context_len` processes one token per sequence that attends to `context_len`
  tokens (the cache after this token is appended); a sliding layer attends to min(context, window).

Multi-chip (docs/multi-chip.md), a world of N chips sharded the way transformers 5.24 shards it (read off
its `distributed/` code and checked by counting the collectives of one forward on 2 CPU ranks):
- Tensor parallel is `tp_plan="auto"`: q/k/v and the MLP's gate/up column-wise, o_proj and down
  row-wise, each expert sliced the same way (`moe_tp_experts`), the token embedding split over the
  vocabulary and the lm_head column-wise with its logits gathered. Expert parallel is what
  `DistributedConfig(tp_size=N, ep_size=N)` builds (an empty tp_plan is refused with tp_size > 1,
  and ep_size needs tp_size * fsdp_size to be a multiple of it): the same tensor-parallel attention,
  embedding, lm_head and dense MLP, and whole experts, E/N per chip; at inference its `auto`
  implementation is `AllReduceEP`: every chip runs its own experts on the whole batch (routes to
  other chips' experts masked) and one all-reduce sums the partial outputs. Replicated on every
  chip either way: norms, biases, the router, Gemma 4's per-layer-input weights.
- Bytes one chip reads per decode step: (attention + dense MLP + lm_head weights) / N + the
  replicated weights in full + (distinct experts x expert size) / N (tensor parallel: a 1/N slice
  of each; expert parallel: on average 1/N of the distinct experts live on a chip) + KV cache / N
  (KV heads split) + the batch's embedding rows (every chip looks them up).
- FLOPs are the model's; a chip does 1/N of them (replicated router work is not model work).
  Per chip: achieved = model FLOPs / N / time, and MFU, MBU compare per-chip figures with one
  chip's peaks. The all-chips figures (`decode_bytes_per_step`, `*_achieved_*`) are N x per chip.
- Bytes each chip sends per forward of T tokens (decode: T = B, the batch), ring collectives over
  N chips of an S-byte tensor: an all-reduce sends 2 (N-1)/N S, an all-gather (N-1)/N S.
  With d bytes per element, H hidden, V vocab:
    all-reduces of T x H x d: 1 (embedding) + per layer 1 (o_proj) + 1 if it has a dense MLP
      + 1 if it has an MoE block (tensor parallel: the experts' row-wise down; expert parallel
      `all_reduce`: the combine), i.e. 2 per layer for Qwen3 and Qwen3-MoE, 3 for Gemma 4's MoE
      layers (dense MLP beside the experts);
    one all-gather of the last position's logits, B x V x d.
  Expert parallel with `ep_implementation="all_to_all"` instead (each chip takes T/N of the shared
  tokens): per MoE layer the per-expert counts (E int64, (N-1)/N of them leave the chip), the
  dispatch and the combine ((T/N) k (N-1)/N rows of H x d each: uniform routing sends (N-1)/N of
  a chip's routes to other chips) and an all-gather of the outputs ((N-1)/N T H d).
- `interconnect_floor_s` = bytes sent per step / the chip's send bandwidth (half a bidirectional
  figure): the time the step cannot beat even if every link of the chip were busy; None when the
  bandwidth is unknown (always on the CPU). `interconnect_share_of_tpot` = floor / TPOT p50.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

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


_BUILDERS: dict[str, Callable[[str, Mapping[str, Any]], ModelShape]] = {
    "qwen3": _qwen3,
    "qwen3_moe": _qwen3_moe,
    "gemma4_text": _gemma4_text,
}


# --- FLOPs ------------------------------------------------------------------------------------


def _sum_attended(first: int, last: int, window: int | None) -> float:
    """sum over c in [first, last] of min(c, window): keys attended by positions first..last."""
    if last < first:
        return 0.0

    def arith(a: int, b: int) -> float:
        return (a + b) * (b - a + 1) / 2

    if not window or last <= window:
        return arith(first, last)
    if first >= window:
        return float((last - first + 1) * window)
    return arith(first, window) + (last - window) * window


def flops_per_token(shape: ModelShape, context_len: float) -> float:
    """FLOPs for one token attending to `context_len` tokens: 2 x active params + attention."""
    return 2 * shape.active_params + sum(
        layer.attention_flops_per_token(layer.attended(context_len)) for layer in shape.layers)


def prefill_flops(shape: ModelShape, batch: int, input_len: int, *,
                  logits_all_positions: bool = False) -> float:
    """Model FLOPs of a causal prefill of `batch` sequences of `input_len` tokens.

    Position p (1-based) attends to min(p, window) tokens, summed exactly. The lm_head counts at
    the last position only unless `logits_all_positions`; KV-shared layers at the last position.
    """
    _check_positive(batch=batch, input_len=input_len)
    per_sequence = 2 * shape.global_matmul_params * input_len
    for layer in shape.layers:
        if layer.kv_shared:
            per_sequence += (2 * layer.active_matmul_params
                             + layer.attention_flops_per_token(layer.attended(input_len)))
        else:
            per_sequence += (2 * layer.active_matmul_params * input_len
                             + layer.attention_flops_per_token(
                                 _sum_attended(1, input_len, layer.window)))
    per_sequence += 2 * shape.lm_head_params * (input_len if logits_all_positions else 1)
    return batch * per_sequence


def decode_flops_per_step(shape: ModelShape, batch: int, context_len: float) -> float:
    """FLOPs of one decode step: one token per sequence, each attending to `context_len` tokens."""
    _check_positive(batch=batch, context_len=context_len)
    return batch * flops_per_token(shape, context_len)


# --- training (docs/definitions.md#training) ---------------------------------------------------------------------

TRAIN_MFU_FORMULA = "6N+12LHQT (PaLM appendix B), no recomputation"


def train_flops_per_token(shape: ModelShape, seq_len: int) -> float:
    """Model FLOPs of one training token (forward + backward) at sequence length T = `seq_len`:
    6 N + 12 L H Q T (PaLM, appendix B; `TRAIN_MFU_FORMULA`).

    N is the non-embedding parameters a token touches: every matmul weight one token multiplies
    (`ModelShape.active_params`: attention, dense MLP, router, the top-k experts of an MoE layer,
    the lm_head), not the embedding table; norm scales and biases do no matmul work and are left
    out (< 0.1%). 12 L H Q T is attention's QK^T and PV over T keys, forward and backward, written
    as a sum over layers of 12 H_l Q_l T so that layers with their own head count or head dim
    (Gemma 4's global layers) count what they are; as in PaLM every layer attends to all T tokens
    (no causal halving, no sliding window). Activation recomputation is not counted (MFU, not HFU).
    """
    _check_positive(seq_len=seq_len)
    attention = sum(12 * layer.n_heads * layer.head_dim * seq_len for layer in shape.layers)
    return 6 * shape.active_params + attention


def train_mfu(tokens_per_s: float, flops_per_token: float, world_size: int,
              peak_flops_per_chip: float | None) -> float | None:
    """Training MFU per chip: model FLOPs per token x training tokens/s of the whole world,
    shared by its `world_size` chips, over one chip's peak; None when the peak is unknown."""
    _check_positive(world_size=world_size)
    return mfu(tokens_per_s * flops_per_token / world_size, peak_flops_per_chip)


# --- bytes ------------------------------------------------------------------------------------


def expected_distinct_experts(n_experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts `tokens` tokens route to, each picking `top_k` of `n_experts`.

    Uniform routing: an expert is missed by one token with probability 1 - k/E.
    """
    if n_experts <= 0:
        return 0.0
    if not 0 <= top_k <= n_experts:
        raise ValueError(f"top_k={top_k} must lie in [0, {n_experts}]")
    return n_experts * (1 - (1 - top_k / n_experts) ** tokens)


def _distinct_per_moe_layer(shape: ModelShape, batch: int,
                            distinct_experts: float | Sequence[float] | None) -> list[float]:
    moe = shape.moe_layers
    if distinct_experts is None:
        counts = [expected_distinct_experts(layer.n_experts, layer.top_k, batch) for layer in moe]
    elif isinstance(distinct_experts, (int, float)):
        counts = [float(distinct_experts)] * len(moe)
    else:
        counts = [float(d) for d in distinct_experts]
        if len(counts) != len(moe):
            raise ValueError(f"distinct_experts has {len(counts)} entries for {len(moe)} MoE layers")
    for layer, count in zip(moe, counts):
        if not 0 <= count <= layer.n_experts:
            raise ValueError(f"distinct experts {count} outside [0, {layer.n_experts}]")
    return counts


def _decode_bytes(shape: ModelShape, batch: int, attended: Callable[[LayerShape], float],
                  dtype_bytes: int, kv_dtype_bytes: int,
                  distinct_experts: float | Sequence[float] | None,
                  world_size: int = 1) -> dict[str, float]:
    """Bytes one chip of `world_size` reads (module notes); with one chip, the whole step's."""
    n = world_size
    sharded = (sum(layer.attn_matmul_params + layer.mlp_matmul_params for layer in shape.layers)
               + shape.lm_head_params)
    replicated = (sum(layer.extra_matmul_params + layer.router_params + layer.other_params
                      for layer in shape.layers)
                  + shape.global_matmul_params + shape.global_other_params)
    weights = (sharded / n + replicated) * dtype_bytes
    counts = _distinct_per_moe_layer(shape, batch, distinct_experts)
    experts = sum(count * layer.params_per_expert * dtype_bytes
                  for layer, count in zip(shape.moe_layers, counts)) / n
    kv = sum(layer.kv_bytes_per_token(kv_dtype_bytes) * attended(layer) * batch
             for layer in shape.layers) / n
    embeddings = batch * (shape.hidden_size + shape.per_layer_embedding_width) * dtype_bytes
    return {"weights": float(weights), "experts": float(experts), "kv_cache": float(kv),
            "embeddings": float(embeddings)}


def decode_bytes_breakdown(shape: ModelShape, batch: int, context_len: float,
                           dtype_bytes: int | str, kv_dtype_bytes: int | str | None = None,
                           distinct_experts: float | Sequence[float] | None = None,
                           world_size: int = 1) -> dict[str, float]:
    """Bytes one decode step reads, by kind: weights, experts, kv_cache, embeddings; with
    `world_size` N > 1, what one of the N chips reads (module notes)."""
    _check_positive(batch=batch, context_len=context_len, world_size=world_size)
    w = bytes_per_element(dtype_bytes)
    kv = bytes_per_element(kv_dtype_bytes) if kv_dtype_bytes is not None else w
    return _decode_bytes(shape, batch, lambda layer: layer.attended(context_len), w, kv,
                         distinct_experts, world_size)


def decode_bytes_per_step(shape: ModelShape, batch: int, context_len: float,
                          dtype_bytes: int | str, kv_dtype_bytes: int | str | None = None,
                          distinct_experts: float | Sequence[float] | None = None) -> float:
    """Bytes one decode step must read (see the module notes for what counts).

    `distinct_experts`: measured distinct experts per MoE layer (one number for all layers, or one
    per MoE layer); None uses `expected_distinct_experts` at `batch` tokens.
    """
    return sum(decode_bytes_breakdown(shape, batch, context_len, dtype_bytes, kv_dtype_bytes,
                                      distinct_experts).values())


# --- bytes between chips ------------------------------------------------------------------------

EP_IMPLEMENTATIONS = ("all_reduce", "all_to_all")


def ring_all_reduce_send_bytes(tensor_bytes: float, world_size: int) -> float:
    """Bytes each chip sends in a ring all-reduce of a `tensor_bytes` tensor: 2 (N-1)/N of it."""
    return 2 * (world_size - 1) / world_size * tensor_bytes


def ring_all_gather_send_bytes(gathered_bytes: float, world_size: int) -> float:
    """Bytes each chip sends to all-gather a `gathered_bytes` result (1/N held by each): (N-1)/N."""
    return (world_size - 1) / world_size * gathered_bytes


def interconnect_bytes_per_forward(shape: ModelShape, tokens: float, logit_rows: float,
                                   world_size: int, dtype_bytes: int | str, *,
                                   expert_parallel: bool = False,
                                   ep_implementation: str = "all_reduce") -> dict[str, float]:
    """Bytes each chip sends between chips in one forward of `tokens` tokens whose last
    `logit_rows` positions get logits, by collective (module notes); zeros on one chip.

    `expert_parallel` selects the expert-parallel layout (whole experts per chip) and
    `ep_implementation` how its tokens reach the experts: `all_reduce` (transformers' choice at
    inference when the chips share the batch) or `all_to_all`.
    """
    _check_positive(tokens=tokens, logit_rows=logit_rows, world_size=world_size)
    if ep_implementation not in EP_IMPLEMENTATIONS:
        raise ValueError(f"ep_implementation must be one of {EP_IMPLEMENTATIONS}, got {ep_implementation!r}")
    n, d = world_size, bytes_per_element(dtype_bytes)
    out = {"all_reduce": 0.0, "all_gather": 0.0, "all_to_all": 0.0}
    if n == 1:
        return out
    hidden = tokens * shape.hidden_size * d
    a2a = expert_parallel and ep_implementation == "all_to_all"
    reductions = 1 + sum(1 + (layer.mlp_matmul_params > 0) + (layer.is_moe and not a2a)
                         for layer in shape.layers)
    out["all_reduce"] = reductions * ring_all_reduce_send_bytes(hidden, n)
    out["all_gather"] = ring_all_gather_send_bytes(logit_rows * shape.vocab_size * d, n)
    if a2a:
        for layer in shape.moe_layers:
            counts = (n - 1) / n * layer.n_experts * 8            # int64 per-expert counts
            routes = tokens / n * layer.top_k * (n - 1) / n * shape.hidden_size * d
            out["all_to_all"] += counts + 2 * routes              # dispatch and combine
            out["all_gather"] += ring_all_gather_send_bytes(hidden, n)
    return out


def decode_interconnect_bytes_per_step(shape: ModelShape, batch: int, world_size: int,
                                       dtype_bytes: int | str, *, expert_parallel: bool = False,
                                       ep_implementation: str = "all_reduce") -> float:
    """Bytes each chip sends between chips in one decode step (one token per sequence)."""
    return sum(interconnect_bytes_per_forward(
        shape, batch, batch, world_size, dtype_bytes, expert_parallel=expert_parallel,
        ep_implementation=ep_implementation).values())


def kv_cache_bytes(shape: ModelShape, batch: int, context_len: int,
                   kv_dtype_bytes: int | str) -> int:
    """Bytes the KV cache holds at `context_len`: sliding layers keep a window, shared layers none."""
    kv = bytes_per_element(kv_dtype_bytes)
    return int(sum(layer.kv_bytes_per_token(kv) * layer.attended(context_len) * batch
                   for layer in shape.layers if not layer.kv_shared))


# --- efficiency -------------------------------------------------------------------------------


def _ratio(achieved: float, peak: float | None) -> float | None:
    if peak is None or not math.isfinite(peak) or peak <= 0:
        return None
    return achieved / peak


def mfu(achieved_flops_per_s: float, peak_flops_per_s: float | None) -> float | None:
    """Model FLOPs utilisation; None when the peak is unknown."""
    return _ratio(achieved_flops_per_s, peak_flops_per_s)


def mbu(achieved_bytes_per_s: float, peak_bytes_per_s: float | None) -> float | None:
    """Memory bandwidth utilisation; None when the peak is unknown."""
    return _ratio(achieved_bytes_per_s, peak_bytes_per_s)


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if value is None or not value > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")


def efficiency_for_run(family: str | None, config: Mapping[str, Any], dtype: str | int,
                       batch: int, input_len: int, output_len: int,
                       ttft_s: float, tpot_s: float | None,
                       peak_flops: float | None, peak_bytes_per_s: float | None, *,
                       kv_dtype: str | int | None = None,
                       distinct_experts: float | Sequence[float] | None = None,
                       world_size: int = 1, expert_parallel: bool = False,
                       ep_implementation: str = "all_reduce",
                       interconnect_send_bytes_per_s: float | None = None) -> dict[str, Any]:
    """MFU of the prefill and MBU (and MFU) of the decode for one generate run.

    TTFT covers the prefill; TPOT is the mean decode step. The O - 1 decode steps attend to
    I+1 .. I+O-1 tokens, so per-step bytes and FLOPs are their exact mean over those steps.
    Decode fields are None when O == 1. `exceeds_peak` is True when any achieved rate is above
    the chip's peak: physically impossible, so a timing bug (docs/measurement.md#validity).

    On `world_size` N chips (module notes; `expert_parallel` picks that layout, else tensor
    parallel) the peaks are one chip's and MFU / MBU are per chip; `*_per_chip` fields are one
    chip's share, the others all chips together (equal when N = 1). `interconnect_*` fields give
    the bytes each chip sends per decode step, the time floor they set against
    `interconnect_send_bytes_per_s` (one direction, what one chip can send; None when unknown)
    and that floor's share of TPOT.
    """
    _check_positive(batch=batch, input_len=input_len, output_len=output_len, ttft_s=ttft_s,
                    world_size=world_size)
    n = world_size
    shape = ModelShape.from_config(family, config)
    w = bytes_per_element(dtype)
    kv = bytes_per_element(kv_dtype) if kv_dtype is not None else w

    p_flops = prefill_flops(shape, batch, input_len)
    p_rate = p_flops / ttft_s
    out: dict[str, Any] = {
        "world_size": n,
        "total_params": shape.total_params,
        "active_params": shape.active_params,
        "prefill_flops": p_flops,
        "prefill_achieved_flops_per_s": p_rate,
        "prefill_achieved_flops_per_s_per_chip": p_rate / n,
        "prefill_mfu": mfu(p_rate / n, peak_flops),
        "decode_steps": output_len - 1,
        "decode_bytes_per_step": None,
        "decode_bytes_per_step_per_chip": None,
        "decode_weight_bytes_per_step": None,
        "decode_kv_bytes_per_step": None,
        "decode_achieved_bytes_per_s": None,
        "decode_achieved_bytes_per_s_per_chip": None,
        "decode_mbu": None,
        "decode_flops_per_step": None,
        "decode_achieved_flops_per_s": None,
        "decode_achieved_flops_per_s_per_chip": None,
        "decode_mfu": None,
        "interconnect_bytes_per_step": None,
        "interconnect_floor_s": None,
        "interconnect_share_of_tpot": None,
        "expected_distinct_experts": (
            expected_distinct_experts(shape.n_experts, shape.top_k, batch)
            if shape.moe_layers else None),
    }
    if output_len > 1:
        _check_positive(tpot_s=tpot_s)
        first, last = input_len + 1, input_len + output_len - 1
        steps = last - first + 1

        def mean_attended(layer: LayerShape) -> float:
            return _sum_attended(first, last, layer.window) / steps

        parts = _decode_bytes(shape, batch, mean_attended, w, kv, distinct_experts, n)
        chip_bytes = sum(parts.values())
        d_flops = batch * (2 * shape.active_params + sum(
            layer.attention_flops_per_token(mean_attended(layer)) for layer in shape.layers))
        sent = decode_interconnect_bytes_per_step(shape, batch, n, w, expert_parallel=expert_parallel,
                                                  ep_implementation=ep_implementation)
        floor = (sent / interconnect_send_bytes_per_s
                 if n > 1 and interconnect_send_bytes_per_s and interconnect_send_bytes_per_s > 0
                 else None)
        out.update({
            "decode_bytes_per_step": chip_bytes * n,
            "decode_bytes_per_step_per_chip": chip_bytes,
            "decode_weight_bytes_per_step": (parts["weights"] + parts["experts"] + parts["embeddings"]) * n,
            "decode_kv_bytes_per_step": parts["kv_cache"] * n,
            "decode_achieved_bytes_per_s": chip_bytes * n / tpot_s,
            "decode_achieved_bytes_per_s_per_chip": chip_bytes / tpot_s,
            "decode_mbu": mbu(chip_bytes / tpot_s, peak_bytes_per_s),
            "decode_flops_per_step": d_flops,
            "decode_achieved_flops_per_s": d_flops / tpot_s,
            "decode_achieved_flops_per_s_per_chip": d_flops / n / tpot_s,
            "decode_mfu": mfu(d_flops / n / tpot_s, peak_flops),
            "interconnect_bytes_per_step": sent,
            "interconnect_floor_s": floor,
            "interconnect_share_of_tpot": floor / tpot_s if floor is not None else None,
        })
    ratios = (out["prefill_mfu"], out["decode_mbu"], out["decode_mfu"])
    out["exceeds_peak"] = any(r is not None and r > 1.0 for r in ratios)
    return out


__all__ = [
    "LayerShape", "ModelShape", "bytes_per_element", "flops_per_token", "prefill_flops",
    "decode_flops_per_step", "expected_distinct_experts", "decode_bytes_breakdown",
    "decode_bytes_per_step", "kv_cache_bytes", "mfu", "mbu", "efficiency_for_run",
    "EP_IMPLEMENTATIONS", "ring_all_reduce_send_bytes", "ring_all_gather_send_bytes",
    "interconnect_bytes_per_forward", "decode_interconnect_bytes_per_step",
    "TRAIN_MFU_FORMULA", "train_flops_per_token", "train_mfu",
]
