"""Roofline efficiency of a run: MFU and MBU of a generate run, MFU of a training run.

Divides the counts of `hardware.counts` (FLOPs, bytes read, bytes sent between chips) by a run's
measured times and compares the rates with one chip's peaks (docs/definitions.md#roofline). The
counting conventions and the multi-chip sharding they assume are in `hardware.counts`' module notes.

Multi-chip (docs/multi-chip.md), a world of N chips:
- FLOPs are the model's; a chip does 1/N of them (replicated router work is not model work).
  Per chip: achieved = model FLOPs / N / time, and MFU, MBU compare per-chip figures with one
  chip's peaks. The all-chips figures (`decode_bytes_per_step`, `*_achieved_*`) are N x per chip.
- `interconnect_floor_s` = bytes sent per step / the chip's send bandwidth (half a bidirectional
  figure): the time the step cannot beat even if every link of the chip were busy; None when the
  bandwidth is unknown (always on the CPU). `interconnect_share_of_tpot` = floor / TPOT p50.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from tpubench.hardware.counts import (
    check_positive,
    decode_bytes_per_chip,
    decode_interconnect_bytes_per_step,
    expected_distinct_experts,
    prefill_flops,
    sum_attended,
)
from tpubench.hardware.model_shape import LayerShape, ModelShape, bytes_per_element

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
    check_positive(batch=batch, input_len=input_len, output_len=output_len, ttft_s=ttft_s,
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
        check_positive(tpot_s=tpot_s)
        first, last = input_len + 1, input_len + output_len - 1
        steps = last - first + 1

        def mean_attended(layer: LayerShape) -> float:
            return sum_attended(first, last, layer.window) / steps

        parts = decode_bytes_per_chip(shape, batch, mean_attended, w, kv, distinct_experts, n)
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


# --- training (docs/definitions.md#training) ---------------------------------------------------------------------

TRAIN_MFU_FORMULA = "6N+12LHQT (PaLM appendix B), no recomputation"


def train_mfu(tokens_per_s: float, flops_per_token: float, world_size: int,
              peak_flops_per_chip: float | None) -> float | None:
    """Training MFU per chip: model FLOPs per token x training tokens/s of the whole world,
    shared by its `world_size` chips, over one chip's peak; None when the peak is unknown."""
    check_positive(world_size=world_size)
    return mfu(tokens_per_s * flops_per_token / world_size, peak_flops_per_chip)


__all__ = ["mfu", "mbu", "efficiency_for_run", "TRAIN_MFU_FORMULA", "train_mfu"]
