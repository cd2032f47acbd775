"""MoE routing control (model.routing), per-expert load in results, TorchTPU's eager modes refused
off a TPU, and the note on what transformers' generate() would run instead (issue 20)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from tpubench.errors import UserError
from tpubench.models.routing import expert_load, schedule

FIXTURES = Path(__file__).parent / "fixtures"


def _loads(table: np.ndarray, n_experts: int) -> np.ndarray:
    return np.bincount(table.reshape(-1), minlength=n_experts)


# ----------------------------------------------------------------------------- schedules


def test_uniform_is_balanced_within_5_percent_over_a_few_thousand_tokens():
    for n_experts, k in ((128, 8), (32, 4), (60, 4)):
        table = schedule("uniform", 2, n_experts, k)
        for start, n in ((0, 2000), (1234, 3000), (4000, 2500)):   # a window crossing the period too
            window = np.take(table[1], np.arange(start, start + n) % table.shape[1], axis=0)
            load = _loads(window, n_experts)
            assert load.max() / load.mean() <= 1.05, (n_experts, k, start)
            assert all(len(set(row)) == k for row in window.tolist())   # a token's experts are distinct


def test_hot_puts_the_asked_share_on_the_hot_set():
    table = schedule({"hot": {"experts": 4, "share": 0.3}}, 1, 32, 8)[0]
    load = _loads(table, 32)
    assert load[:4].sum() / load.sum() == pytest.approx(0.3, abs=1e-3)
    assert all(len(set(row)) == 8 for row in table.tolist())
    # the hot experts share their part evenly, and so do the cold ones
    assert load[:4].max() - load[:4].min() <= 1 and load[4:].max() - load[4:].min() <= 1


def test_hot_share_a_token_cannot_reach_is_refused_naming_the_field():
    with pytest.raises(UserError) as exc:
        schedule({"hot": {"experts": 2, "share": 0.5}}, 1, 32, 8)   # 4 of 8 experts hot, only 2 exist
    assert exc.value.field == "model.routing.hot.share"
    assert "at most 0.25" in exc.value.message


def test_skewed_follows_zipf_order():
    table = schedule({"skewed": {"zipf": 1.2}}, 1, 16, 2)[0]
    load = _loads(table, 16)
    assert load[0] > load[3] > load[15]
    assert load.max() / load.mean() > 2


def test_trace_draws_in_proportion_and_checks_its_shape():
    layers = [[8, 4, 2, 2], [1, 1, 1, 1]]
    table = schedule({"trace": {"file": "t.json", "layers": layers}}, 2, 4, 1)
    shares = _loads(table[0], 4) / table.shape[1]
    assert shares == pytest.approx([0.5, 0.25, 0.125, 0.125], abs=0.03)
    with pytest.raises(UserError, match="model has 3 MoE layers"):
        schedule({"trace": {"file": "t.json", "layers": layers}}, 3, 4, 1)
    with pytest.raises(UserError, match="the model has 8"):
        schedule({"trace": {"file": "t.json", "layers": layers}}, 2, 8, 1)


def test_expert_load_statistics_by_hand():
    # one MoE layer, 4 experts, k=1: prefill of 4 tokens [0,0,1,2], then two decode steps of 2 tokens
    steps = [np.array([[[0], [0], [1], [2]]]), np.array([[[0], [3]]]), np.array([[[0], [0]]])]
    load = expert_load(steps, 4, iterations=3)
    assert load["expert_load"] == [[15, 3, 3, 3]]        # [5,1,1,1] per iteration, x3
    assert load["expert_load_imbalance"] == pytest.approx(5 / 2)          # max 5, mean 2
    assert load["decode_expert_load_imbalance"] == pytest.approx(3 / 1)   # decode [3,0,0,1]: max 3, mean 1
    assert load["distinct_experts_per_decode_step"] == pytest.approx(1.5)  # 2 then 1


# ----------------------------------------------------------------------------- the workload field


def _workload(tmp_path: Path, routing, **model) -> Path:
    data = yaml.safe_load((FIXTURES / "tiny_moe.yaml").read_text())
    data["model"]["routing"] = routing
    data["model"]["config"].update(model)
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_routing_is_a_sweep_axis_with_a_trace_read_on_load(tmp_path):
    from tpubench.run.sweep import expand
    from tpubench.run.workload import load_workload

    (tmp_path / "hist.json").write_text(json.dumps({"layers": [[3, 1, 0, 0]]}))
    path = _workload(tmp_path, ["natural", "uniform", {"skewed": {"zipf": 1.1}}, {"trace": "hist.json"}])
    points = expand(load_workload(path))
    routings = [p.routing for p in points if p.batch_size == 1]
    assert routings == ["natural", "uniform", {"skewed": {"zipf": 1.1}},
                        {"trace": {"file": "hist.json", "layers": [[3.0, 1.0, 0.0, 0.0]]}}]
    assert len({p.key() for p in points}) == len(points)   # --resume tells the routings apart
    from tpubench.scenarios.generate.sweep import label
    skewed = next(p for p in points if p.routing == {"skewed": {"zipf": 1.1}})
    assert "routing=zipf1.1" in label(skewed)


@pytest.mark.parametrize("routing, content, expect", [
    ({"trace": "missing.json"}, None, "does not exist"),
    ({"trace": "bad.json"}, "{not json", "not readable JSON"),
    ({"trace": "bad.json"}, json.dumps({"layers": [[1, -2, 0, 0]]}), "layers[0] must be a list of non-negative"),
    ({"hot": {"experts": 2, "share": 1.5}}, None, "less than or equal to 1"),
    ({"skewed": {"zpif": 1}}, None, "model.routing.skewed.zpif: unknown key 'zpif'; did you mean 'zipf'?"),
    ({"skewed": {"s": 1}}, None, "model.routing.skewed.zipf: required field is missing"),
    ({"skewd": {"zipf": 1}}, None, "expected natural, uniform or one of"),
])
def test_bad_routing_is_one_line_naming_file_line_and_field(tmp_path, routing, content, expect):
    from tpubench.run.workload import load_workload

    if content is not None:
        (tmp_path / "bad.json").write_text(content)
    path = _workload(tmp_path, routing)
    with pytest.raises(UserError) as exc:
        load_workload(path)
    line = exc.value.one_line()
    assert str(path) in line and "model.routing" in line and expect in line and "\n" not in line


# ----------------------------------------------------------------------------- on the models


def _point(tmp_path, routing, batch=2, input_length=8, output_length=4, **model):
    from dataclasses import replace

    from tpubench.run.sweep import expand
    from tpubench.run.workload import load_workload

    point = next(p for p in expand(load_workload(_workload(tmp_path, routing, **model))) if p.batch_size == batch)
    return replace(point, input_length=input_length, output_length=output_length)


def _routes(backend, point):
    from tpubench.backends import get_backend
    from tpubench.scenarios.generate.measure import make_prompt, run_iteration

    be = get_backend(backend)
    built = be.build(point)
    prompt = make_prompt(0, point.batch_size, point.input_length, point.model_config["vocab_size"])
    session = be.session(built, point, prompt)
    with session:
        steps, n_experts = session.expert_routes(lambda: run_iteration(session, point.output_length))
    return steps, n_experts


def test_uniform_routing_on_the_torch_model_is_balanced(tmp_path):
    point = _point(tmp_path, "uniform", batch=2, input_length=100, output_length=3,
                   num_experts=8, num_experts_per_tok=2, num_hidden_layers=2)
    steps, n_experts = _routes("torch", point)
    load = expert_load(steps, n_experts)
    assert load["expert_load_imbalance_max"] <= 1.05
    assert load["distinct_experts_per_decode_step"] == 4   # 2 tokens x top-2, round robin


@pytest.mark.slow   # two frameworks' builds and JAX's compiles: ~20 s a case on the shared CPU
@pytest.mark.parametrize("routing", ["natural", {"skewed": {"zipf": 1.3}}, {"hot": {"experts": 2, "share": 0.5}}])
def test_torch_and_jax_pick_the_same_experts(tmp_path, routing):
    pytest.importorskip("jax")
    point = _point(tmp_path, routing, batch=2, input_length=6, output_length=4,
                   num_experts=8, num_experts_per_tok=2, num_hidden_layers=2)
    torch_steps, _ = _routes("torch", point)
    jax_steps, _ = _routes("jax", point)
    assert len(torch_steps) == len(jax_steps) == 4
    for t, j in zip(torch_steps, jax_steps):
        np.testing.assert_array_equal(np.sort(t, axis=-1), np.sort(j, axis=-1))


def test_routing_on_a_dense_model_is_refused(tmp_path):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from tpubench.models.torch_routing import install_routing

    model = Qwen3ForCausalLM(Qwen3Config(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                         num_key_value_heads=1, head_dim=8, intermediate_size=16, vocab_size=32))
    assert install_routing(model, "natural", "qwen3", 0) is None
    with pytest.raises(UserError, match="needs a mixture-of-experts model"):
        install_routing(model, "uniform", "qwen3", 0)


@pytest.mark.slow   # runs a point: builds a tiny model
def test_a_generate_result_carries_per_expert_load(tmp_path, monkeypatch, capsys):
    from helpers_cli import run_cli

    path = _workload(tmp_path, "uniform", num_experts=4, num_experts_per_tok=2)
    out = tmp_path / "res"
    code, text, err = run_cli(monkeypatch, capsys, "run", str(path), "--out", str(out))
    assert code == 0, text + err
    results = [json.loads(f.read_text()) for f in sorted(out.glob("*.json"))]
    assert results
    for r in results:
        b, i, o = r["point"]["batch_size"], r["point"]["input_length"], r["point"]["output_length"]
        tokens = r["metrics"]["iterations"] * b * (i + o - 1)   # prefill tokens + one per decode step
        k = r["point"]["model_config"]["num_experts_per_tok"]
        assert [sum(layer) for layer in r["moe"]["expert_load"]] == [tokens * k]   # one MoE layer
        # round robin: every expert gets floor or ceil of one iteration's N*k/E
        n_experts, slots = r["moe"]["n_experts"], b * (i + o - 1) * k
        assert r["metrics"]["expert_load_imbalance"] <= -(-slots // n_experts) / (slots / n_experts) + 1e-9
        # the roofline counted the experts the decode really touched
        assert r["metrics"]["roofline_distinct_experts"] == r["moe"]["distinct_experts_per_decode_step"]


# ----------------------------------------------------------------------------- eager modes, generate()


def test_torchtpu_eager_modes_are_refused_off_a_tpu():
    from tpubench.backends import get_backend

    for mode in ("eager_fused", "eager_sync"):
        with pytest.raises(UserError) as exc:
            get_backend("torch", "cpu").check_execution_mode(mode)
        assert exc.value.field == "execution.mode" and "--device tpu" in exc.value.message
        with pytest.raises(UserError):
            get_backend("jax").check_execution_mode(mode)
    get_backend("torch", "cpu").check_execution_mode("compile")   # the others pass


def test_eager_modes_set_their_variables_in_a_fresh_process_only_on_a_tpu():
    from tpubench.backends.torch import TorchBackend

    point = type("P", (), {"execution_mode": "eager_fused"})()
    env = TorchBackend("tpu").process_environment(point)
    assert env == {"TORCH_TPU_DEFER_AND_FUSE": "1"}
    point.execution_mode = "eager_sync"
    assert TorchBackend("tpu").process_environment(point) == {"TORCH_TPU_LAUNCH_BLOCKING": "1"}
    point.execution_mode = "eager"
    assert TorchBackend("tpu").process_environment(point) == {}


def test_workload_refuses_eager_fused_on_cpu_before_running(tmp_path, monkeypatch, capsys):
    from helpers_cli import run_cli

    data = yaml.safe_load((FIXTURES / "tiny_moe.yaml").read_text())
    data["execution"] = {"mode": ["eager", "eager_fused"]}
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data))
    code, out, err = run_cli(monkeypatch, capsys, "run", str(path), "--out", str(tmp_path / "res"))
    assert code == 2
    assert f"{path}: execution.mode: execution mode eager_fused is a TorchTPU eager mode" in err
    assert "Traceback" not in out + err
    assert not list((tmp_path / "res").glob("*.json"))   # refused before any point ran


def test_generate_difference_is_named_where_generate_would_switch():
    from tpubench.models.torch_models import generate_decode_note

    note = generate_decode_note("cuda", {"": "grouped_mm"})
    assert "batched_mm" in note and "generate()" in note and "cuda" in note
    assert generate_decode_note("cpu", {"": "grouped_mm"}) is None     # generate() keeps grouped_mm on CPU
    assert generate_decode_note("tpu", {"": "batched_mm"}) is None
    assert generate_decode_note("tpu", {"": "eager"}) is None


@pytest.mark.slow   # runs a point: builds a tiny model
def test_generate_difference_reaches_the_result(tmp_path, monkeypatch, capsys):
    """A session that reports the note (a non-CPU device) puts it in the result's warnings and moe."""
    from tpubench.backends import torch as torch_backend

    monkeypatch.setattr(torch_backend, "generate_decode_note", lambda device, impls: f"NOTE {sorted(impls.values())}")
    from helpers_cli import run_cli

    data = yaml.safe_load((FIXTURES / "tiny_moe.yaml").read_text())
    data["model"]["experts_implementation"] = "grouped_mm"
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data))
    code, out, err = run_cli(monkeypatch, capsys, "run", str(path), "--scale", "small", "--out",
                             str(tmp_path / "res"))
    assert code == 0, out + err
    result = json.loads(next((tmp_path / "res").glob("*.json")).read_text())
    assert "NOTE ['grouped_mm']" in result["warnings"]
    assert result["moe"]["generate_decode_experts_implementation"] == "batched_mm"


