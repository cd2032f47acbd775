"""Serving metrics, SSE parsing, lengths and schedules on hand-computed cases (no server)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tpubench.errors import UserError
from tpubench.serving.client import (
    Endpoint,
    RequestRecord,
    RequestSpec,
    SSEParser,
    describe_non_sse,
    request_body,
)
from tpubench.serving.load import LoadOutcome, arrival_schedule, draw_lengths
from tpubench.serving.metrics import (
    _weighted_quantile,
    cost_basis,
    failure_summary,
    meets_slo,
    outcome_metrics,
    records_frame,
    serving_metrics,
    validity_reasons,
)


def rec(index, sent, chunks=(), completion=None, prompt=10, end=None, error=None, queue=0.0, usage=True,
        prompt_len=10, max_tokens=None):
    r = RequestRecord(index=index, prompt_len=prompt_len, max_tokens=max_tokens or (completion or 1),
                      scheduled_s=sent - queue, sent_s=sent, queue_s=queue,
                      end_s=end if end is not None else (chunks[-1] + 0.01 if chunks else sent + 0.01))
    r.token_chunk_s = list(chunks)
    if chunks:
        r.ttft_s, r.e2e_s = chunks[0] - sent, chunks[-1] - sent
    r.error, r.ok = error, error is None
    if error is None:
        r.usage_reported = usage
        r.completion_tokens = completion if completion is not None else len(chunks)
        r.prompt_tokens = prompt if usage else None
    return r


@pytest.fixture
def window_records():
    # r0: TTFT 0.1, E2E 0.16, 4 tokens -> TPOT 0.02, ITL 0.02 x3
    # r1: TTFT 0.2, E2E 0.3, 2 tokens -> TPOT 0.1, ITL 0.1
    # r2: failed
    # r3: TTFT 0.1, E2E 0.1, 1 token -> no TPOT, no ITL
    return [rec(0, 0.0, [0.10, 0.12, 0.14, 0.16], end=0.17),
            rec(1, 0.05, [0.25, 0.35], end=0.36, queue=0.004),
            rec(2, 0.10, error="HTTP 500: boom", end=0.11),
            rec(3, 0.20, [0.30], end=0.31)]


def test_hand_computed_window(window_records):
    m = serving_metrics(window_records, slo={"ttft_s": 0.15}, offered_request_rate=16.0, n_boot=200)
    W = 0.36
    assert m["window_s"] == pytest.approx(W)
    assert (m["requests_ok"], m["requests_failed"], m["requests_total"]) == (3, 1, 4)
    assert m["failure_rate"] == pytest.approx(0.25)
    assert (m["prompt_tokens_total"], m["completion_tokens_total"]) == (30, 7)
    assert m["output_tokens_per_s"] == pytest.approx(7 / W)
    assert m["input_tokens_per_s"] == pytest.approx(30 / W)
    assert m["total_tokens_per_s"] == pytest.approx(37 / W)
    assert m["requests_per_s"] == pytest.approx(3 / W)
    assert m["ttft_mean_s"] == pytest.approx(0.4 / 3)
    assert m["ttft_p50_s"] == pytest.approx(0.1)
    assert m["ttft_min_s"] == pytest.approx(0.1) and m["ttft_max_s"] == pytest.approx(0.2)
    assert m["tpot_mean_s"] == pytest.approx(0.06)
    assert m["tpot_p50_s"] == pytest.approx(0.06)
    assert m["interactivity_tokens_per_s"] == pytest.approx(1 / 0.06)
    assert m["itl_mean_s"] == pytest.approx(0.04)
    assert m["itl_p50_s"] == pytest.approx(0.02)
    assert m["itl_p99_s"] == pytest.approx(np.percentile([0.02, 0.02, 0.02, 0.1], 99))
    assert m["e2e_mean_s"] == pytest.approx(0.56 / 3)
    assert m["e2e_stdev_s"] == pytest.approx(np.std([0.16, 0.3, 0.1], ddof=1))
    assert m["e2e_cv"] == pytest.approx(m["e2e_stdev_s"] / m["e2e_mean_s"])
    assert m["queue_max_s"] == pytest.approx(0.004)
    assert m["goodput_requests_per_s"] == pytest.approx(2 / W)       # r0 and r3 meet TTFT <= 0.15
    assert m["slo_attainment"] == pytest.approx(0.5)
    assert m["offered_request_rate"] == 16.0
    assert m["achieved_send_rate"] == pytest.approx(3 / 0.2)
    assert m["tokens_per_chunk_mean"] == pytest.approx(1.0)
    share = 0.4 / 0.56
    assert m["prefill_time_share"] == pytest.approx(share)
    assert m["input_s_per_token"] == pytest.approx(W * share / 30)
    assert m["output_s_per_token"] == pytest.approx(W * (1 - share) / 7)
    assert m["blended_s_per_token"] == pytest.approx(W / 37)
    assert m["mean_concurrency"] == pytest.approx((0.17 + 0.31 + 0.01 + 0.11) / W)


def test_tpot_definition_uses_usage_tokens_not_chunks():
    # One chunk carrying 3 tokens (a server that batches writes): TPOT counts tokens from usage.
    r = rec(0, 0.0, [0.1, 0.2], completion=5)
    assert r.tpot_s == pytest.approx((0.2 - 0.1) / 4)
    m = serving_metrics([r], n_boot=0)
    assert m["tokens_per_chunk_mean"] == pytest.approx(2.5)
    assert m["itl_p50_s"] == pytest.approx(0.1)


def test_slo_subsets(window_records):
    r0, r1, _, r3 = window_records
    assert meets_slo(r0, {"tpot_s": 0.05}) and not meets_slo(r1, {"tpot_s": 0.05})
    assert meets_slo(r3, {"tpot_s": 0.001})                     # one token: no TPOT to miss
    assert not meets_slo(r0, {"e2e_s": 0.15}) and meets_slo(r3, {"e2e_s": 0.15, "ttft_s": 0.1})
    assert not meets_slo(window_records[2], {})                  # failed never counts
    m = serving_metrics(window_records, n_boot=0)
    assert math.isnan(m["goodput_requests_per_s"])
    with pytest.raises(ValueError, match="unknown SLO"):
        serving_metrics(window_records, slo={"ttft_ms": 1})


def test_bootstrap_cis_bracket_and_are_seeded():
    rng = np.random.default_rng(0)
    recs = []
    for i in range(200):
        sent = i * 0.01
        ttft = 0.05 + rng.exponential(0.02)
        gaps = 0.01 + rng.exponential(0.002, 15)
        chunks = sent + ttft + np.concatenate([[0], np.cumsum(gaps)])
        recs.append(rec(i, sent, list(chunks), prompt=100))
    a = serving_metrics(recs, n_boot=300, seed=1)
    b = serving_metrics(recs, n_boot=300, seed=1)
    assert a == pytest.approx(b, nan_ok=True)
    for name in ("ttft", "tpot", "itl", "e2e"):
        assert a[f"{name}_ci95_low_s"] < a[f"{name}_mean_s"] < a[f"{name}_ci95_high_s"]
        assert a[f"{name}_p99_ci95_low_s"] <= a[f"{name}_p99_s"] <= a[f"{name}_p99_ci95_high_s"]
    for name in ("output_tokens_per_s", "requests_per_s", "total_tokens_per_s", "interactivity_tokens_per_s",
                 "input_s_per_token", "output_s_per_token", "blended_s_per_token"):
        assert a[f"{name}_ci95_low"] < a[name] < a[f"{name}_ci95_high"], name
    # Per-token seconds are the inverse side of throughput.
    assert a["blended_s_per_token"] == pytest.approx(1 / a["total_tokens_per_s"])
    assert a["blended_s_per_token_ci95_high"] == pytest.approx(1 / a["total_tokens_per_s_ci95_low"])
    c = serving_metrics(recs, n_boot=300, seed=2)
    assert c["ttft_ci95_low_s"] != a["ttft_ci95_low_s"]


def test_weighted_quantile_matches_expanded_percentile():
    rng = np.random.default_rng(5)
    for _ in range(50):
        v = np.sort(rng.normal(size=rng.integers(1, 30)))
        w = rng.integers(0, 4, v.size)
        if w.sum() == 0:
            continue
        for q in (0.0, 0.5, 0.9, 0.99, 1.0):
            assert _weighted_quantile(v, w, q) == pytest.approx(np.percentile(np.repeat(v, w), q * 100))


def test_cost_basis_formulas():
    c = cost_basis(10.0, 2.0, 8.0, 1000, 500)
    assert c["prefill_time_share"] == 0.25
    assert c["input_s_per_token"] == pytest.approx(10 * 0.25 / 1000)
    assert c["output_s_per_token"] == pytest.approx(10 * 0.75 / 500)
    assert c["blended_s_per_token"] == pytest.approx(10 / 1500)


def test_no_ok_requests_gives_nans_not_errors():
    m = serving_metrics([rec(0, 0.0, error="timeout after 1 s")], n_boot=50)
    assert m["requests_ok"] == 0 and m["failure_rate"] == 1.0
    assert math.isnan(m["ttft_p99_s"]) and m["output_tokens_per_s"] == 0.0
    assert serving_metrics([], n_boot=10)["requests_total"] == 0


def test_validity_reasons(window_records):
    m = serving_metrics(window_records, n_boot=0, offered_request_rate=15.5,
                        client={"client_loop_lag_p99_s": 0.001})
    reasons = validity_reasons(m, window_records)
    assert len(reasons) == 1 and reasons[0].startswith("1 of 4 requests failed (25.0%): HTTP 500")

    good = [r for r in window_records if r.ok]
    m = serving_metrics(good, n_boot=0, offered_request_rate=20.0, client={"client_loop_lag_p99_s": 0.006})
    reasons = validity_reasons(m, good)
    assert any("event-loop lag p99 6.0 ms" in r for r in reasons)
    assert any("achieved send rate 10 req/s < 95% of the offered 20 req/s" in r for r in reasons)
    # Closed loop (no offered rate) and rate inf: no send-rate check.
    for offered in (None, math.inf):
        m = serving_metrics(good, n_boot=0, offered_request_rate=offered)
        assert validity_reasons(m, good) == []


def test_validity_token_counts():
    recs = [rec(0, 0.0, [0.1, 0.2], prompt=128, prompt_len=128, max_tokens=2),
            rec(1, 0.0, [0.1, 0.2], prompt=131, prompt_len=128, max_tokens=2),     # within max(4, 2%)
            rec(2, 0.0, [0.1, 0.2], prompt=140, prompt_len=128, max_tokens=2),     # off by 12
            rec(3, 0.0, [0.1, 0.2], prompt=128, prompt_len=128, max_tokens=8)]     # stopped early
    m = serving_metrics(recs, n_boot=0)
    reasons = validity_reasons(m, recs)
    assert len(reasons) == 1 and "request 2: asked 128, server counted 140" in reasons[0]
    reasons = validity_reasons(m, recs, exact_output=True)
    assert any("request 3: asked 8, got 2" in r for r in reasons)
    assert validity_reasons(m, recs, prompt_tolerance_tokens=20) == []
    no_usage = [rec(0, 0.0, [0.1, 0.2], usage=False)]
    m = serving_metrics(no_usage, n_boot=0)
    assert m["usage_missing"] == 1 and m["prompt_tokens_total"] == 10      # asked length stands in
    assert any("without usage" in r for r in validity_reasons(m, no_usage))
    assert validity_reasons(serving_metrics([], n_boot=0), []) == ["no measured request"]


def test_failure_summary_groups_kinds():
    recs = [rec(i, 0.0, error=e) for i, e in enumerate(
        ["HTTP 500: a", "HTTP 500: b", "timeout after 2 s (0 token-bearing chunks received)", "HTTP 422: x"])]
    s = failure_summary(recs)
    assert s.startswith("HTTP 500 x2 (HTTP 500: a)") and "timeout after 2 s x1" in s and "HTTP 422 x1" in s


def test_records_json_roundtrip_and_frame(window_records):
    text = json.dumps([r.to_dict() for r in window_records], allow_nan=False)
    back = [RequestRecord.from_dict(d) for d in json.loads(text)]
    assert serving_metrics(back, n_boot=0)["window_s"] == pytest.approx(0.36)
    df = records_frame(back)
    assert list(df["ok"]) == [True, True, False, True]
    assert df.loc[0, "tpot_s"] == pytest.approx(0.02) and df.loc[0, "token_chunks"] == 4
    assert "token_chunk_s" not in df.columns and "token_chunk_s" in records_frame(back, with_chunks=True)


def test_outcome_metrics_includes_client_figures(window_records):
    out = LoadOutcome(mode="open", records=window_records, warmup_records=[], concurrency=None, request_rate=16.0,
                      burstiness=1.0, max_concurrency=None, seed=0, num_requests=4, duration_s=None,
                      offered_request_rate=15.0, achieved_send_rate=15.0, window_s=0.36, wall_s=0.4,
                      client_cpu_s=0.1, loop_lag_s=[0.0001] * 99 + [0.002])
    m = outcome_metrics(out, n_boot=0)
    assert m["client_loop_lag_max_s"] == pytest.approx(0.002)
    assert m["client_cpu_share"] == pytest.approx(0.25)
    assert m["client_send_late_max_s"] == pytest.approx(0.004)       # r1's queue, no slot wait
    assert m["offered_request_rate"] == 15.0
    d = out.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["request_rate"] == 16.0 and "loop_lag_s" not in d


# ----------------------------------------------------------------------------- SSE


STREAM = (b": keep-alive comment\r\n\r\n"
          b'data: {"choices":[{"text":"a"}]}\n\n'
          b"event: message\ndata: {\"choices\":\ndata: [{\"text\":\"b\"}]}\n\n"
          b'data:{"choices":[],"usage":{"completion_tokens":2}}\r\n\r\n'
          b"id: 7\nretry: 10\n"
          b"data: [DONE]\n\n")


def _events(chunks):
    p = SSEParser()
    out = []
    for c in chunks:
        out.extend(p.feed(c))
    return out + p.flush()


def test_sse_parser_any_split():
    whole = _events([STREAM])
    assert [d for _, d in whole] == [b'{"choices":[{"text":"a"}]}', b'{"choices":\n[{"text":"b"}]}',
                                     b'{"choices":[],"usage":{"completion_tokens":2}}', b"[DONE]"]
    assert whole[1][0] == b"message"
    for cut in range(1, len(STREAM)):
        assert _events([STREAM[:cut], STREAM[cut:]]) == whole, cut
    assert _events([bytes([b]) for b in STREAM]) == whole


def test_sse_parser_flushes_unterminated_event():
    assert _events([b'data: {"x":1}']) == [(None, b'{"x":1}')]
    assert _events([b'data: {"x":1}\n']) == [(None, b'{"x":1}')]


def test_non_sse_descriptions():
    assert "HTML" in describe_non_sse("text/html", b"<html><title>Bad Gateway</title></html>")
    assert "Bad Gateway" in describe_non_sse("text/html", b"<html><title>Bad Gateway</title></html>")
    assert "without choices" in describe_non_sse("application/json", b'{"object": "list"}')
    assert "not streamed" in describe_non_sse("application/json", b'{"choices": []}')
    assert "server error" in describe_non_sse("application/json", b'{"error": {"message": "no"}}')


def test_request_body():
    ep = Endpoint("http://h:1", "m", extra_body={"ignore_eos": True, "min_tokens": 8})
    b = request_body(ep, RequestSpec([1, 2, 3], 3, 8))
    assert b == {"model": "m", "prompt": [1, 2, 3], "max_tokens": 8, "stream": True,
                 "stream_options": {"include_usage": True}, "ignore_eos": True, "min_tokens": 8}
    chat = Endpoint("http://h:1/v1", "m", api="chat")
    assert chat.request_url() == "http://h:1/v1/chat/completions"
    assert request_body(chat, RequestSpec("hi", 1, 4))["messages"] == [{"role": "user", "content": "hi"}]
    with pytest.raises(ValueError, match="text prompt"):
        request_body(chat, RequestSpec([1], 1, 4))
    assert Endpoint("http://h:1/", "m").request_url() == "http://h:1/v1/completions"


# ----------------------------------------------------------------------------- lengths and schedules


def test_draw_lengths_fixed_uniform_seeded():
    assert draw_lengths(128, 32, 3) == [(128, 32)] * 3
    a = draw_lengths({"uniform": [10, 20]}, (5, 6), 500, seed=3)
    assert a == draw_lengths({"uniform": [10, 20]}, (5, 6), 500, seed=3)
    ins, outs = zip(*a)
    assert min(ins) == 10 and max(ins) == 20 and set(outs) == {5, 6}
    # Changing the output side leaves the input draws alone.
    assert [x for x, _ in draw_lengths({"uniform": [10, 20]}, 7, 500, seed=3)] == list(ins)
    assert draw_lengths({"uniform": [10, 20]}, 7, 50, seed=4) != draw_lengths({"uniform": [10, 20]}, 7, 50, seed=3)
    with pytest.raises(ValueError):
        draw_lengths({"uniform": [20, 10]}, 1, 1)
    with pytest.raises(ValueError):
        draw_lengths(0, 1, 1)


def test_draw_lengths_csv(tmp_path):
    f = tmp_path / "lengths.csv"
    f.write_text("output_length,input_length\n1,100\n2,200\n3,300\n")
    pairs = draw_lengths({"csv": "lengths.csv"}, {"csv": "lengths.csv"}, 6, seed=1, base_dir=tmp_path)
    assert sorted(pairs[:3]) == [(100, 1), (200, 2), (300, 3)]        # every row once, rows kept whole
    assert sorted(pairs[3:]) == sorted(pairs[:3])
    (tmp_path / "bare.csv").write_text("5,6\n7,8\n")
    assert sorted(draw_lengths({"csv": str(tmp_path / "bare.csv")}, 9, 2)) == [(5, 9), (7, 9)]
    (tmp_path / "bad.csv").write_text("input_length,output_length\n5,x\n")
    with pytest.raises(UserError, match=r"bad.csv:2"):
        draw_lengths({"csv": str(tmp_path / "bad.csv")}, 1, 1)
    with pytest.raises(UserError, match="cannot read"):
        draw_lengths({"csv": str(tmp_path / "missing.csv")}, 1, 1)


def test_arrival_schedule_gamma():
    t = arrival_schedule(20001, rate=50.0, burstiness=1.0, seed=7)
    gaps = np.diff(t)
    assert t[0] == 0.0 and np.all(gaps > 0)
    assert gaps.mean() == pytest.approx(1 / 50, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)                # Poisson: CV 1
    g = np.diff(arrival_schedule(20001, rate=50.0, burstiness=0.25, seed=7))
    assert g.mean() == pytest.approx(1 / 50, rel=0.06)
    assert g.std() / g.mean() == pytest.approx(2.0, rel=0.06)                      # CV = 1/sqrt(k)
    assert np.array_equal(t, arrival_schedule(20001, 50.0, 1.0, seed=7))
    assert np.all(arrival_schedule(5, math.inf) == 0)
    with pytest.raises(ValueError):
        arrival_schedule(3, 0.0)
