"""What a result says about its energy, always (docs/measurement.md#energy).

A result's `energy` is never left empty: it carries `verdict`, one of

- "measured": a sensor (NVML, AMD SMI, RAPL) measured the timed window, the figure is valid;
- "modelled": a per-chip power figure times the window (and the duty cycle where read), valid;
- "invalid": a figure was made but broke a window rule (`reasons` has the codes, `reason` says them);
- "unavailable": no figure at all, and `reason` says why (no sensor on this device and no
  --chip-power-w, --no-energy, the point failed or was skipped before its timed window, its work
  ran on a server elsewhere...).

Results written before the verdict existed are read as they were: `verdict_of` derives one, and
an empty `energy` reads "unavailable" with the reason "not recorded".
"""

from __future__ import annotations

from typing import Any

MEASURED, MODELLED, INVALID, UNAVAILABLE = "measured", "modelled", "invalid", "unavailable"
VERDICTS = (MEASURED, MODELLED, INVALID, UNAVAILABLE)
NOT_RECORDED = "not recorded (a result from before tpubench said why)"


def _why_not(why_not: str | None, status: str) -> str:
    if status != "ok":
        return f"the point {status} before a timed window was metered"
    if why_not == "--no-energy":
        return "not asked for (--no-energy)"
    return why_not or "this point's measurement metered no window"


def with_verdict(energy: dict[str, Any] | None, *, why_not: str | None, status: str) -> dict[str, Any]:
    """`energy` (a WindowEnergy's dict, or empty) with its `verdict` and, where there is no valid
    figure, the `reason`. `why_not` is why the sweep had no energy source (EnergyPlan.why_not);
    `status` the result's ("ok", "failed", "skipped")."""
    if not energy:
        return {"verdict": UNAVAILABLE, "reason": _why_not(why_not, status)}
    out = dict(energy)
    verdict = verdict_of(out)
    out["verdict"] = verdict
    if verdict == INVALID and not out.get("reason"):
        out["reason"] = "; ".join(str(x) for x in (out.get("reasons") or []) + (out.get("notes") or [])) or "invalid"
    return out


def verdict_of(energy: dict[str, Any] | None) -> str:
    """The verdict of a stored `energy` (module docstring), for old results too."""
    if not energy:
        return UNAVAILABLE
    if energy.get("verdict") in VERDICTS:
        return energy["verdict"]
    if "valid" in energy and not energy.get("valid"):
        return INVALID
    if energy.get("method") in (MEASURED, MODELLED):
        return energy["method"]
    return UNAVAILABLE


def reason_of(energy: dict[str, Any] | None) -> str:
    """Why a stored `energy` has no valid figure ("" when it has one)."""
    verdict = verdict_of(energy)
    if verdict in (MEASURED, MODELLED):
        return ""
    if not energy:
        return NOT_RECORDED
    return str(energy.get("reason") or "; ".join(map(str, energy.get("reasons") or [])) or NOT_RECORDED)
