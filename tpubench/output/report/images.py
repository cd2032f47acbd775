"""The reports' diffusion section (rows priced per image, scenarios/diffuse/unit.py): per workload, platform
and plan the cheapest point by $ per 1,000 images, with seconds per image by stage, and the
Pareto front of images/s per chip against seconds per call (the latency a user waits). Cells
only: markdown.py and html.py lay them out."""

from __future__ import annotations

import math

import pandas as pd

from tpubench.output.published.match import pareto_mask
from tpubench.output.report import format as f
from tpubench.records.usable import usable_mask

HEADERS = ["Platform", "Plan", "$/chip-h", "Price as of", "$/1k images", "vs cheapest", "Images/s/chip",
           "s/image p50 / p99", "Text / denoise / VAE s per image", "Step p50 ms", "MFU/step", "J/image", "Point",
           "Hardware", "Validity", "Placement"]
NUMERIC = {2, 4, 6, 7, 8, 9, 10, 11}
PARETO_HEADERS = ["Workload", "Hardware", "Point", "Images/s/chip", "s/call p50", "$/1k images, cheapest"]
NOTES = [
    "$/1k images = chip-seconds per image x price per chip-second x 1,000; chip-seconds per image = "
    "seconds of the whole pipeline call (text encoders to decoded image) / images x chips "
    "(docs/definitions.md#diffusion). CI from the seconds per image's.",
    "Stages are fenced: text encoders, preparation, denoising steps, VAE decode and post-processing sum to "
    "the call; the table shows the three largest.",
    "J/image = the chips' mean power over the timed calls x chip-seconds per image (docs/measurement.md#energy); "
    "– where the run metered no energy, '(modelled)' where the power is a per-chip figure, not a sensor's.",
]
# The warning a result carries when a component ran on the host (scenarios/diffuse/metrics.py).
PLACEMENT_MARK = "on CPU: cost per image includes host time"


def point_label(row) -> str:
    parts = [f"{_int(row.get('resolution_px'))}px", f"{_int(row.get('denoise_steps'))} steps",
             f"×{_int(row.get('batch_size'))}"]
    return " ".join(parts + [str(row[k]) for k in ("dtype", "execution_mode") if f._present(row.get(k))])


def _int(value) -> str:
    try:
        return f"{int(value)}"
    except (TypeError, ValueError):
        return "?"


def _sec(value) -> str:
    return f.sig(value) if value is not None and math.isfinite(float(value)) else "–"


def placements(results: pd.DataFrame) -> dict[str, str]:
    """{result file: its placement warning} for results whose components were split host/chip."""
    if not len(results) or "warnings" not in results:
        return {}
    out = {}
    for file, warnings in zip(results["file"], results["warnings"]):
        hits = [w for w in str(warnings or "").split("; ") if PLACEMENT_MARK in w]
        if hits:
            out[file] = hits[0]
    return out


def cells(row, placement: dict[str, str]) -> list[str]:
    stages = " / ".join(_sec(row.get(f"{s}_s_per_image")) for s in ("text_encode", "denoise", "vae_decode"))
    return [f.platform_label(row), f.plan_label(row["plan"]), f.usd(row["usd_per_chip_hour"]), str(row["price_as_of"]),
            f.ci_cell(row, "image_usd_per_kimage"), str(row.get("vs_cheapest", "")),
            f.ci_cell(row, "images_per_s_per_chip"), f"{_sec(row.get('image_p50_s'))} / {_sec(row.get('image_p99_s'))}",
            stages, f.ms(row.get("denoise_step_p50_s")), f.share(row.get("denoise_mfu")), joules_cell(row), point_label(row),
            f.hardware_label(row), f.validity_label(row), placement.get(row["file"], "all on the chip")]


def joules_cell(row) -> str:
    """Joules per image with its CI, marked when modelled; '–' without energy."""
    if not f.finite(row.get("image_j_per_image")):
        return "–"
    return f.ci_cell(row, "image_j_per_image") + (" (modelled)" if row.get("energy_method") == "modelled" else "")


def pareto(rows: pd.DataFrame) -> pd.DataFrame:
    """Valid points no other point of the same workload matches or beats on both images/s per chip
    (higher) and p50 seconds per call (lower), one row per result file (its cheapest price), quickest
    call first.

    The latency is the call's: an image arrives with its whole call, and more images per call buy
    images/s at the cost of that wait. Seconds per image would not do: it is chips / (images/s per
    chip), so on equal chips the front would shrink to the one fastest point."""
    if not len(rows):
        return rows
    rows = (rows[usable_mask(rows)].sort_values("image_usd_per_kimage", kind="stable")
            .drop_duplicates("file"))
    keep = []
    for _, group in rows.groupby(["workload", "scale"], sort=False, dropna=False):
        front = pareto_mask(pd.to_numeric(group["images_per_s_per_chip"], errors="coerce"),
                            -pd.to_numeric(group["call_p50_s"], errors="coerce"))
        keep += list(group.index[front])
    return rows.loc[keep].sort_values(["workload", "call_p50_s"], kind="stable")


def pareto_cells(row) -> list[str]:
    return [f.workload_label(row), f.hardware_label(row), point_label(row), f.sig(row["images_per_s_per_chip"]),
            _sec(row.get("call_p50_s")), f.sig(row.get("image_usd_per_kimage"))]


def section(data, fmt: str, unit, max_rows: int = 200, figures: bool = True) -> list[str]:
    """The diffusion section (the image unit's `report_section`): per workload, platform and plan $
    per 1,000 images with seconds per image by stage, then the Pareto front of images/s per chip
    against latency. Markdown lines, or HTML fragments with fmt "html"."""
    summary = data.summary_of(unit)
    if not len(summary):
        return []
    placement = placements(data.results)
    front = pareto(data.priced_rows.take(data.unit_positions(unit)))
    if fmt == "md":
        from tpubench.output.report.markdown_parts import table

        out = []
        for _, group in summary.groupby(["workload", "scale"], sort=False, dropna=False):
            out += [f"## Images, {f.workload_label(group.iloc[0])}: $ per 1,000 images per platform and plan", ""]
            out.append(table(HEADERS, [cells(r, placement) for _, r in group.iterrows()]))
            out.append("")
        if len(front):
            out += ["## Images: Pareto front of images/s per chip against seconds per call", "",
                    table(PARETO_HEADERS, [pareto_cells(r) for _, r in front.iterrows()]), ""]
        return out + [f"- {note}" for note in NOTES] + [""]

    from tpubench.output.report.html_parts import escape_html, html_table

    body = []
    for _, group in summary.groupby(["workload", "scale"], sort=False, dropna=False):
        body.append(f"<h2>Images, {escape_html(f.workload_label(group.iloc[0]))}: $ per 1,000 images per platform "
                    "and plan</h2>")
        body.append(html_table(HEADERS, [cells(r, placement) for _, r in group.iterrows()],
                           NUMERIC, f.validity_classes(group),
                           {5: lambda v: f"verdict-{v.split()[0]}" if v else "", 13: lambda v: "validity"}))
    if len(front):
        body.append("<h2>Images: Pareto front of images/s per chip against seconds per call</h2>")
        body.append(html_table(PARETO_HEADERS, [pareto_cells(r) for _, r in front.iterrows()], {3, 4, 5}))
    body.append('<ul class="note">' + "".join(f"<li>{escape_html(n)}</li>" for n in NOTES) + "</ul>")
    return body
