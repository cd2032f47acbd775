"""The report's MoE kernel table (output/report/kernel_speedups.py, docs/definitions.md#kernel-speedups):
speed-ups and their CIs by hand, the baseline rule (eager loop, else generate(), else none), arms
that did not run listed with their reason, groups that never mix unlike points, invalid results
marked, and the section in the markdown and HTML reports."""

from __future__ import annotations

import math

import pytest
from helpers_synthetic import make_result, results_frame

from tpubench.output.frames import arm_free_key
from tpubench.output.report import kernel_speedups as ks
from tpubench.output.report import render_report
from tpubench.output.report.markdown_parts import table

NO_HUB_KERNEL = "experts implementation kernels: transformers registers no Hugging Face Hub MoE kernel for cpu"


def arm(impl, tpot=None, rel=0.02, *, backend="torch", loop=None, kernel=None, routing=None, status="ok",
        error=None, batch_size=8, started_at="2026-12-01T00:00:00+00:00", **kw):
    """A generate result of one arm on a CPU, its mean TPOT `tpot` with 95% CI tpot * (1 -/+ rel)."""
    r = make_result(experts_implementation=impl, backend=backend, device="cpu", accelerator="cpu", status=status,
                    error=error, batch_size=batch_size, started_at=started_at, **kw)
    if loop:
        r.point["params"] = {"decode_loop": loop}
    if kernel:
        r.moe["kernel"] = {"arm": impl, "implementation": kernel, "package": "test", "version": "0"}
    if routing:
        r.point["routing"] = routing
    if status == "ok":
        rate = batch_size / tpot
        r.metrics.update(tpot_mean_s=tpot, tpot_ci95_low_s=tpot * (1 - rel), tpot_ci95_high_s=tpot * (1 + rel),
                         decode_tokens_per_s=rate, decode_tokens_per_s_ci95_low=rate * (1 - rel),
                         decode_tokens_per_s_ci95_high=rate * (1 + rel))
    return r


def rows(*results):
    """The table as {arm: row} (one group expected)."""
    t = ks.speedups(results_frame(*results))
    assert t["group_id"].nunique() == 1
    return {r["arm"]: r for _, r in t.iterrows()}


# ----------------------------------------------------------------------------- by hand


def test_speedup_and_its_ci_by_hand():
    # baseline 100 ms +/- 4% and grouped_mm 50 ms +/- 3%: 0.100 / 0.050 = 2.00, relative half-width
    # sqrt(0.04^2 + 0.03^2) = 0.05, so 2.00 +/- 0.10 -> 1.90-2.10
    t = rows(arm("eager", 0.100, 0.04), arm("grouped_mm", 0.050, 0.03), arm("batched_mm", 0.098, 0.04))
    g = t["torch grouped_mm"]
    assert g["speedup"] == pytest.approx(2.0)
    assert (g["speedup_ci95_low"], g["speedup_ci95_high"]) == (pytest.approx(1.90), pytest.approx(2.10))
    assert g["verdict"] == "faster" and g["baseline"] == "eager loop"
    assert ks.statement(g) == "torch grouped_mm vs eager loop: 2.00x (1.90–2.10)"
    # 0.100 / 0.098 = 1.0204 +/- 1.0204 * sqrt(2) * 0.04 = 0.0577: the interval holds 1
    b = t["torch batched_mm"]
    assert b["speedup"] == pytest.approx(1.020408, rel=1e-5)
    assert b["speedup_ci95_high"] - b["speedup"] == pytest.approx(1.020408 * math.sqrt(2) * 0.04, rel=1e-5)
    assert b["verdict"] == "tie within noise"
    e = t["torch eager"]
    assert e["is_baseline"] and e["speedup"] == 1.0 and ks.statement(e) == "eager loop: baseline"


def test_a_missing_ci_gives_the_ratio_alone():
    t = rows(arm("eager", 0.09, math.nan), arm("grouped_mm", 0.03))
    g = t["torch grouped_mm"]
    assert g["speedup"] == pytest.approx(3.0) and math.isnan(g["speedup_ci95_low"])
    assert ks.statement(g) == "torch grouped_mm vs eager loop: 3.00x" and g["verdict"] == "no CI"


def test_arm_labels_name_backend_implementation_kernel_and_loop():
    t = rows(arm("eager", 0.1), arm("kernels", 0.05, kernel="sonicmoe"), arm("tokamax", 0.04, backend="jax", kernel="xla"),
             arm(None, 0.08, loop="hf_generate"), arm("ragged_dot", 0.06, backend="jax", kernel="ragged_dot"))
    assert set(t) == {"torch eager", "torch kernels (sonicmoe)", "jax tokamax (xla)", "torch default generate()",
                      "jax ragged_dot"}
    # baseline first, then fastest first
    assert list(t) == ["torch eager", "jax tokamax (xla)", "torch kernels (sonicmoe)", "jax ragged_dot",
                       "torch default generate()"]
    assert ks.statement(t["jax tokamax (xla)"]).startswith("jax tokamax (xla) vs eager loop: 2.50x")


# ----------------------------------------------------------------------------- the baseline


