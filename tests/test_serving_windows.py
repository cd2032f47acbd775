"""Steady-state windows and the over-saturation test on hand-made timelines (no server)."""

from __future__ import annotations

import math

import pytest

from tpubench.serving.client import RequestRecord
from tpubench.serving.metrics import in_flight_intervals, steady_metrics, steady_target, steady_window
from tpubench.serving.saturation import in_flight_at_send, saturation, trend


def rec(index, sent, end, chunks=(), completion=None, ok=True):
    r = RequestRecord(index=index, prompt_len=10, max_tokens=completion or max(len(chunks), 1), scheduled_s=sent,
                      sent_s=sent, end_s=end)
    r.token_chunk_s = list(chunks)
    if chunks:
        r.ttft_s, r.e2e_s = chunks[0] - sent, chunks[-1] - sent
    r.ok = ok
    r.error = None if ok else "HTTP 500"
    r.completion_tokens = (completion if completion is not None else len(chunks)) if ok else None
    r.usage_reported = ok
    return r


def closed_timeline(resend_delay=0.0):
    """Concurrency 2, five requests of 1 s: worker A sends r0, r2, r4 back to back from 0; worker B
    r1, r3 from 0.5, and has nothing left at 2.5. Chunks 0.2, 0.4, 0.6, 0.8 s after the send,
    except r0's, late (TTFT 0.9)."""
    out = []
    for i, sent in enumerate([0.0, 0.5, 1.0, 1.5, 2.0]):
        sent += resend_delay * (i >= 2)
        chunks = [sent + 0.9, sent + 0.92, sent + 0.94, sent + 0.96] if i == 0 else [sent + d for d in (0.2, 0.4, 0.6, 0.8)]
        out.append(rec(i, sent, sent + 1.0, chunks))
    return out


def test_closed_loop_window_from_reaching_the_concurrency_to_the_first_drop():
    assert steady_window(closed_timeline(), 2) == (0.5, 2.5)
    # r1..r4 were sent in the window (r0's late TTFT stays out); r0..r3 finished in it;
    # output tokens with chunks inside: r0 4, r1 4, r2 4, r3 4, r4 2 (of 4) = 18 over 2 s.
    m = steady_metrics(closed_timeline(), 2)
    assert (m["steady_window_start_s"], m["steady_window_end_s"], m["steady_window_s"]) == (0.5, 2.5, 2.0)
    assert m["steady_requests"] == 4
    assert m["steady_requests_per_s"] == pytest.approx(2.0)
    assert m["steady_output_tokens_per_s"] == pytest.approx(9.0)
    assert m["steady_ttft_p50_s"] == pytest.approx(0.2) and m["steady_ttft_p99_s"] == pytest.approx(0.2)
    assert m["steady_tpot_p50_s"] == pytest.approx(0.2)
    assert m["steady_target_concurrency"] == 2


def test_a_resend_within_the_grace_is_no_drop_but_a_longer_gap_is():
    # Sends from r2 on come 5 ms after the reply they follow: the count dips under 2 for 5 ms
    # (at 1.0, 1.5, 2.0), and B's last reply ends at 2.505.
    assert steady_window(closed_timeline(0.005), 2) == pytest.approx((0.5, 2.505))
    # 50 ms: the first dip (at 1.0) ends the window.
    assert steady_window(closed_timeline(0.05), 2) == pytest.approx((0.5, 1.0))


def test_open_loop_window_runs_to_the_last_drop():
    recs = [rec(0, 1.0, 2.0), rec(1, 1.5, 2.5), rec(2, 3.0, 4.0), rec(3, 3.2, 5.0)]
    # Two requests in flight over [1.5, 2.0] and [3.2, 4.0].
    assert in_flight_intervals(recs, 2) == [(1.5, 2.0), (3.2, 4.0)]
    assert steady_window(recs, 2) == (1.5, 2.0)
    assert steady_window(recs, 2, until="last_drop") == (1.5, 4.0)
    assert steady_window(recs, 3) is None
    m = steady_metrics(recs, 3)
    assert math.isnan(m["steady_window_s"]) and math.isnan(m["steady_requests_per_s"])


