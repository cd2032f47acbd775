"""The one list of scenario kinds. A new scenario is one package under tpubench/scenarios/ and one
line here (docs/extending/scenario.md)."""

from __future__ import annotations

import importlib
from typing import Iterator, Mapping, MutableMapping

from tpubench.errors import UserError
from tpubench.scenarios import Scenario
from tpubench.scenarios.output_units import OutputUnit
from tpubench.workload_spec.point import DEFAULT_KIND, RunPoint


class _Registry(MutableMapping):
    """Scenario kind -> Scenario, each kind's package imported when its kind is first looked up, so
    that `validate` of one workload imports one kind's package. The kinds are known without
    importing; a kind's schema (pydantic builds each section at import) is imported only by
    `schema_of`, when a workload is loaded."""

    def __init__(self, entries: dict[str, str]):
        self._entries: dict[str, str | Scenario] = dict(entries)   # "module:Class" until first looked up

    def __getitem__(self, kind: str) -> Scenario:
        entry = self._entries[kind]
        if isinstance(entry, str):
            module, name = entry.split(":")
            entry = self._entries[kind] = getattr(importlib.import_module(module), name)()
        return entry

    def __contains__(self, kind) -> bool:
        return kind in self._entries      # without importing the kind's package

    def __setitem__(self, kind: str, scenario: Scenario) -> None:
        self._entries[kind] = scenario

    def __delitem__(self, kind: str) -> None:
        del self._entries[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


SCENARIOS: MutableMapping[str, Scenario] = _Registry({
    "generate": "tpubench.scenarios.generate:Generate",
    "serve": "tpubench.scenarios.serve:Serve",
    "train": "tpubench.scenarios.train:Train",
    "diffuse": "tpubench.scenarios.diffuse:Diffuse",
})

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


def units() -> tuple[OutputUnit, ...]:
    """Every unit of output of the registered scenarios, each once, in registry order (the default
    kind's first): what cost, energy, the console and reports loop over. Read from SCENARIOS on each
    call, so a scenario added to it (a test's, tests/demo_scenario/) brings its unit along."""
    seen: dict[str, OutputUnit] = {}
    for scenario in SCENARIOS.values():
        for unit in scenario.units:
            seen.setdefault(unit.key, unit)
    return tuple(seen.values())


def unit_of(kind) -> OutputUnit:
    """The unit a row of `kind` is ranked, shown and budgeted in: its scenario's first unit (the
    default kind's for a kind this version does not know, as `describing`)."""
    return describing(kind).unit


def point_label(point: RunPoint) -> str:
    """A run point in a few words (progress bar, run table, messages)."""
    return scenario_of(point.scenario_kind).label(point)


def pair_label(point: Mapping) -> str:
    """A result's point dict in words for a comparison."""
    return describing(point.get("scenario_kind")).pair_label(point)


def row_label(row: Mapping) -> str:
    """A priced result row in a few words."""
    return describing(row.get("scenario_kind")).row_label(row)


def schema_of(kind: str):
    """The pydantic model of `kind`'s `scenario:` section (Scenario.schema): imported here, when a
    workload is loaded, and never by describing a scenario, so that reports never build the schema:
    pydantic, the shared sections and every kind's section cost a report ~0.14 s of CPU at start-up
    (benchmarks/report_10k.py's imports, measured 2026-12)."""
    return _named(scenario_of(kind).schema)


def measurement_of(kind: str):
    """The object that measures points of `kind` (Measurement): imported here, when points run, and
    never by describing a scenario, so that cost and report code never loads a framework."""
    return _named(scenario_of(kind).measurement)()


def cost_basis_of(kind):
    """The function that charges result rows of `kind` their chip-seconds (Scenario.cost_basis): the
    default kind's for a kind this version does not know (`describing`). Imported here, when results
    are priced, and never by describing a scenario, so that validating a workload never loads pandas."""
    return _named(describing(kind).cost_basis)


def _named(ref: str):
    """What a "module:name" reference names, its module imported."""
    module, name = ref.split(":")
    return getattr(importlib.import_module(module), name)
