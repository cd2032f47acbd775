"""`tpubench run --profile` (measure/profile.py, docs/measurement.md#profile): op categories and the
breakdown by hand; a generate and a train point on tiny random MoE models through the CLI (the
profile stored, categories summing to the pass within 10%, the trace beside the result, the timed
loop never profiled); the report's section and `compare`'s moved categories on fixture results."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import yaml
from helpers_cli import run_cli as cli
from helpers_synthetic import make_result

from tpubench.backends import get_backend
from tpubench.backends.jax import PROFILER_UNAVAILABLE
from tpubench.measure.profile import CATEGORIES, OpTime, breakdown, op_category, profile_pass, union_seconds
from tpubench.output.compare import profile_moves
from tpubench.records.result import read_result, write_result

REPO = Path(__file__).resolve().parents[1]
TINY_MOE = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 16, "intermediate_size": 128, "num_experts": 8, "num_experts_per_tok": 2,
            "moe_intermediate_size": 32, "vocab_size": 512, "max_position_embeddings": 256}
SUM_TOLERANCE = 0.10   # the bound: categories add up to the profiled pass within 10%


# ----------------------------------------------------------------------------- by hand


@pytest.mark.parametrize("name, ancestors, category", [
    ("aten::_grouped_mm", ("tpubench::experts",), "expert_matmul_s"),
    ("aten::_grouped_mm", (), "expert_matmul_s"),                     # compiled: no ranges, the name says
    ("aten::mm", ("aten::linear", "tpubench::experts"), "expert_matmul_s"),   # the eager loop's linears
    ("aten::index", ("tpubench::experts",), "expert_dispatch_s"),
    ("aten::silu", ("tpubench::experts", "tpubench::attention"), "expert_dispatch_s"),   # innermost range wins
    ("aten::_softmax", ("aten::softmax", "tpubench::router"), "router_topk_s"),
    ("aten::mm", ("aten::linear", "tpubench::router"), "router_topk_s"),
    ("aten::topk", (), "router_topk_s"),
    ("aten::_scaled_dot_product_flash_attention_for_cpu", ("aten::scaled_dot_product_attention",), "attention_s"),
    ("aten::bmm", ("aten::_scaled_dot_product_attention_math", "aten::scaled_dot_product_attention"), "attention_s"),
    ("aten::addmm", ("aten::linear", "tpubench::attention"), "dense_matmul_s"),   # q/k/v projections
    ("aten::cat", ("tpubench::attention",), "attention_s"),                       # rope, cache writes
    ("aten::mm", ("aten::matmul", "aten::linear"), "dense_matmul_s"),
    ("aten::rsqrt", ("tpubench::norm",), "norm_elementwise_s"),
    ("aten::mul", (), "norm_elementwise_s"),
    ("c10d::allreduce_", (), "collectives_s"),
    ("nccl:all_to_all", ("tpubench::experts",), "collectives_s"),
    ("aten::copy_", (), "other_s"),
    ("aten::embedding", (), "other_s"),
])
def test_op_categories(name, ancestors, category):
    assert op_category(name, ancestors) == category


def test_report_names_every_category_in_order():
    from tpubench.output.report import profile as report_profile

    assert report_profile.CATEGORIES == CATEGORIES


def test_union_of_intervals_by_hand():
    # [0,2) and [1,3) overlap to [0,3); [5,6) apart; [5.5,5.8) inside it: 3 + 1 = 4 s
    assert union_seconds([(5.0, 6.0), (0.0, 2.0), (1.0, 3.0), (5.5, 5.8)]) == pytest.approx(4.0)
    assert union_seconds([]) == 0.0


def test_breakdown_by_hand():
    ops = [OpTime("aten::_grouped_mm", 0.3, ("tpubench::experts",)), OpTime("aten::topk", 0.1),
           OpTime("aten::mm", 0.25, ("aten::linear",)), OpTime("aten::mm", 0.1, ("aten::linear",)),
           OpTime("aten::add", 0.05)]
    p = breakdown(ops, wall_s=1.0, busy_s=0.8, top=2)
    c = p["categories"]
    assert set(c) == set(CATEGORIES)
    assert c["expert_matmul_s"] == pytest.approx(0.3) and c["router_topk_s"] == pytest.approx(0.1)
    assert c["dense_matmul_s"] == pytest.approx(0.35) and c["norm_elementwise_s"] == pytest.approx(0.05)
    assert c["host_gap_s"] == pytest.approx(0.2)             # wall 1.0 - busy 0.8
    assert p["sums_to"] == pytest.approx(1.0)
    # aten::mm's two calls add up (0.35 s) and rank first; only `top` ops are kept
    assert [(o["name"], o["calls"]) for o in p["top_ops"]] == [("aten::mm", 2), ("aten::_grouped_mm", 1)]
    assert p["top_ops"][0]["self_s"] == pytest.approx(0.35)
    # busy longer than wall (threads overlapping) never makes a negative host gap
    assert breakdown(ops, wall_s=0.5, busy_s=0.8)["categories"]["host_gap_s"] == 0.0


def test_device_view_counts_kernel_time_and_kernel_gaps():
    """On an accelerator each op counts its kernels' self device time, and the busy time is the
    union of the kernels' intervals (events as torch.profiler gives them; times in microseconds)."""
    from types import SimpleNamespace as Event

    from torch.autograd import DeviceType

    from tpubench.measure.profile import _torch_ops

    def span(start, end):
        return Event(start=start, end=end)

    experts = Event(name="tpubench::experts", device_type=DeviceType.CPU, cpu_parent=None, time_range=span(0, 900),
                    self_cpu_time_total=50, self_device_time_total=0)
    mm = Event(name="aten::_grouped_mm", device_type=DeviceType.CPU, cpu_parent=experts, time_range=span(10, 40),
               self_cpu_time_total=30, self_device_time_total=400)
    sdpa = Event(name="aten::_scaled_dot_product_flash_attention", device_type=DeviceType.CPU, cpu_parent=None,
                 time_range=span(50, 60), self_cpu_time_total=10, self_device_time_total=200)
    kernels = [Event(name=k, device_type=DeviceType.CUDA, cpu_parent=None, time_range=span(a, b),
                     self_cpu_time_total=0, self_device_time_total=0)
               for k, a, b in (("sm90_gemm", 100, 300), ("sm90_gemm", 250, 500), ("flash_fwd", 600, 800))]
    ops, busy = _torch_ops([experts, mm, sdpa, *kernels], on_device=True)
    assert [(o.name, o.self_s, o.ancestors) for o in ops] == [
        ("aten::_grouped_mm", 400e-6, ("tpubench::experts",)),
        ("aten::_scaled_dot_product_flash_attention", 200e-6, ())]
    assert busy == pytest.approx(600e-6)          # [100, 500) and [600, 800)
    host_ops, host_busy = _torch_ops([experts, mm, sdpa, *kernels], on_device=False)
    assert [o.self_s for o in host_ops] == [30e-6, 10e-6]   # the range's own time is not an op's
    assert host_busy == pytest.approx(40e-6)


