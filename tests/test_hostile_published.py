"""Hostile inputs to the published-results importers (issue 32), through the CLI as a user runs it:
every bad file ends in one line naming the file and the field, exit code 2, no traceback, and
nothing written into the results folder. The MLPerf cases start from the real v5.1 excerpt
(tests/fixtures/published/real/) with one file spoiled.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers_cli import run_cli

REAL = Path(__file__).parent / "fixtures" / "published" / "real"
TREE = REAL / "mlperf_v5.1_tree"
SUMMARY = REAL / "mlperf_v5.1_summary" / "closed" / "GigaComputing" / "summary.csv"
GOOGLE = Path("closed/Google")
SYSTEM = GOOGLE / "systems" / "B200-SXM-180GBx8_TRT.json"
MEASUREMENT = GOOGLE / "measurements/B200-SXM-180GBx8_TRT/deepseek-r1/Server/B200-SXM-180GBx8_TRT_Server.json"
DEEP = "[" * 100_000 + "]" * 100_000
BIG = "9" * 400


def _row(metrics: str) -> str:
    return ('[{"hardware": "h200", "model": "dsr1", "precision": "fp8", "isl": 1024, "osl": 1024, "conc": 4, '
            f'"decode_tp": 8, "metrics": {metrics}}}]')


def _refused(monkeypatch, capsys, tmp_path, kind: str, path: Path, *needles: str) -> str:
    into = tmp_path / "results"
    code, _, stderr = run_cli(monkeypatch, capsys, "import", kind, str(path), "--into", str(into))
    lines = stderr.strip().splitlines()
    assert code == 2, stderr
    assert len(lines) == 1 and "Traceback" not in stderr and "internal error" not in stderr, stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    assert not into.exists()
    return lines[0]


@pytest.mark.parametrize("text, needles", [
    (DEEP, ["nested too deeply"]),
    (_row('{"output_tput_per_gpu": ' + BIG + '}'), ["[0].metrics.output_tput_per_gpu", "number too large"]),
    (_row('{"output_tput_per_gpu": 1e400}'), ["[0].metrics.output_tput_per_gpu", "not a finite number"]),
    (_row('{"output_tput_per_gpu": Infinity}'), ["[0].metrics.output_tput_per_gpu", "not a finite number"]),
    (_row('{"output_tput_per_gpu": 50, "median_tpot": ' + BIG + '}'), ["[0].metrics.median_tpot"]),
    ('[{"hardware": "h200", "model": "x", "isl": ' + BIG + ', "osl": 1, "conc": 1, "metrics": {}}]', ["[0].isl"]),
    ('[{"hardware": "h200", "model": "x", "isl": ' + "9" * 5000 + '}]', ["not JSON"]),
])
def test_inferencex_hostile_json(tmp_path, monkeypatch, capsys, text, needles):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    _refused(monkeypatch, capsys, tmp_path, "inferencex", bad, str(bad), *needles)


def test_inferencex_not_utf8(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'[{"hardware": "h\xe9200"}]')
    _refused(monkeypatch, capsys, tmp_path, "inferencex", bad, str(bad), "not JSON")


def _spoiled_tree(tmp_path: Path, relative: Path, text: str) -> tuple[Path, Path]:
    tree = tmp_path / "tree"
    shutil.copytree(TREE, tree)
    (tree / relative).write_text(text)
    return tree, tree / relative


@pytest.mark.parametrize("relative, text, needles", [
    (SYSTEM, DEEP, ["nested too deeply"]),
    (SYSTEM, '{"accelerators_per_node": ' + BIG + ', "number_of_nodes": 1}', ["accelerators_per_node"]),
    (SYSTEM, '{"accelerators_per_node": 8, "number_of_nodes": ' + BIG + '}', ["number_of_nodes"]),
    (SYSTEM, '["not", "an", "object"]', ["expected a system description"]),
    (MEASUREMENT, DEEP, ["nested too deeply"]),
])
def test_mlperf_tree_hostile_json(tmp_path, monkeypatch, capsys, relative, text, needles):
    tree, spoiled = _spoiled_tree(tmp_path, relative, text)
    _refused(monkeypatch, capsys, tmp_path, "mlperf", tree, str(spoiled), *needles)


def _spoiled_csv(tmp_path: Path, line: int, change) -> Path:
    lines = SUMMARY.read_text().splitlines()
    lines[line - 1] = change(lines[line - 1])
    bad = tmp_path / "summary.csv"
    bad.write_text("\n".join(lines) + "\n")
    return bad


def test_mlperf_short_summary_row(tmp_path, monkeypatch, capsys):
    # Line 3 cut after its Result: 10 fields where the header has 28; the first missing one is Accuracy.
    bad = _spoiled_csv(tmp_path, 3, lambda row: ",".join(row.split(",")[:10]))
    _refused(monkeypatch, capsys, tmp_path, "mlperf", bad, f"{bad}:3: Accuracy: row has 10 fields, the header 28")


def test_mlperf_long_summary_row(tmp_path, monkeypatch, capsys):
    bad = _spoiled_csv(tmp_path, 2, lambda row: row + ",extra")
    _refused(monkeypatch, capsys, tmp_path, "mlperf", bad, f"{bad}:2", "29 fields, the header 28")


def test_mlperf_400_digit_result(tmp_path, monkeypatch, capsys):
    bad = _spoiled_csv(tmp_path, 2, lambda row: row.replace(",30873.9,", f",{BIG},"))
    _refused(monkeypatch, capsys, tmp_path, "mlperf", bad, f"{bad}:2: Result: not a finite number")


def test_mlperf_summary_not_utf8(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "summary.csv"
    bad.write_bytes(SUMMARY.read_bytes().replace(b"GigaComputing", b"Giga\xe7omputing"))
    _refused(monkeypatch, capsys, tmp_path, "mlperf", bad, str(bad), "cannot read")


def test_mlperf_huge_summary_field(tmp_path, monkeypatch, capsys):
    bad = _spoiled_csv(tmp_path, 2, lambda row: row.replace("G894-SD1", "x" * (200 * 1024), 1))
    _refused(monkeypatch, capsys, tmp_path, "mlperf", bad, str(bad), "cannot read")
