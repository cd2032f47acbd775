"""Roofline efficiency of a measured run: prefill MFU and decode MBU against the chip's peaks.

Accelerator peaks come from the shipped spec table; a CPU has no universal figure, so a short
GEMM and memory-bandwidth probe of this host stands in (recorded in the result's environment).

A point on N chips (tensor or expert parallel, docs/multi-chip.md) is judged per chip: MFU and MBU compare
one chip's share with one chip's peaks, and the bytes each chip sends per decode step set a time
floor against the chip's interconnect (hardware/counts.py has the formulas). The ranks of a CPU world
share one host, so each rank's peak is the host probe's divided by N, and there is no
interconnect figure (the floor stays None).
"""

from __future__ import annotations

import math

from tpubench.errors import UserError
from tpubench.hardware.accelerators import chip_peak_flops, chip_peaks, normalize_accelerator
from tpubench.hardware.environment import device_chips

# A probe measures what this host reached with its own shapes, not a nominal peak; a workload's
# better-shaped matmuls can beat it, so only a clear excess counts as a timing bug on a CPU.
CPU_PEAK_TOLERANCE = 1.5
HALF_DTYPES = ("bfloat16", "float16")
# Matmul input formats narrower than 16 bits (a quantised point's activations): their peak is the
# chip's int8/fp8 figure, and the host probe measures none of them.
NARROW_DTYPES = ("int8", "float8_e4m3fn", "float4_e2m1")


def peaks_for(device: str, accelerator_name: str | None, dtype: str) -> dict | None:
    """{peak_flops, peak_bytes_per_s, interconnect_send_bytes_per_s, shared_by_world, tolerance,
    source} for this device and dtype, or None. `interconnect_send_bytes_per_s` is what one chip can
    send over its links (one direction; None when unknown); `shared_by_world` marks a host-wide
    figure that the ranks of a world split between them."""
    if device == "cpu":
        from tpubench.hardware.hostprobe import probe_host

        probe = probe_host()
        key = "cpu_peak_bf16_flops" if dtype in HALF_DTYPES else "cpu_peak_fp32_flops"
        # No int8/fp8 GEMM probe: MFU is left unknown rather than judged against a float peak
        # that VNNI / AMX int8 matmuls can exceed several times.
        return {"peak_flops": None if dtype in NARROW_DTYPES else probe[key],
                "peak_bytes_per_s": probe["cpu_mem_bandwidth_bytes_per_s"],
                "interconnect_send_bytes_per_s": None, "shared_by_world": True,
                "tolerance": CPU_PEAK_TOLERANCE, "source": "host probe (GEMM and memory copy, this machine)",
                "probe": probe}
    spec = chip_peaks(normalize_accelerator(accelerator_name, device))
    # A framework device may be part of a chip (a logical NeuronCore): it is judged against its share.
    share = device_chips(device, 1, accelerator_name)
    if spec is None or share["chips"] is None:
        return None
    part = share["chips"]
    sending = spec["interconnect_send_bytes_per_s"]
    shown = f" x {part:g} chip per device ({share['chips_source']})" if part != 1 else ""
    # The table lists dense bf16; for float32 runs that is still an upper bound on the chip. Int8 and
    # fp8 matmuls are judged against the chip's own figure for them.
    flops = chip_peak_flops(normalize_accelerator(accelerator_name, device), dtype) if dtype in NARROW_DTYPES else None
    return {"peak_flops": (flops or spec["peak_bf16_flops"]) * part,
            "peak_bytes_per_s": spec["memory_bandwidth_bytes_per_s"] * part,
            "interconnect_send_bytes_per_s": sending * part if sending is not None else None, "shared_by_world": False,
            "tolerance": 1.0, "source": f"spec sheet: {spec['source'][:200]}{shown}"}


def _per_chip(peak: float | None, peaks: dict, world_size: int) -> float | None:
    """One rank's share of a host-wide peak; a chip's own peak as it is."""
    if peak is None or not peaks.get("shared_by_world"):
        return peak
    return peak / world_size


