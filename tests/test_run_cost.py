"""The cost table `tpubench run` prints (console.render_run_cost): an invalid point is priced for
reference only, marked, with its reasons (as every report prices it: records/usable.py), flagged
prices are passed over unless asked for, and marked when they are used (issue 17, items 3 and 12)."""

from __future__ import annotations

from helpers_synthetic import write_results
from rich.console import Console

from tpubench.console import render_run_cost

H100 = "NVIDIA H100 80GB HBM3"


def run_cost_text(paths, **kwargs) -> str:
    console = Console(record=True, width=400, force_terminal=False)
    render_run_cost(console, paths, **kwargs)
    return console.export_text()


def test_an_invalid_point_is_marked_reference_only_with_its_reasons(tmp_path):
    valid, invalid = write_results(tmp_path, [
        dict(accelerator=H100, batch_size=8, input_length=1024, output_length=128),
        dict(accelerator=H100, batch_size=16, input_length=1024, output_length=128, valid=False,
             invalid_reasons=["output tokens/s is negative (-324.0)"], seed=1),
    ])
    text = run_cost_text([valid, invalid])
    assert ("invalid b16 in1024 out128 cuda: output tokens/s is negative (-324.0); its cost is for reference only, "
            "never ranked or budgeted") in text
    table = text.split("cost per million tokens")[1]
    assert "b8 in1024 out128 cuda " in table and "b16 in1024 out128 cuda (INVALID: reference only)" in table
    # Plans by their labels (money/plans.plan_label), as in every report.
    assert "on-demand" in table and "on_demand" not in table


def test_the_run_cost_table_passes_over_flagged_prices_unless_included(tmp_path):
    paths = write_results(tmp_path, [dict(accelerator=H100, batch_size=8)])
    # On-demand H100: the shipped GCP us-central1 row (5.38 $/GPU-h) is flagged; the cheapest honest
    # one is p5.48xlarge in us-east-1 (6.88 $/GPU-h).
    note, table = run_cost_text(paths).split("cost per million tokens")
    assert "aws us-east-1 p5.48xlarge" in table and "a3-highgpu-8g" not in table
    assert "flagged price row(s) set aside" in note and "gcp/us-central1/a3-highgpu-8g" in note
    text = run_cost_text(paths, include_flagged=True)
    assert "gcp us-central1 a3-highgpu-8g (1 of 8 H100) ⚠ flagged price" in text
