"""key_of_point_dict: RunPoint(**point).key() without building the RunPoint (the arm-free key of
10,000 result files); the keys are persisted identities, so they must match to the byte."""

import dataclasses
import hashlib
import json

import pytest

from tests.fakes import make_point
from tpubench.output.frames import arm_free_key
from tpubench.workload_spec.point import RunPoint, key_of_point_dict

BASE = make_point()
VARIANTS = [
    {}, {"tensor_parallel": 2}, {"expert_parallel": 1, "data_parallel": 4}, {"scenario_kind": "serve"},
    {"params": {"load": {"concurrency": 8}}}, {"routing": {"skewed": {"zipf": 1.2}}}, {"routing": "uniform"},
    {"matmul_precision": "highest"}, {"matmul_precision": "high"}, {"experts_implementation": "grouped_mm"},
    {"model_config": {"num_experts": 8}}, {"compile_options": {"fullgraph": True}}, {"hub_id": "org/model"},
]


@pytest.mark.parametrize("change", VARIANTS, ids=lambda c: ",".join(c) or "base")
def test_the_key_of_a_point_dict_is_the_key_of_its_run_point(change):
    point = dataclasses.replace(BASE, **change)
    data = point.to_dict()
    assert key_of_point_dict(data) == point.key()
    assert data == point.to_dict()            # the caller's dict is left as it was


def test_fields_left_out_take_their_defaults():
    data = BASE.to_dict()
    for name in ("tensor_parallel", "params", "routing", "matmul_precision", "compile_options", "scenario_kind"):
        del data[name]
    assert key_of_point_dict(data) == RunPoint(**data).key() == BASE.key()


def test_a_required_field_missing_raises_type_error_as_the_constructor_does():
    data = BASE.to_dict()
    del data["weights"]
    with pytest.raises(TypeError):
        RunPoint(**data)
    with pytest.raises(TypeError):
        key_of_point_dict(data)


def test_the_arm_free_key_of_a_point_missing_a_field_hashes_its_own_fields():
    data = {**BASE.to_dict(), "params": {"decode_loop": "hf_generate", "x": 1}}
    del data["family"]
    params = {"x": 1}
    blob = json.dumps({**data, "params": params, "experts_implementation": None}, sort_keys=True, default=str)
    assert arm_free_key(data) == hashlib.sha256(blob.encode()).hexdigest()[:16]


def test_the_arm_free_key_is_the_key_of_the_point_without_its_arm():
    point = dataclasses.replace(BASE, experts_implementation="grouped_mm", params={"decode_loop": "x", "y": 2})
    expected = dataclasses.replace(point, experts_implementation=None, params={"y": 2}).key()
    assert arm_free_key({**point.to_dict(), "unknown_field": 3}) == expected
