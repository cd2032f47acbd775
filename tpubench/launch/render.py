"""Terminal tables for `tpubench launch` (the priced plan) and `tpubench collect` (jobs and results)."""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from rich.table import Table

from tpubench.units import usd_cents


def _usd(value: float | None) -> str:
    return usd_cents(value, "no price")


def render_launch_plan(console, prepared) -> None:
    plan_name = "spot" if prepared.manifest["spot"] else "on_demand"
    table = Table("target", "SkyPilot resources", "priced as", "$/h", "nodes", "points", "expected h", "est. cost",
                  title=f"tpubench launch {prepared.launch_id} ({plan_name} prices)", title_justify="left")
    for plan in prepared.plans:
        t, p = plan.target, plan.target.priced_as
        resources = t.accelerators or t.priced_as["instance_type"]
        if t.cloud:
            resources += f" on {'/'.join(x for x in (t.cloud, t.region) if x)}"
        table.add_row(escape(t.spec), escape(resources), escape(f"{p['cloud']} {p['region']} {p['instance_type']}"),
                      _usd(p["usd_per_hour"]), str(plan.num_nodes), str(len(plan.points)), f"{plan.hours:.2f}",
                      _usd(plan.usd))
    unpriced = " + unpriced targets" if prepared.unpriced else ""
    table.add_row("total", "", "", "", "", str(sum(len(p.points) for p in prepared.plans)),
                  "", f"{_usd(prepared.total_usd)}{unpriced}",
                  style="bold")
    console.print(table)
    bases = sorted({p.hours_basis for p in prepared.plans})
    console.print(f"expected hours: setup once per target, then per point: {'; '.join(bases)}. "
                  "SkyPilot's jobs controller (a small CPU VM) is not included.")
    from tpubench.money.pricing import STALE_AFTER_DAYS, price_age_days

    dates = sorted({p.target.priced_as["as_of"] for p in prepared.plans if p.target.priced_as["usd_per_hour"] is not None})
    old = [f"{d} ({price_age_days(d)} days)" for d in dates if price_age_days(d) > STALE_AFTER_DAYS]
    if old:
        console.print(f"[yellow]warning:[/yellow] the estimate uses prices dated {', '.join(old)}: check them, or "
                      "import SkyPilot's current catalog (`tpubench pricing import-skypilot`, then --prices FILE)")
    for plan in prepared.plans:
        for message in ([plan.target.note] if plan.target.note else []) + plan.warnings:
            console.print(f"[yellow]warning:[/yellow] {escape(plan.target.spec)}: {escape(message)}")


def render_collected(console, reports, out_dir: Path) -> None:
    table = Table("launch", "target", "job", "status", "results found", "added", title=f"collected into {out_dir}",
                  title_justify="left")
    for r in reports:
        status = r.status + (" (fetch failed)" if r.fetch_failed_badly else "")
        colour = "red" if "FAILED" in status or r.fetch_failed_badly else "green" if r.status == "SUCCEEDED" else "yellow"
        table.add_row(escape(r.launch_id), escape(r.target), "-" if r.job_id is None else str(r.job_id),
                      f"[{colour}]{escape(status)}[/{colour}]", str(r.found), str(r.added))
    console.print(table)
    for r in reports:
        if r.fetch_error:
            label = "[red]error:[/red]" if r.fetch_failed_badly else f"nothing fetched (job {escape(r.status)}):"
            console.print(f"{label} {escape(r.target)}: {escape(r.fetch_error)}")
        if r.log_file is not None:
            console.print(f"{escape(r.target)} failed; the last lines of its log (all of it: {escape(str(r.log_file))}):")
            for line in r.log_tail:
                console.print(f"  {escape(line)}", soft_wrap=True)
