"""FLOP and byte counts of a workload: per token, per prefill, per decode step, per training token.

Everything here is a count over a `ModelShape` (hardware.model_shape), no timing: what one forward
must compute, read from memory and send between chips. `hardware.roofline` divides these counts by
measured times and compares them with a chip's peaks.

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
  A linear-attention layer (Gated DeltaNet: Qwen3.5, Qwen3-Next) keeps no per-token cache: its
  fixed-size state is one slot (`window = 1`), read whole every step and counted as that slot's
  bytes, and its recurrence costs the same FLOPs per token at any context
  (`model_shape.LinearAttentionLayerShape`).

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
"""

from __future__ import annotations

from typing import Callable, Sequence

from tpubench.hardware.model_shape import LayerShape, ModelShape, bytes_per_element

# --- arguments ----------------------------------------------------------------------------------

# Shared with hardware.roofline, whose run-level figures take the same workload arguments.
def check_positive(**values: float) -> None:
    for name, value in values.items():
        if value is None or not value > 0:
            raise ValueError(f"{name} must be positive, got {value!r}")


# --- FLOPs ------------------------------------------------------------------------------------


def sum_attended(first: int, last: int, window: int | None) -> float:
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
        layer.attention_flops_per_token(layer.attended(context_len)) * n for layer, n in shape.layer_counts)


def prefill_flops(shape: ModelShape, batch: int, input_len: int, *,
                  logits_all_positions: bool = False) -> float:
    """Model FLOPs of a causal prefill of `batch` sequences of `input_len` tokens.

    Position p (1-based) attends to min(p, window) tokens, summed exactly. The lm_head counts at
    the last position only unless `logits_all_positions`; KV-shared layers at the last position.
    """
    check_positive(batch=batch, input_len=input_len)
    per_sequence = 2 * shape.global_matmul_params * input_len
    for layer, n in shape.layer_counts:
        if layer.kv_shared:
            per_sequence += n * (2 * layer.active_matmul_params
                                 + layer.attention_flops_per_token(layer.attended(input_len)))
        else:
            per_sequence += n * (2 * layer.active_matmul_params * input_len
                                 + layer.attention_flops_per_token(
                                     sum_attended(1, input_len, layer.window)))
    per_sequence += 2 * shape.lm_head_params * (input_len if logits_all_positions else 1)
    return batch * per_sequence


def decode_flops_per_step(shape: ModelShape, batch: int, context_len: float) -> float:
    """FLOPs of one decode step: one token per sequence, each attending to `context_len` tokens."""
    check_positive(batch=batch, context_len=context_len)
    return batch * flops_per_token(shape, context_len)


# --- training FLOPs (docs/definitions.md#training) ---------------------------------------------------------------


def train_flops_per_token(shape: ModelShape, seq_len: int) -> float:
    """Model FLOPs of one training token (forward + backward) at sequence length T = `seq_len`:
    6 N + 12 L H Q T (PaLM, appendix B; `roofline.TRAIN_MFU_FORMULA`).

    N is the non-embedding parameters a token touches: every matmul weight one token multiplies
    (`ModelShape.active_params`: attention, dense MLP, router, the top-k experts of an MoE layer,
    the lm_head), not the embedding table; norm scales and biases do no matmul work and are left
    out (< 0.1%). 12 L H Q T is attention's QK^T and PV over T keys, forward and backward, written
    as a sum over layers of 12 H_l Q_l T so that layers with their own head count or head dim
    (Gemma 4's global layers) count what they are; as in PaLM every layer attends to all T tokens
    (no causal halving, no sliding window). A linear-attention layer (Gated DeltaNet) has no such
    term: its recurrence costs the same per token at any T, 3x its forward FLOPs
    (`LayerShape.train_attention_flops_per_token`). Activation recomputation is not counted (MFU, not HFU).
    """
    check_positive(seq_len=seq_len)
    attention = sum(layer.train_attention_flops_per_token(seq_len) for layer in shape.layers)
    return 6 * shape.active_params + attention


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


def decode_bytes_per_chip(shape: ModelShape, batch: int, attended: Callable[[LayerShape], float] | None,
                  dtype_bytes: int, kv_dtype_bytes: int,
                  distinct_experts: float | Sequence[float] | None,
                  world_size: int = 1) -> dict[str, float]:
    """Bytes one chip of `world_size` reads (module notes); with one chip, the whole step's. With
    `attended` None the step reads no KV cache (a prefill's, or the weights alone)."""
    n = world_size
    weights = (shape.sharded_matmul_params / n + shape.replicated_params) * dtype_bytes
    counts = _distinct_per_moe_layer(shape, batch, distinct_experts)
    experts = sum(count * layer.params_per_expert * dtype_bytes
                  for layer, count in zip(shape.moe_layers, counts)) / n
    kv = 0.0 if attended is None else sum(layer.kv_bytes_per_token(kv_dtype_bytes) * attended(layer) * batch * k
                                          for layer, k in shape.layer_counts) / n
    embeddings = batch * (shape.hidden_size + shape.per_layer_embedding_width) * dtype_bytes
    return {"weights": float(weights), "experts": float(experts), "kv_cache": float(kv),
            "embeddings": float(embeddings)}


def decode_bytes_breakdown(shape: ModelShape, batch: int, context_len: float,
                           dtype_bytes: int | str, kv_dtype_bytes: int | str | None = None,
                           distinct_experts: float | Sequence[float] | None = None,
                           world_size: int = 1) -> dict[str, float]:
    """Bytes one decode step reads, by kind: weights, experts, kv_cache, embeddings; with
    `world_size` N > 1, what one of the N chips reads (module notes)."""
    check_positive(batch=batch, context_len=context_len, world_size=world_size)
    w = bytes_per_element(dtype_bytes)
    kv = bytes_per_element(kv_dtype_bytes) if kv_dtype_bytes is not None else w
    return decode_bytes_per_chip(shape, batch, lambda layer: layer.attended(context_len), w, kv,
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
    check_positive(tokens=tokens, logit_rows=logit_rows, world_size=world_size)
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


__all__ = [
    "check_positive", "sum_attended", "flops_per_token", "prefill_flops", "decode_flops_per_step",
    "train_flops_per_token", "expected_distinct_experts", "decode_bytes_per_chip",
    "decode_bytes_breakdown", "decode_bytes_per_step", "EP_IMPLEMENTATIONS",
    "ring_all_reduce_send_bytes", "ring_all_gather_send_bytes", "interconnect_bytes_per_forward",
    "decode_interconnect_bytes_per_step", "kv_cache_bytes",
]
