"""The doctor's device checks, run in a child process of their own (a device that hangs or crashes
takes only this process down): the device is usable, its fence waits for the work, its peak memory
reads what was allocated, torch.compile works with its backend, and (as two ranks) its collective.

    python -m tpubench.doctor.probe --device tpu                      # one JSON line per check
    python -m tpubench.doctor.probe --device tpu --collective-rank 0  # one rank of the 2-chip check
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from tpubench.doctor.verdicts import Check, fence_verdict, memory_verdict

PREFIX = "DOCTOR "
FENCE_SIZES = (1024, 4096, 8192)
FENCE_REPEATS = 5
MEMORY_PROBE_BYTES = 256 << 20


def emit(check: Check) -> None:
    print(PREFIX + json.dumps(check.as_dict()), flush=True)


def guarded(name: str, run) -> Check:
    try:
        return run()
    except Exception as exc:  # noqa: BLE001 - a check that breaks is a failed check, named
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        return Check(name, "fail", f"{type(exc).__name__}: {first}")


def fence_check(device: str) -> Check:
    """Fenced seconds per matmul at growing sizes, through tpubench's own fence (TorchDevice)."""
    if device == "cpu":
        return Check("fence", "skip", "the CPU has no queue to fence: its kernels finish before the call returns")
    import torch

    from tpubench.backends.torch import TorchBackend, TorchDevice

    dev, where = TorchDevice(device), TorchBackend(device).torch_device()
    dtype = torch.float32 if device == "mps" else torch.bfloat16
    seconds = {}
    for n in FENCE_SIZES:
        a = torch.randn(n, n, dtype=dtype, device=where)
        b = torch.randn(n, n, dtype=dtype, device=where)
        for _ in range(2):   # the first call of a shape may compile or initialise: untimed
            dev.depends_on(a @ b)
            dev.fence()
        t0 = time.perf_counter()
        for _ in range(FENCE_REPEATS):
            dev.depends_on(a @ b)
        dev.fence()
        seconds[n] = (time.perf_counter() - t0) / FENCE_REPEATS
    return fence_verdict(seconds)


def memory_check(device: str) -> Check:
    import torch

    from tpubench.backends.torch import DEVICE_SOURCES, TorchBackend, TorchDevice

    dev = TorchDevice(device)
    dev.reset_peak_memory()
    x = torch.ones(MEMORY_PROBE_BYTES // 4, dtype=torch.float32, device=TorchBackend(device).torch_device())
    dev.depends_on(x)
    dev.fence()
    check = memory_verdict(dev.peak_memory_bytes(), MEMORY_PROBE_BYTES, DEVICE_SOURCES.get(device, {}).get("memory", ""))
    summary = getattr(getattr(torch, "tpu", None), "_hbm_usage_summary", None)
    if device == "tpu" and summary is not None:
        check.figures["torch.tpu._hbm_usage_summary"] = str(summary())   # the compilation cache's HBM (torch-tpu 0.2.0)
    del x
    return check


def compile_check(device: str) -> Check:
    import torch

    from tpubench.backends.torch import TorchBackend, TorchDevice

    dev, where = TorchDevice(device), TorchBackend(device).torch_device()
    backend, _ = dev.compile_backend({})

    def f(x, w):
        return torch.nn.functional.gelu(x @ w).sum(-1)

    x = torch.randn(64, 256, device=where)
    w = torch.randn(256, 256, device=where)
    t0 = time.perf_counter()
    got = torch.compile(f, backend=backend)(x, w)
    dev.depends_on(got)
    dev.fence()
    seconds = time.perf_counter() - t0
    want = f(x, w)
    err = float((got.float() - want.float()).abs().max().item())
    scale = float(want.float().abs().max().item()) or 1.0
    ok = err <= 1e-2 * scale
    return Check("compile", "ok" if ok else "fail",
                 f"torch.compile(backend={backend!r}) compiled and ran in {seconds:.1f} s; max |compiled - eager| "
                 f"{err:.2e}", fix="" if ok else "compile mode disagrees with eager here: measure eager only",
                 figures={"backend": backend, "seconds": seconds, "max_abs_error": err})


def collective_rank(device: str, rank: int) -> Check:
    """One of two ranks: the device's process group, an all-reduce of rank+1 (expects 3)."""
    from tpubench.backends.torch import TorchBackend

    be = TorchBackend(device)
    be.enter_rank(1)
    be.bind_rank(rank)
    import torch
    import torch.distributed as dist

    be.init_process_group(120.0)
    try:
        x = torch.full((1024,), float(rank + 1), device=be.torch_device())
        dist.all_reduce(x)
        got = float(x[0].item())
    finally:
        dist.destroy_process_group()
    ok = got == 3.0
    return Check("collective", "ok" if ok else "fail",
                 f"all_reduce over 2 ranks with {be.process_group_backend()!r}: {got:g} (expected 3)",
                 figures={"backend": be.process_group_backend(), "source": be.process_group_source()})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", required=True)
    p.add_argument("--collective-rank", type=int, default=None)
    p.add_argument("--skip-compile", action="store_true")
    args = p.parse_args(argv)
    if args.collective_rank is not None:
        emit(guarded("collective", lambda: collective_rank(args.device, args.collective_rank)))
        return 0
    from tpubench.backends.torch import TorchBackend

    found = TorchBackend(args.device).availability()
    emit(Check("device", "ok" if found.available else "fail", found.detail))
    if not found.available:
        return 1
    emit(guarded("fence", lambda: fence_check(args.device)))
    emit(guarded("memory", lambda: memory_check(args.device)))
    if args.skip_compile:
        emit(Check("compile", "skip", "--quick: torch.compile is not tried (it takes tens of seconds on a CPU)"))
    else:
        emit(guarded("compile", lambda: compile_check(args.device)))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
