import textwrap

import pytest

from tpubench.errors import UserError
from tpubench.run.sweep import expand
from tpubench.run.workload import load_workload

BASE = """\
name: w
model:
  family: qwen3_moe
  dtype: float32
  config: {hidden_size: 32}
scenario:
  batch_size: 1
  input_length: 8
  output_length: 4
"""


def write(tmp_path, text, name="w.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def error_of(path) -> str:
    with pytest.raises(UserError) as info:
        load_workload(path)
    msg = info.value.one_line()
    assert "\n" not in msg
    return msg


def test_shipped_and_fixture_workloads_load(tiny_workload):
    w = load_workload(tiny_workload)
    assert w.name == "tiny_moe"
    assert len(expand(w)) == 2
    (small,) = expand(w, "small")
    assert small.model_config["num_experts"] == 2 and small.model_config["hidden_size"] == 32
    assert small.batch_size == 1


def test_sweep_is_cartesian_product(tmp_path):
    p = write(tmp_path, BASE.replace("batch_size: 1", "batch_size: [1, 2, 4]")
              .replace("dtype: float32", "dtype: [float32, bfloat16]"))
    points = expand(load_workload(p))
    assert len(points) == 6
    assert {(pt.batch_size, pt.dtype) for pt in points} == {(b, d) for b in (1, 2, 4) for d in ("float32", "bfloat16")}
    assert len({pt.key() for pt in points}) == 6


def test_point_key_is_stable_and_sensitive(tmp_path):
    a = expand(load_workload(write(tmp_path, BASE)))[0]
    b = expand(load_workload(write(tmp_path, BASE, "again.yaml")))[0]
    c = expand(load_workload(write(tmp_path, BASE.replace("output_length: 4", "output_length: 5"), "c.yaml")))[0]
    assert a.key() == b.key() != c.key()


def test_unknown_key_did_you_mean(tmp_path):
    p = write(tmp_path, BASE.replace("  dtype: float32", "  dtpye: float32"))
    msg = error_of(p)
    assert msg.startswith(f"{p}:4: model.dtpye:")
    assert "did you mean 'dtype'" in msg


def test_unknown_top_level_key(tmp_path):
    msg = error_of(write(tmp_path, BASE + "scenaro: {}\n"))
    assert "did you mean 'scenario'" in msg


def test_wrong_type_and_non_positive_sizes(tmp_path):
    msg = error_of(write(tmp_path, BASE.replace("input_length: 8", "input_length: eight")))
    assert ":8: scenario.input_length:" in msg
    msg = error_of(write(tmp_path, BASE.replace("batch_size: 1", "batch_size: 0"), "z.yaml"))
    assert "scenario.batch_size" in msg and "greater than 0" in msg
    msg = error_of(write(tmp_path, BASE.replace("output_length: 4", "output_length: [4, -1]"), "n.yaml"))
    assert "scenario.output_length" in msg


def test_bad_literal(tmp_path):
    msg = error_of(write(tmp_path, BASE.replace("dtype: float32", "dtype: float8")))
    assert "model.dtype" in msg and "float8" in msg


def test_missing_field(tmp_path):
    msg = error_of(write(tmp_path, BASE.replace("name: w\n", "")))
    assert "name: required field is missing" in msg


def test_yaml_syntax_empty_and_non_mapping(tmp_path):
    assert "YAML syntax error" in error_of(write(tmp_path, "name: [unclosed\n"))
    assert "empty" in error_of(write(tmp_path, "", "e.yaml"))
    assert "expected a mapping" in error_of(write(tmp_path, "- 1\n- 2\n", "l.yaml"))
    assert "no such workload file" in error_of(tmp_path / "missing.yaml")


def test_unknown_scale(tiny_workload):
    with pytest.raises(UserError, match="unknown scale 'huge'"):
        expand(load_workload(tiny_workload), "huge")


@pytest.mark.parametrize("name", ["qwen3_moe.yaml", "gemma4_moe.yaml", "qwen3_dense.yaml"])
def test_shipped_workloads_validate(name):
    from pathlib import Path

    path = Path(__file__).parent.parent / "workloads" / name
    w = load_workload(path)
    assert "small" in w.scales
    assert expand(w, "small") and expand(w)


def test_max_seconds_below_min_seconds(tmp_path):
    msg = error_of(write(tmp_path, BASE + "measurement: {min_seconds: 5, max_seconds: 1}\n"))
    assert "measurement.max_seconds" in msg and "below min_seconds" in msg


TRAIN = """\
name: t
model:
  family: qwen3_moe
  dtype: float32
  config: {hidden_size: 32}
scenario:
  kind: train
  batch_size: 1
  sequence_length: 8
  gradient_acumulation: 2
"""


def test_train_typo_names_the_field_and_line_with_a_guess(tmp_path):
    # The scenario kind (pydantic's union tag) must not leak into the field, and the line is the key's.
    p = write(tmp_path, TRAIN)
    msg = error_of(p)
    assert msg.startswith(f"{p}:10: scenario.gradient_acumulation: unknown key 'gradient_acumulation'")
    assert "did you mean 'gradient_accumulation'" in msg


def test_every_registered_scenario_kind_has_a_schema():
    # One list of kinds: the workload schema's union must know every kind the registry runs.
    # A file is validated with its own kind's section alone; a kind not registered, with every kind's.
    from tpubench.run.workload import schema_for
    from tpubench.scenarios.registry import SCENARIOS

    def kinds_of(data):
        sections = schema_for(data).model_fields["scenario"].annotation
        sections = getattr(sections, "__args__", (sections,))     # a union of one is its member
        return {section.model_fields["kind"].annotation.__args__[0] for section in sections}

    assert kinds_of({"scenario": {"kind": "no-such-kind"}}) == set(SCENARIOS)
    assert kinds_of({"scenario": "not a mapping"}) == set(SCENARIOS)
    for kind in SCENARIOS:
        assert kinds_of({"scenario": {"kind": kind}}) == {kind}
    assert kinds_of({"scenario": {}}) == {"generate"}    # the kind of a scenario that names none
