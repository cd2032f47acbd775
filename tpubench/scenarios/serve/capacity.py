"""Capacity at the SLO, and where an open-loop rate sweep stops: the steering of scenario serve's
sweep (run.runner tells it every finished point; docs/scenarios/serve.md#capacity-at-the-slo).

Capacity search (`load.find_capacity: {min_rate, max_rate, goodput, tolerance, slo}`). A probe is
an open-loop point at one request rate; it passes when it was measured, at least `goodput` of its
requests met every SLO (`slo_attainment`, with the search's SLO; a failed request never meets
it) and the client achieved the offered send rate (else the rate was not really offered). Other
reasons a probe is invalid (the client's event-loop lag, token counts) stay in its validity but do
not decide it: they can only lower its attainment, never pass a rate the server cannot serve.
Probes run in this order (`bisect_step`, pure):

    min_rate: fails -> no capacity in the range (below min_rate), the search ends;
    max_rate: passes -> the capacity is max_rate (at least), the search ends;
    then, lo = the highest passing rate, hi = the lowest failing rate above it, the next probe is
    sqrt(lo * hi) (4 significant digits) until hi / lo <= 1 + tolerance; the capacity is lo.

The midpoint is geometric so that a range of 1 to 1000 req/s is searched to the same relative
precision everywhere; every probe is a recorded point, and a resumed sweep replays the probes it
finds on disk to the same decisions. The capacity is then measured once more as its own point
(`capacity: point` in its load; metrics `capacity_point` = 1, `capacity_request_rate`,
`capacity_bracket_high_rate`, and the field `capacity` with every probe): that point, not a probe,
is the serve number `tpubench budget` sizes on (`capacity_point`, below; probes carry
`capacity_probe` = 1 and `capacity_probe_passed`).

Saturation stop: in an open-loop rate sweep (`load.stop_at_saturation`, on by default), a point
flagged over-saturated (serving/saturation.py) skips every pending point of the same sweep (the
same in all but the rate) at a higher rate; they are recorded as skipped, with the reason.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tpubench.workload_spec.point import RunPoint

if TYPE_CHECKING:   # annotations only: describing a serve workload (`validate`) never builds the result model
    from tpubench.records.result import RunResult

SIGNIFICANT_DIGITS = 4


def search_slo(load: dict) -> dict:
    """The params a point of a capacity search overrides: its SLO, when the search has its own."""
    search = load.get("find_capacity") or {}
    slo = search.get("slo")
    return {"slo": slo} if slo else {}


def round_significant(x: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - 1 - math.floor(math.log10(abs(x))))


def bisect_step(probes: dict[float, bool], min_rate: float, max_rate: float,
                tolerance: float) -> tuple[str, float | None]:
    """("probe", rate) to measure next, or ("done", capacity) with capacity None when even
    min_rate fails; `probes` maps each rate measured to whether it passed (module doc)."""
    if min_rate not in probes:
        return "probe", min_rate
    if not probes[min_rate]:
        return "done", None
    if max_rate not in probes:
        return "probe", max_rate
    if probes[max_rate]:
        return "done", max_rate
    lo = max(r for r, ok in probes.items() if ok)
    hi = min(r for r, ok in probes.items() if not ok and r > lo)
    if hi / lo <= 1 + tolerance:
        return "done", lo
    mid = round_significant(math.sqrt(lo * hi))
    if not lo < mid < hi:
        return "done", lo
    return "probe", mid


def probe_passed(result: RunResult, goodput: float) -> bool:
    """Measured, at least `goodput` of its requests met every SLO, and the client sent at the rate
    it was asked (module doc: an invalid probe for other reasons, a lagging client or token
    counts, is still decided on its SLO attainment, which those can only lower)."""
    # Here, not at the top: the sweep's description imports this module, and `validate` does not
    # load the streaming client's modules.
    from tpubench.serving.metrics import MIN_SEND_RATIO

    m = result.metrics
    attained, offered, achieved = m.get("slo_attainment"), m.get("offered_request_rate"), m.get("achieved_send_rate")
    if result.status != "ok" or attained is None or not math.isfinite(attained) or attained < goodput:
        return False
    return not (offered is not None and achieved is not None and math.isfinite(offered) and math.isfinite(achieved)
                and achieved < MIN_SEND_RATIO * offered)


def _group(point: RunPoint) -> str:
    """Everything that defines a point but its request rate and capacity role: one sweep or search."""
    data = point.to_dict()
    params = dict(data.get("params") or {})
    params["load"] = {k: v for k, v in (params.get("load") or {}).items() if k not in ("request_rate", "capacity")}
    data["params"] = params
    return json.dumps(data, sort_keys=True, default=str)


def _at_rate(point: RunPoint, rate: float, role: str) -> RunPoint:
    load = {**point.params["load"], "request_rate": rate, "capacity": role}
    return replace(point, params={**point.params, "load": load})


class ServeSteering:
    """The runner's Steering for serve sweeps: capacity searches and the saturation stop."""

    def __init__(self, points: list[RunPoint]):
        self.points = list(points)
        self.probes: dict[str, dict[float, tuple[bool, Any]]] = {}
        self.found: dict[str, tuple[float, float]] = {}     # search -> (capacity, lowest failing rate or nan)

    def after(self, point: RunPoint, result: RunResult) -> tuple[list[RunPoint], dict[str, str]]:
        load = point.params.get("load") or {}
        role = load.get("capacity")
        if role == "probe":
            return self._probe(point, result, load), {}
        if role == "point":
            self._mark_capacity(point, result, load)
            return [], {}
        return [], self._saturation_skips(point, result, load)

    def _probe(self, point: RunPoint, result: RunResult, load: dict) -> list[RunPoint]:
        search, rate = load["find_capacity"], load["request_rate"]
        passed = probe_passed(result, search["goodput"])
        if result.status != "skipped":
            result.metrics.update(capacity_probe=1, capacity_probe_passed=int(passed),
                                  capacity_goodput_goal=search["goodput"])
        group = _group(point)
        probes = self.probes.setdefault(group, {})
        probes[rate] = (passed, result.metrics.get("slo_attainment"))
        step, value = bisect_step({r: p for r, (p, _) in probes.items()}, search["min_rate"], search["max_rate"],
                                  search["tolerance"])
        if step == "probe":
            return [_at_rate(point, value, "probe")]
        if value is None:
            result.warnings.append(f"capacity search: the lowest rate, {search['min_rate']:g} req/s, did not reach "
                                   f"{search['goodput']:.0%} of requests meeting the SLO: the capacity is below it")
            return []
        failing = [r for r, (p, _) in probes.items() if not p and r > value]
        self.found[group] = (value, min(failing) if failing else math.nan)
        return [_at_rate(point, value, "point")]

    def _mark_capacity(self, point: RunPoint, result: RunResult, load: dict) -> None:
        search, rate = load["find_capacity"], load["request_rate"]
        group = _group(point)
        _, high = self.found.get(group, (rate, math.nan))
        probes = sorted(self.probes.get(group, {}).items())
        result.metrics.update(capacity_point=1, capacity_request_rate=rate, capacity_bracket_high_rate=high,
                              capacity_goodput_goal=search["goodput"])
        result.capacity = {
            "request_rate": rate, "lowest_failing_rate": None if math.isnan(high) else high,
            "goodput_goal": search["goodput"], "min_rate": search["min_rate"], "max_rate": search["max_rate"],
            "tolerance": search["tolerance"],
            "probes": [{"request_rate": r, "passed": p, "slo_attainment": a} for r, (p, a) in probes]}
        if rate >= search["max_rate"]:
            result.warnings.append(f"capacity search: max_rate {rate:g} req/s met the SLO, so the capacity is at "
                                   "least that: raise max_rate to find it")
        if result.status == "ok" and not probe_passed(result, search["goodput"]):
            result.warnings.append(f"capacity point: measured again at {rate:g} req/s it did not reach "
                                   f"{search['goodput']:.0%} of requests meeting the SLO: the capacity is marginal")

    def _saturation_skips(self, point: RunPoint, result: RunResult, load: dict) -> dict[str, str]:
        rate = load.get("request_rate")
        if (rate is None or not load.get("stop_at_saturation", True) or result.status != "ok"
                or result.metrics.get("over_saturated") != 1):
            return {}
        m = result.metrics
        evidence = (f"TTFT median {m.get('ttft_first_quarter_p50_s', math.nan) * 1e3:.0f} ms in its first quarter "
                    f"of requests, {m.get('ttft_last_quarter_p50_s', math.nan) * 1e3:.0f} ms in its last")
        # Flagged by the in-flight count alone (serving/saturation.py): say that, not a TTFT that held.
        sat = getattr(result, "saturation", None) or {}
        if (sat.get("ttft") or {}).get("grows") is not True and (sat.get("in_flight") or {}).get("grows"):
            evidence = (f"requests in flight, median {m.get('in_flight_first_quarter_p50', math.nan):g} at its first "
                        f"quarter's sends, {m.get('in_flight_last_quarter_p50', math.nan):g} at its last")
        group = _group(point)
        return {p.key(): (f"rate {_rate(p)} is above {rate:g} req/s, which over-saturated the server ({evidence}); "
                          "load.stop_at_saturation: false measures it anyway")
                for p in self.points if _group(p) == group and p.params["load"]["request_rate"] > rate}


def _rate(point: RunPoint) -> str:
    r = point.params["load"]["request_rate"]
    return "inf" if math.isinf(r) else f"{r:g} req/s"


def capacity_point(rows):
    """The rows (a results DataFrame, load_results) that are capacity points: the serve numbers a
    capacity search found. A budget sizes on these and leaves the searches' probes
    (`capacity_probe` = 1) out."""
    if "capacity_point" not in rows:
        return rows.iloc[0:0]
    return rows[rows["capacity_point"].fillna(0).astype(float) == 1]