def test_steady_target():
    recs = [rec(i, 0.1 * i, 0.1 * i + 0.3) for i in range(10)]
    assert steady_target("closed", concurrency=8) == 8
    assert steady_target("open", request_rate=10.0, records=recs) == 3        # 10 req/s x 0.3 s
    assert steady_target("open", request_rate=10.0, max_concurrency=2, records=recs) == 2
    assert steady_target("open", request_rate=math.inf, records=recs) == 10
    assert steady_target("open", request_rate=0.01, records=recs) == 1
    # A trace replay or sessions have no nominal rate: the achieved one, 9 sends over 0.9 s.
    assert steady_target("replay", records=recs) == 3


def test_in_flight_at_send():
    recs = [rec(0, 0.0, 1.5), rec(1, 1.0, 1.6), rec(2, 2.0, 3.0)]
    assert in_flight_at_send(recs) == ([0.0, 1.0, 2.0], [0, 1, 0])


def queueing(n=40, rate=10.0, ttft=lambda k: 0.1):
    """n requests every 1/rate s, TTFT ttft(k), then 3 tokens 10 ms apart."""
    out = []
    for k in range(n):
        sent = k / rate
        first = sent + ttft(k)
        out.append(rec(k, sent, first + 0.03, [first, first + 0.01, first + 0.02]))
    return out


def test_a_server_that_keeps_up_is_not_over_saturated():
    sat = saturation(queueing(ttft=lambda k: 0.1 + (0.005 if k % 2 else -0.005)))
    assert sat.over_saturated is False and sat.reason == ""
    assert sat.ttft.grows is False and sat.in_flight.grows is False
    assert sat.metrics()["over_saturated"] == 0.0


def test_a_growing_ttft_is_over_saturated_with_its_evidence():
    # TTFT 0.05 + 0.05 k at sends 0.1 k: slope exactly 0.5 s/s; quarters of 10 requests:
    # medians (0.25 + 0.30)/2 and (1.55 + 1.60)/2... of k 0-9 and 30-39.
    sat = saturation(queueing(ttft=lambda k: 0.05 + 0.05 * k))
    assert sat.over_saturated is True
    assert sat.ttft.slope_per_s == pytest.approx(0.5)
    assert sat.ttft.slope_ci95_low == pytest.approx(0.5)
    assert sat.ttft.first_quarter_p50 == pytest.approx(0.275)
    assert sat.ttft.last_quarter_p50 == pytest.approx(1.775)
    assert sat.ttft.growth == pytest.approx(0.5 * 3.9)
    assert sat.in_flight.grows is True          # replies take longer and longer: they pile up
    assert "TTFT grows" in sat.reason and "275.0 ms" in sat.reason and "1775.0 ms" in sat.reason
    m = sat.metrics()
    assert m["over_saturated"] == 1.0 and m["ttft_last_quarter_p50_s"] == pytest.approx(1.775)
    assert sat.to_dict()["ttft"]["slope_per_s"] == pytest.approx(0.5)


def test_a_small_significant_slope_is_not_saturation():
    # TTFT creeps from 100 to 104 ms: significant, but far from doubling.
    sat = saturation(queueing(ttft=lambda k: 0.1 + 0.001 * k))
    assert sat.ttft.slope_ci95_low > 0 and sat.ttft.grows is False and sat.over_saturated is False


def test_too_few_requests_or_no_spread_is_untested():
    assert saturation(queueing(n=5)).over_saturated is None
    same_time = [rec(k, 0.0, 0.1 + k, [0.05 + k]) for k in range(20)]
    assert trend([r.sent_s for r in same_time], [r.ttft_s for r in same_time]).grows is None
    assert math.isnan(saturation(queueing(n=5)).metrics()["over_saturated"])
