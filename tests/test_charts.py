"""The report's figures as charts (report/charts.py, figures.py, chart_page.py, chart_images.py):
every spec is valid Vega-Lite and reads only columns its tables have, the page's copy of a table
rebuilds the same rows and cannot close its script element, the known faults of the matplotlib
figures are gone (identical heat maps and captions, latency rows that read alike), and `--figures`
writes images the markdown links. tests/test_report_browser.py draws them in Chromium."""

from __future__ import annotations

import json
import re
import sys
from datetime import date
from functools import lru_cache
from pathlib import Path

import pandas as pd
import pytest
from helpers_synthetic import write_results
from test_report_layout import wide_results

from tpubench.output.report import build_report, chart_page, charts, render
from tpubench.output.report.chart_images import report_charts
from tpubench.output.report.figures import latency_distributions, moe_figures

TODAY = date(2026, 12, 2)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The committed example results (MoE heat maps, several precisions, kernel arms), wide synthetic
    points and the shipped published rows."""
    return build_report(wide_results(tmp_path_factory.mktemp("charts")), today=TODAY, warn=lambda _: None)


@lru_cache(maxsize=1)
def _validator():
    import jsonschema
    from altair.vegalite.v6.schema import load_schema

    return jsonschema.Draft7Validator(load_schema())


def _fields(spec: dict, data: str | None = None, made: frozenset = frozenset()):
    """(table name, field, the fields transforms made) of every encoding in `spec`, layers, panels
    and facets included, each read from the table its view inherits."""
    data = spec.get("data", {}).get("name", data)
    made = made | {t["as"] for t in spec.get("transform", []) if "as" in t}
    for channel in spec.get("encoding", {}).values():
        for entry in channel if isinstance(channel, list) else [channel]:
            if isinstance(entry, dict) and "field" in entry:
                yield data, entry["field"], made
    for child in [*spec.get("layer", []), *spec.get("hconcat", []), *([spec["spec"]] if "spec" in spec else [])]:
        yield from _fields(child, data, made)
    facet = spec.get("facet", {})
    for channel in facet.values():
        yield data, channel["field"], made


def test_every_chart_is_valid_vega_lite_reading_only_columns_it_has(data):
    found = report_charts(data)
    kinds = {re.sub(r"-\d+$", "", chart.id) for chart in found}
    assert {"answer", "cost", "pareto", "latency", "expert-load", "published-ref"} <= kinds
    for chart in found:
        spec = chart.vega_lite(width=charts.WIDTH)
        errors = sorted(_validator().iter_errors(spec), key=str)
        assert not errors, f"{chart.id}: {errors[0].message}"
        for table, name, made in _fields(chart.spec):
            assert name in chart.tables[table] or name in made, (chart.id, table, name)
        assert chart.filters() == [f for f in charts.FILTERS if f in chart.tables[charts.MAIN]]
        json.dumps(spec, allow_nan=False)        # no NaN: JSON has none, missing numbers are null


def test_a_chart_with_a_typo_in_a_field_is_caught():
    # The check above must be able to fail: a field no table has.
    spec = {"data": {"name": "table"}, "mark": "point", "encoding": {"x": {"field": "nope"}}}
    assert [(t, f) for t, f, _ in _fields(spec)] == [("table", "nope")]
    assert _validator().is_valid({"mark": "pointy"}) is False


def test_the_page_rebuilds_every_row_and_its_text_cannot_close_the_script():
    table = {"label": ["a", "</script><script>alert(1)</script>", "a", None], "x": [1.5, None, 3.0, 4.0],
             "flag": [True, False, True, False], "file": ["/r/a.json", "/r/b.json", None, "/s/c.json"]}
    chart = charts.Chart("c-0", "caption", {"mark": "point"}, {"table": table})
    text = charts.page_json(chart)
    assert "<" not in text
    payload = json.loads(text)
    packed = payload["tables"]["table"]
    assert packed["columns"]["label"] == {"text": ["a", "</script><script>alert(1)</script>"], "codes": [0, 1, 0, -1]}
    assert packed["columns"]["file"] == {"folders": ["/r/", "/s/"], "names": ["a.json", "b.json", None, "c.json"],
                                         "codes": [0, 0, -1, 1]}

    def cell(col, i):     # what the page's script does (chart_page.SCRIPT's inflate), in Python
        if isinstance(col, list):
            return col[i]
        if col["codes"][i] < 0:
            return None
        return col["folders"][col["codes"][i]] + col["names"][i] if "folders" in col else col["text"][col["codes"][i]]
    rebuilt = [{name: cell(col, i) for name, col in packed["columns"].items()} for i in range(packed["n"])]
    assert rebuilt == charts.rows(table)
    html = chart_page.figure_html(chart)
    assert html.count("<script") == 1 and "alert(1)</script>" not in html


def test_a_hostile_workload_name_never_becomes_markup(tmp_path):
    folder = tmp_path / "results"
    write_results(folder, [dict(workload="<script>alert(1)</script>", batch_size=8),
                           dict(workload="<script>alert(1)</script>", batch_size=16)])
    html = render(build_report(folder, today=TODAY, warn=lambda _: None), "html")
    assert "<script>alert(1)" not in html
    assert re.findall(r"<script[^>]*>", html).count("<script>") == 2     # the library and ours, nothing else


def test_the_vendored_library_is_what_its_readme_names_with_its_licences():
    folder = Path(chart_page.__file__).parent / "vendor"
    readme = (folder / "README.md").read_text()
    for name in ("vega", "vega-lite", "vega-embed"):
        assert (folder / f"LICENSE-{name}").read_text().startswith("Copyright (c)")
        assert re.search(rf"`{name}@\d+\.\d+\.\d+`", readme)
    for name in chart_page.VENDORED:
        import hashlib

        digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        assert digest in readme, name
    library = chart_page.library()
    assert "sourceMappingURL" not in library and "</script" not in library.lower()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="figures are drawn ahead in a forked child on Linux only")
@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")
def test_figures_drawn_ahead_in_a_child_make_the_same_page(data, monkeypatch):
    """A large report draws its figures in a forked child while the rest of the page is written
    (html_parts.charts_on_page): the page is the very same as drawn here, filters and all."""
    from tpubench.output import forked
    from tpubench.output.report import html

    here = render(data, "html")
    children = []
    started = forked.ahead

    def ahead(fn, *, fork):
        pending = started(fn, fork=fork)
        children.append(pending._pid)
        return pending

    monkeypatch.setattr(html, "AHEAD_MIN_RESULTS", 0)
    monkeypatch.setattr(forked, "other_threads_running", lambda: False)
    monkeypatch.setattr(forked, "usable_cpus", lambda: 2)
    monkeypatch.setattr(forked, "ahead", ahead)
    assert render(data, "html") == here
    assert children and all(children)         # drawn in a child, by its PID, at least once


def test_a_workload_filter_never_hides_a_figure_of_that_workload(data):
    """The page hides a figure whose workload facets do not hold the chosen workload: the answer's
    figure weighs a workload at every scale, so each label the page offers for its workload keeps it
    in view; every other figure of a workload is hidden under another one."""
    drawn = report_charts(data)
    offered = chart_page.filter_values(drawn)["workload"]
    answers = [chart for chart in drawn if chart.id.startswith("answer-")]
    assert answers
    for chart in answers:
        workload = chart.caption.split(":")[0]
        mine = {label for label in offered if label == workload or label.startswith(f"{workload} (")}
        assert mine and mine <= set(chart.facets["workload"]), (chart.id, mine, chart.facets)
    for chart in drawn:
        facet = chart.facets.get("workload", [])
        shown_for = {facet} if isinstance(facet, str) else set(facet)
        assert shown_for <= set(offered), chart.id
        table = set(filter(None, chart.tables.get(charts.MAIN, {}).get("workload", [])))
        assert table <= shown_for or not shown_for, (chart.id, table, shown_for)


def test_equal_expert_loads_share_one_map_and_no_two_captions_read_alike():
    load = json.dumps([[4, 4, 0, 0], [3, 5, 0, 0]])
    base = {"status": "ok", "workload": "w", "scale": "full", "device": "cpu", "chips": 1, "batch_size": 8,
            "input_length": 128, "output_length": 32, "routing": "natural", "expert_load_imbalance": 2.0}
    results = pd.DataFrame([
        {**base, "backend": "torch", "experts_implementation": "eager", "expert_load_json": load, "file": "a.json"},
        {**base, "backend": "torch", "experts_implementation": "grouped_mm", "expert_load_json": load, "file": "b.json"},
        {**base, "backend": "torch", "batch_size": 16, "expert_load_json": json.dumps([[1, 2, 3, 4], [4, 3, 2, 1]]),
         "file": "c.json"},
        {**base, "backend": "torch", "batch_size": 16, "expert_load_json": json.dumps([[2, 2, 3, 4], [4, 3, 2, 1]]),
         "file": "d.json"},
    ])
    maps = moe_figures(type("D", (), {"results": results})())
    assert len(maps) == 3                       # a and b recorded the very same load: one map
    assert "experts=eager" in maps[0].caption and "experts=grouped_mm" in maps[0].caption
    assert "2 results with this same load" in maps[0].caption
    assert len({m.caption for m in maps}) == 3  # c and d differ in load only: their captions name their files
    assert "d.json" in maps[2].caption
    # A load that is no matrix of counts (empty, ragged, not JSON) is left out, not drawn wrong.
    odd = pd.DataFrame([{**base, "backend": "torch", "expert_load_json": bad, "file": f"{n}.json"}
                        for n, bad in enumerate(["[]", "[[1, 2], [3]]", "{", "[1, 2]"])])
    assert moe_figures(type("D", (), {"results": odd})()) == []


def test_latency_rows_name_what_tells_the_runs_apart():
    base = {"workload": "w", "scale": "small", "backend": "torch", "priced_accelerator": "CPU x86 vCPU", "chips": 2,
            "batch_size": 8, "input_length": 128, "output_length": 32, "dtype": "float32", "scenario_kind": "generate",
            **{f"{m}_{s}_s": 0.01 for m in ("ttft", "tpot") for s in ("p50", "p90", "p99", "min", "max")}}
    rows = pd.DataFrame([{**base, "file": "a.json"}, {**base, "quantization": "int8_dynamic", "file": "b.json"},
                         {**base, "experts_implementation": "grouped_mm", "file": "c.json"},
                         {**base, "file": "d.json"}])          # measured again: the same point
    labels = latency_distributions(rows, "t", "latency-0", "c").tables["table"]["label"][:4]
    assert len(set(labels)) == 4
    assert "q=int8_dynamic" in labels[1] and "experts=grouped_mm" in labels[2] and labels[3].endswith("d.json")


def test_unique_labels_add_what_differs_then_the_position():
    assert charts.unique_labels(["a", "a", "b"], ["x", "y", "z"]) == ["a · x", "a · y", "b"]
    assert charts.unique_labels(["a", "a"], ["x", "x"]) == ["a · x · #1", "a · x · #2"]


def test_figures_drawn_to_images_for_markdown(data, tmp_path):
    from tpubench.output.report.chart_images import draw, write_images

    pytest.importorskip("vl_convert")
    chosen = [c for c in report_charts(data) if c.id in ("cost-0", "latency-0")]
    svg = draw(chosen[0], "svg").decode()
    assert svg.startswith("<svg") and "Cost per million tokens" in svg and svg.count("<path") > 3
    assert draw(chosen[1], "png")[:8] == b"\x89PNG\r\n\x1a\n"
    images = write_images(chosen, tmp_path / "report-figures", "svg", relative_to=tmp_path)
    assert [i.path.as_posix() for i in images] == ["report-figures/cost-0.svg", "report-figures/latency-0.svg"]
    md = render(data, "md", images=images)
    assert "![Blended $/Mtok by platform and plan" in md and "(report-figures/cost-0.svg)" in md
    spaced = write_images(chosen[:1], tmp_path / "my report-figures", "svg", relative_to=tmp_path)
    assert "(my%20report-figures/cost-0.svg)" in render(data, "md", images=spaced)   # a link a space does not cut
    plain = render(data, "md", html_name="report.html")
    assert "[report.html](report.html)" in plain and "--figures" in plain and "![" not in plain


def test_figures_flag_needs_an_output_file(tmp_path, monkeypatch, capsys):
    from helpers_cli import run_cli

    write_results(tmp_path / "r", [dict(batch_size=8)])
    code, _, err = run_cli(monkeypatch, capsys, "report", str(tmp_path / "r"), "--figures")
    assert code == 2 and "--out" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(monkeypatch, capsys, "report", str(tmp_path / "r"), "--figures", "-f", "csv",
                           "-o", str(tmp_path / "r.csv"))
    assert code == 2 and "md or html" in err


def test_figures_without_vl_convert_say_how_to_get_it(data, monkeypatch):
    import sys

    from tpubench.errors import UserError
    from tpubench.output.report.chart_images import draw

    monkeypatch.setitem(sys.modules, "vl_convert", None)       # as if not installed: import raises
    with pytest.raises(UserError, match=r"pip install 'tpubench\[figures\]'"):
        draw(report_charts(data)[0], "svg")
