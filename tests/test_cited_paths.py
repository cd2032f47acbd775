"""Comments and docstrings in tpubench/ cite files of this repository that exist.

A file that moves leaves its citations behind (`scenarios/train.py` after the scenarios became
packages, `tpubench.output.csv_safety` after it moved to records/). Two forms are checked:

- a path with a slash whose first folder is one of this repository's (`measure/world.py`,
  `output/report/format.py`, `tests/test_docs.py`): it must exist from the repository root, from
  tpubench/, or from a package above the citing file. Paths into other projects (transformers'
  `generation/utils.py`) start with a folder this repository does not have and are not checked;
  `docs/...md` pages and their anchors are test_docs.py's (checked against the built site);
- a dotted `tpubench.a.b` name: a module, or a name defined at the top of one.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest
from helpers_source import parsed

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "tpubench"

PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w.-]+\.(?:py|md))(?![\w/])")
DOTTED = re.compile(r"(?<![\w.])(tpubench(?:\.\w+)+)")


def cited_texts(path: Path):
    """(line, text) of every comment and docstring of a Python file."""
    source = path.read_text(encoding="utf-8")
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(parsed(path)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield node.body[0].lineno, doc


def _our_folders() -> set[str]:
    """Names of this repository's folders (top level, and every folder under tpubench/)."""
    top = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")}
    return top | {p.name for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"}


def path_exists(cited: str, citing: Path) -> bool:
    bases = [REPO, *(p for p in citing.parents if p == PACKAGE or PACKAGE in p.parents)]
    return any((base / cited).exists() for base in bases)


def _top_level_names(module: Path) -> set[str]:
    names: set[str] = set()
    for node in parsed(module).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def dotted_exists(cited: str) -> bool:
    """`tpubench.a.b[.name]`: the longest prefix that is a module or package, then (if any part
    is left) a name defined at its top level (attributes of that name are not followed)."""
    parts = cited.split(".")
    for n in range(len(parts), 0, -1):
        folder = REPO.joinpath(*parts[:n])
        module = folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")
        if module.is_file():
            return n == len(parts) or parts[n] in _top_level_names(module)
    return False


def broken_citations() -> list[str]:
    ours = _our_folders()
    broken = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, text in cited_texts(path):
            for cited in PATH.findall(text):
                first = cited.split("/")[0]
                if first in ours and first != "docs" and not path_exists(cited, path):
                    broken.append(f"{path.relative_to(REPO)}:{line}: {cited}")
            for cited in DOTTED.findall(text):
                if not dotted_exists(cited.rstrip(".")):
                    broken.append(f"{path.relative_to(REPO)}:{line}: {cited}")
    return broken


def test_every_cited_file_and_module_exists():
    broken = broken_citations()
    assert not broken, "comments or docstrings cite files or modules that do not exist:\n" + "\n".join(broken)


@pytest.mark.parametrize("cited, ok", [
    ("docs/measurement.md", True), ("measure/world.py", True), ("output/report/format.py", True),
    ("scenarios/train.py", False), ("docs/" + "no_such_page.md", False),   # split: test_docs reads this file too
])
def test_paths_resolve_from_the_root_tpubench_or_a_package_above(cited, ok):
    assert path_exists(cited, PACKAGE / "scenarios" / "train" / "measure.py") is ok


@pytest.mark.parametrize("cited, ok", [
    ("tpubench.records.csv_safety", True), ("tpubench.records.result.safe_text", True),
    ("tpubench.load_requests", True), ("tpubench.output.csv_safety", False),
    ("tpubench.records.result.no_such_name", False),
])
def test_dotted_names_resolve_to_a_module_or_a_name_in_one(cited, ok):
    assert dotted_exists(cited) is ok
