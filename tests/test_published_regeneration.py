"""The shipped published rows are what scripts/published/regenerate.py writes: every CSV in the
writer's own form (a hand edit shows), every source module pinning full commits, and, where a
maintainer's git copies of the sources are at hand (TPUBENCH_MIRRORS), the CSVs rebuilt byte for
byte. The git reader is checked on this repository's own history."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "published"))

import git_mirror  # noqa: E402
import regenerate  # noqa: E402
from git_mirror import Mirror  # noqa: E402


def test_every_shipped_csv_is_in_the_regeneration_s_own_form():
    for f in sorted(regenerate.SHIPPED.glob("*.csv")):
        rows = pd.read_csv(f, keep_default_na=False, dtype=str)
        assert regenerate.csv_bytes(rows) == f.read_bytes(), f"{f.name} is not as regenerate.py writes it"


def test_every_source_pins_full_commits_and_builds():
    for name in regenerate.SOURCES:
        module = importlib.import_module(name)
        assert callable(module.build) and module.REPOS, name
        for repo, commit in module.REPOS.items():
            assert re.fullmatch(r"[\w.-]+/[\w.-]+", repo) and re.fullmatch(r"[0-9a-f]{40}", commit), (name, repo)


@pytest.mark.skipif(not os.environ.get("TPUBENCH_MIRRORS"),
                    reason="needs git copies of the sources (TPUBENCH_MIRRORS=folder; scripts/published/regenerate.py)")
def test_the_csvs_rebuild_byte_for_byte_from_the_sources():
    built = regenerate.build_all(Path(os.environ["TPUBENCH_MIRRORS"]))
    assert set(built) == {f.name for f in regenerate.SHIPPED.glob("*.csv")}
    for name, data in built.items():
        assert data == (regenerate.SHIPPED / name).read_bytes(), name


def test_the_git_reader_on_this_repository():
    git_dir = ROOT / ".git"
    if not (git_dir / "HEAD").is_file():
        pytest.skip("not a git checkout")
    head = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    mirror = Mirror(repo="this/checkout", git_dir=git_dir, commit=head)
    assert "README.md" in mirror.files and mirror.glob("scripts/published/*.py")
    assert mirror.text("pyproject.toml").startswith("[build-system]")
    assert mirror.text_if_present("no/such/file.txt") is None
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", mirror.date)
    assert mirror.cite("README.md") == f"this/checkout README.md@{head[:12]}"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.slow   # starts git in a subprocess
def test_a_mirror_whose_alternates_file_is_a_fifo_fails_fast_with_one_line(tmp_path, monkeypatch, capsys):
    # git opens objects/info/alternates to look an object up; a FIFO there (no writer) blocks that
    # open() forever. Each git call has a timeout, so the regeneration stops with one line, exit 2.
    git_dir = tmp_path / "ROCm+vllm" / "repo"
    subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
    (git_dir / "objects" / "info").mkdir(parents=True, exist_ok=True)
    os.mkfifo(git_dir / "objects" / "info" / "alternates")
    monkeypatch.setattr(git_mirror, "GIT_TIMEOUT_S", 1.0)
    codes = []
    # In a daemon thread, so that a regression (git blocking again) fails this test instead of
    # hanging the suite: 60 s is a hang guard, not a measurement (the call takes about 1 s).
    worker = threading.Thread(daemon=True, target=lambda: codes.append(
        regenerate.main(["--mirrors", str(tmp_path), "--source", "amd", "--check"])))
    worker.start()
    worker.join(timeout=60)
    assert codes == [2], "the regeneration hung on a FIFO alternates file"
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "did not finish in 1 s" in err and str(git_dir) in err, err
