"""The code passes its linter (pyproject.toml [tool.ruff]: pyflakes, pycodestyle, import order,
bugbear), and the pre-commit configuration that runs it on every commit is valid."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    # The dev extra installs both next to this interpreter; a missing one is a broken install, not a skip.
    path = Path(sys.executable).with_name(name)
    found = str(path) if path.exists() else shutil.which(name)
    assert found, f"{name} is not installed: pip install -e '.[dev]'"
    return found


def test_ruff_finds_nothing():
    run = subprocess.run([_tool("ruff"), "check", "--no-cache", "tpubench", "tests", "benchmarks"],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_ruff_would_catch_an_unsorted_import(tmp_path):
    # The check above can fail: a file with imports out of order is reported.
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nimport os\n\nprint(os, sys)\n")
    run = subprocess.run([_tool("ruff"), "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(bad)],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 1 and "I001" in run.stdout


@pytest.mark.slow   # pre-commit loads its own machinery (about a second)
def test_pre_commit_config_is_valid():
    run = subprocess.run([_tool("pre-commit"), "validate-config", ".pre-commit-config.yaml"],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
