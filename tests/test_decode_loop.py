"""scenario.decode_loop: tpubench's own loop or transformers' generate() as its users call it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

FIXTURES = Path(__file__).parent / "fixtures"


def _workload(tmp_path: Path, **scenario) -> Path:
    data = yaml.safe_load((FIXTURES / "tiny_moe.yaml").read_text())
    data["scenario"].update(scenario)
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _points(path: Path):
    from tpubench.run.sweep import expand
    from tpubench.run.workload import load_workload

    return expand(load_workload(path), "full", source=str(path))


def test_the_loop_is_a_sweep_axis_carried_in_params_only_when_not_tpubench(tmp_path):
    from tpubench.scenarios.registry import point_label

    plain = _points(_workload(tmp_path))
    both = _points(_workload(tmp_path, decode_loop=["tpubench", "hf_generate"]))
    assert len(both) == 2 * len(plain)
    loops = [p.params.get("decode_loop") for p in both]
    assert loops.count("hf_generate") == len(plain) and loops.count(None) == len(plain)
    # tpubench's loop keeps the key points had before the axis existed (--resume finds them)
    assert {p.key() for p in plain} == {p.key() for p in both if not p.params}
    assert all(("loop=generate()" in point_label(p)) == bool(p.params) for p in both)


def test_a_bad_loop_name_is_one_line_naming_the_field(tmp_path, monkeypatch, capsys):
    from helpers_cli import run_cli

    path = _workload(tmp_path, decode_loop="generate")
    code, out, err = run_cli(monkeypatch, capsys, "validate", str(path))
    assert code == 2 and "scenario.decode_loop" in err and "Traceback" not in out + err


@pytest.mark.parametrize("args, extra, expect", [
    (["--backend", "jax"], {}, "measured with --backend torch"),
    ([], {"execution": {"mode": "compile"}}, "execution.mode eager on one chip"),
])
def test_generate_loop_refused_where_it_would_not_be_what_users_run(tmp_path, monkeypatch, capsys, args, extra, expect):
    from helpers_cli import run_cli

    if "jax" in args:
        pytest.importorskip("jax")
    path = _workload(tmp_path, decode_loop="hf_generate")
    data = yaml.safe_load(path.read_text())
    data.update(extra)
    path.write_text(yaml.safe_dump(data))
    code, out, err = run_cli(monkeypatch, capsys, "run", str(path), "--out", str(tmp_path / "res"), *args)
    assert code == 2, out + err
    assert f"{path}: scenario.decode_loop: " in err and expect in err and "Traceback" not in out + err
    assert not list((tmp_path / "res").glob("*.json"))


@pytest.mark.slow   # builds a tiny model, two points
def test_generate_loop_makes_the_same_tokens_with_one_stamp_per_token(tmp_path, monkeypatch, capsys):
    from helpers_cli import run_cli

    path = _workload(tmp_path, decode_loop=["tpubench", "hf_generate"], batch_size=2, output_length=5)
    out = tmp_path / "res"
    code, text, err = run_cli(monkeypatch, capsys, "run", str(path), "--out", str(out))
    assert code == 0, text + err
    results = {json.loads(f.read_text())["point"]["params"].get("decode_loop", "tpubench"): json.loads(f.read_text())
               for f in out.glob("*.json")}
    ours, hf = results["tpubench"], results["hf_generate"]
    b = hf["point"]["batch_size"]
    assert hf["status"] == "ok" and hf["metrics"]["generated_tokens"] == b * 5   # the first iteration's, checked
    assert len(hf["samples"]["tpot_s"]) == hf["metrics"]["iterations"]
    assert all(t > 0 for t in hf["samples"]["ttft_s"])
    # greedy on the same weights and prompt: generate() picks the tokens tpubench's loop picks
    assert hf["numerics"]["greedy_tokens"] == ours["numerics"]["greedy_tokens"]
    assert hf["numerics"]["top_ids"] == ours["numerics"]["top_ids"]
    assert hf["numerics"]["top_values"] == pytest.approx(ours["numerics"]["top_values"], abs=1e-4)
    assert "generate_decode_experts_implementation" not in hf["moe"]   # the loop is generate() itself
