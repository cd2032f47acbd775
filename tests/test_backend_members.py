"""The Backend protocol (backends/base.py) is what shared code may ask of a backend: every backend
provides each of its members, and code outside backends/ asks no other (an AST walk over the
attributes read from `be`, `<x>.be` and `<x>.backend`). Nothing here imports torch or JAX."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from helpers_source import parsed

from tpubench.backends import get_backend
from tpubench.backends.base import Backend

PACKAGE = Path(__file__).resolve().parents[1] / "tpubench"


def declared() -> dict[str, object]:
    """{member: its declaration}: the annotated attributes (None) and the methods of Backend."""
    members: dict[str, object] = {name: None for name in Backend.__annotations__}
    members.update({name: value for name, value in vars(Backend).items()
                    if inspect.isfunction(value) and not name.startswith("_")})
    return members


BACKENDS = [("torch", "cpu"), ("torch", "tpu"), ("jax", None)]


@pytest.mark.parametrize("name, device", BACKENDS)
def test_every_backend_provides_every_declared_member(name, device):
    be = get_backend(name, device)   # builds the object only: no framework is imported
    missing = [m for m in declared() if not hasattr(be, m)]
    assert not missing, f"{type(be).__name__} lacks {missing}"
    for member, declaration in declared().items():
        if declaration is None:
            continue
        own = getattr(type(be), member)
        assert callable(own), f"{type(be).__name__}.{member} is not a method"
        # The same parameters as declared (names and order), so a caller's call fits every backend.
        assert list(inspect.signature(own).parameters) == list(inspect.signature(declaration).parameters), \
            f"{type(be).__name__}.{member}{inspect.signature(own)} differs from Backend.{member}"


def _is_backend(node: ast.expr) -> bool:
    """`be`, or an attribute named `be` or `backend` (`self.be`, `ctx.backend`): how callers hold
    a Backend. A plain name `backend` is often a string (a backend's name) and is not read."""
    return (isinstance(node, ast.Name) and node.id == "be") or \
        (isinstance(node, ast.Attribute) and node.attr in ("be", "backend"))


def backend_uses() -> dict[str, list[str]]:
    """{member read from a backend outside backends/: where}."""
    uses: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "backends") in path.parents:
            continue
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Attribute) and _is_backend(node.value):
                uses.setdefault(node.attr, []).append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return uses


def test_callers_ask_a_backend_only_for_declared_members():
    uses = backend_uses()
    assert {"device", "name", "build", "session"} <= set(uses), "the walk no longer finds the callers"
    undeclared = {m: where for m, where in uses.items() if m not in declared()}
    assert not undeclared, f"members used but not declared in backends/base.py Backend: {undeclared}"


def test_no_shared_code_branches_on_a_backend_name():
    # `be.name` is for records and messages: comparing it is asking the wrong question (declare a member).
    branches = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "backends") in path.parents:
            continue
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Compare) and any(
                    isinstance(side, ast.Attribute) and side.attr == "name" and _is_backend(side.value)
                    for side in [node.left, *node.comparators]):
                branches.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not branches, f"branches on a backend's name: {branches}"
