"""Terminal rendering for `tpubench run`: progress bars and the final table. Units chosen here."""

from __future__ import annotations

from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tpubench import units
from tpubench.output.run_cost import per_unit_cost_table
from tpubench.output.safe_text import escape  # rich markup and control characters
from tpubench.records import usable
from tpubench.run.runner import PointOutcome
from tpubench.scenarios import registry
from tpubench.scenarios.registry import point_label, scenario_of
from tpubench.scenarios.run_table import MISSING


class RichReporter:
    """Progress over the sweep's points, and within each through load / compile / warm-up / measure."""

    def __init__(self, console):
        self.console = console
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), console=console, transient=False)
        self.points_task = None
        self.phase_task = None

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def note(self, message):
        self.console.print(escape(message))

    def sweep_started(self, points):
        self.points_task = self.progress.add_task("points", total=len(points))
        self.phase_task = self.progress.add_task("", total=1, visible=False)

    def point_started(self, index, point):
        self.progress.update(self.points_task, description=f"point {index + 1}: {point_label(point)}")

    def phase(self, name, done, total):
        self.progress.update(self.phase_task, description=f"  {name}", completed=done, total=max(total, 1),
                             visible=True)

    def points_added(self, count):
        task = next(t for t in self.progress.tasks if t.id == self.points_task)
        self.progress.update(self.points_task, total=(task.total or 0) + count)

    def point_finished(self, index, outcome: PointOutcome):
        self.progress.advance(self.points_task)
        if outcome.skipped:
            self.console.print(f"skipped {point_label(outcome.point)}: already measured (--resume)")
        elif outcome.result.status == "failed":
            self.console.print(f"[red]failed[/red] {point_label(outcome.point)}: {escape(str(outcome.result.error))}")
        elif outcome.result.status == "skipped":
            self.console.print(f"skipped {point_label(outcome.point)}: {escape(str(outcome.result.error))}")


def render_run_table(console, outcomes: list[PointOutcome]) -> None:
    """One table per scenario kind in the sweep (each scenario's own columns), then its warnings
    and where the results went."""
    kinds = list(dict.fromkeys(o.point.scenario_kind for o in outcomes))
    for kind in kinds:
        console.print(scenario_of(kind).run_table([o for o in outcomes if o.point.scenario_kind == kind]))
    written = [str(o.path) for o in outcomes if o.result is not None and o.path is not None]
    for o in outcomes:   # usable, but measured on a busy host or with varying timings (records/usable.py)
        if o.result is not None and o.result.status == "ok" and o.result.validity.valid and o.result.validity.noise:
            console.print(f"[yellow]noisy[/yellow] {point_label(o.point)}: {escape('; '.join(o.result.validity.noise))}"
                          "; still measured, priced and reported, with its wider 95% CI")
    shown: set[str] = set()
    for o in outcomes:
        if o.result is not None and o.result.warnings and o.result.status == "ok":
            for w in o.result.warnings:
                if w not in shown or not scenario_of(o.point.scenario_kind).warn_once:
                    console.print(f"[yellow]warning[/yellow] {point_label(o.point)}: {escape(w)}")
                shown.add(w)
    if written:
        folder = {str(Path(p).parent) for p in written}
        console.print(f"wrote {len(written)} result file(s) to {', '.join(sorted(folder))}")


def render_comparisons(console, comparisons, unmatched: list[str], *, numerics_only: bool = False) -> None:
    for c in comparisons:
        console.print(f"[bold]{escape(c.label)}[/bold]")
        if not numerics_only:
            table = Table("metric", "A", "B", "B/A (95% CI)", "verdict")
            for m in c.metrics:
                timed = m.metric.endswith("_s") and not m.metric.endswith("_per_s")
                fmt = (lambda v: f"{units.ms(v, spec=',.2f', missing=MISSING)} ms") if timed else \
                    (lambda v: f"{units.sig(v)} J") if m.metric.startswith("joules_") else \
                    (lambda v: units.fixed(v, ",.1f", MISSING))
                ratio = f"{m.ratio:.3f} ± {m.half_width:.3f}" if units.finite(m.ratio) else MISSING
                table.add_row(m.metric, fmt(m.a), fmt(m.b), ratio, m.verdict)
            console.print(table)
        if c.profile and not numerics_only:   # both ran with --profile (measure/profile.py)
            console.print("where the time moved (profiled pass, per iteration):")
            for m in c.profile:
                console.print(f"  {m.category} {units.ms(m.a_s)} -> {units.ms(m.b_s)} ms "
                              f"({'+' if m.change_s > 0 else ''}{units.ms(m.change_s)} ms)")
        n = c.numerics
        colour = {"agree": "green", "disagree": "red"}.get(n.verdict, "yellow")
        console.print(f"numerics: [{colour}]{n.verdict}[/{colour}] ({escape(n.detail)})")
    for f in unmatched:
        console.print(f"[yellow]unmatched[/yellow] {escape(f)}")


def render_run_cost(console, paths, *, include_flagged: bool = False) -> None:
    """What the points just measured cost per unit of output: one table per unit (registry.units(),
    the token unit's own table or the shared per_unit_cost_table), the cheapest priced
    instance per plan. Flagged prices take part only where no unflagged one exists (all with
    `include_flagged`), marked. A point that is not usable (records/usable.py) is priced for
    reference as a report prices it, marked INVALID and listed with its reasons; a noisy one is
    priced like any other, marked noisy with its CV."""
    from tpubench.money.cost import PRICE_NOTES, price_results, unit_rows
    from tpubench.money.pricing import load_prices
    from tpubench.output.frames import load_results
    from tpubench.output.report.tokens import run_cost_table

    # A unit's own table after a run, by unit key (its scenario below names none); else the shared one.
    tables = {"token": run_cost_table}

    df = load_results(paths)
    df = df[df["status"] == "ok"]
    if df.empty:
        return
    prices = load_prices()
    plans = ["on_demand", "spot"]
    priced, unpriced = price_results(df, prices, plans=plans, include_flagged=include_flagged)
    for _, row in unpriced.iterrows():
        console.print(f"[yellow]unpriced[/yellow] {escape(str(row['accelerator']))}: {escape(str(row['reason']))}")
    for note in priced.attrs.get(PRICE_NOTES, []):
        console.print(f"[yellow]note[/yellow] {escape(note)}")
    if priced.empty:
        return
    sources = []
    for unit in registry.units():   # one table per unit of output, each in its own figures
        rows = priced[unit_rows(priced, unit)]
        if len(rows):
            sources.append(tables.get(unit.key, per_unit_cost_table)(console, rows, unit))
    _say_why_marked(console, priced)
    if sources:
        source = sources[0]
        console.print(f"prices: {escape(source['price_source'][:90])}... as of {source['price_as_of']}. "
                      f"Full report: tpubench report {Path(paths[0]).parent} --format html --out report.html")


def _say_why_marked(console, priced) -> None:
    """Under the cost tables, each point that is not usable with its reasons: its cost is there for
    reference, as in a report, and never ranked (a noisy point's reasons came with the run table)."""
    fine = usable.usable_mask(priced)
    for _, row in priced[~fine].drop_duplicates("file").iterrows():
        reasons = row.get("invalid_reasons")
        reasons = reasons if isinstance(reasons, str) and reasons else "no reason recorded"
        console.print(f"[yellow]invalid[/yellow] {escape(registry.row_label(row))}: {escape(reasons)}; its cost "
                      "is for reference only, never ranked or budgeted")
