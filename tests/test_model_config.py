"""Model config values are checked before anything is built, from a table kept in step with
transformers; the sweep size is bounded; names are safe. `validate` imports neither torch nor
transformers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers_cli import run_cli as cli

from tpubench.errors import UserError
from tpubench.models.config_table import FAMILIES, generate_table, load_table
from tpubench.run.sweep import expand
from tpubench.run.workload import load_workload

REPO = Path(__file__).resolve().parents[1]
# The shipped workloads with a transformers `model` block (a server's, or a diffusion pipeline's
# written-out components, have none).
SHIPPED = sorted(p for p in (REPO / "workloads").glob("*.yaml") if "model" in (yaml.safe_load(p.read_text()) or {}))


def edited(tmp_path, source: Path, edit) -> Path:
    data = yaml.safe_load(source.read_text())
    edit(data)
    path = tmp_path / source.name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def error_of(path: Path) -> str:
    with pytest.raises(UserError) as info:
        load_workload(path)
    msg = info.value.one_line()
    assert "\n" not in msg and str(path) in msg
    return msg


def test_table_is_in_step_with_installed_transformers():
    fresh = generate_table()
    shipped = load_table()
    assert set(shipped["families"]) == set(FAMILIES)
    # A newer transformers adds model types (known_family asks it for those); it must not lose any.
    assert set(shipped["model_types"]) <= set(fresh["model_types"])
    for key in ("layer_types", "mlp_layer_types", "rope_types", "families"):
        assert fresh[key] == shipped[key], (
            f"tpubench/data/model_configs.json '{key}' differs from transformers {fresh['transformers_version']} "
            f"(table made with {shipped['transformers_version']}): run python -m tpubench.models.config_table")


@pytest.mark.parametrize("workload", SHIPPED, ids=lambda p: p.stem)
def test_shipped_configs_pass_the_table_and_transformers(workload):
    from tpubench.models.torch_models import hf_config

    w = load_workload(workload)
    for scale in ["full", *w.scales]:
        config = hf_config(expand(w, scale)[0])      # transformers accepts what the table accepted
        assert config.num_hidden_layers == {**w.model.config, **(w.scales[scale].config if scale != "full" else {})}[
            "num_hidden_layers"]


def _set(*path, value):
    def edit(data):
        node = data
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
    return edit


def _rename(*path, new):
    def edit(data):
        node = data
        for part in path[:-1]:
            node = node[part]
        node[new] = node.pop(path[-1])
    return edit


@pytest.mark.parametrize("workload", SHIPPED, ids=lambda p: p.stem)
def test_unknown_keys_are_refused_everywhere_with_a_suggestion(tmp_path, workload):
    data = yaml.safe_load(workload.read_text())
    key = "num_hidden_layers"
    msg = error_of(edited(tmp_path, workload, _rename("model", "config", key, new="num_hiden_layers")))
    assert "model.config.num_hiden_layers" in msg and "did you mean 'num_hidden_layers'" in msg
    if "small" in data.get("scales", {}):
        msg = error_of(edited(tmp_path, workload, _rename("scales", "small", "config", key, new="num_hidden_layer")))
        assert "scales.small.config.num_hidden_layer" in msg and "did you mean 'num_hidden_layers'" in msg
    rope = data["model"]["config"].get("rope_parameters")
    if rope is not None:
        nested = all(isinstance(v, dict) for v in rope.values()) and "rope_type" not in rope
        path = ("model", "config", "rope_parameters") + ((next(iter(rope)),) if nested else ())
        msg = error_of(edited(tmp_path, workload, _set(*path, "rope_thetta", value=1.0)))
        assert ".rope_thetta" in msg and "did you mean 'rope_theta'" in msg


GEMMA = REPO / "workloads" / "gemma4_moe.yaml"
QWEN = REPO / "workloads" / "qwen3_moe.yaml"


@pytest.mark.parametrize("source, edit, field, says", [
    (GEMMA, _set("model", "config", "hidden_size", value="2816"), "model.config.hidden_size", "expected an integer"),
    (GEMMA, _set("model", "config", "num_hidden_layers", value="thirty"), "model.config.num_hidden_layers", "integer"),
    (GEMMA, _set("scales", "small", "config", "num_hidden_layers", value=5), "scales.small.config.layer_types",
     "6 entries for num_hidden_layers=5"),
    (GEMMA, _set("model", "config", "num_hidden_layers", value=100000), "model.config.num_hidden_layers", "out of range"),
    (QWEN, _set("model", "config", "num_hidden_layers", value=10**15), "model.config.num_hidden_layers", "out of range"),
    (QWEN, _set("model", "config", "num_hidden_layers", value="1e15"), "model.config.num_hidden_layers", "integer"),
    (QWEN, _set("model", "config", "num_hidden_layers", value=True), "model.config.num_hidden_layers", "integer"),
    (QWEN, _set("model", "config", "num_experts_per_tok", value=200), "model.config.num_experts_per_tok",
     "exceeds the number of experts"),
    (QWEN, _set("model", "config", "num_key_value_heads", value=5), "model.config.num_key_value_heads", "multiple"),
    (QWEN, _set("model", "config", "norm_topk_prob", value="yes"), "model.config.norm_topk_prob", "true or false"),
    (QWEN, _set("model", "config", "rope_parameters", "rope_type", value="yarn"), "model.config.rope_parameters",
     "needs factor, original_max_position_embeddings"),
    (GEMMA, _set("model", "config", "layer_types", 0, value="slidin_attention"), "model.config.layer_types.0",
     "did you mean 'sliding_attention'"),
    (GEMMA, _set("model", "config", "use_bidirectional_attention", value="text"),
     "model.config.use_bidirectional_attention", "one of 'all', 'vision'"),
    (GEMMA, _set("model", "config", "rope_parameters", "full_attention", "partial_rotary_factor", value=4),
     "model.config.rope_parameters.full_attention.partial_rotary_factor", "at most 1"),
    (QWEN, _set("model", "family", value="qwen3moe"), "model.family", "did you mean 'qwen3_moe'"),
])
def test_bad_config_values_are_one_line_user_errors(tmp_path, source, edit, field, says):
    msg = error_of(edited(tmp_path, source, edit))
    assert f": {field}: " in msg and says in msg, msg


def test_errors_transformers_raises_at_build_are_user_errors():
    from tpubench.models.torch_models import hf_config

    point = expand(load_workload(QWEN), "small")[0]
    # The table does not know every class validator: rotary embeddings need an even head_dim.
    bad = type(point)(**{**point.to_dict(), "model_config": {**point.model_config, "head_dim": 63}})
    with pytest.raises(UserError) as info:
        hf_config(bad)
    assert info.value.field == "model.config" and "transformers rejected the config" in info.value.one_line()


@pytest.mark.slow
def test_validate_answers_without_torch_or_transformers():
    code = ("import sys; from tpubench.cli import main; sys.argv = ['tpubench', 'validate', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
            "heavy = [m for m in ('torch', 'transformers', 'jax') if m in sys.modules]\n"
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code, *map(str, SHIPPED)], check=True, timeout=60)


def test_sweep_above_the_limit_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    big = edited(tmp_path, QWEN, lambda d: d["scenario"].update(
        batch_size=list(range(1, 31)), input_length=list(range(1, 31)), output_length=list(range(1, 31))))
    for command in ("validate", "run"):
        code, out, err = cli(monkeypatch, capsys, command, str(big), "--out", str(tmp_path / "r")) \
            if command == "run" else cli(monkeypatch, capsys, command, str(big))
        assert code == 2, (out, err)
        assert "27,000 points (batch_size 30 x input_length 30 x output_length 30)" in err
        assert "--max-points" in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()
    code, out, _ = cli(monkeypatch, capsys, "validate", str(big), "--max-points", "27000")
    assert code == 0 and "full: 27,000 points" in out


@pytest.mark.parametrize("name", ["=cmd|' /C calc'!A0", "+1", "-x", "@SUM(A1)", "a b", "a/b", "x" * 65, "<b>"])
def test_unsafe_workload_names_are_refused(tmp_path, name):
    msg = error_of(edited(tmp_path, QWEN, _set("name", value=name)))
    assert ": name: " in msg and "not a safe name" in msg


def test_unsafe_scale_names_are_refused(tmp_path):
    msg = error_of(edited(tmp_path, QWEN, _rename("scales", "small", new="=small")))
    assert "not a safe name" in msg


def test_shipped_table_is_plain_json():
    data = json.loads((REPO / "tpubench" / "data" / "model_configs.json").read_text())
    assert data["families"]["qwen3_moe"]["keys"]["num_experts"] == ["int"]


def rope_blocks(config: dict) -> list[tuple]:
    """The path of every rope_parameters block in a model config (one, or one per layer type)."""
    rope = config.get("rope_parameters") or {}
    nested = rope and all(isinstance(v, dict) for v in rope.values()) and "rope_type" not in rope
    return [("rope_parameters", layer) for layer in rope] if nested else [("rope_parameters",)] if rope else []


@pytest.mark.parametrize("workload", SHIPPED, ids=lambda p: p.stem)
@pytest.mark.parametrize("value", [{"rope_type": "default"}, ["default"]], ids=["mapping", "list"])
def test_rope_type_of_the_wrong_type_is_one_line(tmp_path, monkeypatch, capsys, workload, value):
    # A mapping is unhashable: it used to reach a dict lookup and crash validate with a TypeError.
    blocks = rope_blocks(yaml.safe_load(workload.read_text()).get("model", {}).get("config", {}))
    if not blocks:
        pytest.skip("no rope_parameters in this workload")
    path = edited(tmp_path, workload, _set("model", "config", *blocks[0], "rope_type", value=value))
    code, out, err = cli(monkeypatch, capsys, "validate", str(path))
    assert code == 2 and err.count("\n") == 1 and "internal error" not in err, err
    assert f"model.config.{'.'.join(blocks[0])}.rope_type: unknown rope_type" in err


SERVE = REPO / "workloads" / "serve_local.yaml"


def test_serve_workload_without_a_model(tmp_path, monkeypatch, capsys):
    # Launching model 'build' needs the model block: refused at validate, before any server starts.
    no_model = edited(tmp_path, SERVE, lambda d: d.pop("model"))
    code, out, err = cli(monkeypatch, capsys, "validate", str(no_model))
    assert code == 2 and err.count("\n") == 1 and "internal error" not in err, err
    assert "scenario.server.launch.model: 'build' serves the workload's model" in err
    # A running server needs no model block: valid, and validate says whose model it is.
    at_url = edited(tmp_path, SERVE, lambda d: (d.pop("model"), d["scenario"].update(
        server={"url": "http://127.0.0.1:8000", "hardware": {"accelerator": "H100", "chips": 8}})))
    code, out, err = cli(monkeypatch, capsys, "validate", str(at_url))
    assert code == 0 and "internal error" not in err, err
    assert "serve_local (the server's model)" in out
