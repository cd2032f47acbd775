"""README's examples run as written, and print what README shows (issue 50).

Every `tpubench ...` command README shows, in its bash blocks and its inline code, runs here in
README's order in a folder laid out as a fresh clone (workloads/ and examples/, no results/ until
the main job writes it): each exits 0. A command with a placeholder (FILE, FOLDER) or alternatives
(`a|b`) is syntax, not an example; `tpubench launch` starts cloud jobs and is checked by
tests/test_launch.py instead. The Hub id README starts from is read from a Hugging Face cache made
here (offline: the state one fetch leaves), so no test touches the network. Then the answer and
budget tables README quotes are checked against what the commands printed."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
QWEN3_MOE_CONFIG = REPO / "tests" / "fixtures" / "model_configs" / "qwen3-30b-a3b" / "config.json"
# Not run here, with the reason.
NOT_RUN_HERE = {"tpubench launch": "launches SkyPilot jobs on a cloud (tests/test_launch.py checks their task files)"}
PLACEHOLDER = re.compile(r"\b[A-Z]{3,}\b|\|")


def readme_commands(text: str) -> list[str]:
    """Every tpubench command in README, in order, once: bash blocks (split at &&), then inline code."""
    found: list[tuple[int, str]] = []
    for block in re.finditer(r"```bash\n(.*?)```", text, re.S):
        for part in re.split(r"&&|\n", block.group(1)):
            if part.strip().startswith("tpubench "):
                found.append((block.start(), part.strip()))
    for span in re.finditer(r"(?<!`)`(tpubench [^`]+)`(?!`)", text):
        found.append((span.start(), " ".join(span.group(1).split())))
    return list(dict.fromkeys(command for _, command in sorted(found, key=lambda f: f[0])))


def examples(text: str) -> list[str]:
    return [c for c in readme_commands(text)
            if not PLACEHOLDER.search(c) and not any(c.startswith(p) for p in NOT_RUN_HERE)]


def test_readme_names_its_examples():
    text = README.read_text(encoding="utf-8")
    runs = examples(text)
    assert runs[:2] == ["tpubench run workloads/qwen3_moe.yaml", "tpubench report results --format html --out report.html"]
    assert "tpubench budget generate examples/results --tokens-per-day 1e9 --months 12 --peak-factor 3 " \
           "--peak-hours 4 --slo-tpot-ms 50" in runs
    assert any(c.startswith("tpubench run --model Qwen/Qwen3-30B-A3B") for c in runs)
    skipped = set(readme_commands(text)) - set(runs)
    assert all(PLACEHOLDER.search(c) or c.startswith("tpubench launch") for c in skipped)


def hub_cache(root: Path) -> Path:
    """Hugging Face's cache holding Qwen/Qwen3-30B-A3B's config.json, as huggingface_hub lays it out."""
    repo, commit = root / "models--Qwen--Qwen3-30B-A3B", "0" * 40
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    (repo / "snapshots" / commit).mkdir(parents=True)
    shutil.copy(QWEN3_MOE_CONFIG, repo / "snapshots" / commit / "config.json")
    return root


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    clone = tmp_path_factory.mktemp("clone")
    for folder in ("workloads", "examples"):
        (clone / folder).symlink_to(REPO / folder, target_is_directory=True)
    env = {**os.environ, "HF_HUB_CACHE": str(hub_cache(clone.parent / "hub")), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = {}
    for command in examples(README.read_text(encoding="utf-8")):
        args = [sys.executable, "-m", "tpubench.cli", *shlex.split(command)[1:]]
        done[command] = subprocess.run(args, cwd=clone, env=env, capture_output=True, text=True, timeout=1800)
        assert done[command].returncode == 0, f"{command}\n{done[command].stdout[-2000:]}\n{done[command].stderr[-2000:]}"
    done["clone"] = clone
    return done


def test_every_example_runs_as_written(ran):
    clone = ran["clone"]
    assert (clone / "report.html").stat().st_size > 0
    assert (clone / "results" / "qwen3-30b-a3b.yaml").is_file()
    mine = sorted(p.name for p in (clone / "results").glob("*.json"))
    assert mine and all(name.startswith(("qwen3_moe_", "qwen3-30b-a3b_")) for name in mine)   # only this run's


def _rows(markdown: str, header_start: str) -> list[dict[str, str]]:
    """The rows of the first table whose header starts with `header_start`, as dicts."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (c.strip() for c in line.strip("|").split("|")))))
    return rows


def _section(text: str, title: str) -> str:
    return text[text.index(title):]


def test_the_answer_readme_quotes_is_what_the_command_prints(ran):
    readme = README.read_text(encoding="utf-8")
    section = _section(readme, "From\n`tpubench report examples/results --table answer`")
    quoted = _rows(section, "| Option | Source | At the SLO |")
    printed_text = _section(ran["tpubench report examples/results --table answer"].stdout, "### qwen3_moe: the answer")
    printed = _rows(printed_text, "| Option | Source | At the SLO |")

    def kind(cell: str) -> str:            # 'estimate [1]' -> 'estimate': footnote numbers may move
        return cell.split(" [")[0]

    by_option = {(r["Option"], kind(r["Source"])): r for r in printed}
    for row in quoted:      # every option README shows is ranked at the SLO, with the same source
        got = by_option[(row["Option"], kind(row["Source"]))]
        assert got["At the SLO"].endswith(row["At the SLO"].split(" ", 1)[-1]), row   # the same bound binds
    for line in ("Service level: TTFT p99 ≤ 2 s, TPOT p99 ≤ 50 ms (20 tok/s per user)", "- **spot: ", "Break-even: ",
                 "Fleet: at the volume", "- **1-year commitment: "):
        assert line in printed_text and line in section, line


def test_the_budget_readme_quotes_is_what_the_command_prints(ran):
    command = ("tpubench budget generate examples/results --tokens-per-day 1e9 --months 12 --peak-factor 3 "
               "--peak-hours 4 --slo-tpot-ms 50")
    readme = README.read_text(encoding="utf-8")
    quoted = _rows(_section(readme, "## A budget"), "| Workload | # | Platform | Base |")
    printed = _rows(_section(ran[command].stdout, "## How to buy"), "| Workload | # | Platform | Base |")
    for row in quoted:
        assert {k: v for k, v in row.items()} in [{k: r[k] for k in row} for r in printed], row


def test_the_model_example_prints_the_workload_it_wrote(ran):
    command = next(c for c in ran if isinstance(c, str) and c.startswith("tpubench run --model"))
    out = " ".join(ran[command].stdout.split())
    assert "workload: results/qwen3-30b-a3b.yaml, from Qwen/Qwen3-30B-A3B's config with random weights" in out
