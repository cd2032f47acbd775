"""execution.matmul_precision: validated, 'highest' by default, a sweep axis, set on both backends
per point and recorded as the frameworks report it back."""

import importlib.util

import pytest
import yaml

from tpubench.backends.torch import set_matmul_precision
from tpubench.errors import UserError
from tpubench.run.runner import run_sweep
from tpubench.run.sweep import expand
from tpubench.run.workload import load_workload
from tpubench.scenarios.registry import point_label

HAS_JAX = importlib.util.find_spec("jax") is not None


def _workload(tmp_path, tiny_workload, **execution):
    data = yaml.safe_load(tiny_workload.read_text())
    if execution:
        data["execution"] = execution
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def restore_torch_precision():
    import torch

    before = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(before)


def test_default_is_highest_and_keeps_earlier_point_keys(tmp_path, tiny_workload):
    points = expand(load_workload(_workload(tmp_path, tiny_workload)))
    assert {p.matmul_precision for p in points} == {"highest"}
    # A point made before the field existed (no matmul_precision) has the same key.
    old = points[0].to_dict()
    del old["matmul_precision"]
    from tpubench.workload_spec.point import RunPoint

    assert RunPoint.from_dict(old).key() == points[0].key()


def test_bad_value_is_one_line_naming_file_and_field(tmp_path, tiny_workload):
    path = _workload(tmp_path, tiny_workload, matmul_precision="fastest")
    with pytest.raises(UserError) as err:
        load_workload(path)
    line = err.value.one_line()
    assert "\n" not in line and str(path) in line and "execution.matmul_precision" in line
    assert "'highest'" in line and "fastest" in line


def test_a_sweep_axis_with_distinct_keys_and_labels(tmp_path, tiny_workload):
    points = expand(load_workload(_workload(tmp_path, tiny_workload, matmul_precision=["highest", "medium"])))
    assert len(points) == 4 and {p.matmul_precision for p in points} == {"highest", "medium"}
    assert len({p.key() for p in points}) == 4
    assert any("matmul=medium" in point_label(p) for p in points)


def test_torch_sets_and_reads_back(restore_torch_precision):
    import torch

    for level in ("medium", "high", "highest"):
        record = set_matmul_precision("cpu", level)
        assert torch.get_float32_matmul_precision() == level
        assert record == {"matmul_precision": level,
                          "matmul_precision_applied": {"torch.get_float32_matmul_precision": level}}


@pytest.mark.skipif(not HAS_JAX, reason="jax extra not installed")
def test_jax_sets_and_reads_back():
    import jax

    from tpubench.backends.jax import set_matmul_precision as set_jax

    before = jax.config.jax_default_matmul_precision
    try:
        for level, jax_name in (("medium", "bfloat16"), ("high", "tensorfloat32"), ("highest", "float32")):
            record = set_jax(level)
            assert jax.config.jax_default_matmul_precision == jax_name
            assert record["matmul_precision_applied"] == {"jax_default_matmul_precision": jax_name}
    finally:
        jax.config.update("jax_default_matmul_precision", before)


@pytest.mark.slow
def test_each_result_records_the_precision_its_point_ran_at(tmp_path, tiny_workload, restore_torch_precision):
    path = _workload(tmp_path, tiny_workload, matmul_precision=["medium", "highest"])
    outcomes = run_sweep(path, scale="small", out_dir=tmp_path / "r")
    seen = {}
    for o in outcomes:
        assert o.result.status == "ok", o.result.error
        env = o.result.environment
        applied = env["matmul_precision_applied"]["torch.get_float32_matmul_precision"]
        seen[o.result.point["matmul_precision"]] = (env["matmul_precision"], applied)
    assert seen == {"medium": ("medium", "medium"), "highest": ("highest", "highest")}
