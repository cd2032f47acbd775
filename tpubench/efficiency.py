"""Roofline efficiency of a measured run: prefill MFU and decode MBU against the chip's peaks.

Accelerator peaks come from the shipped spec table; a CPU has no universal figure, so a short
GEMM and memory-bandwidth probe of this host stands in (recorded in the result's environment).
"""

from __future__ import annotations

import math

from tpubench.accelerators import chip_peaks, normalize_accelerator

# A probe measures what this host reached with its own shapes, not a nominal peak; a workload's
# better-shaped matmuls can beat it, so only a clear excess counts as a timing bug on a CPU.
CPU_PEAK_TOLERANCE = 1.5
HALF_DTYPES = ("bfloat16", "float16")


def peaks_for(device: str, accelerator_name: str | None, dtype: str) -> dict | None:
    """{peak_flops, peak_bytes_per_s, tolerance, source} for this device and dtype, or None."""
    if device == "cpu":
        from tpubench.hostprobe import probe_host

        probe = probe_host()
        key = "cpu_peak_bf16_flops" if dtype in HALF_DTYPES else "cpu_peak_fp32_flops"
        return {"peak_flops": probe[key], "peak_bytes_per_s": probe["cpu_mem_bandwidth_bytes_per_s"],
                "tolerance": CPU_PEAK_TOLERANCE, "source": "host probe (GEMM and memory copy, this machine)",
                "probe": probe}
    spec = chip_peaks(normalize_accelerator(accelerator_name, device))
    if spec is None:
        return None
    # The table lists dense bf16; for float32 runs that is still an upper bound on the chip.
    return {"peak_flops": spec["peak_bf16_flops"], "peak_bytes_per_s": spec["memory_bandwidth_bytes_per_s"],
            "tolerance": 1.0, "source": f"spec sheet: {spec['source'][:200]}"}


def roofline_metrics(point, metrics: dict, peaks: dict | None) -> tuple[dict, bool]:
    """(metrics to add, exceeds_peak) from median TTFT and TPOT; empty when the family is unknown."""
    from tpubench.models.torch_models import full_config
    from tpubench.roofline import efficiency_for_run

    ttft, tpot = metrics.get("ttft_p50_s"), metrics.get("tpot_p50_s")
    if not ttft or not math.isfinite(ttft):
        return {}, False
    try:
        eff = efficiency_for_run(point.family, full_config(point), point.dtype, point.batch_size,
                                 point.input_length, point.output_length, ttft,
                                 tpot if tpot and math.isfinite(tpot) else None,
                                 peaks["peak_flops"] if peaks else None,
                                 peaks["peak_bytes_per_s"] if peaks else None)
    except (ValueError, KeyError, NotImplementedError):
        return {}, False
    keep = ("active_params", "prefill_flops", "prefill_achieved_flops_per_s", "prefill_mfu",
            "decode_bytes_per_step", "decode_achieved_bytes_per_s", "decode_mbu", "decode_flops_per_step",
            "decode_mfu", "expected_distinct_experts")
    out = {k: eff.get(k) for k in keep}
    limit = peaks["tolerance"] if peaks else math.inf
    exceeds = any(v is not None and v > limit for v in (out["prefill_mfu"], out["decode_mbu"], out["decode_mfu"]))
    return out, exceeds
