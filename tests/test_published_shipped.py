"""The reference published rows shipped with tpubench (tpubench/data/published/, issue 31 §2):
the loader gives them in the stored columns with a source for every row, they cover TPU, GPU and
Trainium, the report lists them apart from measured rows (never priced), and a budget sizes on them
only when asked."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tomllib
from helpers_cli import run_cli
from helpers_synthetic import write_results

from tpubench.hardware.accelerators import normalize_accelerator
from tpubench.output.published import COLUMNS, shipped_published
from tpubench.output.published.store import SHIPPED_DIR
from tpubench.output.report import build_report, render
from tpubench.output.report.published_list import cells, family, model_class

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "tpubench" / "data" / "accelerators.csv"


@pytest.fixture(scope="module")
def shipped() -> pd.DataFrame:
    return shipped_published()


@pytest.fixture
def results(tmp_path) -> Path:
    """One measured CPU point, as the repository's own results/ folder holds."""
    out = tmp_path / "results"
    write_results(out, [dict(accelerator="Intel Xeon", device="cpu", chips=1, workload="qwen3_moe",
                             batch_size=1, ttft_s=0.2, e2e_s=1.0, seed=1)])
    return out


def test_loader_gives_stored_columns_and_a_source_for_every_row(shipped):
    assert list(shipped.columns) == ["file", "file_row"] + COLUMNS
    assert len(shipped) >= 40
    for column in ("publisher", "model", "accelerator", "date", "reference"):
        blank = shipped[column].isna() | (shipped[column].astype(str).str.strip() == "")
        assert not blank.any(), f"shipped rows without {column}: {shipped[blank]['file'].tolist()}"
    assert (shipped["output_tokens_per_s_per_chip"] > 0).all() and (shipped["chips"] >= 1).all()
    assert pd.to_datetime(shipped["date"], format="%Y-%m-%d").notna().all()
    assert shipped["file"].map(lambda f: Path(f).parent == SHIPPED_DIR).all()


def test_every_shipped_row_passes_the_physics_gate(shipped):
    # Held to their figures when read and to the roofline only where they enter a fit, an answer or
    # a budget (output/published/store.py): this is what lets a report skip the roofline of all of them.
    from tpubench.estimate.gate import efficiencies, refusals
    from tpubench.estimate.models import published_model
    from tpubench.estimate.physics import EFFICIENCY_LIMIT

    assert refusals(shipped) == [None] * len(shipped)
    found = efficiencies(shipped)
    # A model tpubench has a shape for has a roofline, and every such row is under it; one without
    # (GPT-J and Falcon on TensorRT-LLM's page) is held to its figures only (estimate/gate.py).
    known = np.array([bool(published_model(m) or published_model(p))
                      for m, p in zip(shipped["model"], shipped["published_model"])])
    assert (found[known] > 0).all() and found[known].max() <= EFFICIENCY_LIMIT
    assert np.isnan(found[~known]).all() and known.mean() > 0.99


def test_every_shipped_chip_is_a_canonical_name_of_the_spec_table(shipped):
    with SPECS.open(newline="") as f:
        names = {row["accelerator"] for row in csv.DictReader(f)}
    # A chip the spec table has no row for yet (InferenceX's GB300) still carries its canonical name,
    # and SOURCES.md says its rows wait for that row.
    unspecced = set(shipped["accelerator"]) - names
    assert all(normalize_accelerator(chip) == chip for chip in unspecced), unspecced
    sources = " ".join((SHIPPED_DIR / "SOURCES.md").read_text(encoding="utf-8").split())
    for chip in unspecced:
        assert f"{chip} has no row in tpubench/data/accelerators.csv" in sources, chip


def test_coverage_tpu_gpu_amd_and_trainium(shipped):
    chips = set(shipped["accelerator"])
    assert {"H100", "H200", "B200", "TPU7x", "TPU v6e", "Trainium", "Trainium2"} <= chips
    assert chips & {"MI300X", "MI325X", "MI355X"}
    per_family = shipped.groupby(shipped["accelerator"].map(family)).size()
    assert (per_family >= 3).all(), per_family.to_dict()


def test_no_publisher_cost_model_mixed_with_list_prices(shipped):
    # A $ figure is only ever stored with where it came from (the sources shipped give none).
    priced = shipped["publisher_usd_per_mtok"].notna()
    assert shipped.loc[priced, "cost_basis"].notna().all()


