"""The roofline of one operating point and the fit's terms for it.

An operating point is a model (its shape, bytes per weight and per cached value, and the number
format its matmuls run in) served on `chips` chips with `concurrency` sequences in flight, prompts
of `input_len` tokens and answers of `output_len`. Its roofline is what the chips' peaks allow
(FLOP and weight-byte counts from `hardware.counts`, tensor-parallel sharding as it describes):

- prefill: the `concurrency` prompts' model FLOPs over all chips' peak FLOP/s, or the weights one
  chip must read for them (experts touched by that many tokens) over its bandwidth, whichever is
  longer;
- decode step: one token for each of the `concurrency` sequences at the mean context
  (input_len + output_len / 2): FLOPs over the peak, or the bytes one chip reads over its
  bandwidth, whichever is longer. Bytes: the non-expert weights / chips, the distinct experts the
  batch routes to / chips (routing-aware for MoE: E (1 - (1 - k/E)^batch), uniform routing), and
  the KV cache. The cache splits by KV head, so a chip reads 1 / min(chips, KV heads) of it: a
  model with fewer KV heads than chips (Qwen3-30B-A3B's 4 on 8 chips) holds each head on several
  chips, and a latent-attention cache (DeepSeek's MLA: one latent per token, no heads to split)
  is read in full by every chip of a tensor-parallel group.

A cycle produces concurrency x output_len tokens and takes prefill + (output_len - 1) decode steps
(prefill makes each sequence's first token, as a measured batch's E2E - TTFT is O - 1 steps:
measure/per_token.batch_chip_seconds_per_token charges both alike); `cycle_s` is its roofline
time. The observed cycle of a published row is
concurrency x output_len / (output tokens/s per chip x chips): what a closed loop of that many users
(Little's law) or a static batch takes. Efficiency = roofline / observed (<= 1 on an honest row).
Interconnect time is not counted: it is part of what the efficiency (its log-chips term) absorbs.

Latency. The cycle fixes the throughput, and with it a request's whole time in the engine (E2E =
the cycle, by Little's law, for a closed loop or a static batch); how that time splits into TTFT
and the O - 1 decode steps depends on how the engine schedules prefills, which no roofline says.
So TTFT is modelled in units of the mean step (cycle / O) as log(TTFT / step) = terms . theta
(`LATENCY_TERMS`), fitted on the published rows that report a TTFT:

- log(prefill ahead / step): the prefill a request waits for, in steps: every prompt of a static
  batch (all are prefilled before any decodes), or its own prompt in a server (continuous
  batching prefills each arrival into the running batch, chunk by chunk, sharing steps with the
  decodes of the others);
- log(load): the more sequences in flight, the more prefills queue ahead of a new one;
- log(input length): a long prompt is split into chunks over several steps (chunked prefill);
- log(total / active parameters): a mixture of experts' prefill runs its experts as many small
  matmuls, far below the roofline of its active parameters (0 for a dense model);
- how requests arrive (`ARRIVALS`): all at once (static), a closed loop of clients (each sends
  its next request when the last completes: vLLM's and SGLang's benchmark clients, tpubench's
  serve at a concurrency), or an open loop at a rate near the engine's capacity (MLPerf Server and,
  at a tighter latency bound, Interactive), where the wait in the queue dominates; the open loop
  has its own slope for its own prompt's prefill.

TPOT is what the cycle leaves after the TTFT: (cycle - TTFT) / (O - 1), so throughput, TTFT and
TPOT always add up to one E2E. Requests a server cannot hold at once (more clients than the memory
fits) wait for a slot first: (clients - running) x cycle / running, by Little's law, added to TTFT.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from tpubench.hardware.counts import decode_bytes_per_chip, decode_flops_per_step, prefill_flops
from tpubench.hardware.model_shape import ModelShape

# log_decode_step_roofline_s: the shorter the ideal step, the more fixed costs (kernel launches,
# collectives' latency, the host) weigh in it; a small model spread over many chips runs far below
# its roofline for that reason, not for lack of bandwidth. decode_compute_excess: how far past the
# ridge a decode step's FLOPs are, max(0, ln(compute time / memory time)): real steps do not switch
# sharply from bandwidth- to compute-bound at the ridge (the two overlap imperfectly, and large
# batched matmuls reach their peak less often than streaming reaches its bandwidth), so a point
# well past it runs below the max() roofline by more than one at the ridge.
# How a row's requests arrive (module notes: latency), and the latency model's terms.
STATIC, CLOSED_LOOP, OPEN_LOOP, INTERACTIVE = "static batch", "closed loop", "open loop", "open loop, interactive"
ARRIVALS = (STATIC, CLOSED_LOOP, OPEN_LOOP, INTERACTIVE)
LATENCY_TERMS = ("intercept", "log_prefill_ahead_steps", "log_load", "static_batch", "open_loop", "interactive",
                 "open_loop_log_prefill_steps", "log_input_length", "log_sparsity")
# A TTFT the latency fit puts above this share of the cycle is held there: the cycle, which the
# throughput fit validates, must keep some time for the decode steps.
MAX_TTFT_SHARE = 0.5
# log_sparsity: ln(total / active parameters), 0 for a dense model: a mixture of experts runs
# further below its roofline the sparser it is (routing, uneven expert loads, small expert matmuls),
# and how much further is a family's kernels' own (Neuron's MoE rows run at 2-9% of it).
# stack_age_years: how much older the row's serving stack is than the calibration's newest rows
# (their dates, years): publishers' software gains speed month by month, so a row of 2023 runs below
# one of 2026 on the same chip; an estimate is for the newest stack (0) unless asked for another.
TERMS = ("intercept", "log_concurrency", "log_chips", "prefill_share", "log_decode_step_roofline_s",
         "decode_compute_excess", "log_sparsity", "stack_age_years")
# The share of a chip's memory a server gives its weights and KV cache (vLLM's default
# --gpu-memory-utilization): the sequences that fit in the rest are the most that can run at once.
MEMORY_UTILIZATION = 0.9


@dataclass(frozen=True)
class Point:
    shape: ModelShape
    weight_bytes: float      # per weight
    kv_bytes: float          # per cached element
    compute_precision: str   # the format the matmuls run in: picks the chip's peak FLOP/s
    chips: int
    concurrency: float       # sequences decoded together
    input_len: float
    output_len: float
    precision: str = ""      # how tables name it: 'bf16', 'w fp8 / a fp8 / kv bf16' (models.PointPrecision)
    stack_age_years: float = 0.0   # its serving stack's age before the calibration's newest (TERMS)


@dataclass(frozen=True)
class Roofline:
    prefill_s: float         # all `concurrency` prompts
    decode_step_s: float     # one step of `concurrency` sequences
    output_len: float
    prefill_bound: str       # "compute" or "memory"
    decode_bound: str
    decode_compute_s: float = 0.0   # a step's FLOPs over the peak, and its bytes over the bandwidth
    decode_memory_s: float = 0.0

    @property
    def decode_steps(self) -> float:
        """Decode steps after prefill: prefill makes the first output token (module notes)."""
        return max(self.output_len - 1, 0.0)

    @property
    def cycle_s(self) -> float:
        return self.prefill_s + self.decode_steps * self.decode_step_s

    @property
    def prefill_share(self) -> float:
        return self.prefill_s / self.cycle_s


def kv_cache_bytes_per_chip(shape: ModelShape, batch: float, context: float, kv_bytes: float, chips: int) -> float:
    """KV-cache bytes one chip reads in a decode step (module notes: split by KV head, no finer)."""
    return sum(layer.kv_bytes_per_token(kv_bytes) * layer.attended(context) * batch
               / min(chips, max(1, layer.n_kv_heads)) * n for layer, n in shape.layer_counts)


def decode_step_bytes_per_chip(point: Point) -> float:
    """Bytes one chip reads in one decode step at the mean context (module notes)."""
    p = point
    context = p.input_len + p.output_len / 2
    weights = decode_bytes_per_chip(p.shape, p.concurrency, None, p.weight_bytes, p.kv_bytes,
                                    None, p.chips)
    return sum(weights.values()) + kv_cache_bytes_per_chip(p.shape, p.concurrency, context, p.kv_bytes, p.chips)


def roofline(point: Point, peak_flops: float, peak_bytes_per_s: float) -> Roofline:
    p, n = point, point.chips
    context = p.input_len + p.output_len / 2
    p_flops = prefill_flops(p.shape, p.concurrency, int(round(p.input_len)))
    # A prefill reads every weight its prompt tokens touch once; attention reads no cache.
    p_bytes = sum(decode_bytes_per_chip(p.shape, p.concurrency * p.input_len, None, p.weight_bytes,
                                        p.kv_bytes, None, n).values())
    d_flops = decode_flops_per_step(p.shape, p.concurrency, context)
    d_bytes = decode_step_bytes_per_chip(p)
    p_compute, p_memory = p_flops / n / peak_flops, p_bytes / peak_bytes_per_s
    d_compute, d_memory = d_flops / n / peak_flops, d_bytes / peak_bytes_per_s
    return Roofline(prefill_s=max(p_compute, p_memory), decode_step_s=max(d_compute, d_memory),
                    output_len=p.output_len,
                    prefill_bound="compute" if p_compute >= p_memory else "memory",
                    decode_bound="compute" if d_compute >= d_memory else "memory",
                    decode_compute_s=d_compute, decode_memory_s=d_memory)


def terms(point: Point, roof: Roofline) -> np.ndarray:
    """The fit's terms (TERMS) for one point."""
    shape = point.shape
    return np.array([1.0, math.log(point.concurrency), math.log(point.chips), roof.prefill_share,
                     math.log(roof.decode_step_s), max(0.0, math.log(roof.decode_compute_s / roof.decode_memory_s)),
                     math.log(shape.total_params / shape.active_params), point.stack_age_years])


