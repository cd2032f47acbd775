"""The serving client and load generator against a scripted local server (127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import math
import time

import aiohttp
import numpy as np
import pytest
from scripted_server import Script, ScriptedServer, script_prompt

from tpubench.serving.client import Endpoint, RequestSpec
from tpubench.serving.load import arrival_schedule, run_load
from tpubench.serving.metrics import outcome_metrics, validity_reasons

MS = 1e-3
STALL_S = 0.4   # the client's own work injected by test_the_client_times_bytes_at_the_socket...


@pytest.fixture(scope="module")
def server():
    with ScriptedServer(Script(ttft_ms=0, itl_ms=0, tokens=2)) as srv:
        yield srv


@pytest.fixture
def srv(server):
    server.reset()
    return server


def specs(n, prompt="p", prompt_len=1, max_tokens=4):
    return [RequestSpec(prompt, prompt_len, max_tokens) for _ in range(n)]


def in_flight_at(records, t):
    return sum(1 for r in records if r.sent_s <= t < r.end_s)


@pytest.mark.slow
def test_latencies_match_the_script(srv):
    ep = Endpoint(srv.url, "m", extra_body={"ignore_eos": True})
    prompt = script_prompt(ttft_ms=40, itl_ms=10, tokens=6, prompt_tokens=5)
    out = run_load(ep, specs(6, prompt, prompt_len=5, max_tokens=6), concurrency=2, warmup_requests=2)
    assert len(out.warmup_records) == 2 and len(out.records) == 6 and len(srv.log) == 8
    body = srv.log[-1]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 6 and body["ignore_eos"] is True
    # The scripted delays are floors (a busy machine only adds to them); how close the client comes
    # to the server's own times is benchmarks/serve_client.py's job (TTFT error p99 < 1 ms there).
    for r in out.records:
        assert r.ok and r.usage_reported and r.status == 200 and r.finish_reason == "length"
        assert (r.prompt_tokens, r.completion_tokens, r.token_chunks) == (5, 6, 6)
        assert r.ttft_s >= 0.040 and r.e2e_s >= 0.090      # the server keeps to deadlines from arrival
    # Each request against the server's own log on the same monotonic clock: sent before the server
    # had it, every chunk read after the server wrote it (a client stamping early would fail here).
    logs = srv.log[2:]
    by_arrival = sorted(out.records, key=lambda r: r.sent_s)
    for r, log in zip(by_arrival, sorted(logs, key=lambda e: e["received"])):
        assert out.origin_perf_counter_s + r.sent_s <= log["received"]
        assert min(np.array(r.token_chunk_s) + out.origin_perf_counter_s - np.array(log["writes"])) > 0
    m = outcome_metrics(out, n_boot=100)
    assert m["ttft_p50_s"] >= 0.040 and m["itl_p50_s"] > 0
    assert m["completion_tokens_total"] == 36 and m["failure_rate"] == 0
    assert m["client_loop_lag_samples"] > 0 and m["client_cpu_s"] > 0


@pytest.mark.slow
def test_open_loop_follows_the_seeded_schedule(srv):
    ep = Endpoint(srv.url, "m")
    out = run_load(ep, specs(40), request_rate=80.0, burstiness=1.0, seed=3)
    expected = arrival_schedule(40, 80.0, 1.0, seed=3)
    assert np.allclose([r.scheduled_s for r in out.records], expected, atol=1e-12)
    # Never early; how late is benchmarks/serve_client.py's (send lateness p99 < 2 ms there).
    late = np.array([r.sent_s - r.scheduled_s for r in out.records])
    assert late.min() >= 0
    assert out.offered_request_rate == pytest.approx(39 / expected[-1])
    # (n - 1) over the first to the last send: a late first send alone makes it above the offered rate.
    assert out.achieved_send_rate > 0
    m = outcome_metrics(out, n_boot=0)
    assert m["achieved_send_rate"] == pytest.approx(out.achieved_send_rate)
    # Burstier arrivals from the same seed: a different schedule, followed just as closely.
    out = run_load(ep, specs(20), request_rate=80.0, burstiness=0.5, seed=3)
    assert np.allclose([r.scheduled_s for r in out.records], arrival_schedule(20, 80.0, 0.5, seed=3))


def test_rate_inf_sends_everything_at_once(srv):
    # Each request takes the server a second before its first token: a client that waited for a
    # reply before sending the next would send its second only after the first came back. All at
    # once, every request is sent before any reply arrives (the order of events, not a time bound).
    out = run_load(Endpoint(srv.url, "m"), specs(30, script_prompt(ttft_ms=1000, itl_ms=0, tokens=2)),
                   request_rate=math.inf)
    assert all(r.scheduled_s == 0 for r in out.records)
    first_reply = min(r.sent_s + r.ttft_s for r in out.records)
    assert max(r.sent_s for r in out.records) < first_reply and srv.max_in_flight == 30
    assert out.offered_request_rate == math.inf and all(r.ok for r in out.records)


def test_max_concurrency_caps_and_counts_queue_time(srv):
    ep = Endpoint(srv.url, "m")
    prompt = script_prompt(ttft_ms=200, itl_ms=10, tokens=3)
    out = run_load(ep, specs(12, prompt), request_rate=math.inf, max_concurrency=3)
    assert srv.max_in_flight == 3
    assert max(in_flight_at(out.records, r.sent_s) for r in out.records) == 3
    # How late the client itself is (queue_s - slot_wait_s) is benchmarks/serve_client.py's to measure.
    for r in out.records:
        assert r.ok and r.queue_s >= r.slot_wait_s >= 0
    # The first three took a free slot: sent before any request ended (the server holds each for
    # 200 ms first). The last waited for three rounds of at least the scripted 200 + 2 x 10 ms (a
    # floor: a busy machine only adds to it).
    by_send = sorted(out.records, key=lambda r: r.sent_s)
    assert all(r.sent_s < min(q.end_s for q in out.records) for r in by_send[:3])
    waits = sorted(r.slot_wait_s for r in out.records)
    assert waits[-1] >= 3 * 0.220 - 3 * MS
    m = outcome_metrics(out, n_boot=50)
    assert m["queue_p99_s"] > 0.4


def test_closed_loop_keeps_exactly_n_in_flight(srv):
    prompt = script_prompt(ttft_ms=15, itl_ms=5, tokens=4)
    out = run_load(Endpoint(srv.url, "m"), specs(20, prompt), concurrency=4)
    assert [r.index for r in out.records] == list(range(20))
    assert srv.max_in_flight == 4
    assert max(in_flight_at(out.records, r.sent_s) for r in out.records) == 4
    # Every send after the first four follows a completion (a worker's next request): it is sent
    # only once as many requests have ended as were sent before it beyond the four. How quickly
    # (the client's turnaround) is benchmarks/serve_client.py's to measure.
    ends = sorted(r.end_s for r in out.records)
    for k, r in enumerate(sorted(out.records, key=lambda q: q.sent_s)[4:]):
        assert ends[k] <= r.sent_s
    assert 0 < outcome_metrics(out, n_boot=0)["mean_concurrency"] <= 4


@pytest.mark.slow
def test_connector_is_not_the_limit(srv):
    # aiohttp's default connector allows 100 connections; the load decides, not the connector.
    prompt = script_prompt(ttft_ms=400, tokens=1)
    out = run_load(Endpoint(srv.url, "m"), specs(130, prompt), concurrency=130)
    assert srv.max_in_flight == 130 and all(r.ok for r in out.records)


def test_goodput_with_an_slo_half_the_requests_miss(srv):
    fast, slow = script_prompt(ttft_ms=10, itl_ms=5, tokens=3), script_prompt(ttft_ms=120, itl_ms=5, tokens=3)
    out = run_load(Endpoint(srv.url, "m"), [RequestSpec(p, 1, 3) for p in [fast, slow] * 4], concurrency=4)
    m = outcome_metrics(out, slo={"ttft_s": 0.06}, n_boot=50)
    assert m["slo_attainment"] == 0.5
    assert m["goodput_requests_per_s"] == pytest.approx(m["requests_per_s"] / 2)
    m = outcome_metrics(out, slo={"ttft_s": 0.06, "tpot_s": 0.001}, n_boot=0)
    assert m["goodput_requests_per_s"] == 0


FAULTS = {
    "500": (500, "HTTP 500: "),
    "422": (422, "HTTP 422: "),
    "html": (200, "non-OpenAI reply (HTML"),
    "json_no_choices": (200, "non-OpenAI reply: JSON without choices"),
    "json_completion": (200, "reply not streamed"),
    "break": (200, "broken stream: "),
    "truncate": (200, "broken stream: the body ended before [DONE]"),
    "hang": (None, "timeout after 0.6 s (0 token-bearing chunks"),
    "hang_stream": (200, "timeout after 0.6 s (2 token-bearing chunks"),
    "error_event": (200, "server error in stream: scripted error mid-stream"),
    "not_json": (200, "non-OpenAI stream: event data is not JSON"),
    "odd_chunk": (200, "non-OpenAI stream: unexpected chunk"),
}


def test_every_fault_is_recorded_and_the_run_goes_on(srv):
    names = list(FAULTS)
    prompts = [script_prompt(fault=f, ttft_ms=5, itl_ms=5, tokens=4) for f in names]
    good = script_prompt(ttft_ms=5, itl_ms=2, tokens=3)
    ep = Endpoint(srv.url, "m", timeout_s=0.6)
    out = run_load(ep, [RequestSpec(p, 1, 4) for p in prompts + [good, good]], concurrency=len(prompts) + 2)
    for name, r in zip(names, out.records):
        status, error = FAULTS[name]
        assert not r.ok and r.status == status and r.error.startswith(error), (name, r.error)
    assert "Extra inputs are not permitted" in out.records[1].error
    assert "502 Bad Gateway" in out.records[2].error
    assert all(r.ok and r.completion_tokens == 3 for r in out.records[-2:])
    m = outcome_metrics(out, n_boot=20)
    assert m["requests_failed"] == len(names) and m["requests_ok"] == 2
    assert any(f"{len(names)} of {len(names) + 2} requests failed" in r for r in validity_reasons(m, out.records))
    # The broken-off requests still carry what arrived before the fault.
    broken = out.records[names.index("break")]
    assert broken.token_chunks == 2 and broken.ttft_s is not None


def test_connection_refused_is_a_record_not_an_exception():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = run_load(Endpoint(f"http://127.0.0.1:{port}", "m", timeout_s=2), specs(2), concurrency=1)
    assert all(not r.ok and r.error.startswith("cannot connect") and r.status is None for r in out.records)


def test_reply_shapes_without_usage_or_done(srv):
    ep = Endpoint(srv.url, "m")
    no_usage, no_done = script_prompt(fault="no_usage", tokens=3), script_prompt(fault="no_done", tokens=3)
    out = run_load(ep, [RequestSpec(no_usage, 1, 3), RequestSpec(no_done, 1, 3)], concurrency=2)
    a, b = out.records
    assert a.ok and not a.usage_reported and a.completion_tokens == 3 and a.prompt_tokens is None
    assert b.ok and b.usage_reported and b.completion_tokens == 3          # like transformers serve
    m = outcome_metrics(out, n_boot=0)
    assert m["usage_missing"] == 1
    assert any("without usage" in r for r in validity_reasons(m, out.records))


@pytest.mark.slow
def test_chat_endpoint(srv):
    ep = Endpoint(srv.url, "m", api="chat")
    out = run_load(ep, [RequestSpec(script_prompt(ttft_ms=20, itl_ms=5, tokens=4), 1, 4)], concurrency=1)
    r = out.records[0]
    assert r.ok and r.token_chunks == 4 and r.completion_tokens == 4       # the role chunk carries no token
    assert r.ttft_s >= 0.020                                               # the scripted floor
    assert r.events == 6                                                   # role, 4 tokens, usage
    assert srv.log[-1]["body"]["messages"][0]["role"] == "user"


@pytest.mark.slow
def test_duration_stops_scheduling_and_lets_in_flight_finish(srv):
    prompt = script_prompt(ttft_ms=60, tokens=1)
    out = run_load(Endpoint(srv.url, "m"), specs(5, prompt), request_rate=100.0, duration_s=0.3, seed=1)
    assert all(r.scheduled_s < 0.3 for r in out.records)
    assert len(out.records) == int(np.sum(arrival_schedule(200, 100.0, 1.0, seed=1) < 0.3))
    assert all(r.ok for r in out.records) and max(r.end_s for r in out.records) > 0.3
    out = run_load(Endpoint(srv.url, "m"), specs(3, prompt), concurrency=2, duration_s=0.15)
    # Rounds of at least 60 ms start at 0, >= 0.06 and >= 0.12 s: at most three rounds of two
    # (fewer when a busy machine slows a round), and the first round always.
    assert 2 <= len(out.records) <= 6 and all(r.ok for r in out.records)


@pytest.mark.slow
def test_a_blocked_client_loop_makes_the_point_invalid(srv):
    out = run_load(Endpoint(srv.url, "m"), specs(15), concurrency=1, on_record=lambda r: time.sleep(0.008))
    m = outcome_metrics(out, n_boot=0)
    assert m["client_loop_lag_p99_s"] > 0.005
    assert any("event-loop lag" in r for r in validity_reasons(m, out.records))


def test_bad_load_arguments(srv):
    ep = Endpoint(srv.url, "m")
    for kw in ({}, {"concurrency": 1, "request_rate": 1.0}, {"concurrency": 0}, {"request_rate": -1.0},
               {"request_rate": math.inf, "duration_s": 1.0}, {"request_rate": 1.0, "burstiness": 0.0}):
        with pytest.raises(ValueError):
            run_load(ep, specs(1), **kw)
    with pytest.raises(ValueError):
        Endpoint("127.0.0.1:80", "m")


def test_the_client_times_bytes_at_the_socket_not_when_its_task_runs(srv, monkeypatch):
    """Arrivals are stamped when the loop reads them (the protocol's data_received) and a send when
    the request is written: STALL_S of the client's own work queued between the read and the task
    (or between handing the request to aiohttp and its write) is not in the TTFT. Stamped where the
    task runs, the TTFT below would be STALL_S over the server's. The first token comes 0.6 s after
    the head, after the stall queued behind the head's own read. The stall is long (0.4 s) so that
    what a busy machine's scheduler adds stays far below the half of it the test allows."""
    from tpubench.serving import client as client_module

    def blocked_reads(self, data, _orig=client_module._TimedProtocol.data_received):
        if data:    # other work queued ahead of this stream's task, as other streams' chunks are
            asyncio.get_running_loop().call_soon(time.sleep, STALL_S)
        _orig(self, data)

    async def late_write(self, *args, _orig=aiohttp.ClientRequest.write_bytes, **kwargs):
        time.sleep(STALL_S)    # aiohttp's write waits behind other work: the request has not left
        return await _orig(self, *args, **kwargs)

    monkeypatch.setattr(client_module._TimedProtocol, "data_received", blocked_reads)
    monkeypatch.setattr(aiohttp.ClientRequest, "write_bytes", late_write)
    prompt = script_prompt(ttft_ms=600, itl_ms=0, tokens=2)
    out = run_load(Endpoint(srv.url, "m"), specs(1, prompt, max_tokens=2), concurrency=1)
    (rec,), (entry,) = out.records, srv.log
    assert rec.ok
    server_ttft = entry["writes"][0] - entry["received"]
    # The stall queued behind the read is not in the TTFT: what the client adds to the server's own
    # TTFT is a small share of the stall (scheduling noise on a busy machine, never the stall itself).
    assert rec.ttft_s >= server_ttft and rec.ttft_s - server_ttft < STALL_S / 2
    assert out.origin_perf_counter_s + rec.sent_s <= entry["received"]
    assert rec.queue_s >= STALL_S                                # the late write is the client's lateness


def test_the_timing_hooks_are_engaged_on_this_aiohttp(srv, monkeypatch):
    """The client's times rest on hooks into aiohttp (module docstring); pyproject pins the aiohttp
    range they are tested on. On the installed one, every reply's body is followed where the loop
    reads it (never `_pull`, the task's later times) and every send is stamped at its write (never
    the time it was handed to aiohttp): for a reply that comes whole in one read (aiohttp before
    3.12 had released its connection by then, and both hooks were lost), a streamed one, a chat
    one, eight at once and requests on a reused connection. An aiohttp that drops a hook fails
    here, not quietly in the timing figures."""
    from tpubench.serving import client as client_module

    pulled, stamps = [], set()
    pull, stamp = client_module._pull, client_module._stamp_send

    async def counted_pull(reply, content):
        pulled.append(reply.rec.index)
        await pull(reply, content)

    async def counted_stamp(session, context, params):
        await stamp(session, context, params)
        stamps.add(context.trace_request_ctx.t)

    monkeypatch.setattr(client_module, "_pull", counted_pull)
    monkeypatch.setattr(client_module, "_stamp_send", counted_stamp)
    whole = script_prompt(ttft_ms=0, itl_ms=0, tokens=2)
    streamed = script_prompt(ttft_ms=2, itl_ms=2, tokens=5)
    runs = [("one read, reused connection", Endpoint(srv.url, "m"), specs(3, whole, max_tokens=2), 1),
            ("streamed", Endpoint(srv.url, "m"), specs(2, streamed, max_tokens=5), 1),
            ("chat", Endpoint(srv.url, "m", api="chat"), specs(2, streamed, max_tokens=5), 1),
            ("eight at once", Endpoint(srv.url, "m"), specs(8, streamed, max_tokens=5), 8)]
    where = f"on aiohttp {aiohttp.__version__}"
    for name, ep, requests, concurrency in runs:
        stamps.clear()
        out = run_load(ep, requests, concurrency=concurrency)
        assert all(r.ok for r in out.records), (name, [r.error for r in out.records])
        assert not pulled, f"{name}: bodies read by the task, not where the loop reads them, {where}"
        written = {round(t - out.origin_perf_counter_s, 9) for t in stamps}
        untimed = [r.index for r in out.records if round(r.sent_s, 9) not in written]
        assert not untimed, f"{name}: sends not stamped at their write {where} (requests {untimed})"
