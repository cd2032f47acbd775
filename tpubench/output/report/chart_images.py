"""The report's figures as image files (`tpubench report --figures`): the very charts the HTML page
draws (report/figures.py), drawn to SVG or PNG by vl-convert, Vega-Lite's own converter (it runs
Vega in an embedded JavaScript engine: no browser, no network). For the markdown report, the docs
site and slides. Only drawn when asked: vl-convert is the `figures` extra
(`pip install 'tpubench[figures]'`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tpubench.errors import UserError
from tpubench.output.report.charts import WIDTH, Chart
from tpubench.records.files import replace_file

IMAGE_FORMATS = ("svg", "png")
PNG_SCALE = 2.0           # PNG pixels per chart pixel: sharp on a slide or a high-density screen


@dataclass(frozen=True)
class Image:
    """A figure written to a file: its caption and where it is (relative to the report)."""

    id: str
    caption: str
    path: Path


def report_charts(data) -> list[Chart]:
    """Every chart the HTML report draws, in its order: the answer's, each unit's section's, the
    published comparison's and the published rows'."""
    from tpubench.output.report import published_list
    from tpubench.output.report.figures import answer_figures, published_figures, report_figures, training_figures
    from tpubench.scenarios import registry

    charts = list(answer_figures(data).values())
    for unit in registry.units():
        if unit.key == "token":
            charts += report_figures(data, unit)
        elif unit.key == "training_token":
            charts += training_figures(data.summary_of(unit))
    return charts + published_figures(data) + published_list.figures(data)


def _converter():
    try:
        import vl_convert
    except ImportError:
        raise UserError("drawing figures to images needs vl-convert: pip install 'tpubench[figures]'",
                        field="--figures") from None
    return vl_convert


def draw(chart: Chart, fmt: str = "svg") -> bytes:
    """One chart as SVG or PNG bytes."""
    if fmt not in IMAGE_FORMATS:
        raise UserError(f"unknown figure format '{fmt}'; choose one of {', '.join(IMAGE_FORMATS)}", field="--figures")
    vl_convert = _converter()
    spec = chart.vega_lite(width=WIDTH)
    if fmt == "png":
        return bytes(vl_convert.vegalite_to_png(spec, scale=PNG_SCALE))
    return vl_convert.vegalite_to_svg(spec).encode("utf-8")


def write_images(charts: list[Chart], folder: Path, fmt: str = "svg", relative_to: Path | None = None) -> list[Image]:
    """Each chart drawn to `folder`/<id>.<fmt> (written whole or not at all), its path given
    relative to `relative_to` (the report's folder) when set."""
    _converter()
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for chart in charts:
        path = folder / f"{chart.id}.{fmt}"
        replace_file(path, draw(chart, fmt))
        shown = path.relative_to(relative_to) if relative_to is not None else path
        out.append(Image(chart.id, chart.caption, shown))
    return out


__all__ = ["IMAGE_FORMATS", "Image", "draw", "report_charts", "write_images"]
