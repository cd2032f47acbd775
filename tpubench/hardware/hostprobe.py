"""A quick measured roofline for the host CPU: GEMM FLOP/s and memory bandwidth.

A CPU has no universal peak (data/accelerators.csv, CPU row), so a run on the host stores what
this probe measured in its environment and the roofline divides by that. It takes about a second,
runs once per process and is cached.

Measurement notes:
- GEMM sizes ramp 256 -> 2048 and stop where the next size would overrun the time budget. A CPU
  without native bf16 (no AVX512-BF16 / AMX) needs tens of seconds for a 2048^3 bf16 matmul, so
  a fixed size would blow the budget; there the figure comes from a smaller size.
- Bandwidth uses 128 MiB arrays (16x a typical L3; the copy touches 256 MiB). A copy counts
  read + write (2 x N bytes, the STREAM convention: write-allocate traffic is not counted); a
  sum counts N bytes read. The reported figure is the better of the two, the conservative roof
  for MBU (decode mostly reads).
- Every figure is the best of its timed repetitions: interference only ever slows a run down.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

_GEMM_SIZES = (256, 512, 1024, 2048)
_GEMM_REPS = 3
_GEMM_WARM_S = 0.1
_BANDWIDTH_BYTES = 128 * 1024 * 1024
_BANDWIDTH_REPS = 3

_lock = threading.Lock()
_cached: dict[str, Any] | None = None


def _best_seconds(fn, reps: int, deadline: float, min_seconds: float = 0.0) -> float:
    """Best wall time of `fn` over at least `reps` runs and `min_seconds`; one run at least,
    none started past `deadline`."""
    best = float("inf")
    start = time.perf_counter()
    count = 0
    while True:
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        best = min(best, t1 - t0)
        count += 1
        if t1 > deadline or (count >= reps and t1 - start >= min_seconds):
            return best


def _gemm_flops(torch: Any, dtype: Any, budget_s: float) -> tuple[float, int]:
    """Best FLOP/s of a square matmul in `dtype` and the size that reached it.

    Sizes ramp up from 256 while the next size's repetitions still fit the budget; small sizes
    alone understate a BLAS (packing overheads), so the larger ones usually win.
    """
    deadline = time.perf_counter() + budget_s
    best_rate, best_n = 0.0, 0
    for i, n in enumerate(_GEMM_SIZES):
        a = torch.randn(n, n).to(dtype)
        b = torch.randn(n, n).to(dtype)
        torch.matmul(a, b)  # warm-up: first call initialises the BLAS / oneDNN path
        # The smallest size also runs for a while: a cold thread pool on a busy host can take a
        # scheduler tick per call for the first few calls.
        seconds = _best_seconds(lambda a=a, b=b: torch.matmul(a, b), _GEMM_REPS, deadline,
                                _GEMM_WARM_S if i == 0 else 0.0)
        rate = 2 * n**3 / seconds
        if rate > best_rate:
            best_rate, best_n = rate, n
        next_n = n * 2
        # The next size costs ~8x per repetition; it needs a warm-up plus at least one timed rep.
        if 2 * 2 * next_n**3 / best_rate > deadline - time.perf_counter():
            break
    return best_rate, best_n


def _bandwidth(torch: Any, budget_s: float) -> tuple[float, float]:
    """(copy, read) bytes/s over arrays far larger than the last-level cache."""
    import numpy as np

    deadline = time.perf_counter() + budget_s
    src = np.ones(_BANDWIDTH_BYTES // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # first touch: page faults would otherwise be timed
    copy_s = _best_seconds(lambda: np.copyto(dst, src), _BANDWIDTH_REPS, deadline)
    src_t = torch.from_numpy(src)  # shares memory; torch reduces with all its threads
    src_t.sum()
    read_s = _best_seconds(lambda: src_t.sum(), _BANDWIDTH_REPS, deadline)
    return 2 * src.nbytes / copy_s, src.nbytes / read_s


def _gemm_best(torch: Any, dtype: Any, budget_s: float) -> tuple[float, int, int]:
    """Best of the ramp at torch's thread count and at one thread: (FLOP/s, size, threads).

    On an oversubscribed host every multi-threaded region waits for its slowest thread's time
    slice (we saw 2-thread 256^3 matmuls take 30 ms instead of 0.5 ms); one thread is a measured
    lower bound of the peak, so the better of the two is the honest figure.
    """
    threads = torch.get_num_threads()
    settings = [threads, 1] if threads > 1 else [threads]
    best = (0.0, 0, threads)
    for n_threads in settings:
        torch.set_num_threads(n_threads)
        try:
            rate, n = _gemm_flops(torch, dtype, budget_s / len(settings))
        finally:
            torch.set_num_threads(threads)
        if rate > best[0]:
            best = (rate, n, n_threads)
    return best


def probe_host(force: bool = False) -> dict[str, Any]:
    """Measure (once per process) the CPU's GEMM peak and memory bandwidth, in about a second.

    Returns `{cpu_peak_fp32_flops, cpu_peak_bf16_flops, cpu_mem_bandwidth_bytes_per_s, threads,
    probe_seconds}` plus how each was reached (`gemm_n_*`, `gemm_threads_*`,
    `cpu_mem_copy_bytes_per_s`, `cpu_mem_read_bytes_per_s`). Rates are best-of measurements;
    `threads` is `torch.get_num_threads()`. `force=True` measures again.
    """
    global _cached
    with _lock:
        if _cached is not None and not force:
            return dict(_cached)
        import torch

        start = time.perf_counter()
        with torch.inference_mode():
            fp32, n32, t32 = _gemm_best(torch, torch.float32, 0.5)
            bf16, n16, t16 = _gemm_best(torch, torch.bfloat16, 0.25)
            copy_bw, read_bw = _bandwidth(torch, 0.35)
        _cached = {
            "cpu_peak_fp32_flops": fp32,
            "cpu_peak_bf16_flops": bf16,
            "cpu_mem_bandwidth_bytes_per_s": max(copy_bw, read_bw),
            "cpu_mem_copy_bytes_per_s": copy_bw,
            "cpu_mem_read_bytes_per_s": read_bw,
            "gemm_n_fp32": n32,
            "gemm_n_bf16": n16,
            "gemm_threads_fp32": t32,
            "gemm_threads_bf16": t16,
            "threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(),
            "probe_seconds": time.perf_counter() - start,
        }
        return dict(_cached)


__all__ = ["probe_host"]
