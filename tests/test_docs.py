"""The documentation site (docs/, mkdocs.yml) builds with --strict, and every page the code and
README cite exists with the anchor they name: the definitions a number follows are readable in the
project, never in a file outside it."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Where citations of the docs live: the package, the benchmarks, the tests and the README.
CITING = [ROOT / "tpubench", ROOT / "benchmarks", ROOT / "tests", ROOT / "workloads", ROOT / "README.md"]
CITATION = re.compile(r"docs/([A-Za-z0-9_/-]+)\.md(?:#([A-Za-z0-9_-]+))?")
# The design notes kept outside the repository, cited by file name or by section sign (the
# pattern is built in two parts so that this file does not match it itself).
OUTSIDE_NOTES = re.compile("DESIGN" + r"(\.md| §)")

needs_mkdocs = pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                                  reason="mkdocs is not installed (pip install -e '.[dev]')")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT,
                           capture_output=True, text=True, env=env, timeout=120)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return out


def _built_page(site: Path, page: str) -> Path:
    """Where mkdocs writes docs/<page>.md (directory URLs: a/b.md -> a/b/index.html)."""
    if page == "index" or page.endswith("/index"):
        return site / page[: -len("index")] / "index.html"
    return site / page / "index.html"


def _citing_files() -> list[Path]:
    files = []
    for place in CITING:
        files.extend([place] if place.is_file() else sorted(f for pattern in ("*.py", "*.yaml")
                                                            for f in place.rglob(pattern)))
    return files


def _citations() -> list[tuple[Path, str, str | None]]:
    return [(f, page, anchor) for f in _citing_files()
            for page, anchor in CITATION.findall(f.read_text(encoding="utf-8"))]


@pytest.mark.slow   # `site`: mkdocs build --strict in a subprocess
@needs_mkdocs
def test_docs_build_strict(site):
    for page in ("index", "getting-started", "definitions", "chips-prices-pairs", "results",
                 "scenarios/generate", "scenarios/serve", "scenarios/train",
                 "extending/scenario", "extending/device", "extending/prices"):
        assert _built_page(site, page).is_file(), page


@pytest.mark.slow   # `site`: mkdocs build --strict in a subprocess
@needs_mkdocs
def test_cited_pages_and_anchors_exist(site):
    citations = _citations()
    assert citations, "the code and README cite no docs page"
    for source, page, anchor in citations:
        html = _built_page(site, page)
        assert html.is_file(), f"{source.relative_to(ROOT)} cites docs/{page}.md, which does not exist"
        if anchor:
            assert f'id="{anchor}"' in html.read_text(encoding="utf-8"), (
                f"{source.relative_to(ROOT)} cites docs/{page}.md#{anchor}, which has no such anchor")


def test_no_citation_of_notes_outside_the_repository():
    citing = [str(f.relative_to(ROOT)) for f in _citing_files() if OUTSIDE_NOTES.search(f.read_text(encoding="utf-8"))]
    assert not citing, f"these cite design notes that are not in the repository: {citing}"


def test_readme_keeps_the_two_commands_ci_runs():
    # .ci/run greps README for these two lines and runs them as written.
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert any(line.startswith("python3 -m venv .venv && ") for line in lines)
    assert any(line.startswith(". .venv/bin/activate && ") and "pytest" in line for line in lines)


# A module path written in prose: tpubench/<folders>/<module>.py, or a package folder ending in '/'.
MODULE_PATH = re.compile(r"\btpubench/(?:[a-z_]+/)*(?:[a-z_]+\.(?:py|csv|json)|[a-z_]+/(?=[`\s)]))")


def test_every_module_path_the_docs_and_comments_name_exists():
    """The docs and the code's comments name modules by path: after a module moves, the old path
    must not linger anywhere (docs, README, comments, workloads)."""
    texts = sorted((ROOT / "docs").rglob("*.md")) + _citing_files()
    missing = sorted({(str(f.relative_to(ROOT)), path) for f in texts
                      for path in MODULE_PATH.findall(f.read_text(encoding="utf-8"))
                      if not (ROOT / path).exists()})
    assert not missing, f"these name module paths that do not exist: {missing}"