def test_a_collective_on_gloos_own_thread_counts_as_the_callers_wait():
    """gloo runs an all-reduce on its own thread (an event without self time) while the caller
    waits outside any op: the part of it no caller op covers is the collective's time, so the
    categories still add up to the pass."""
    from types import SimpleNamespace as Event

    from torch.autograd import DeviceType

    from tpubench.measure.profile import _torch_ops, op_category

    def event(name, start, end, self_us):
        return Event(name=name, device_type=DeviceType.CPU, cpu_parent=None, time_range=Event(start=start, end=end),
                     self_cpu_time_total=self_us, self_device_time_total=0)

    ops, busy = _torch_ops([event("aten::mm", 0, 100, 100), event("c10d::allreduce_", 100, 110, 10),
                            event("gloo:all_reduce", 105, 300, 0)], on_device=False)
    assert [(o.name, o.self_s) for o in ops] == [
        ("aten::mm", 100e-6), ("c10d::allreduce_", 10e-6),
        ("gloo:all_reduce (its own thread, while the caller waited)", pytest.approx(190e-6))]
    assert op_category(ops[-1].name) == "collectives_s"
    assert busy == pytest.approx(300e-6) and sum(o.self_s for o in ops) == pytest.approx(busy)


def test_module_ranges_sort_ops_and_leave_no_hook_behind(tmp_path):
    """A hand-made module tree (classes named as transformers names them): ops in the experts
    module are expert time, in the router router time, the rest by name; afterwards the model has
    the hooks it had, no profiler is on, and the trace is written."""
    import torch
    import torch.autograd.profiler as torch_profiler

    class ToyExperts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 32, 32))

        def forward(self, x):
            return torch.bmm(x.expand(4, -1, -1), self.w).sum(0)

    class ToyTopKRouter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.top_k, self.num_experts = 2, 4
            self.weight = torch.nn.Parameter(torch.randn(4, 32))

        def forward(self, x):
            return torch.topk(torch.softmax(x @ self.weight.t(), -1), 2, dim=-1)

    class Toy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.router, self.experts, self.lm_head = ToyTopKRouter(), ToyExperts(), torch.nn.Linear(32, 32)

        def forward(self, x):
            self.router(x)
            return self.lm_head(self.experts(x))

    model, x = Toy(), torch.randn(8, 32)
    hooks_before = [(len(m._forward_pre_hooks), len(m._forward_hooks)) for m in model.modules()]
    with torch.inference_mode():
        record = profile_pass(get_backend("torch", "cpu"), lambda: model(x), tmp_path, "toy", model=model)
    c = record["categories"]
    assert record["available"] and record["module_ranges"]
    assert c["expert_matmul_s"] > 0 and c["router_topk_s"] > 0 and c["dense_matmul_s"] > 0
    assert {o["name"]: o["category"] for o in record["top_ops"]}["aten::bmm"] == "expert_matmul_s"
    assert abs(sum(c.values()) - record["total_s"]) <= SUM_TOLERANCE * record["total_s"]
    assert [(len(m._forward_pre_hooks), len(m._forward_hooks)) for m in model.modules()] == hooks_before
    assert not torch_profiler._is_profiler_enabled
    assert (tmp_path / "toy.trace.json.gz").is_file() and record["trace_file"] == "toy.trace.json.gz"


