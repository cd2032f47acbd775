"""`tpubench run --model ID|FOLDER` (issue 50): the workload a model's own config describes, written
beside the results and run from that file, so the run is reproducible and editable. The configs
are real public config.json files (tests/fixtures/model_configs/SOURCES.md); no network: a Hub id
is read from a Hugging Face cache folder made here, offline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers_cli import click_command, run_cli, validate  # noqa: F401 (fixtures)

from tpubench.errors import UserError
from tpubench.run.from_model import ModelRun, workload_for, workload_name
from tpubench.run.sweep import expand
from tpubench.run.workload import load_workload

CONFIGS = Path(__file__).resolve().parent / "fixtures" / "model_configs"
QWEN3_MOE = CONFIGS / "qwen3-30b-a3b"          # Qwen/Qwen3-30B-A3B's config.json
QWEN3 = CONFIGS / "qwen3-8b"                   # Qwen/Qwen3-8B's


def written(tmp_path: Path, model: Path | str, **flags) -> tuple[Path, dict]:
    path, _ = workload_for(ModelRun(str(model), **flags), tmp_path)
    return path, yaml.safe_load(path.read_text())


@pytest.mark.parametrize("folder, family", [(QWEN3_MOE, "qwen3_moe"), (QWEN3, "qwen3")])
def test_the_written_workload_is_the_config_and_validates(tmp_path, validate, folder, family):
    path, data = written(tmp_path, folder)
    source = json.loads((folder / "config.json").read_text())
    assert data["model"]["family"] == family and data["model"]["weights"] == "random"
    assert data["model"]["dtype"] == source["torch_dtype"] == "bfloat16"
    config = data["model"]["config"]
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
                "intermediate_size", "vocab_size", "max_position_embeddings"):
        assert config[key] == source[key], key
    assert config["rope_parameters"]["rope_theta"] == source["rope_theta"]     # transformers' v5 spelling
    if family == "qwen3_moe":
        assert (config["num_experts"], config["num_experts_per_tok"], config["moe_intermediate_size"]) == (128, 8, 768)
    assert not {"architectures", "torch_dtype", "transformers_version", "bos_token_id", "eos_token_id"} & set(config)
    code, err = validate(path)
    assert code == 0, err
    assert path.read_text().startswith(f"# Written by `tpubench run --model {folder}`")


def test_the_small_scale_is_the_same_architecture_shrunk(tmp_path):
    _, data = written(tmp_path, QWEN3_MOE)
    small = data["scales"]["small"]
    assert small["dtype"] == "float32"
    assert small["config"] == {"vocab_size": 8192, "hidden_size": 512, "intermediate_size": 1536,
                               "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 1,
                               "max_position_embeddings": 4096, "moe_intermediate_size": 192,
                               "num_experts_per_tok": 4, "head_dim": 64, "num_experts": 32}
    assert small["scenario"] == {"input_length": 128, "output_length": 32}   # lengths not given: a smoke test's


def test_lengths_given_are_kept_at_the_small_scale(tmp_path):
    path, data = written(tmp_path, QWEN3, input_length=300, output_length=20)
    assert "scenario" not in data["scales"]["small"]
    w = load_workload(path)
    assert {(p.input_length, p.output_length) for p in expand(w, "small")} == {(300, 20)}


def test_the_flags_are_the_sweep(tmp_path):
    path, data = written(tmp_path, QWEN3, batch_size=(1, 2, 4), input_length=512, output_length=64)
    assert data["scenario"] == {"kind": "generate", "batch_size": [1, 2, 4], "input_length": 512, "output_length": 64}
    points = expand(load_workload(path))
    assert sorted(p.batch_size for p in points) == [1, 2, 4]


def test_train_takes_the_input_length_as_its_sequence_length(tmp_path):
    path, data = written(tmp_path, QWEN3, kind="train", batch_size=(2,), input_length=256)
    assert data["scenario"] == {"kind": "train", "batch_size": 2, "sequence_length": 256}
    load_workload(path)
    with pytest.raises(UserError, match="scenario train has no output length"):
        workload_for(ModelRun(str(QWEN3), kind="train", output_length=8), tmp_path)
    with pytest.raises(UserError, match="'serve' is not a scenario --model runs"):
        workload_for(ModelRun(str(QWEN3), kind="serve"), tmp_path)


def test_the_same_request_reuses_its_file_and_another_gets_a_new_one(tmp_path):
    first, _ = written(tmp_path, QWEN3)
    again, _ = written(tmp_path, QWEN3)
    other, _ = written(tmp_path, QWEN3, batch_size=(4,))
    assert again == first and other != first and other.name == "qwen3-8b-1.yaml"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["qwen3-8b-1.yaml", "qwen3-8b.yaml"]


def test_names_from_ids_and_folders():
    assert workload_name("Qwen/Qwen3-30B-A3B") == "qwen3-30b-a3b"
    assert workload_name("meta-llama/Llama-3.1-8B-Instruct") == "llama-3.1-8b-instruct"
    assert workload_name(str(QWEN3)) == "qwen3-8b"


@pytest.mark.parametrize("args, field, words", [
    ((), "WORKLOAD", "name a workload file"),
    (("workloads/qwen3_moe.yaml", "--batch-size", "2"), "--batch-size", "applies with --model"),
    (("workloads/qwen3_moe.yaml", "--model", str(QWEN3)), "--model", "or --model, not both"),
    (("--model", str(CONFIGS)), "--model", "cannot read the config of"),      # a folder without config.json
])
def test_run_refuses_what_it_cannot_run_in_one_line(monkeypatch, capsys, tmp_path, args, field, words):
    code, out, err = run_cli(monkeypatch, capsys, "run", *args, "--out", str(tmp_path))
    assert code == 2 and err.startswith(f"error: {field}: ") and words in err and err.count("\n") == 1, err
    assert not any(tmp_path.iterdir())


def tiny_config(folder: Path) -> Path:
    """Qwen3-8B's config.json at test size: the same family and keys, a model built in a second."""
    folder.mkdir(parents=True, exist_ok=True)
    config = json.loads((QWEN3 / "config.json").read_text())
    config.update(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                  intermediate_size=128, vocab_size=256, max_position_embeddings=512, max_window_layers=2,
                  torch_dtype="float32")
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.slow
def test_run_from_a_config_folder_writes_the_workload_it_ran_and_reruns_it_identically(monkeypatch, capsys, tmp_path):
    model, out = tiny_config(tmp_path / "tiny-qwen3"), tmp_path / "results"
    code, stdout, err = run_cli(monkeypatch, capsys, "run", "--model", str(model), "--batch-size", "1",
                                "--input-length", "8", "--output-length", "2", "--device", "cpu", "--out", str(out),
                                "--no-price")
    assert code == 0, err
    workload = out / "tiny-qwen3.yaml"
    assert f"workload: {workload}" in stdout and "scales" not in yaml.safe_load(workload.read_text())   # tiny already
    results = sorted(out.glob("*.json"))
    assert len(results) == 1
    measured = json.loads(results[0].read_text())
    assert measured["workload_file"] == str(workload) and measured["status"] == "ok"
    # The file runs again as written: every point is the one already measured (resume skips it).
    code, stdout, err = run_cli(monkeypatch, capsys, "run", str(workload), "--device", "cpu", "--out", str(out),
                                "--resume", "--no-price")
    assert code == 0, err
    assert sorted(out.glob("*.json")) == results
    assert len(list(out.glob("*.yaml"))) == 1


@pytest.mark.slow
def test_a_hub_id_is_read_from_hugging_faces_cache_offline(tmp_path):
    """A Hub id whose config.json the Hugging Face cache holds (as one fetch leaves it) is read with
    no network: the cache layout huggingface_hub writes (models--ORG--NAME/refs, snapshots)."""
    repo = tmp_path / "hub" / "models--Qwen--Qwen3-30B-A3B"
    commit = "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    shutil.copy(QWEN3_MOE / "config.json", repo / "snapshots" / commit / "config.json")
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    probe = ("import json, sys; from pathlib import Path; from tpubench.run.from_model import ModelRun, workload_for; "
             "path, _ = workload_for(ModelRun('Qwen/Qwen3-30B-A3B'), Path(sys.argv[1])); print(path)")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "out")], capture_output=True, text=True,
                          env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load(Path(done.stdout.strip()).read_text())
    assert data["name"] == "qwen3-30b-a3b" and data["model"]["hub_id"] == "Qwen/Qwen3-30B-A3B"
    assert data["model"]["config"]["num_experts"] == 128
