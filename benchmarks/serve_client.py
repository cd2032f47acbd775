"""The serving client's own limits on this machine, against the scripted server in another process
(tests/scripted_server.py, its bare HTTP mode: arrivals stamped before any framework).

1. Intake, paced: 200 streams, each sending one token every 8 ms (25,000 chunks/s offered, mostly
   one chunk per network read: the client's costly case). Goal: >= 20,000 chunks/s received with
   the client's loop lag p99 under 5 ms; the CPU share says how much room is left (chunks per
   client CPU-second is the capacity).
   Intake, flood: an instant server writing 16 chunks at a time as fast as it can. Goal: >= 20,000
   chunks per client CPU-second.
2. TTFT error: the client's TTFT against a server that writes the first token 50 ms (busy-waited)
   after a request arrives. The server logs its times on the same monotonic clock, so the error
   is the client's TTFT less the TTFT the server actually produced (first write - arrival; a
   server descheduled by another process is not the client's error), split into the way there
   (send -> the server has the request) and the way back (the server writes -> the client has the
   chunk). Goal: p99 < 1 ms. The error against the nominal 50 ms is printed too.
3. Send lateness: open loop at 200 requests/s (Poisson), actual send - scheduled send.
   Goal: p99 < 2 ms.
4. Traffic modes (serving/traffic/). Trace replay: a Mooncake-format trace of 200 requests/s
   (Poisson timestamps, hash ids shared by half the requests, prompts of 512-2048 words made
   block by block while the replay runs, the file read as it goes): actual send - the trace's
   clock. Goal: p99 < 2 ms. Multi-turn intake: 200 sessions of 2 turns in flight, each answer
   paced at one token every 8 ms, the answers' text kept and resent as history: chunks/s
   received. Goal: >= 20,000 with loop lag p99 < 2 ms (issue 34: tighter than the paced intake's
   5 ms, since a turn's reply and the next turn's send share the loop).

Each check runs in rounds: on a small machine shared with other processes, a few milliseconds of
the client or server being descheduled hits every request in flight at once, so one round's p99
says as much about the machine as about the client. Every round is printed with how busy the
machine was; the verdict takes the best round. Both processes run at nice -20 where permitted, and
so does their autogroup (Linux ranks a nice value only within its session's group)
(--normal-priority to compare). The client is one thread, so it runs on one core at a time; it is
pinned to the first CPU and the server to the second (--no-pin leaves them free: on two CPUs the
busy-waiting server then lands on the client's CPU now and then).

    python benchmarks/serve_client.py [--quick] [--rounds 3] [--no-pin] [--normal-priority]
                                      [--only paced,flood,ttft1,ttft8,late,trace,multi]
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

from scripted_server import Script, script_prompt, spawn

from tpubench.serving.client import Endpoint, RequestSpec
from tpubench.serving.load import run_load
from tpubench.serving.metrics import outcome_metrics
from tpubench.serving.traffic import trace as trace_mode
from tpubench.serving.traffic.common import Session, Vocabulary

MS = 1e-3
CHECKS = ("paced", "flood", "ttft1", "ttft8", "late", "trace", "multi")
# Multi-turn: the loop lag goal is the serve client's (issue 34), tighter than the paced intake's 5 ms.
MULTI_LAG_GOAL_S = 2 * MS


def _cpus() -> tuple[int | None, int | None]:
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)


def _cpu_ticks() -> tuple[int, int, int] | None:
    """(busy, total, stolen) clock ticks of all CPUs so far, from /proc/stat (Linux)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v), v[7] if len(v) > 7 else 0


def _machine(before) -> str:
    after = _cpu_ticks()
    if before is None or after is None or after[1] == before[1]:
        return ""
    busy, total, steal = (a - b for a, b in zip(after, before))
    return f"; machine {busy / total:.0%} busy, {steal / total:.1%} stolen by the host"


def _server_log(url: str) -> list[dict]:
    with urllib.request.urlopen(url + "/_log", timeout=30) as r:
        return json.load(r)["log"]