def test_jax_says_not_available():
    assert profile_pass(get_backend("jax"), lambda: None, None, "x") == {"available": False,
                                                                         "why": PROFILER_UNAVAILABLE}


def test_a_failing_pass_keeps_the_point_and_says_why(tmp_path):
    def boom():
        raise RuntimeError("device lost\nmore lines")

    record = profile_pass(get_backend("torch", "cpu"), boom, tmp_path, "x")
    assert record == {"available": False, "why": "the profiled pass failed: device lost"}


# ----------------------------------------------------------------------------- compare and report


def _profiled(result, **categories):
    result.profile = {"total_s": sum(categories.values()), "categories": {k: categories.get(k, 0.0) for k in CATEGORIES},
                      "top_ops": [{"name": "aten::mm", "self_s": 0.01, "calls": 3, "category": "dense_matmul_s"}]}
    return result


def test_profile_moves_largest_absolute_change_first():
    a = {"categories": {"expert_matmul_s": 0.50, "attention_s": 0.10, "dense_matmul_s": 0.20, "host_gap_s": 0.05}}
    b = {"categories": {"expert_matmul_s": 0.20, "attention_s": 0.15, "dense_matmul_s": 0.20, "host_gap_s": 0.01}}
    moves = profile_moves(a, b, top=3)
    assert [m.category for m in moves] == ["expert_matmul_s", "attention_s", "host_gap_s"]   # dense unchanged: out
    assert moves[0].change_s == pytest.approx(-0.30) and moves[1].change_s == pytest.approx(0.05)
    assert profile_moves(a, {}) == [] and profile_moves({}, b) == []


