"""The architecture's rules, run with the tests so that CI enforces them.

The layer rules are import-linter contracts in pyproject.toml ([tool.importlinter]): no cycles between
sibling modules, measurement never imports prices, costs or reports, and money and output never import
torch, JAX, transformers or diffusers. Two rules are checked elsewhere because a contract cannot say them:

- no cycle at all: import-linter's acyclic_siblings contract does not see a package's __init__ and
  its own modules importing each other (a registry importing the modules that import its types), so
  test_no_import_cycle_between_modules walks the whole module graph;
- the CLI imports no heavy module at start-up: a contract cannot tell start-up imports from the lazy
  ones inside functions, so subprocesses check what is loaded:
  test_cli_run.py::test_cli_start_up_imports_no_torch_or_jax (`import tpubench.cli`) and
  test_model_config.py::test_validate_answers_without_torch_or_transformers (`tpubench validate` on
  every shipped workload).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import grimp
import pytest
import tomllib
from helpers_source import parsed

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow   # lint-imports in a subprocess builds the whole graph (seconds); the cycle test below stays fast
def test_import_contracts_hold():
    # Through import-linter's own command, as a developer runs it; no cache, so the checkout stays clean.
    lint = ("import sys; from importlinter.cli import lint_imports_command; "
            "sys.exit(lint_imports_command())")
    done = subprocess.run([sys.executable, "-c", lint, "--no-cache", "--no-logo", "pyproject.toml"],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, f"import contracts broken (pyproject.toml [tool.importlinter]):\n" \
                                 f"{done.stdout}{done.stderr}"


def _contract(contract_id: str) -> dict:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["id"] == contract_id)


def scenario_packages() -> set[str]:
    """The package of every registered scenario: the one its measurement module lives in."""
    from tpubench.scenarios.registry import SCENARIOS

    return {".".join(s.measurement.split(":")[0].split(".")[:3]) for s in SCENARIOS.values()}


def test_the_scenario_contracts_list_every_registered_scenario():
    # A contract that leaves a scenario out checks nothing about it (diffuse was missing once).
    packages = scenario_packages()
    assert packages and all(p.startswith("tpubench.scenarios.") for p in packages)
    assert set(_contract("scenarios-independent")["modules"]) == packages
    assert set(_contract("scenarios-through-registry")["forbidden_modules"]) == packages


def test_every_package_outside_the_scenarios_reaches_them_through_the_registry():
    packages = {f"tpubench.{d.name}" for d in (REPO / "tpubench").iterdir() if (d / "__init__.py").is_file()}
    shared = packages - {"tpubench.scenarios"}
    listed = set(_contract("scenarios-through-registry")["source_modules"])
    assert shared <= listed, f"not in the contract's source_modules: {sorted(shared - listed)}"


def find_cycle(graph: grimp.ImportGraph) -> list[str] | None:
    """The first import cycle found by depth-first search, as [a, b, ..., a]; None if there is none."""
    state: dict[str, str] = {}  # module -> "open" (on the current path) or "done"
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if state.get(imported) == "open":
                return path[path.index(imported):] + [imported]
            if imported not in state and (cycle := visit(imported)):
                return cycle
        state[module] = "done"
        path.pop()
        return None

    for module in sorted(graph.modules):
        if module not in state and (cycle := visit(module)):
            return cycle
    return None


def describe_cycle(graph: grimp.ImportGraph, cycle: list[str]) -> str:
    """Each step of the cycle with the lines that import (imports inside functions count too)."""
    steps = []
    for importer, imported in zip(cycle, cycle[1:]):
        lines = "; ".join(f"l.{d['line_number']}: {d['line_contents']}"
                          for d in graph.get_import_details(importer=importer, imported=imported))
        steps.append(f"  {importer} -> {imported}  ({lines})")
    return "\n".join(steps)


def test_no_import_cycle_between_modules():
    graph = grimp.build_graph("tpubench", cache_dir=None)  # no cache folder left in the checkout
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle between tpubench's modules:\n{describe_cycle(graph, cycle)}"


def test_find_cycle_reports_a_package_and_its_own_module():
    # The case the acyclic_siblings contract cannot see: a registry in __init__ and a module under it.
    graph = grimp.ImportGraph()
    for module in ("pkg", "pkg.impl", "pkg.leaf"):
        graph.add_module(module)
    graph.add_import(importer="pkg", imported="pkg.impl", line_number=3, line_contents="from pkg.impl import X")
    graph.add_import(importer="pkg.impl", imported="pkg.leaf", line_number=1, line_contents="import pkg.leaf")
    assert find_cycle(graph) is None
    graph.add_import(importer="pkg.impl", imported="pkg", line_number=2, line_contents="from pkg import T")
    cycle = find_cycle(graph)
    assert cycle == ["pkg", "pkg.impl", "pkg"]
    assert "pkg.impl -> pkg  (l.2: from pkg import T)" in describe_cycle(graph, cycle)


# A function longer than this is split into parts that each say what they do (issue 33 split the
# last ones: the measure functions of train, diffuse and serve, open_server, the client's exchange).
MAX_FUNCTION_LINES = 100


def long_functions(root: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    import ast

    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(parsed(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno}: {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_a_hundred_lines():
    assert long_functions(REPO / "tpubench") == []


def test_long_functions_finds_one(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text("def f():\n" + "    x = 1\n" * 3 + "\n\nasync def g():\n    pass\n")
    assert long_functions(pkg, limit=3) == ["pkg/m.py:1: f (4 lines)"]


# --- references as strings ("module:Name") obey the contracts too -------------------------------------

_STRING_REFERENCE = re.compile(r"""["'](tpubench(?:\.\w+)+):\w+["']""")


def _matches(module: str, names) -> bool:
    return any(module == n or module.startswith(n + ".") for n in names)


def _layer(module: str, layers: list[list[str]]) -> int | None:
    """The index of `module`'s layer (0 the top), None when no layer holds it."""
    for i, layer in enumerate(layers):
        if _matches(module, layer):
            return i
    return None


def string_references(root: Path = REPO / "tpubench") -> list[tuple[str, str, str]]:
    """(module, referenced module, file:line) of every "tpubench.x.y:Name" literal in the package."""
    out = []
    for path in sorted(root.rglob("*.py")):
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts).removesuffix(".__init__")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in _STRING_REFERENCE.finditer(line):
                out.append((module, m.group(1), f"{path.relative_to(REPO)}:{n}"))
    return out


