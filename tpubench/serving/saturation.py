"""Over-saturation of a serving load point (docs/definitions.md#saturation): a server that cannot
keep up queues what it is sent, so the queue, and with it the TTFT, grows through the window. Its
figures then describe a transient that depends on how long the point ran, not a rate the server
sustains, and an open-loop sweep gains nothing by sending faster.

Two series are tested, each over the ok requests in send order (send times t, seconds of the window):
    TTFT          y = the request's TTFT
    in flight     y = requests in flight when it was sent (sent before it, reply not finished),
                  counted over every request
For each: the least-squares slope b of y on t, its standard error se, its 95% CI b +- 1.96 se
(normal approximation; at least MIN_REQUESTS requests and sends spread over time, else not
tested), the medians of the first and the last quarter of the requests (by send time), and the
growth the fit predicts over the send span, b * (t_last - t_first). A series grows when

    CI low > 0  and  growth >= GROWTH_RATIO * first-quarter median  and  last-quarter median > first-quarter median

(with GROWTH_RATIO 1: the fit has the series at least doubling across the window, and the raw
medians agree). The point is over-saturated when either series grows. A closed loop keeps its
in-flight count fixed, so there the TTFT says it; an open loop's in-flight count wanders about
rate x latency when the server keeps up and climbs when it does not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tpubench.serving.client import RequestRecord
from tpubench.serving.metrics import steady_metrics, steady_target

MIN_REQUESTS = 12
GROWTH_RATIO = 1.0
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Trend:
    """One series' evidence (seconds of TTFT, or requests, per second of the window)."""

    n: int
    slope_per_s: float
    slope_ci95_low: float
    slope_ci95_high: float
    first_quarter_p50: float
    last_quarter_p50: float
    growth: float               # slope x send span
    grows: bool | None          # None: too few requests or no span to test


def trend(t: Sequence[float], y: Sequence[float], growth_ratio: float = GROWTH_RATIO,
          min_requests: int = MIN_REQUESTS) -> Trend:
    """The slope test of y against t (module doc)."""
    t_a, y_a = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(t_a) & np.isfinite(y_a)
    t_a, y_a = t_a[keep], y_a[keep]
    order = np.argsort(t_a, kind="stable")
    t_a, y_a = t_a[order], y_a[order]
    n = int(t_a.size)
    nan = math.nan
    if n < max(min_requests, 3):
        return Trend(n, nan, nan, nan, nan, nan, nan, None)
    q = max(1, n // 4)
    first, last = float(np.median(y_a[:q])), float(np.median(y_a[-q:]))
    span = float(t_a[-1] - t_a[0])
    dt = t_a - t_a.mean()
    sxx = float(dt @ dt)
    if not span > 0 or sxx <= 0:
        return Trend(n, nan, nan, nan, first, last, nan, None)
    slope = float(dt @ (y_a - y_a.mean())) / sxx
    resid = y_a - y_a.mean() - slope * dt
    se = math.sqrt(float(resid @ resid) / (n - 2) / sxx)
    low, high = slope - Z95 * se, slope + Z95 * se
    growth = slope * span
    grows = bool(low > 0 and growth >= growth_ratio * first and last > first)
    return Trend(n, slope, low, high, first, last, growth, grows)


def in_flight_at_send(records: Iterable[RequestRecord]) -> tuple[list[float], list[int]]:
    """(send times, requests in flight at each send, itself excluded) over the requests with a send."""
    recs = [r for r in records if math.isfinite(r.sent_s)]
    sends = np.sort(np.asarray([r.sent_s for r in recs], dtype=float))
    ends = np.sort(np.asarray([r.end_s if math.isfinite(r.end_s) else math.inf for r in recs], dtype=float))
    # Sent strictly before it, finished after it was sent.
    before = np.searchsorted(sends, sends, side="left")
    ended = np.searchsorted(ends, sends, side="right")
    return sends.tolist(), (before - ended).astype(int).tolist()


@dataclass(frozen=True)
class Saturation:
    over_saturated: bool | None     # None: neither series could be tested
    ttft: Trend
    in_flight: Trend
    reason: str                     # the evidence in words ("" when not over-saturated)

    def metrics(self) -> dict[str, float]:
        """Flat figures for a result's metrics (NaN where untested)."""
        flag = math.nan if self.over_saturated is None else float(self.over_saturated)
        out = {"over_saturated": flag}
        for name, tr, unit in (("ttft", self.ttft, "_s"), ("in_flight", self.in_flight, "")):
            out.update({f"{name}_slope_per_s": tr.slope_per_s, f"{name}_slope_ci95_low": tr.slope_ci95_low,
                        f"{name}_slope_ci95_high": tr.slope_ci95_high,
                        f"{name}_first_quarter_p50{unit}": tr.first_quarter_p50,
                        f"{name}_last_quarter_p50{unit}": tr.last_quarter_p50})
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"over_saturated": self.over_saturated, "reason": self.reason,
                "ttft": asdict(self.ttft), "in_flight": asdict(self.in_flight)}


def saturation(records: Iterable[Any], growth_ratio: float = GROWTH_RATIO,
               min_requests: int = MIN_REQUESTS) -> Saturation:
    """Is the point over-saturated (module doc)? `records`: RequestRecords or their dicts."""
    recs = [r if isinstance(r, RequestRecord) else RequestRecord.from_dict(r) for r in records]
    ok = [r for r in recs if r.ok and r.ttft_s is not None and math.isfinite(r.sent_s)]
    ttft = trend([r.sent_s for r in ok], [r.ttft_s for r in ok], growth_ratio, min_requests)
    t, inflight = in_flight_at_send(recs)
    flight = trend(t, inflight, growth_ratio, min_requests)
    tested = [tr.grows for tr in (ttft, flight) if tr.grows is not None]
    flag = any(tested) if tested else None
    reasons = []
    if ttft.grows:
        reasons.append(f"TTFT grows through the window: slope {ttft.slope_per_s:.3g} s/s (95% CI "
                       f"{ttft.slope_ci95_low:.3g} to {ttft.slope_ci95_high:.3g}), median "
                       f"{ttft.first_quarter_p50 * 1e3:.1f} ms in the first quarter of requests, "
                       f"{ttft.last_quarter_p50 * 1e3:.1f} ms in the last")
    if flight.grows:
        reasons.append(f"requests in flight grow through the window: slope {flight.slope_per_s:.3g}/s "
                       f"(95% CI {flight.slope_ci95_low:.3g} to {flight.slope_ci95_high:.3g}), median "
                       f"{flight.first_quarter_p50:g} at the first quarter's sends, "
                       f"{flight.last_quarter_p50:g} at the last")
    return Saturation(flag, ttft, flight, "; ".join(reasons))


def window_figures(outcome: Any) -> tuple[dict[str, float], Saturation]:
    """A LoadOutcome's steady-state window metrics (serving.metrics.steady_metrics: a closed loop's
    until its count first drops, an open loop's until it last drops) and its saturation test."""
    closed = outcome.mode == "closed"
    target = steady_target(outcome.mode, concurrency=outcome.concurrency, request_rate=outcome.request_rate,
                           max_concurrency=outcome.max_concurrency, records=outcome.records)
    figures = steady_metrics(outcome.records, target, until="first_drop" if closed else "last_drop")
    return figures, saturation(outcome.records)