def _reset(url: str) -> None:
    urllib.request.urlopen(urllib.request.Request(url + "/_reset", data=b"", method="POST"), timeout=10).read()


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def intake(url: str, streams: int, tokens: int, itl_ms: float = 0.0, burst: int = 1) -> dict:
    prompt = script_prompt(tokens=tokens, itl_ms=itl_ms, burst=burst)
    warm = [RequestSpec(script_prompt(tokens=2), 1, 2)]        # opens the connections, quickly
    out = run_load(Endpoint(url, "scripted"), [RequestSpec(prompt, 1, tokens)] * streams, concurrency=streams,
                   warmup_requests=streams, warmup_specs=warm)
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
    def q(x):
        return np.percentile(x, [50, 99, 100])

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


def _write_trace(path, requests: int, rate: float, seed: int = 0):
    """A Mooncake-format trace at `rate` requests/s (Poisson), half the requests continuing an
    earlier one's blocks (its hash ids, then one block of their own)."""
    rng = np.random.default_rng(seed)
    t, rows, next_id = 0.0, [], 0
    for k in range(requests):
        if k:
            t += rng.exponential(1.0 / rate)
        if rows and rng.random() < 0.5:
            ids = rows[int(rng.integers(len(rows)))]["hash_ids"][:3] + [next_id]
        else:
            ids = [next_id]
        next_id += 1
        rows.append({"timestamp": round(t * 1e3, 3), "input_length": 512 * len(ids), "output_length": 4,
                     "hash_ids": ids})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def trace_lateness(url: str, requests: int, rate: float) -> dict:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = _write_trace(Path(tmp) / "trace.jsonl", requests, rate)
        plan = trace_mode.plan({"path": str(path)}, warmup=4, seed=1, vocab=Vocabulary.plain(), base_dir=None,
                               chat=False)
        out = run_load(Endpoint(url, "scripted"), [], timed=plan.timed(), warmup_requests=4,
                       warmup_specs=plan.warmup)
    late = np.array([r.sent_s - r.scheduled_s for r in out.records])
    m = outcome_metrics(out, n_boot=0)
    return {"late": np.percentile(late, [50, 99, 100]), "offered": out.offered_request_rate,
            "achieved": out.achieved_send_rate, "lag_p99": m["client_loop_lag_p99_s"],
            "failed": m["requests_failed"], "n": len(out.records)}


def multi_turn_intake(url: str, sessions: int, tokens: int, itl_ms: float = 8.0) -> dict:
    turn = script_prompt(tokens=tokens, itl_ms=itl_ms)
    plan = [Session(index=i, system=f"session {i}", user_turns=(turn, turn), max_tokens=(tokens, tokens))
            for i in range(sessions)]
    warm = [RequestSpec("", 0, 2, messages=({"role": "user", "content": script_prompt(tokens=2)},))]
    out = run_load(Endpoint(url, "scripted", api="chat"), [], concurrency=sessions, sessions=plan,
                   warmup_requests=sessions, warmup_specs=warm)
    assert all(r.ok for r in out.records), [r.error for r in out.records if not r.ok][:3]
    chunks = sum(r.token_chunks for r in out.records)
    m = outcome_metrics(out, n_boot=0)
    return {"chunks": chunks, "wall_rate": chunks / out.wall_s, "cpu_rate": chunks / out.client_cpu_s,
            "cpu_share": out.client_cpu_s / out.wall_s, "lag_p99": m["client_loop_lag_p99_s"]}


def _rounds(n: int, run) -> list[dict]:
    out = []
    for _ in range(n):
        t = _cpu_ticks()
        r = run()
        r["machine"] = _machine(t)
        out.append(r)
    return out


def _report(rounds: list[dict], passes, score, line) -> bool:
    """Print every round; the verdict is the best round's (lowest score)."""
    best = min(rounds, key=score)
    ok = passes(best)
    for i, r in enumerate(rounds):
        tag = _verdict(ok) if r is best else "    "
        print(f"[{tag}] " + line(r) + (f", round {i + 1}" if len(rounds) > 1 else "") + r["machine"])
    return ok


