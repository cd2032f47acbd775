"""Capacity at the SLO and the stop at over-saturation: the bisection on hand-computed cases, the
steering of a serve sweep on made-up results, the budget's use of the capacity point, and both
end to end against the scripted server given a capacity of its own (Script.slots)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from helpers_cli import run_cli as cli
from helpers_synthetic import make_result
from helpers_synthetic import results_frame as frame

from tpubench.records.result import RunResult, read_result
from tpubench.run.sweep import expand
from tpubench.run.workload import load_workload
from tpubench.scenarios.serve.capacity import (
    ServeSteering,
    bisect_step,
    capacity_point,
    probe_passed,
    round_significant,
)

pytest.importorskip("aiohttp")
from scripted_server import Script, ScriptedServer  # noqa: E402


def search(passes, min_rate=8.0, max_rate=64.0, tolerance=0.05):
    """Run bisect_step against an oracle: (probes in order, capacity)."""
    probes: dict[float, bool] = {}
    order = []
    while True:
        step, rate = bisect_step(probes, min_rate, max_rate, tolerance)
        if step == "done":
            return order, rate
        assert rate not in probes
        probes[rate] = passes(rate)
        order.append(rate)


def test_bisection_converges_on_the_capacity():
    order, capacity = search(lambda r: r <= 17.0)
    # 8 passes, 64 fails, then geometric midpoints to 4 digits: sqrt(8 * 64) = 22.63 fails,
    # sqrt(8 * 22.63) = 13.455 -> 13.46 passes, sqrt(13.46 * 22.63) = 17.45 fails, then 15.33,
    # 16.36 and 16.90 pass; 17.45 / 16.9 = 1.033 <= 1.05.
    assert order == [8.0, 64.0, 22.63, 13.46, 17.45, 15.33, 16.36, 16.9]
    assert capacity == 16.9
    assert 17.0 / 1.05 <= capacity <= 17.0


def test_bisection_ends_at_the_edges():
    assert search(lambda r: False) == ([8.0], None)                     # below min_rate
    assert search(lambda r: True) == ([8.0, 64.0], 64.0)                # at least max_rate
    # A looser tolerance takes fewer probes.
    assert len(search(lambda r: r <= 17.0, tolerance=0.5)[0]) < 8
    assert round_significant(22.627416997969522) == 22.63 and round_significant(0.012345678) == 0.01235


def workload(tmp_path: Path, load: dict, url: str = "http://127.0.0.1:9", **scenario) -> Path:
    data = {"name": "cap", "scenario": {
        "kind": "serve", "server": {"url": url, "model": "scripted", "hardware": {"accelerator": "H100", "chips": 1}},
        "load": load, "input_length": 8, "output_length": 2, "request_timeout_s": 30,
        "slo": {"ttft_s": 0.2}, **scenario}}
    path = tmp_path / "cap.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def result(point, status="ok", valid=True, **metrics) -> RunResult:
    return RunResult(point=point.to_dict(), point_key=point.key(), backend="torch", device="cpu", status=status,
                     metrics=metrics, validity={"valid": valid, "reasons": [] if valid else ["x"]})


def test_steering_runs_the_probes_then_the_capacity_point(tmp_path):
    w = workload(tmp_path, {"find_capacity": {"min_rate": 8, "max_rate": 64, "goodput": 0.9}, "num_requests": 10})
    points = expand(load_workload(w))
    assert len(points) == 1 and points[0].params["load"]["request_rate"] == 8
    steer = ServeSteering(points)
    point, seen = points[0], []
    for _ in range(20):
        rate = point.params["load"]["request_rate"]
        r = result(point, slo_attainment=1.0 if rate <= 17 else 0.5)
        added, skipped = steer.after(point, r)
        assert skipped == {}
        if point.params["load"]["capacity"] == "probe":
            assert r.metrics["capacity_probe"] == 1 and r.metrics["capacity_probe_passed"] == int(rate <= 17)
        seen.append((rate, point.params["load"]["capacity"]))
        if not added:
            break
        (point,) = added
    assert seen[-1] == (16.9, "point") and seen[-2] == (16.9, "probe")
    assert r.metrics["capacity_point"] == 1 and r.metrics["capacity_request_rate"] == 16.9
    assert r.metrics["capacity_bracket_high_rate"] == 17.45
    assert [p["request_rate"] for p in r.capacity["probes"]] == sorted(rate for rate, _ in seen[:-1])
    assert len(seen) == 9 and r.warnings == []


def test_a_probe_passes_on_its_attainment_when_the_client_kept_up(tmp_path):
    w = workload(tmp_path, {"find_capacity": {"min_rate": 8, "max_rate": 64}, "num_requests": 10})
    (point,) = expand(load_workload(w))
    # Sent at 7 of 8 req/s: the rate was not offered, so the probe cannot pass.
    r = result(point, valid=False, slo_attainment=1.0, offered_request_rate=8.0, achieved_send_rate=7.0)
    assert ServeSteering([point]).after(point, r) == ([], {})     # min_rate failed: no capacity
    assert r.metrics["capacity_probe_passed"] == 0 and "capacity is below it" in r.warnings[0]
    # Invalid for a lagging client only: decided on its attainment.
    r = result(point, valid=False, slo_attainment=0.95, offered_request_rate=8.0, achieved_send_rate=7.9)
    (following,), _ = ServeSteering([point]).after(point, r)
    assert r.metrics["capacity_probe_passed"] == 1 and following.params["load"]["request_rate"] == 64
    assert not probe_passed(result(point, status="failed"), 0.9)
    assert not probe_passed(result(point, slo_attainment=0.89), 0.9)


def test_an_over_saturated_rate_skips_the_higher_ones(tmp_path):
    w = workload(tmp_path, {"request_rate": [1, 8, 2, math.inf], "num_requests": 10}, input_length=[8, 16])
    points = expand(load_workload(w))
    steer = ServeSteering(points)
    at = {(p.params["load"]["request_rate"], p.input_length): p for p in points}
    assert steer.after(at[(1, 8)], result(at[(1, 8)], over_saturated=0.0)) == ([], {})
    added, skipped = steer.after(at[(2, 8)], result(at[(2, 8)], over_saturated=1.0, ttft_first_quarter_p50_s=0.05,
                                                   ttft_last_quarter_p50_s=0.9))
    # Higher rates of the same lengths only; the other input length's sweep goes on.
    assert added == [] and set(skipped) == {at[(8, 8)].key(), at[(math.inf, 8)].key()}
    assert "above 2 req/s, which over-saturated the server (TTFT median 50 ms" in skipped[at[(8, 8)].key()]
    assert skipped[at[(math.inf, 8)].key()].startswith("rate inf is above")
    # Flagged by the in-flight count alone: the reason names that, not a TTFT that held.
    flagged = result(at[(1, 16)], over_saturated=1.0, ttft_first_quarter_p50_s=0.05, ttft_last_quarter_p50_s=0.05,
                     in_flight_first_quarter_p50=2.0, in_flight_last_quarter_p50=9.0)
    flagged.saturation = {"over_saturated": True, "ttft": {"grows": False}, "in_flight": {"grows": True}}
    _, skipped = ServeSteering(points).after(at[(1, 16)], flagged)
    assert "(requests in flight, median 2 at its first quarter's sends, 9 at its last)" in skipped[at[(2, 16)].key()]
    w = workload(tmp_path, {"request_rate": [1, 2], "num_requests": 10, "stop_at_saturation": False})
    points = expand(load_workload(w))
    assert ServeSteering(points).after(points[0], result(points[0], over_saturated=1.0)) == ([], {})


def test_find_capacity_is_checked_on_load(tmp_path, monkeypatch, capsys):
    for load, message in (
            ({"find_capacity": {"min_rate": 8, "max_rate": 4}}, "min_rate (8) must be below max_rate (4)"),
            ({"find_capacity": {"min_rate": 1, "max_rate": 4}, "request_rate": 2}, "chooses the request rates"),
            ({"find_capacity": {"min_rate": 1, "max_rate": 4, "goodput": 1.5}}, "goodput")):
        code, _, err = cli(monkeypatch, capsys, "validate", str(workload(tmp_path, load)))
        assert code == 2 and message in err and err.count("\n") == 1, err
    code, _, err = cli(monkeypatch, capsys, "validate",
                       str(workload(tmp_path, {"find_capacity": {"min_rate": 1, "max_rate": 4}}, slo={})))
    assert code == 2 and "needs an SLO" in err


def test_the_budget_sizes_on_the_capacity_point_not_the_probes():
    from tpubench.budget import tokens as budget
    from tpubench.money import pricing

    fast, slow = (make_result(chips=8, batch_size=b, input_length=1000, output_length=250, e2e_s=e)
                  for b, e in ((64, 8.0), (8, 3.0)))
    fast.metrics["capacity_probe"] = 1
    slow.metrics["capacity_point"] = 1
    prices = pricing.load_prices()
    picked = budget.plan_budget(frame(fast, slow), prices, tokens_per_day=8.64e8, output_share=0.2,
                                plans=["on_demand"], cloud="aws")
    assert set(picked.options["batch_size"]) == {8}
    assert any("1 capacity-search probe(s) left out" in n for n in picked.notes)
    assert list(capacity_point(frame(fast, slow))["batch_size"]) == [8]


@pytest.mark.slow
def test_capacity_search_against_a_server_of_known_capacity(tmp_path, monkeypatch, capsys):
    # 2 slots, each request 100 ms to its first token + 1 more token 20 ms later: 2 / 0.12 s =
    # 16.7 req/s; above it requests queue and TTFT passes the 200 ms SLO.
    w = workload(tmp_path, {"find_capacity": {"min_rate": 8, "max_rate": 64, "goodput": 0.9, "tolerance": 0.1},
                            "num_requests": 30, "warmup_requests": 0, "burstiness": 100})
    out_dir = tmp_path / "r"
    with ScriptedServer(Script(ttft_ms=100, itl_ms=20, slots=2)) as srv:
        code, out, err = cli(monkeypatch, capsys, "run", str(w), "--server-url", srv.url, "--out", str(out_dir))
        assert code == 0, err + out
        results = [read_result(f) for f in out_dir.glob("*.json")]
        (cap,) = [r for r in results if r.metrics.get("capacity_point") == 1]
        probes = [r for r in results if r.metrics.get("capacity_probe") == 1]
        capacity = cap.metrics["capacity_request_rate"]
        assert 16.7 / 1.3 <= capacity <= 16.7 * 1.25, cap.capacity
        assert len(probes) == len(cap.capacity["probes"]) >= 4
        assert {p.point["params"]["load"]["request_rate"] for p in probes} >= {8.0, 64.0}
        high = cap.metrics["capacity_bracket_high_rate"]
        assert capacity < high <= capacity * 1.1 + 1e-9
        assert "capacity rate" in out and "capacity probe rate 64/s" in out
        # Resumed: every probe and the capacity point are found on disk, replayed, nothing re-run.
        code, out, err = cli(monkeypatch, capsys, "run", str(w), "--server-url", srv.url, "--out", str(out_dir),
                             "--resume")
    assert code == 0, err + out
    assert out.count("already measured") == len(probes) + 1
    assert len(list(out_dir.glob("*.json"))) == len(results)


@pytest.mark.slow
def test_an_open_loop_sweep_stops_above_an_over_saturated_rate(tmp_path, monkeypatch, capsys):
    # 1 slot of 60 ms: 16.7 req/s. 8 req/s keeps up; 40 req/s queues (TTFT grows ~35 ms a
    # request); 80 req/s is not sent.
    w = workload(tmp_path, {"request_rate": [8, 40, 80], "num_requests": 24, "warmup_requests": 0,
                            "burstiness": 100})
    with ScriptedServer(Script(ttft_ms=50, itl_ms=10, slots=1)) as srv:
        code, out, err = cli(monkeypatch, capsys, "run", str(w), "--server-url", srv.url,
                             "--out", str(tmp_path / "r"))
    assert code == 0, err + out
    by_rate = {r.point["params"]["load"]["request_rate"]: r for r in map(read_result, (tmp_path / "r").glob("*.json"))}
    assert set(by_rate) == {8, 40, 80}
    calm, busy, skipped = by_rate[8], by_rate[40], by_rate[80]
    assert calm.metrics["over_saturated"] == 0 and calm.saturation["over_saturated"] is False
    assert busy.metrics["over_saturated"] == 1
    assert busy.metrics["ttft_last_quarter_p50_s"] > 4 * busy.metrics["ttft_first_quarter_p50_s"]
    assert busy.saturation["ttft"]["slope_ci95_low"] > 0 and "TTFT grows" in busy.saturation["reason"]
    assert any(w.startswith("over-saturated: TTFT grows") for w in busy.warnings)
    assert skipped.status == "skipped" and "above 40 req/s, which over-saturated the server" in skipped.error
    assert not skipped.validity.valid
    # Steady-state window of the calm point: the open loop's, to the last drop of its in-flight count.
    m = calm.metrics
    assert 0 < m["steady_window_s"] <= m["window_s"] and m["steady_requests"] > 12
    assert m["steady_ttft_p50_s"] == pytest.approx(m["ttft_p50_s"], rel=0.5)
    assert "skipped rate 80/s" in out and "over-saturated" in out