def test_compare_shows_the_categories_that_moved(tmp_path, monkeypatch, capsys):
    a = _profiled(make_result(e2e_s=2.0), expert_matmul_s=0.9, attention_s=0.3, dense_matmul_s=0.5, host_gap_s=0.1)
    b = _profiled(make_result(e2e_s=1.5, started_at="2026-12-02T00:00:00+00:00"),
                  expert_matmul_s=0.4, attention_s=0.3, dense_matmul_s=0.75, host_gap_s=0.1)
    fa, fb = write_result(a, tmp_path / "a"), write_result(b, tmp_path / "b")
    code, out, err = cli(monkeypatch, capsys, "compare", str(fa), str(fb))
    assert code == 0, err
    moved = out[out.index("where the time moved"):].splitlines()[1:3]
    assert [x.strip() for x in moved] == ["expert_matmul_s 900 -> 400 ms (-500 ms)",
                                          "dense_matmul_s 500 -> 750 ms (+250 ms)"]
    assert "attention_s" not in out   # unchanged
    # without profiles on both sides, no such line
    plain = write_result(make_result(e2e_s=1.5, started_at="2026-12-03T00:00:00+00:00"), tmp_path / "c")
    code, out, _ = cli(monkeypatch, capsys, "compare", str(fa), str(plain))
    assert code == 0 and "where the time moved" not in out


def test_report_has_a_profile_section_and_figure(tmp_path, monkeypatch, capsys):
    from helpers_synthetic import results_frame

    from tpubench.output.report.figures import profile_figures

    r = _profiled(make_result(), expert_matmul_s=0.6, router_topk_s=0.1, dense_matmul_s=0.2, host_gap_s=0.1)
    write_result(r, tmp_path / "res")
    code, out, err = cli(monkeypatch, capsys, "report", str(tmp_path / "res"), "--format", "markdown")
    assert code == 0, err
    section = out[out.index("## Where the time goes"):]
    assert "| 1,000 | 600 (60%) | 0 (0%) | 100 (10%) |" in section and "aten::mm" in section

    class Data:   # what profile_figures reads of ReportData
        results = results_frame(r)

    (chart,) = profile_figures(Data)
    assert chart.id == "profile"
    table = chart.tables["table"]
    assert len(table["ms"]) == len(CATEGORIES) and table["ms"][0] == pytest.approx(600.0)   # ms of expert matmuls


# ----------------------------------------------------------------------------- through the CLI


def _generate_workload(tmp_path: Path) -> Path:
    data = yaml.safe_load((REPO / "workloads" / "qwen3_moe.yaml").read_text())
    data["scales"]["small"]["config"].update(TINY_MOE)
    data["scales"]["small"]["scenario"] = {"batch_size": 2, "input_length": 16, "output_length": 4}
    data["measurement"] = {"warmup": 1, "min_iterations": 3, "min_seconds": 0.0, "max_seconds": 20,
                           "target_ci": None, "max_cv": 10.0}
    path = tmp_path / "moe.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _check_profile(result, folder: Path) -> dict:
    p = result.profile
    assert p["available"] is True and p["module_ranges"] is True, p
    assert set(p["categories"]) == set(CATEGORIES)
    assert abs(sum(p["categories"].values()) - p["total_s"]) <= SUM_TOLERANCE * p["total_s"], p
    # the trace sits beside the result, gzip'd chrome trace JSON (not *.json: never read as a result)
    trace = folder / p["trace_file"]
    assert trace.name.endswith(".trace.json.gz")
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    assert any(e.get("name") == "tpubench::experts" for e in events)
    return p


