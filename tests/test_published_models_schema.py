"""Every model the shipped published rows name (tpubench/data/published_models.json) is a model a
workload can describe: its family and every config key pass the workload schema as they are stored,
and its shape builds. A key a model's own config.json carries that transformers' class ignores
(DeepSeek-V3's moe_layer_freq) passes at the value the class builds, and only there."""

from __future__ import annotations

import json

import pytest
import yaml

from tpubench.errors import UserError
from tpubench.estimate.models import PUBLISHED_MODELS
from tpubench.hardware.model_shape import ModelShape
from tpubench.run.workload import load_workload

MODELS = json.loads(PUBLISHED_MODELS.read_text(encoding="utf-8"))["models"]


def _workload(tmp_path, family: str, config: dict):
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({
        "name": "published_model", "model": {"family": family, "config": config},
        "scenario": {"kind": "generate", "batch_size": 1, "input_length": 16, "output_length": 4}}))
    return path


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_published_model_passes_the_workload_schema_and_builds_its_shape(tmp_path, name):
    entry = MODELS[name]
    workload = load_workload(_workload(tmp_path, entry["family"], entry["config"]))
    assert workload.model.config == entry["config"]
    shape = ModelShape.from_config(entry["family"], entry["config"])
    assert shape.total_params > 0 and shape.n_layers == entry["config"]["num_hidden_layers"]


def test_a_key_transformers_ignores_passes_only_at_the_value_it_builds(tmp_path):
    config = dict(MODELS["deepseek-r1"]["config"])
    assert config["moe_layer_freq"] == 1 and MODELS["deepseek-r1"]["family"] == "deepseek_v3"
    for bad in (2, True, "1"):
        with pytest.raises(UserError) as info:
            load_workload(_workload(tmp_path, "deepseek_v3", {**config, "moe_layer_freq": bad}))
        message = str(info.value)
        assert "model.config.moe_layer_freq" in message and "DeepseekV3Config does not read moe_layer_freq" in message
        assert "\n" not in message
    # A key no config.json of the family carries is still unknown, with a suggestion.
    with pytest.raises(UserError, match="unknown key 'moe_layer_frq'"):
        load_workload(_workload(tmp_path, "deepseek_v3", {**config, "moe_layer_frq": 1}))