def test_without_an_eager_loop_the_generate_arm_is_the_baseline():
    # two generate() arms: the one with the framework's default experts is what generate() users get
    t = rows(arm("grouped_mm", 0.05), arm(None, 0.08, loop="hf_generate"), arm("eager", 0.2, loop="hf_generate"))
    g = t["torch grouped_mm"]
    assert g["baseline"] == "torch default generate()" and g["speedup"] == pytest.approx(1.6)
    assert ks.statement(g).startswith("torch grouped_mm vs torch default generate(): 1.60x (")
    assert t["torch default generate()"]["is_baseline"]
    # the eager generate() arm is not the eager loop: it is compared with the baseline like any arm
    assert t["torch eager generate()"]["speedup"] == pytest.approx(0.4)


def test_an_eager_loop_that_failed_is_no_baseline():
    t = rows(arm("eager", status="failed", error="RuntimeError: out of memory"), arm("grouped_mm", 0.05),
             arm(None, 0.1, loop="hf_generate"))
    assert t["torch grouped_mm"]["baseline"] == "torch default generate()"
    assert t["torch grouped_mm"]["speedup"] == pytest.approx(2.0)
    assert ks.statement(t["torch eager"]) == "torch eager: failed: RuntimeError: out of memory"


def test_neither_eager_loop_nor_generate_means_no_speedup_said_once():
    t = rows(arm("grouped_mm", 0.05), arm("ragged_dot", 0.04, backend="jax"))
    for r in t.values():
        assert r["baseline"] is None and math.isnan(r["speedup"])
        assert ks.statement(r) == f"{r['arm']}: no baseline"
    # The reason is said once per point, under its title, not on every row.
    table = ks.speedups(results_frame(arm("grouped_mm", 0.05), arm("ragged_dot", 0.04, backend="jax")))
    md = "\n".join(ks.markdown(table, lambda headers, cells: "\n".join(" | ".join(c) for c in cells)))
    assert md.count("has no eager loop") == 1 and md.count("no baseline") == 2
    html = "".join(ks.html(table, lambda headers, cells, *a, **k: "".join(" | ".join(c) for c in cells), str))
    assert html.count("has no eager loop") == 1


def test_a_skipped_arm_is_shown_with_its_reason():
    t = rows(arm("eager", 0.1), arm("kernels", status="skipped", error=NO_HUB_KERNEL))
    k = t["torch kernels"]
    assert ks.statement(k) == f"torch kernels: skipped: {NO_HUB_KERNEL}"
    assert ks.cells(k)[1:] == ["–", "–", ks.statement(k), "–", "skipped"]


def test_an_arm_left_to_the_other_backend_is_listed_once_from_where_it_ran():
    # one A/B workload run once per backend (scenarios/generate/arms.py): each skips the other's arms
    t = rows(arm("eager", 0.1), arm("eager", backend="jax", status="skipped",
                                    error="experts implementation eager is transformers' (torch): measured with --backend torch"),
             arm("tokamax", status="skipped",
                 error="experts implementation tokamax is the JAX twin's: measured with --backend jax"),
             arm("tokamax", 0.04, backend="jax", kernel="xla"),
             arm(None, backend="jax", loop="hf_generate", status="skipped", error="measured with --backend torch"),
             arm("kernels", status="skipped", error=NO_HUB_KERNEL),
             # a JAX formulation in generate(), from a sweep's cross product: neither backend runs it
             arm("gather", loop="hf_generate", status="skipped", error="measured with --backend jax"),
             arm("gather", backend="jax", loop="hf_generate", status="skipped", error="measured with --backend torch"))
    assert list(t) == ["torch eager", "jax tokamax (xla)", "torch kernels"]
    # a JAX sweep naming no JAX arm runs torch's names on the twin's default formulation
    t = rows(arm("eager", 0.1), arm("grouped_mm", 0.05, backend="jax"))
    assert set(t) == {"torch eager", "jax default"}


# ----------------------------------------------------------------------------- groups


def test_groups_never_mix_unlike_points():
    results = [arm("eager", 0.10, batch_size=8), arm("grouped_mm", 0.05, batch_size=8),
               arm("eager", 0.40, batch_size=64), arm("grouped_mm", 0.10, batch_size=64),
               arm("eager", 0.12, batch_size=8, routing="uniform"), arm("grouped_mm", 0.04, batch_size=8, routing="uniform"),
               arm("eager", 1.0, batch_size=8, routing={"skewed": {"zipf": 1.2}}),   # one arm: no group of its own
               arm("grouped_mm", 0.01, batch_size=8, chips=4)]                       # other hardware: alone too
    tp2 = [arm("eager", 0.2), arm("grouped_mm", 0.05)]
    for r in tp2:   # the same chips (a CPU's vCPUs) split in two ranks: a layout of its own
        r.point["tensor_parallel"] = 2
    t = ks.speedups(results_frame(*results, *tp2))
    assert t["group_id"].nunique() == 4 and len(t) == 8
    speed = {(r["group"], r["arm"]): r["speedup"] for _, r in t.iterrows()}
    b8, b64, uniform = (f"synthetic (full) B={b} I=1024 O=128 bfloat16 eager{extra}"
                        for b, extra in ((8, ""), (64, ""), (8, " routing=uniform")))
    assert speed[(b8, "torch grouped_mm")] == pytest.approx(2.0)
    assert speed[(b64, "torch grouped_mm")] == pytest.approx(4.0)
    assert speed[(uniform, "torch grouped_mm")] == pytest.approx(3.0)
    assert speed[(f"{b8} tp2", "torch grouped_mm")] == pytest.approx(4.0)