@pytest.mark.slow   # runs a training point: builds a tiny model
def test_a_train_result_carries_per_expert_load_under_routing(tmp_path, monkeypatch, capsys):
    from helpers_cli import run_cli

    data = yaml.safe_load((FIXTURES / "tiny_moe.yaml").read_text())
    data["model"]["routing"] = {"hot": {"experts": 1, "share": 0.5}}
    data.pop("scales")
    data["scenario"] = {"kind": "train", "batch_size": 2, "sequence_length": 8, "gradient_accumulation": 2,
                        "precision": "fp32"}
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out, err = run_cli(monkeypatch, capsys, "run", str(path), "--out", str(tmp_path / "res"))
    assert code == 0, out + err
    result = json.loads(next((tmp_path / "res").glob("*.json")).read_text())
    load = result["moe"]["expert_load"]
    steps = result["metrics"]["iterations"]
    # one MoE layer, top-2 of 4 experts: 2 x 8 tokens per micro-batch, 2 micro-batches a step
    assert [sum(layer) for layer in load] == [2 * 8 * 2 * 2 * steps]
    assert load[0][0] / sum(load[0]) == pytest.approx(0.5)   # the hot expert took the asked share


def test_report_draws_a_heat_map_and_names_the_generate_difference():
    import pandas as pd

    from tpubench.output.report.data import generate_decode_notes
    from tpubench.output.report.figures import moe_figures

    results = pd.DataFrame([
        {"status": "ok", "workload": "w", "scale": "full", "backend": "torch", "device": "cuda", "batch_size": 8,
         "routing": "uniform", "expert_load_imbalance": 1.0, "expert_load_json": json.dumps([[4, 4], [3, 5]]),
         "warnings": "decode used experts implementation grouped_mm; transformers' generate() would switch it"},
        {"status": "ok", "workload": "w", "scale": "full", "backend": "torch", "device": "cpu", "batch_size": 8,
         "routing": "natural", "expert_load_imbalance": float("nan"), "expert_load_json": None, "warnings": ""},
    ])
    figures = moe_figures(type("D", (), {"results": results})())
    assert [f.id for f in figures] == ["expert-load-0"]
    assert "routing uniform" in figures[0].caption
    notes = generate_decode_notes(results)
    assert len(notes) == 1 and "on cuda" in notes[0] and "batched_mm" in notes[0]