def _paced_line(r: dict) -> str:
    return (f"intake, paced (200 streams x 1 chunk / 8 ms = 25,000 offered): {r['wall_rate']:,.0f} chunks/s "
            f"received (goal >= 20,000 with loop lag p99 < 5 ms) at {r['cpu_share']:.0%} client CPU, i.e. "
            f"{r['cpu_rate']:,.0f} per client CPU-second; loop lag p99 {r['lag_p99'] / MS:.2f} ms; ITL p50/p99 "
            f"{r['itl_p50'] / MS:.2f}/{r['itl_p99'] / MS:.2f} ms (server paced 8 ms)")


def _flood_line(r: dict) -> str:
    return (f"intake, flood (32 streams, instant server, 16 chunks per write): {r['cpu_rate']:,.0f} chunks per "
            f"client CPU-second (goal >= 20,000); {r['wall_rate']:,.0f} chunks/s at {r['cpu_share']:.0%} client "
            f"CPU ({r['chunks']:,} chunks; loop lag p99 {r['lag_p99'] / MS:.2f} ms: a saturated client)")


def _ttft_line(conc: int):
    def line(r: dict) -> str:
        e, n, t, b, s = (x / MS for x in (r["err"], r["nominal"], r["there"], r["back"], r["server"]))
        return (f"TTFT error, scripted 50 ms, concurrency {conc}: p50 {e[0]:.3f} ms, p99 {e[1]:.3f} ms, max "
                f"{e[2]:.3f} ms (goal p99 < 1 ms); way there p50/p99 {t[0]:.3f}/{t[1]:.3f} ms, way back "
                f"{b[0]:.3f}/{b[1]:.3f} ms; against the nominal 50 ms p50/p99 {n[0]:.3f}/{n[1]:.3f} ms (the "
                f"server's own overshoot p99 {s[1]:.3f} ms); loop lag p99 {r['lag_p99'] / MS:.2f} ms")
    return line


def _late_line(r: dict) -> str:
    late = r["late"] / MS
    return (f"send lateness at 200 req/s Poisson: p50 {late[0]:.3f} ms, p99 {late[1]:.3f} ms, max {late[2]:.3f} ms "
            f"(goal p99 < 2 ms); offered {r['offered']:.1f} req/s, achieved {r['achieved']:.1f} req/s; loop lag "
            f"p99 {r['lag_p99'] / MS:.2f} ms")


def _trace_line(r: dict) -> str:
    late = r["late"] / MS
    return (f"trace replay at 200 req/s (Mooncake format, {r['n']} requests, prompts made as it goes): send lateness "
            f"p50 {late[0]:.3f} ms, p99 {late[1]:.3f} ms, max {late[2]:.3f} ms (goal p99 < 2 ms); the trace's rate "
            f"{r['offered']:.1f} req/s, achieved {r['achieved']:.1f} req/s; loop lag p99 {r['lag_p99'] / MS:.2f} ms")


