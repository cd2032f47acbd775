"""Serving presets against their engines' own argument parsers (issue 51): the flags vllm-torchtpu
0.29.0's and vLLM 0.11.0's (vllm-neuron 0.2.0's engine) `vllm serve` accept, read from their
released wheels by scripts/engine_flags.py into tpubench/data/engine_flags/ (each file names the
wheel and its sha256), and a preset flag an engine would refuse failing at validate."""

from __future__ import annotations

import pytest
import yaml

from tpubench.errors import UserError
from tpubench.run.workload import load_workload
from tpubench.serving.engine_flags import CHECKED, engine_flags, flag_name, refusal, unknown_flags
from tpubench.serving.presets import PRESETS


@pytest.mark.parametrize("preset", sorted(CHECKED))
def test_each_checked_preset_uses_only_flags_its_engine_accepts(preset):
    data = engine_flags(preset)
    assert data["command"] == "vllm serve" and len(data["source"]["sha256"]) == 64
    assert data["source"]["wheel"].endswith(".whl")
    # What the preset itself passes ({model} is vllm serve's positional model_tag).
    assert PRESETS[preset].argv[:2] == ("{vllm}", "serve")
    assert unknown_flags(preset, list(PRESETS[preset].argv)) == []
    # The flags the docs' serving examples and the first-hour page give these engines.
    assert unknown_flags(preset, ["--tensor-parallel-size", "8", "--max-model-len", "4096", "--max-num-seqs", "64",
                                  "--no-enable-prefix-caching", "--additional-config", "{}"]) == []


def test_the_stored_lists_are_the_parsers_not_a_guess():
    tpu, neuron = engine_flags("vllm-torchtpu"), engine_flags("vllm-neuron")
    # Flags that exist in one release and not the other: the lists were read, not written by hand.
    assert "--enable-prompt-tokens-details" in tpu["flags"]
    assert len(tpu["flags"]) > 300 and len(neuron["flags"]) > 200
    assert set(tpu["flags"]) != set(neuron["flags"])
    assert engine_flags("vllm") is None and unknown_flags("vllm", ["--anything"]) == []


@pytest.mark.parametrize("token, name", [("--max-model-len", "--max-model-len"), ("--max_model_len=8", "--max-model-len"),
                                         ("--compilation-config.mode", "--compilation-config"), ("8", None),
                                         ("-1", None), ("--", None)])
def test_flag_names_as_vllms_parser_reads_them(token, name):
    assert flag_name(token) == name


def test_an_unknown_flag_names_the_nearest_and_the_release():
    why = refusal("vllm-torchtpu", ["--max-num-seq", "64", "--tensor-parallel-size", "8"])
    assert why.startswith("vllm-torchtpu 0.29.0's `vllm serve` accepts no --max-num-seq (did you mean --max-num-seqs?)")
    assert "vllm_torchtpu-0.29.0-cp312" in why
    assert refusal("vllm-torchtpu", ["--tensor-parallel-size", "8"]) is None


def _serve_workload(tmp_path, preset: str, args: list[str], command=None):
    launch = {"preset": preset, "model": "Qwen/Qwen3-30B-A3B", "args": args}
    if command:
        launch["command"] = command
    data = {"name": "t", "scenario": {"kind": "serve", "server": {"launch": launch},
                                      "load": {"concurrency": [1]}, "input_length": 64, "output_length": 8}}
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_validate_refuses_a_flag_the_engine_would_refuse(tmp_path):
    with pytest.raises(UserError) as caught:
        load_workload(_serve_workload(tmp_path, "vllm-neuron", ["--tensor-parallel-size", "32", "--neuron-cores", "8"]))
    text = str(caught.value)
    assert "scenario.server.launch.args" in text and "vllm-neuron 0.2.0" in text and "--neuron-cores" in text
    load_workload(_serve_workload(tmp_path, "vllm-neuron", ["--tensor-parallel-size", "32", "--max_model_len=2048"]))
    # A command of the user's own is theirs: not checked.
    load_workload(_serve_workload(tmp_path, "vllm-neuron", ["--neuron-cores", "8"],
                                  command="vllm serve {model} --host {host} --port {port}"))
