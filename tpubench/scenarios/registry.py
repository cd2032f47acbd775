"""The one list of scenario kinds. A new scenario is one package under tpubench/scenarios/ and one
line here (docs/extending/scenario.md)."""

from __future__ import annotations

import importlib
from typing import Mapping

from tpubench.errors import UserError
from tpubench.scenarios import Scenario
from tpubench.scenarios.diffuse import Diffuse
from tpubench.scenarios.generate import Generate
from tpubench.scenarios.serve import Serve
from tpubench.scenarios.train import Train
from tpubench.workload_spec.point import DEFAULT_KIND, RunPoint

SCENARIOS: dict[str, Scenario] = {s.kind: s for s in (Generate(), Serve(), Train(), Diffuse())}

assert DEFAULT_KIND in SCENARIOS, "results without a kind must have a scenario"


def scenario_of(kind) -> Scenario:
    """The scenario of a point's or row's kind; results that predate kinds are the default kind's."""
    kind = kind if isinstance(kind, str) and kind else DEFAULT_KIND
    if kind not in SCENARIOS:
        raise UserError(f"scenario '{kind}' cannot run in this version of tpubench "
                        f"(it knows: {', '.join(SCENARIOS)})", field="scenario.kind")
    return SCENARIOS[kind]


def describing(kind):
    """The scenario that describes a result row of `kind`: its own, or for a kind this version does
    not know (a file from a newer tpubench) the default kind's, whose labels use the common fields
    only; such a file is still read, priced and reported."""
    return SCENARIOS.get(kind if isinstance(kind, str) and kind else DEFAULT_KIND) or SCENARIOS[DEFAULT_KIND]


def point_label(point: RunPoint) -> str:
    """A run point in a few words (progress bar, run table, messages)."""
    return scenario_of(point.scenario_kind).label(point)


def pair_label(point: Mapping) -> str:
    """A result's point dict in words for a comparison."""
    return describing(point.get("scenario_kind")).pair_label(point)


def row_label(row: Mapping) -> str:
    """A priced result row in a few words."""
    return describing(row.get("scenario_kind")).row_label(row)


def measurement_of(kind: str):
    """The object that measures points of `kind` (Measurement): imported here, when points run, and
    never by describing a scenario, so that cost and report code never loads a framework."""
    module, name = scenario_of(kind).measurement.split(":")
    return getattr(importlib.import_module(module), name)()


def cost_basis_of(kind):
    """The function that charges result rows of `kind` their chip-seconds (Scenario.cost_basis): the
    default kind's for a kind this version does not know (`describing`). Imported here, when results
    are priced, and never by describing a scenario, so that validating a workload never loads pandas."""
    module, name = describing(kind).cost_basis.split(":")
    return getattr(importlib.import_module(module), name)