def roofline_metrics(point, metrics: dict, peaks: dict | None,
                     distinct_experts: list[float] | None = None) -> tuple[dict, bool]:
    """(metrics to add, exceeds_peak) from median TTFT and TPOT; empty when the family is unknown.
    `distinct_experts`: measured distinct experts per decode step per MoE layer (models/routing.py),
    used for the decode bytes instead of the uniform-routing expectation."""
    from tpubench.hardware.roofline import efficiency_for_run
    from tpubench.models.torch_models import full_config
    from tpubench.workload_spec.precision import precision_of

    ttft, tpot = metrics.get("ttft_p50_s"), metrics.get("tpot_p50_s")
    if not ttft or not math.isfinite(ttft):
        return {}, False
    n = getattr(point, "world_size", 1)
    peaks = peaks or {}
    try:
        precision = precision_of(point.dtype, getattr(point, "quantization", "none"))
        eff = efficiency_for_run(point.family, full_config(point), precision.weight_dtype, point.batch_size,
                                 point.input_length, point.output_length, ttft,
                                 tpot if tpot and math.isfinite(tpot) else None,
                                 _per_chip(peaks.get("peak_flops"), peaks, n),
                                 _per_chip(peaks.get("peak_bytes_per_s"), peaks, n),
                                 distinct_experts=distinct_experts, kv_dtype=precision.kv_cache_dtype,
                                 world_size=n, expert_parallel=getattr(point, "expert_parallel", 1) > 1,
                                 interconnect_send_bytes_per_s=peaks.get("interconnect_send_bytes_per_s"))
    except (ValueError, KeyError, NotImplementedError, UserError):   # fp4's half-byte elements: no roofline yet
        return {}, False
    keep = ("active_params", "prefill_flops", "prefill_achieved_flops_per_s", "prefill_mfu",
            "decode_bytes_per_step", "decode_achieved_bytes_per_s", "decode_mbu", "decode_flops_per_step",
            "decode_mfu", "expected_distinct_experts")
    if n > 1:   # single-chip results keep exactly the fields they always had
        keep += ("prefill_achieved_flops_per_s_per_chip", "decode_bytes_per_step_per_chip",
                 "decode_achieved_bytes_per_s_per_chip", "decode_achieved_flops_per_s_per_chip",
                 "interconnect_bytes_per_step", "interconnect_floor_s", "interconnect_share_of_tpot")
    out = {k: eff.get(k) for k in keep}
    limit = peaks.get("tolerance", math.inf)
    exceeds = any(v is not None and v > limit for v in (out["prefill_mfu"], out["decode_mbu"], out["decode_mfu"]))
    return out, exceeds


def train_roofline_metrics(point, metrics: dict, peaks: dict | None) -> tuple[dict, bool]:
    """(metrics to add, exceeds_peak) of a training point (docs/definitions.md#training): model FLOPs per token by
    counts.train_flops_per_token (6N + 12LHQT), the FLOP/s the world achieved at its mean step
    time (`train_tokens_per_s`), and `mfu` per chip against one chip's peak (a host-wide CPU peak
    split between a world's ranks). Empty when the family has no roofline."""
    from tpubench.hardware.counts import train_flops_per_token
    from tpubench.hardware.model_shape import ModelShape
    from tpubench.hardware.roofline import train_mfu
    from tpubench.models.torch_models import full_config

    rate = metrics.get("train_tokens_per_s")
    if not rate or not math.isfinite(rate):
        return {}, False
    n = getattr(point, "world_size", 1)
    peaks = peaks or {}
    peak = _per_chip(peaks.get("peak_flops"), peaks, n)
    try:
        shape = ModelShape.from_config(point.family, full_config(point))
        per_token = train_flops_per_token(shape, point.input_length)
    except (ValueError, KeyError, NotImplementedError):
        return {}, False
    out = {
        "total_params": shape.total_params,
        "active_params": shape.active_params,
        "model_flops_per_token": per_token,
        "model_flops_per_step": per_token * metrics.get("train_tokens_per_step", math.nan),
        "train_achieved_flops_per_s": rate * per_token,
        "train_achieved_flops_per_s_per_chip": rate * per_token / n,
        "mfu": train_mfu(rate, per_token, n, peak),
    }
    for bound in ("_ci95_low", "_ci95_high"):
        value = metrics.get(f"train_tokens_per_s{bound}")
        out[f"mfu{bound}"] = (train_mfu(value, per_token, n, peak)
                              if value is not None and math.isfinite(value) and value > 0 else None)
    limit = peaks.get("tolerance", math.inf)
    return out, out["mfu"] is not None and out["mfu"] > limit