def _multi_turn_line(r: dict) -> str:
    return (f"multi-turn intake (200 sessions x 2 turns, 1 chunk / 8 ms, answers kept and resent): "
            f"{r['wall_rate']:,.0f} chunks/s received (goal >= 20,000 with loop lag p99 < "
            f"{MULTI_LAG_GOAL_S / MS:g} ms) at {r['cpu_share']:.0%} client CPU, i.e. {r['cpu_rate']:,.0f} per client CPU-second; "
            f"loop lag p99 "
            f"{r['lag_p99'] / MS:.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each check (verdict: the best round)")
    ap.add_argument("--normal-priority", action="store_true",
                    help="do not raise the client's and server's priority (nice -20 where permitted)")
    ap.add_argument("--no-pin", action="store_true", help="leave the client and server free to move between CPUs")
    ap.add_argument("--only", default=",".join(CHECKS),
                    help=f"the checks to run, comma-separated (default all: {','.join(CHECKS)})")
    args = ap.parse_args()
    only = set(args.only.split(","))
    if only - set(CHECKS):
        ap.error(f"unknown checks {sorted(only - set(CHECKS))}; choose from {','.join(CHECKS)}")
    scale = 0.2 if args.quick else 1.0
    priority = "normal priority"
    if not args.normal_priority:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, -20)     # the server child inherits it
            priority = "nice -20"
        except OSError:
            pass
        try:
            # With the kernel's autogroups (sched_autogroup_enabled, each login session a group)
            # a process's nice only ranks it within its own group: another session's busy
            # process still takes half a CPU from a client at nice -20. The group's own nice
            # (shared by the server child, same session) is what ranks it against them.
            with open("/proc/self/autogroup", "w") as f:
                f.write("-20")
            priority += " (its autogroup too)"
        except OSError:
            pass
    client_cpu, server_cpu = (None, None) if args.no_pin else _cpus()
    if client_cpu is not None:
        os.sched_setaffinity(0, {client_cpu})
    def where(c):
        return "any" if c is None else c

    print(f"client on CPU {where(client_cpu)}, server on CPU {where(server_cpu)} (of {os.cpu_count()}); {priority}; "
          f"python {sys.version.split()[0]}; {args.rounds} round(s) per check; load average "
          f"{os.getloadavg()[0]:.2f} before (other processes share the CPUs)")
    results = []

    def served(spin: bool):
        return spawn(Script(), spin=spin, cpu=server_cpu, raw=True)

    if only & {"paced", "flood"}:
        proc, url = served(spin=False)
        try:
            if "paced" in only:
                rounds = _rounds(args.rounds, lambda: intake(url, streams=200, tokens=int(1000 * scale), itl_ms=8.0))
                results.append(_report(rounds, lambda r: r["wall_rate"] >= 20_000 and r["lag_p99"] < 5 * MS,
                                       lambda r: (r["wall_rate"] < 20_000, r["lag_p99"]), _paced_line))
            if "flood" in only:
                rounds = _rounds(args.rounds, lambda: intake(url, streams=32, tokens=int(2000 * scale), burst=16))
                results.append(_report(rounds, lambda r: r["cpu_rate"] >= 20_000, lambda r: -r["cpu_rate"],
                                       _flood_line))
        finally:
            proc.stdin.close()
            proc.wait(10)

    if only & {"ttft1", "ttft8"}:
        proc, url = served(spin=True)
        try:
            for conc in (1, 8):
                if f"ttft{conc}" not in only:
                    continue
                rounds = _rounds(args.rounds, lambda c=conc: ttft_error(url, requests=int(200 * scale), concurrency=c))
                results.append(_report(rounds, lambda r: r["err"][1] < 1 * MS, lambda r: r["err"][1],
                                       _ttft_line(conc)))
        finally:
            proc.stdin.close()
            proc.wait(10)

    if only & {"late", "trace", "multi"}:
        proc, url = served(spin=False)
        try:
            if "late" in only:
                rounds = _rounds(args.rounds, lambda: send_lateness(url, requests=int(2000 * scale), rate=200.0))
                results.append(_report(rounds, lambda r: r["late"][1] < 2 * MS and r["failed"] == 0,
                                       lambda r: r["late"][1], _late_line))
            if "trace" in only:
                rounds = _rounds(args.rounds, lambda: trace_lateness(url, requests=int(2000 * scale), rate=200.0))
                results.append(_report(rounds, lambda r: r["late"][1] < 2 * MS and r["failed"] == 0,
                                       lambda r: r["late"][1], _trace_line))
            if "multi" in only:
                rounds = _rounds(args.rounds, lambda: multi_turn_intake(url, sessions=200, tokens=int(500 * scale)))
                results.append(_report(rounds, lambda r: r["wall_rate"] >= 20_000 and r["lag_p99"] < MULTI_LAG_GOAL_S,
                                       lambda r: (r["wall_rate"] < 20_000, r["lag_p99"]), _multi_turn_line))
        finally:
            proc.stdin.close()
            proc.wait(10)
    print("ALL PASS" if all(results) else "SOME FAIL")
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
