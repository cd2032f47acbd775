"""Describing the scenarios imports no pydantic (issue 34: a report over 10k files within 2 s): the
cost and report layers ask the registry for every kind's units, labels and names, and a warm report
must not pay for the workload schema (pydantic and its models) it never uses. The schema is
imported by name, only when a workload is loaded (registry.schema_of)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import tpubench.output.report, tpubench.output.report.html   # what a report imports (render: html)
from tpubench.scenarios import registry
units = [u.key for u in registry.units()]
described = {kind: (registry.scenario_of(kind).report_kind, registry.unit_of(kind).key) for kind in registry.SCENARIOS}
print(json.dumps([units, described, sorted(sys.modules)]))
"""


def describe_every_kind() -> tuple[list, dict, set[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    units, described, modules = json.loads(done.stdout.strip().splitlines()[-1])
    return units, described, set(modules)


def test_describing_every_scenario_and_the_report_import_no_pydantic():
    units, described, modules = describe_every_kind()
    assert set(described) == {"generate", "serve", "train", "diffuse"}
    # Every kind's package was imported (its units and labels are in it), none of its schema.
    assert {f"tpubench.scenarios.{kind}.sweep" for kind in described} <= modules
    assert not {m for m in modules if m.endswith(".schema") or m == "tpubench.workload_spec.sections"}
    assert not {m for m in modules if m.split(".")[0] == "pydantic"}
    assert units[0] == described["generate"][1]   # the default kind's unit first


def test_loading_a_workload_resolves_its_kinds_schema():
    from tpubench.scenarios.registry import SCENARIOS, schema_of

    for kind in SCENARIOS:
        section = schema_of(kind)
        assert section.__module__ == f"tpubench.scenarios.{kind}.schema"
        assert "kind" in section.model_fields   # the section's own model (test_scenario_registry: its Literal)