# ----------------------------------------------------------------------------- kernel arms


def test_a_jax_arm_on_torch_is_a_one_line_refusal(tmp_path):
    from dataclasses import replace

    from tpubench.backends import get_backend

    point = replace(_point(tmp_path, "natural"), experts_implementation="ragged_dot")
    with pytest.raises(UserError) as exc:
        get_backend("torch", "cpu").build(point)
    assert exc.value.field == "model.experts_implementation" and "--backend jax" in exc.value.message


@pytest.mark.slow   # starts a fresh process (a world of one rank)
def test_an_eager_mode_point_runs_in_a_fresh_process_with_its_variable_set(tmp_path, monkeypatch, capsys):
    """The CPU stands in for a TPU (the refusal is lifted): the point runs in a world of one, whose
    process had TORCH_TPU_LAUNCH_BLOCKING=1 before torch was imported (its session checks it and fails
    the point otherwise), and the result records the variable."""
    import tempfile

    from helpers_cli import run_cli

    from tpubench.backends.torch import TorchBackend

    monkeypatch.setattr(TorchBackend, "check_execution_mode", lambda self, mode: None)
    monkeypatch.delenv("TORCH_TPU_LAUNCH_BLOCKING", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    data = yaml.safe_load((FIXTURES / "tiny_moe.yaml").read_text())
    data["execution"] = {"mode": "eager_sync"}
    data["parallel"] = {"collective_timeout_s": 30}
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data))
    code, out, err = run_cli(monkeypatch, capsys, "run", str(path), "--scale", "small", "--out", str(tmp_path / "res"))
    assert code == 0, out + err
    result = json.loads(next((tmp_path / "res").glob("*.json")).read_text())
    assert result["status"] == "ok", result["error"]
    assert result["environment"]["execution_mode_environment"] == {"TORCH_TPU_LAUNCH_BLOCKING": "1"}
    assert result["environment"]["world_size"] == 1
