"""Mutated workload files never crash `validate`: every shipped workload, each of its values (and
each key removed) replaced by a value of another shape, is either valid or one line, exit 2."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import typer
import yaml
from helpers_cli import run_cli

from tpubench import cli

pytestmark = pytest.mark.slow   # hundreds of mutated workloads

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted((REPO / "workloads").glob("*.yaml"))
# Values of every shape a typo or a bad merge gives: a mapping, a list, a string, a negative, zero,
# null and a number too large for any size.
REPLACEMENTS = ({"x": 1}, [1, 2], "zzz", -1, 0, None, 10**30)
DELETE = object()


def value_paths(node, path=()) -> list[tuple]:
    """The path of every value under `node`: mappings, lists and scalars, depth first."""
    children = (node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ())
    paths = [path] if path else []
    for key, child in children:
        paths.extend(value_paths(child, (*path, key)))
    return paths


def mutations(data: dict) -> list[tuple[tuple, object]]:
    """(path, new value or DELETE): each value gets one replacement, taken in turn from
    REPLACEMENTS so that every shape reaches every depth across the file, and each key is removed."""
    out = []
    for i, path in enumerate(value_paths(data)):
        out.append((path, REPLACEMENTS[i % len(REPLACEMENTS)]))
        if isinstance(path[-1], str):
            out.append((path, DELETE))
    return out


def mutated(data: dict, path: tuple, value) -> dict:
    data = copy.deepcopy(data)
    node = data
    for part in path[:-1]:
        node = node[part]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = copy.deepcopy(value)
    return data


# Parsed once and written with libyaml where PyYAML has it: the pure-Python YAML would be most of the time.
ORIGINALS = {source: yaml.safe_load(source.read_text()) for source in SHIPPED}
CASES = [(source, path, value) for source in SHIPPED for path, value in mutations(ORIGINALS[source])]
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def case_id(case) -> str:
    source, path, value = case
    return f"{source.stem}:{'.'.join(map(str, path))}={'<deleted>' if value is DELETE else repr(value)[:12]}"


@pytest.fixture(scope="module")
def click_command():
    # typer rebuilds its click command on every call (~45 ms, most of a validate): build it once.
    # tpubench.cli.main still runs around it, with its one error handler.
    return typer.main.get_command(cli.app)


@pytest.mark.parametrize("source, path, value", CASES, ids=[case_id(c) for c in CASES])
def test_mutated_workload_is_valid_or_one_line(tmp_path, monkeypatch, capsys, click_command, source, path, value):
    monkeypatch.setattr(cli, "app", click_command)
    target = tmp_path / source.name
    target.write_text(yaml.dump(mutated(ORIGINALS[source], path, value), Dumper=DUMPER))
    code, out, err = run_cli(monkeypatch, capsys, "validate", str(target))
    assert "internal error" not in out + err, err
    assert (code, err.count("\n")) in ((0, 0), (2, 1)), (code, out, err)
