"""Hostile inputs on the result-reading surfaces (issue 32): odd result files, a FIFO among them,
HTML and terminal escape sequences in their text, and budget flags no fleet could mean.

Each must end in a clear one-line error (exit 2, no traceback) or in correct handling: an odd file
is skipped with a warning naming it and every other result is still reported.
"""

from __future__ import annotations

import json
import math
import os
import signal
from pathlib import Path

import pytest
from helpers_cli import run_cli
from helpers_synthetic import make_result, make_serve_result, make_train_result, write_results

from tpubench.records import sanity
from tpubench.records.result import iter_result_files, read_results, write_result

GOOD = [dict(batch_size=8), dict(batch_size=16, accelerator="TPU v6 lite", device="tpu", chips=4)]


def _folder_with(tmp_path: Path, name: str, mutate) -> Path:
    """Two good results and one file made from the first by `mutate` (a point of its own)."""
    folder = tmp_path / "results"
    good = write_results(folder, GOOD)
    data = json.loads(good[0].read_bytes())
    data["point_key"] = "odd-" + name
    mutate(data)
    (folder / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def _set(section: str, key: str, value):
    return lambda d: d[section].__setitem__(key, value)


ODD = {
    "scale_list": (_set("point", "scale", ["a", "b"]), "point.scale"),
    "negative_chips": (_set("environment", "chips", -4), "environment.chips"),
    "chips_text": (_set("environment", "chips", "two"), "environment.chips"),
    "zero_chips": (_set("environment", "chips", 0), "environment.chips"),
    "negative_batch": (_set("point", "batch_size", -8), "point.batch_size"),
    "fractional_batch": (_set("point", "batch_size", 2.5), "point.batch_size"),
    "boolean_batch": (_set("point", "batch_size", True), "point.batch_size"),
    "huge_throughput": (_set("metrics", "output_tokens_per_s", 1e308), "metrics.output_tokens_per_s"),
    "negative_throughput": (_set("metrics", "output_tokens_per_s", -512.0), "metrics.output_tokens_per_s"),
    "negative_latency": (_set("metrics", "e2e_mean_s", -2.0), "metrics.e2e_mean_s"),
    "workload_dict": (_set("point", "workload", {"x": 1}), "point.workload"),
    "accelerator_list": (_set("environment", "accelerator_name", ["H100"]), "environment.accelerator_name"),
    "energy_method_list": (_set("energy", "method", ["measured"]), "energy.method"),
}


@pytest.mark.parametrize("name", sorted(ODD))
def test_an_odd_result_file_is_named_and_skipped(name, tmp_path):
    mutate, field = ODD[name]
    folder = _folder_with(tmp_path, name, mutate)
    warnings = []
    loaded = read_results(folder, warn=warnings.append)
    assert len(loaded) == 2 and name + ".json" not in {f.name for f, _ in loaded}
    assert len(warnings) == 1 and f"skipping {folder / (name + '.json')}" in warnings[0] and field in warnings[0]


# The issue's own cases, through the commands a user types.
@pytest.mark.parametrize("name", ["scale_list", "negative_chips", "negative_batch", "huge_throughput", "chips_text"])
def test_an_odd_result_file_no_longer_takes_down_report_or_budget(name, tmp_path, monkeypatch, capsys):
    mutate, field = ODD[name]
    folder = _folder_with(tmp_path, name, mutate)
    for command in (["report", str(folder)], ["budget", "tokens", str(folder), "--tokens-per-day", "1e9"]):
        code, out, err = run_cli(monkeypatch, capsys, *command)
        assert code == 0, err
        assert f"skipping {folder / (name + '.json')}" in err and field in err
        assert "internal error" not in err and "Traceback" not in err
        # Both good results are still there: the H100 and the TPU v6e.
        assert "H100" in out and "TPU v6e" in out
        assert "-0." not in out.split("## Price sources")[0]     # no negative cost from the odd file


def test_the_rule_accepts_every_kind_of_result_tpubench_writes():
    """No false alarm: offline, serve, training and failed results, a fraction of a chip, NaN metrics."""
    train = make_train_result()
    serve = make_serve_result(scale=None, input_length=None, output_length=None)
    fraction = make_result(accelerator="Trainium2", device="neuron", chips=1)
    fraction.environment["chips"] = 0.5       # one logical NeuronCore of a Trainium chip
    single_token = make_result(output_length=1)   # TPOT is NaN
    for result in (make_result(), train, serve, fraction, single_token, make_result(status="failed")):
        assert sanity.problem(result) is None, sanity.problem(result)


def test_a_result_with_a_ci_below_zero_is_still_usable():
    r = make_result()
    r.metrics["ttft_ci95_low_s"] = -0.001      # a t-interval of a noisy, short sample can dip below 0
    r.metrics["energy_above_idle_j"] = -3.0    # an idle baseline above the loop's mean power
    assert sanity.problem(r) is None


def test_infinity_in_a_result_file_is_skipped_and_named(tmp_path):
    folder = _folder_with(tmp_path, "inf", lambda d: None)
    text = (folder / "inf.json").read_text().replace('"e2e_mean_s": 2.0', '"e2e_mean_s": Infinity')
    (folder / "inf.json").write_text(text)
    warnings = []
    loaded = read_results(folder, warn=warnings.append)
    assert len(loaded) == 2 and len(warnings) == 1 and "inf.json" in warnings[0]


@pytest.fixture
def deadline():
    """Fail instead of hanging: a FIFO read by mistake blocks forever."""
    def expired(*_):
        raise TimeoutError("reading the results folder hung (a FIFO was opened)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this OS")
def test_a_fifo_named_json_is_never_opened(tmp_path, monkeypatch, capsys, deadline):
    folder = tmp_path / "results"
    write_results(folder, GOOD)
    os.mkfifo(folder / "pipe.json")
    assert [f.name for f in iter_result_files(folder)] == sorted(f.name for f in folder.glob("*.json")
                                                                 if f.name != "pipe.json")
    code, out, err = run_cli(monkeypatch, capsys, "report", str(folder))
    assert code == 0 and "H100" in out, err
    # Named directly: one line saying what it is, exit 2.
    code, out, err = run_cli(monkeypatch, capsys, "report", str(folder / "pipe.json"))
    assert code == 2 and "pipe.json" in err and "not a regular file" in err and len(err.strip().splitlines()) == 1


def test_markdown_report_and_budget_never_carry_a_results_html(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "results"
    write_results(folder, [dict(workload="<script>alert(1)</script>", batch_size=8)])
    code, out, err = run_cli(monkeypatch, capsys, "report", str(folder))
    assert code == 0, err
    assert "<script" not in out.lower() and "&lt;script>alert(1)&lt;/script>" in out
    code, out, err = run_cli(monkeypatch, capsys, "budget", "tokens", str(folder), "--tokens-per-day", "1e9")
    assert code == 0 and "<script" not in out.lower() and "&lt;script>" in out
    # HTML escapes every text it writes (report/html.py), figures' titles included: checked by hand,
    # left out here because drawing the figures takes seconds.


ESCAPES = "\x1b[2J\x1b]0;owned\x07\x1b]8;;http://x\x1b\\\x9b31m\u202e\x08\r"


def test_escape_sequences_in_a_result_never_reach_the_terminal(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "results"
    r = make_result(workload="evil" + ESCAPES + "name", batch_size=8)
    r.warnings.append("warn" + ESCAPES)
    write_result(r, folder)
    (folder / ("bad" + "\x1b[31m" + ".json")).write_text("{", encoding="utf-8")   # its name in a warning
    for command in (["report", str(folder)], ["budget", "tokens", str(folder), "--tokens-per-day", "1e9"],
                    ["report", str(folder), "--format", "csv"], ["export", str(folder), "--out",
                                                                  str(tmp_path / "t.csv")]):
        code, out, err = run_cli(monkeypatch, capsys, *command)
        assert code == 0, err
        for text in (out, err):
            assert not any(ch in text for ch in "\x1b\x07\x08\x9b\u202e\r"), (command, repr(text[:300]))
    code, out, err = run_cli(monkeypatch, capsys, "report", str(folder))
    assert "evil[2J]0;owned]8;;http://x\\31mname" in out and "skipping" in err and "bad[31m.json" in err


def test_the_one_escape_helper_strips_controls_and_keeps_text():
    from tpubench.cli import escape
    from tpubench.output.safe_text import markdown_text, terminal_text

    assert terminal_text("a\tb\nc" + ESCAPES + "é✓") == "a\tb\nc[2J]0;owned]8;;http://x\\31mé✓"
    assert escape("[red]x\x1b[0m") == "\\[red]x[0m"
    assert markdown_text("<b>&lt;i&gt; > 1") == "&lt;b>&lt;i&gt; > 1"


def test_the_run_cost_table_strips_escapes(tmp_path):
    from io import StringIO

    from rich.console import Console

    from tpubench.console import render_run_cost

    path = write_result(make_result(workload="w" + ESCAPES, batch_size=8), tmp_path)
    buffer = StringIO()
    render_run_cost(Console(file=buffer, width=300), [path])
    assert "\x1b" not in buffer.getvalue() and "\x9b" not in buffer.getvalue() and "$" in buffer.getvalue()


# ----------------------------------------------------------------------------- budget flags

BASES = {"tokens": ["--tokens-per-day", "1e9"], "train": ["--train-tokens", "1e9"],
         "images": ["--images-per-day", "1e5"]}
FLAGS = [("tokens", "--tokens-per-day"), ("train", "--train-tokens"), ("images", "--images-per-day"),
         ("images", "--max-image-latency-s"), ("tokens", "--output-share"), ("tokens", "--peak-factor"),
         ("images", "--peak-factor"), ("tokens", "--slo-ttft-ms"), ("tokens", "--slo-tpot-ms"),
         ("tokens", "--power-price"), ("tokens", "--pue"), ("tokens", "--grid-gco2-per-kwh"),
         ("tokens", "--months"), ("tokens", "--spot-lost-hours"), ("tokens", "--spot-preemption-rate"),
         ("tokens", "--discount")]


@pytest.fixture(scope="module")
def budget_results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("budget-results")
    write_results(folder, GOOD)
    return folder


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e30", "1e308"])
@pytest.mark.parametrize("kind, flag", FLAGS)
def test_a_budget_flag_no_fleet_could_mean_is_a_one_line_error(kind, flag, value, budget_results, monkeypatch,
                                                               capsys):
    args = [a for a in BASES[kind] if flag != BASES[kind][0]]
    args = args if flag != BASES[kind][0] else []
    code, out, err = run_cli(monkeypatch, capsys, "budget", kind, str(budget_results), *args, flag, value)
    assert code == 2, (out[-300:], err)
    assert err.startswith("error:") and flag in err and len(err.strip().splitlines()) == 1, err
    assert "-9223372036854775808" not in out


def test_tokens_per_day_1e30_no_longer_sizes_minus_nine_quintillion_instances(budget_results, monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "budget", "tokens", str(budget_results), "--tokens-per-day", "1e30")
    assert code == 2 and "--tokens-per-day" in err and "1e+30" in err and "-9223372036854775808" not in out


def test_an_option_needing_more_instances_than_exist_is_left_out_or_refused():
    """A point whose throughput is near zero would need more instances than an int holds: it is left
    out with a note; when every option would, the traffic is what is wrong (exit 2, naming it)."""
    from helpers_synthetic import results_frame

    from tpubench.budget.fleet import MAX_FLEET_INSTANCES
    from tpubench.budget.tokens import plan_budget
    from tpubench.errors import UserError
    from tpubench.money import pricing

    prices = pricing.load_prices()
    crawl = make_result(batch_size=1, input_length=1, output_length=2, ttft_s=1e6, e2e_s=2e6, seed=1)
    fast = make_result(batch_size=8, accelerator="TPU v6 lite", device="tpu", chips=4)
    result = plan_budget(results_frame(crawl, fast), prices, tokens_per_day=1e16, output_share=0.25)
    assert len(result.options) and (result.options["instances"] <= MAX_FLEET_INSTANCES).all()
    assert (result.options["instances"] > 0).all()
    assert any("more than 1e+09 instances" in n for n in result.notes)
    with pytest.raises(UserError) as err:
        plan_budget(results_frame(crawl), prices, tokens_per_day=1e16, output_share=0.25)
    assert err.value.field == "--tokens-per-day"
    assert math.isfinite(result.options["monthly_usd"].max())


def test_a_trend_below_zero_is_a_figure_not_an_odd_file():
    # A serve window's TTFT slope falls below zero when TTFT shrinks over the window.
    from tpubench.records.sanity import _value_problem

    assert _value_problem("ttft_slope_per_s", -0.00103381) is None
    assert _value_problem("output_tokens_per_s", -1.0) == "-1 is negative"
