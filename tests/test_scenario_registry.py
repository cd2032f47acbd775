"""A scenario is one package behind one Protocol, listed once in the registry: every registered
scenario has the whole Protocol, no module outside its package and the registry branches on a kind,
and a result of a kind this version does not know is still described."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers_source import parsed

import tpubench
from tpubench.scenarios import Scenario
from tpubench.scenarios.registry import SCENARIOS, describing, pair_label, row_label, schema_of

PACKAGE = Path(tpubench.__file__).parent


def _protocol_members() -> set[str]:
    names = set(getattr(Scenario, "__annotations__", {}))
    names |= {n for n, v in vars(Scenario).items() if callable(v) and not n.startswith("_")}
    return names


def test_every_scenario_has_the_whole_protocol():
    members = _protocol_members()
    assert {"kind", "schema", "sweep_axes", "points", "label", "run_table", "measurement"} <= members
    for kind, scenario in SCENARIOS.items():
        missing = sorted(m for m in members if not hasattr(scenario, m))
        assert not missing, f"scenario {kind} lacks {missing}"
        assert scenario.kind == kind
        assert schema_of(kind).model_fields["kind"].annotation.__args__ == (kind,)
        module, _, name = scenario.measurement.partition(":")
        assert module.startswith(f"tpubench.scenarios.{kind}.") and name


def _kind_branches(path: Path) -> list[str]:
    """Comparisons of something named *kind* with a registered kind's name: `x.scenario_kind == "serve"`."""
    tree = parsed(path)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        names = {n for s in sides for n in ast.walk(s) if isinstance(n, (ast.Name, ast.Attribute, ast.Constant))}
        about_kind = any("kind" in (getattr(n, "id", "") or getattr(n, "attr", "") or
                                    (n.value if isinstance(getattr(n, "value", None), str) else ""))
                         for n in names)
        kinds = {n.value for n in names if isinstance(n, ast.Constant) and n.value in SCENARIOS}
        if about_kind and kinds:
            found.append(f"{path}:{node.lineno}")
    return found


def test_no_module_outside_a_scenario_package_branches_on_a_kind():
    own = {PACKAGE / "scenarios" / kind for kind in SCENARIOS}
    files = [f for f in PACKAGE.rglob("*.py")
             if not any(place in f.parents for place in own) and f != PACKAGE / "scenarios" / "registry.py"]
    branches = [b for f in files for b in _kind_branches(f)]
    assert not branches, f"these branch on a scenario kind outside its package: {branches}"


def test_the_branch_finder_finds_one(tmp_path):
    sample = tmp_path / "branches.py"
    sample.write_text('def f(p, kind):\n    return p.scenario_kind == "serve" or kind in ("train",)\n', encoding="utf-8")
    assert _kind_branches(sample) == [f"{sample}:2", f"{sample}:2"]


def test_a_kind_this_version_does_not_know_is_still_described():
    point = {"scenario_kind": "from_a_newer_version", "workload": "w", "scale": "small", "batch_size": 2,
             "input_length": 16, "output_length": 4, "dtype": "bfloat16"}
    assert describing("from_a_newer_version") is describing(None)
    assert pair_label(point) == "w small b2 i16 o4 bfloat16"
    assert row_label({**point, "device": "cpu"}) == "b2 in16 out4 cpu"