def latency_terms(point: Point, roof: Roofline, prefill_one_s: float, step_s: float, arrival: str) -> np.ndarray:
    """The latency fit's terms (LATENCY_TERMS) for one point whose mean step is `step_s`: its own
    roofline (`roof`, whose prefill is every prompt of the batch) and one prompt's roofline prefill
    (`prefill_one_s`)."""
    if arrival not in ARRIVALS:
        raise ValueError(f"unknown arrival {arrival!r}: one of {', '.join(ARRIVALS)}")
    static = arrival == STATIC
    open_loop = arrival in (OPEN_LOOP, INTERACTIVE)
    ahead = roof.prefill_s if static else prefill_one_s
    return np.array([1.0, math.log(ahead / step_s), math.log(point.concurrency), float(static), float(open_loop),
                     float(arrival == INTERACTIVE), math.log(prefill_one_s / step_s) if open_loop else 0.0,
                     math.log(point.input_len), math.log(point.shape.total_params / point.shape.active_params)])


def prefill_one_s(point: Point, peak_flops: float, peak_bytes_per_s: float) -> float:
    """Roofline seconds to prefill one of the point's prompts on its chips."""
    return roofline(replace(point, concurrency=1.0), peak_flops, peak_bytes_per_s).prefill_s


def sequences_that_fit(point: Point, memory_bytes: float | None) -> float:
    """How many sequences of input_len + output_len tokens the chips' memory holds beside the
    weights (MEMORY_UTILIZATION of it; a sliding window or a linear-attention state caps a layer's
    cache): inf when the memory is unknown. A server runs no more at once, whatever its clients
    send; a static batch of more does not fit."""
    if not memory_bytes:
        return math.inf
    free = memory_bytes * point.chips * MEMORY_UTILIZATION - point.shape.total_params * point.weight_bytes
    per_sequence = sum(layer.kv_bytes_per_token(point.kv_bytes) * layer.attended(point.input_len + point.output_len)
                       * n for layer, n in point.shape.layer_counts)
    return max(free, 0.0) / per_sequence if per_sequence > 0 else math.inf


def observed_cycle_s(point: Point, output_tokens_per_s_per_chip: float) -> float:
    """Seconds one cycle took on the row: concurrency x output_len tokens at the row's rate."""
    return point.concurrency * point.output_len / (output_tokens_per_s_per_chip * point.chips)


__all__ = ["ARRIVALS", "CLOSED_LOOP", "INTERACTIVE", "LATENCY_TERMS", "MAX_TTFT_SHARE", "MEMORY_UTILIZATION", "OPEN_LOOP",
           "STATIC", "Point", "Roofline", "TERMS", "decode_step_bytes_per_chip", "kv_cache_bytes_per_chip", "latency_terms",
           "observed_cycle_s", "prefill_one_s", "roofline", "sequences_that_fit", "terms"]