def test_the_arm_free_key_ignores_only_the_arm():
    a, b = arm("eager", 0.1).point, arm("grouped_mm", 0.1, loop="hf_generate").point
    assert arm_free_key(a) == arm_free_key(b)
    for change in ({"batch_size": 64}, {"routing": "uniform"}, {"matmul_precision": "high"},
                   {"params": {"decode_loop": "hf_generate", "other": 1}}):
        assert arm_free_key({**a, **change}) != arm_free_key(a), change


def test_a_point_measured_again_counts_its_latest_run():
    t = rows(arm("eager", 0.1), arm("grouped_mm", 0.08, started_at="2026-12-01T00:00:00+00:00"),
             arm("grouped_mm", 0.05, started_at="2026-12-02T00:00:00+00:00"))
    assert len(t) == 2 and t["torch grouped_mm"]["speedup"] == pytest.approx(2.0)


def test_no_table_without_two_arms_or_without_a_named_arm():
    assert ks.speedups(results_frame(arm("eager", 0.1), arm("eager", 0.1, batch_size=64))).empty
    # the same dense point on torch and jax is a backend comparison, not a kernel A/B
    assert ks.speedups(results_frame(arm(None, 0.1), arm(None, 0.08, backend="jax"))).empty
    assert ks.markdown(ks.speedups(results_frame(arm("eager", 0.1))), table) == []


def test_an_arm_generate_would_switch_says_so():
    switched = arm("grouped_mm", 0.05)
    switched.moe["generate_decode_experts_implementation"] = "batched_mm"
    t = rows(arm("eager", 0.1), switched)
    assert ks.cells(t["torch grouped_mm"])[0] == "torch grouped_mm (generate() would decode with batched_mm)"
    assert ks.cells(t["torch eager"])[0] == "torch eager"


# ----------------------------------------------------------------------------- validity and the reports


def test_invalid_results_are_marked():
    t = rows(arm("eager", 0.1), arm("grouped_mm", 0.05, valid=False, invalid_reasons=["cv 0.4 above max_cv 0.1"]))
    assert ks.cells(t["torch grouped_mm"])[-1] == "INVALID: cv 0.4 above max_cv 0.1"
    assert ks.is_marked(t["torch grouped_mm"]) and not ks.is_marked(t["torch eager"])
    t = rows(arm("eager", 0.1, valid=False, invalid_reasons=["drift"]), arm("grouped_mm", 0.05))
    assert ks.cells(t["torch grouped_mm"])[-1] == "valid; baseline INVALID"
    assert ks.is_marked(t["torch grouped_mm"])


def test_the_reports_have_the_section():
    frame = results_frame(arm("eager", 0.1, 0.04), arm("grouped_mm", 0.05, 0.03),
                          arm("kernels", status="skipped", error=NO_HUB_KERNEL),
                          arm("grouped_mm", 0.05, 0.03, valid=False, invalid_reasons=["drift"], batch_size=64),
                          arm("eager", 0.1, 0.04, batch_size=64))
    md = render_report(frame, "markdown")
    section = md[md.index(f"## {ks.TITLE}"):]
    assert "### synthetic (full) B=8 I=1024 O=128 bfloat16 eager · cpu ×1" in section
    assert "| torch grouped_mm | 50.0 (48.5–51.5) | 160 (155–165) | torch grouped_mm vs eager loop: 2.00x (1.90–2.10) " \
           "| faster | valid |" in section
    assert f"torch kernels: skipped: {NO_HUB_KERNEL}" in section and "INVALID: drift" in section
    html = render_report(frame, "html")
    assert f"<h2>{ks.TITLE}</h2>" in html and "torch grouped_mm vs eager loop: 2.00x (1.90–2.10)" in html
    assert html.count('<tr class="invalid"><td>torch grouped_mm</td>') == 1   # batch 64's invalid arm
    plain = render_report(results_frame(arm("eager", 0.1), arm("eager", 0.1, batch_size=64)), "markdown")
    assert ks.TITLE not in plain


def test_the_section_stops_at_max_groups_and_says_how_many_more(monkeypatch):
    monkeypatch.setattr(ks, "MAX_GROUPS", 1)
    t = ks.speedups(results_frame(arm("eager", 0.1), arm("grouped_mm", 0.05),
                                  arm("eager", 0.4, batch_size=64), arm("grouped_mm", 0.1, batch_size=64)))
    md = "\n".join(ks.markdown(t, table))
    assert md.count("### ") == 1 and "B=8 " in md and "… 1 more point(s) with several arms are not shown" in md