def test_sources_file_names_every_shipped_csv_and_is_packaged():
    sources = (SHIPPED_DIR / "SOURCES.md").read_text(encoding="utf-8")
    for f in SHIPPED_DIR.glob("*.csv"):
        assert f.name in sources, f"{f.name} is not described in SOURCES.md"
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "data/published/*.csv" in package_data["tpubench"]


def test_report_lists_tpu_and_gpu_published_rows_apart_and_unpriced(results):
    data = build_report(results)
    assert len(data.results) == 1 and data.priced["file"].str.endswith(".json").all()
    families = set(data.published_list["accelerator"].map(family))
    assert {"TPU", "NVIDIA GPU", "AMD GPU", "Trainium"} <= families
    # Every row (the default shows the first 200, and InferenceX alone ships more).
    markdown = render(data, "markdown", max_rows=len(data.published_list))
    assert "## Published results (not measured here)" in markdown
    section = markdown.split("## Published results (not measured here)")[1]
    assert "| TPU | TPU7x ×4 | Google Cloud TPU recipes (Google) |" in section
    assert "| NVIDIA GPU | H100 ×16 | MLPerf Inference v5.1 (Cisco) |" in section
    assert "AI-Hypercomputer/tpu-recipes inference/ironwood/vLLM/Qwen3-Coder-480B-A35B/README.md@" in section
    html = render(data, "html")
    assert "Published results (not measured here)" in html and '<figure class="chart" id="published-ref-0"' in html
    left_out = build_report(results, include_shipped=False)
    assert left_out.published_list.empty and "not measured here" not in render(left_out, "markdown")


def test_report_cli_no_shipped_flag(results, monkeypatch, capsys):
    code, with_rows, _ = run_cli(monkeypatch, capsys, "report", str(results))
    assert code == 0 and "Published results (not measured here)" in with_rows
    code, without, _ = run_cli(monkeypatch, capsys, "report", str(results), "--no-shipped")
    assert code == 0 and "Published results (not measured here)" not in without


def test_budget_sizes_on_a_shipped_row_only_when_asked(results, monkeypatch, capsys):
    code, mine, _ = run_cli(monkeypatch, capsys, "budget", "tokens", str(results), "--tokens-per-day", "1e9")
    assert code == 0 and "(published:" not in mine
    code, both, stderr = run_cli(monkeypatch, capsys, "budget", "tokens", str(results), "--tokens-per-day", "1e9",
                                 "--include-published")
    # SGLang-JAX's TPU v6e Qwen3 rows carry input + output throughput, so they price as servers (the
    # fastest point per chip of a platform is the one it sizes on: Qwen3-8B at concurrency 256).
    assert code == 0, stderr
    assert "Qwen/Qwen3-8B (published: SGLang-JAX documentation)" in both
    assert "TPU v6e" in both
    code, imported_only, _ = run_cli(monkeypatch, capsys, "budget", "tokens", str(results), "--tokens-per-day", "1e9",
                                     "--include-published", "--no-shipped")
    assert code == 0 and "(published:" not in imported_only


def test_cells_leave_missing_figures_empty_and_label_the_source():
    row = pd.Series({"model": "m", "accelerator": "TPU7x", "chips": 4.0, "publisher": "P", "submitter": None,
                     "framework": "vllm", "framework_version": None, "precision": "fp8", "input_length": None,
                     "output_length": 1024.0, "concurrency": None, "scenario": "Offline",
                     "output_tokens_per_s_per_chip": 499.0, "interactivity_tokens_per_s": float("nan"),
                     "ttft_p50_s": float("nan"), "tpot_p50_s": 0.02, "spec_decoding": "none",
                     "disaggregated": "false", "multinode": "true", "date": "2026-04-23", "reference": "r@c"})
    got = cells(row)
    assert got[:8] == ["m", "TPU", "TPU7x ×4", "P", "vllm", "fp8", "–/1024", "Offline"]
    assert got[8:] == ["499", "–", "–", "20.0", "multi-node", "2026-04-23", "r@c"]


def test_model_class_groups_llama_sizes_and_deepseek_versions():
    assert model_class("meta-llama/Llama-2-70b-chat-hf") == model_class("meta-llama/Llama-3.3-70B-Instruct") == "Llama 70B"
    assert model_class("deepseek-ai/DeepSeek-R1-0528") == model_class("deepseek-ai/DeepSeek-R1") == "DeepSeek-R1"
    assert model_class("Qwen/Qwen3-32B") == "Qwen3-32B"
    assert (family("MI300X"), family("Trainium2"), family("B200")) == ("AMD GPU", "Trainium", "NVIDIA GPU")
