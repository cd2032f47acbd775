"""One place for units (tpubench.units): the reports, the terminal tables and the launch plan show
seconds, fractions, bytes and dollars through it, each with its own precision and missing mark."""

import math
import re
from pathlib import Path

import pytest

import tpubench
from tpubench import units
from tpubench.launch import render
from tpubench.output import run_cost
from tpubench.output.report import format as report_format
from tpubench.scenarios import run_table


def test_seconds_fractions_bytes_and_dollars_by_hand():
    assert units.ms(0.0123456) == "12.3" and units.ms(1.5) == "1,500"          # significant figures
    assert units.ms(0.0123456, spec=".1f") == "12.3" and units.ms(2.25, spec=".1f") == "2250.0"
    assert units.ms(None) == "–" and units.ms(math.nan, missing="-") == "-"
    assert units.share(0.41234) == "41.2%" and units.pct(12.34) == "+12.3%"
    assert units.human_bytes(512) == "512 B" and units.human_bytes(3 * 2**29) == "1.5 GiB"
    assert units.usd(0.041234) == "$0.0412" and units.usd_whole(-0.4) == "$0" and units.usd_whole(1234.6) == "$1,235"
    assert units.usd_cents(1234.5) == "$1,234.50" and units.usd_cents(0.0042, below_a_dollar=4) == "$0.0042"
    assert units.with_ci(1.234, 1.2, 1.26) == "1.23 (1.20–1.26)"
    assert units.with_range(100.0, 90.1, 112.5) == "100.0 (90.1-112.5)" and units.with_range(100.0, None, 1.0) == "100.0"


def test_the_terminal_and_the_reports_show_through_it():
    # The terminal: fixed decimals, a hyphen for a missing value.
    assert run_table.ms(0.0123456) == "12.3" and run_table.ms(None) == "-"
    assert run_table.percent(0.41234) == "41.2%" and run_table.human_bytes(None) == "-"
    assert run_cost.usd(2.5) == "$2.50" and run_cost.usd(0.0042) == "$0.0042" and run_cost.usd(math.inf) == "-"
    assert render._usd(None) == "no price" and render._usd(0.5) == "$0.50" and render._usd(12345.678) == "$12,345.68"
    # The reports: significant figures, an en dash.
    assert report_format.ms is units.ms and report_format.usd is units.usd and report_format.sig is units.sig


@pytest.mark.parametrize("module", ["console.py", "output/run_cost.py", "output/report/tokens.py",
                                    "output/report/training.py", "output/report/images.py", "output/report/units.py",
                                    "scenarios/run_table.py", "scenarios/generate/table.py",
                                    "scenarios/serve/table.py", "scenarios/train/table.py", "launch/render.py",
                                    "output/report/format.py", "output/report/markdown.py",
                                    "output/report/html.py", "output/report/figures.py"])
def test_no_renderer_converts_units_itself(module):
    """A conversion inside an f-string ('{x * 1e3:.1f}', '{f * 100:.3g}%') belongs in units."""
    source = (Path(tpubench.__file__).parent / module).read_text(encoding="utf-8")
    conversions = re.findall(r"\{[^{}]*\*\s*(?:1e3|1000|100|1e6)\b[^{}]*:[^{}]*\}", source)
    assert conversions == []