@pytest.mark.slow
def test_generate_point_with_profile_through_the_cli(tmp_path, monkeypatch, capsys):
    import torch.autograd.profiler as torch_profiler

    from tpubench.scenarios.generate import measure as generate_measure

    # Every iteration the point runs, with whether a profiler was on: the timed loop must not be
    # profiled, and the profiled one must come after it (and after the expert-load pass).
    calls = []
    real = generate_measure.run_iteration

    def spy(session, output_length, **kw):
        calls.append(torch_profiler._is_profiler_enabled)
        return real(session, output_length, **kw)

    monkeypatch.setattr(generate_measure, "run_iteration", spy)
    out = tmp_path / "out"
    code, _, err = cli(monkeypatch, capsys, "run", str(_generate_workload(tmp_path)), "--profile", "--out", str(out),
                       "--no-price", "--no-energy")
    assert code == 0, err
    (path,) = out.glob("*.json")
    result = read_result(path)
    assert result.status == "ok" and result.validity.valid, result.validity.reasons
    p = _check_profile(result, out)
    assert p["categories"]["expert_matmul_s"] > 0 and p["categories"]["router_topk_s"] > 0
    assert p["categories"]["attention_s"] > 0 and p["time_basis"] == "self CPU time"
    assert p["timed_s"] == pytest.approx(sorted(result.samples["e2e_s"])[len(result.samples["e2e_s"]) // 2])
    # first call + warm-up + timed iterations + the expert-load pass, unprofiled; then one profiled
    timed = result.metrics["iterations"]
    assert calls == [False] * (1 + 1 + timed + 1) + [True]
    # the report reads it back
    code, report, err = cli(monkeypatch, capsys, "report", str(out), "--format", "markdown")
    assert code == 0 and "## Where the time goes" in report, err


@pytest.mark.slow   # a world of two processes (gloo)
def test_a_tensor_parallel_point_is_profiled_on_every_rank_and_rank_0_writes(tmp_path, monkeypatch, capsys):
    """Every rank runs the profiled pass (its all-reduces need both); rank 0's breakdown, with the
    collectives in it, is the result's, and only its trace is written."""
    out = tmp_path / "out"
    code, _, err = cli(monkeypatch, capsys, "run", str(_generate_workload(tmp_path)), "--tensor-parallel", "2",
                       "--profile", "--out", str(out), "--no-price", "--no-energy")
    assert code == 0, err
    (path,) = out.glob("*.json")
    result = read_result(path)
    assert result.status == "ok", result.error
    p = _check_profile(result, out)
    assert p["categories"]["collectives_s"] > 0
    assert [f.name for f in out.glob("*.trace.json.gz")] == [p["trace_file"]]


@pytest.mark.slow
def test_train_point_with_profile_through_the_cli(tmp_path, monkeypatch, capsys):
    data = {"name": "tiny_train",
            "model": {"family": "qwen3_moe", "dtype": "float32", "config": TINY_MOE, "experts_implementation": "eager"},
            "scenario": {"kind": "train", "batch_size": 2, "sequence_length": 16, "precision": "fp32",
                         "optimizer": {"name": "adamw", "lr": 1e-3}},
            "measurement": {"warmup": 1, "min_iterations": 2, "min_seconds": 0.0, "max_seconds": 30,
                            "target_ci": None, "max_cv": 10.0}}
    workload = tmp_path / "train.yaml"
    workload.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "out"
    code, _, err = cli(monkeypatch, capsys, "run", str(workload), "--profile", "--out", str(out), "--no-price",
                       "--no-energy")
    assert code == 0, err
    (path,) = out.glob("*.json")
    result = read_result(path)
    assert result.status == "ok", result.error
    p = _check_profile(result, out)
    assert p["categories"]["expert_matmul_s"] > 0
    # the profiled step's loss is not among the recorded ones: first + warm-up + timed steps
    assert len(result.samples["loss"]) == 1 + 1 + len(result.samples["step_s"])
