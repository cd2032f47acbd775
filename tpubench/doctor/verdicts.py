"""Judging the doctor's device figures: pure functions over what the probe measured."""

from __future__ import annotations

from dataclasses import dataclass, field

# A matmul of side n does n^3 multiply-adds: from the smallest to the largest probe size the work
# grows (8192/1024)^3 = 512-fold. A fence that waits sees the time grow far more than this much;
# one that returns before the work ran sees the launch cost only, about flat.
FENCE_MIN_GROWTH = 8.0


@dataclass
class Check:
    """One line of the readiness summary: `status` ok, fail or skip; `fix` what to do about a fail."""

    name: str
    status: str
    detail: str
    fix: str = ""
    figures: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix,
                "figures": self.figures}


def fence_verdict(seconds_by_size: dict[int, float]) -> Check:
    """A timed matmul's time must grow with its size: else the clock read did not wait for the work."""
    small, large = min(seconds_by_size), max(seconds_by_size)
    t_small, t_large = seconds_by_size[small], seconds_by_size[large]
    growth = t_large / t_small if t_small > 0 else float("inf")
    work = (large / small) ** 3
    figures = {"seconds_by_size": {str(k): v for k, v in sorted(seconds_by_size.items())}, "growth": growth}
    detail = (f"matmul {small}^3 -> {large}^3 ({work:.0f}x the work): fenced time {t_small * 1e3:.3f} -> "
              f"{t_large * 1e3:.3f} ms ({growth:.1f}x)")
    if growth >= FENCE_MIN_GROWTH:
        return Check("fence", "ok", detail, figures=figures)
    return Check("fence", "fail", detail + f": under {FENCE_MIN_GROWTH:.0f}x, the fence returns before the work has run",
                 fix="do not trust timings here: report it with `tpubench backends` output (docs/measurement.md#backends)",
                 figures=figures)


def memory_verdict(peak_bytes: int | None, allocated_bytes: int, source: str) -> Check:
    """The device's peak memory must read at least what was just allocated (never 0)."""
    if not peak_bytes:
        return Check("memory", "fail", f"peak memory reads {peak_bytes!r} after allocating {allocated_bytes:,} bytes "
                     f"({source})", fix="results will carry no peak memory on this device (never a 0)")
    status = "ok" if peak_bytes >= allocated_bytes else "fail"
    return Check("memory", status, f"peak {peak_bytes:,} bytes after allocating {allocated_bytes:,} ({source})",
                 fix="" if status == "ok" else "the peak reads less than was allocated: peak memory columns are low",
                 figures={"peak_bytes": peak_bytes, "allocated_bytes": allocated_bytes})


def readiness(checks: list[Check]) -> tuple[bool, list[str]]:
    """(ready, what to do): ready when no check failed; skips are listed with their reasons."""
    fixes = [f"{c.name}: {c.fix}" for c in checks if c.status == "fail" and c.fix]
    return not any(c.status == "fail" for c in checks), fixes