def crossings(references, contracts: list[dict]) -> list[str]:
    """The references that an import of the same modules would break a contract with: up a layer,
    into a forbidden module, or between independent modules."""
    out = []
    for source, target, where in references:
        for c in contracts:
            if c["type"] == "layers":
                layers = [[n.strip() for n in entry.split("|")] for entry in c["layers"]]
                s, t = _layer(source, layers), _layer(target, layers)
                broken = s is not None and t is not None and t < s
            elif c["type"] == "forbidden":
                broken = _matches(source, c["source_modules"]) and _matches(target, c["forbidden_modules"])
            elif c["type"] == "independence":
                broken = any(_matches(source, [a]) and _matches(target, [b])
                             for a in c["modules"] for b in c["modules"] if a != b)
            else:
                broken = False
            if broken:
                out.append(f"{where}: {source} names {target} ({c['id']})")
    return out


def _contracts() -> list[dict]:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]


def test_no_string_reference_crosses_a_contract():
    # A "module:Name" string is an import made later: one up a layer is a dependency the import
    # contracts cannot see (a unit of output naming its report section, once).
    references = string_references()
    assert references, "no string reference found: the pattern no longer matches the code"
    assert crossings(references, _contracts()) == []


def test_crossings_finds_a_reference_up_a_layer_and_into_a_forbidden_module():
    found = crossings([("tpubench.scenarios.token_unit", "tpubench.output.report.tokens", "x.py:1"),
                       ("tpubench.money.cost", "tpubench.money.token_costs", "y.py:2"),
                       ("tpubench.output.report.data", "tpubench.scenarios.registry", "z.py:3")], _contracts())
    assert any(f.startswith("x.py:1") and "(layers)" in f for f in found)
    assert any(f.startswith("x.py:1") and "(measurement-not-money)" in f for f in found)
    assert not any(f.startswith(("y.py", "z.py")) for f in found)
