"""The `tpubench` command: thin; parses, calls the library, renders. One error handler.

Start-up imports neither torch nor jax (nor pandas): each command imports what it needs.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

from tpubench.cli_budget import budget_app, check_estimates, estimating, with_estimates
from tpubench.cli_group import LazyTyper
from tpubench.errors import UserError

# Help is click's plain text (rich_markup_mode=None on every Typer): typer's rich help imports rich's
# markdown, syntax and traceback modules, ~0.2 s of a --help that should take none (issue 34).
# LazyTyper: a command's click form is built only when it runs (or --help lists it), cli_group.py.
app = LazyTyper(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                help="Measure a PyTorch workload on TPU, GPU, Trainium, JAX or CPU and price it per token.")


def escape(text: str) -> str:
    """Text for the rich console: markup shown as written, control characters (ESC...) removed."""
    from tpubench.output.safe_text import escape as safe_escape

    return safe_escape(text)


def _console(stderr: bool = False):
    from rich.console import Console

    # Piped output gets a wide page: tables stay readable in logs and CI.
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)


def _print_ok(text: str) -> None:
    """`ok TEXT` on stdout, without rich: rich's console is ~50 ms of imports that `validate` would
    otherwise pay for one word in green (green on a terminal unless NO_COLOR is set)."""
    from tpubench.output.safe_text import terminal_text

    ok = "\x1b[32mok\x1b[0m" if sys.stdout.isatty() and not os.environ.get("NO_COLOR") else "ok"
    print(f"{ok} {terminal_text(text)}", flush=True)


# ----------------------------------------------------------------------------- run

_INCLUDE_FLAGGED_HELP = ("Let prices the table flags as suspect (spot above on-demand, a lower bound...) compete "
                         "where an unflagged row prices the same accelerator and plan; they stay marked.")


_MODEL_HELP_RUN = ("A Hugging Face model id (its config fetched once into Hugging Face's cache) or a folder with "
                   "its config.json: its architecture with random weights (no weights read), from a workload file "
                   "written to --out first, which `tpubench run` runs again the same.")


@app.command()
def run(
    workload: Optional[Path] = typer.Argument(None, help="Workload YAML file (or --model)."),
    device: Optional[str] = typer.Option(None, "--device", "-d",
                                         help="cpu, cuda, tpu, neuron, xla, mps (default: the accelerator present, else cpu)."),
    backend: str = typer.Option("torch", "--backend", "-b", help="torch or jax."),
    scale: Optional[str] = typer.Option(None, "--scale", "-s",
                                        help="'full' or a scale named in the file (default: small on CPU, "
                                             "full on an accelerator)."),
    out: Path = typer.Option(Path("results"), "--out", "-o", help="Folder for result files."),
    resume: bool = typer.Option(False, "--resume", help="Skip points already measured in --out for this environment."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="With --resume, measure failed points again."),
    price: bool = typer.Option(True, "--price/--no-price", help="Print what the run costs per token."),
    max_points: Optional[int] = typer.Option(None, "--max-points", min=1,
                                             help="Refuse sweeps with more points than this (default 10,000)."),
    tensor_parallel: Optional[int] = typer.Option(None, "--tensor-parallel", "--tp", min=1,
                                                  help="Shard the model over N chips by tensor parallel (overrides the "
                                                       "workload's parallel block)."),
    expert_parallel: Optional[int] = typer.Option(None, "--expert-parallel", "--ep", min=1,
                                                  help="Split a MoE model's experts over N chips (overrides the "
                                                       "workload's parallel block)."),
    server_url: Optional[str] = typer.Option(None, "--server-url",
                                             help="Measure this running OpenAI-compatible server (serve workloads)."),
    data_parallel: Optional[int] = typer.Option(None, "--data-parallel", "--dp", min=1,
                                                help="Training: data-parallel ranks (overrides parallel.data)."),
    fsdp: Optional[bool] = typer.Option(None, "--fsdp/--no-fsdp",
                                        help="Training: shard parameters over the data-parallel ranks (FSDP2)."),
    include_flagged: bool = typer.Option(False, "--include-flagged", help=_INCLUDE_FLAGGED_HELP),
    energy: bool = typer.Option(True, "--energy/--no-energy",
                                help="Measure energy over each point's timed loop where the device reports it."),
    chip_power_w: Optional[float] = typer.Option(None, "--chip-power-w", min=0.0,
                                                 help="Where nothing measures power: model each chip at this many "
                                                      "watts (labelled modelled)."),
    profile: bool = typer.Option(False, "--profile",
                                 help="After each point's timed loop, one profiled pass: time by category "
                                      "(experts, router, attention, ...) and a trace file beside the result."),
    model: Optional[str] = typer.Option(None, "--model", help=_MODEL_HELP_RUN),
    scenario: Optional[str] = typer.Option(None, "--scenario", help="With --model: generate (default) or train."),
    batch_size: List[int] = typer.Option([], "--batch-size", min=1,
                                         help="With --model: a batch size (repeatable: a sweep; default 1 and 8)."),
    input_length: Optional[int] = typer.Option(None, "--input-length", "--input-len", min=1,
                                               help="With --model: prompt tokens (train: the sequence length)."),
    output_length: Optional[int] = typer.Option(None, "--output-length", "--output-len", min=1,
                                                help="With --model: tokens generated per sequence."),
):
    """Measure every point of a workload's sweep and write one result file per point.

    A point that needs N > 1 chips runs in a world of N processes started with torch.distributed's
    launcher; under your own torchrun, every rank runs this command and rank 0 writes the results."""
    from tpubench.console import RichReporter, render_run_table
    from tpubench.run.runner import run_sweep

    console = _console()
    workload = _workload_to_run(console, workload, out, model, scenario, batch_size, input_length, output_length)
    with RichReporter(console) as reporter:
        outcomes = run_sweep(workload, backend=backend, device=device, scale=scale, out_dir=out,
                             resume=resume, retry_failed=retry_failed, reporter=reporter,
                             tensor_parallel=tensor_parallel, expert_parallel=expert_parallel, server_url=server_url,
                             data_parallel=data_parallel, fsdp=fsdp, energy=energy, chip_power_w=chip_power_w,
                             profile=profile, **({"max_points": max_points} if max_points else {}))
    if os.environ.get("RANK", "0") != "0":
        return   # under torchrun, rank 0 reports for the world
    render_run_table(console, outcomes)
    if price:
        from tpubench.console import render_run_cost

        render_run_cost(console, [o.path for o in outcomes if o.path], include_flagged=include_flagged)
    failed = [o for o in outcomes if o.result is not None and o.result.status == "failed"]
    if failed and len(failed) == len([o for o in outcomes if not o.skipped]):
        raise typer.Exit(1)


def _workload_to_run(console, workload: Optional[Path], out: Path, model: Optional[str], kind: Optional[str],
                     batch_size: List[int], input_length: Optional[int], output_length: Optional[int]) -> Path:
    """The workload file `run` measures: the one named, or the one written from --model's config."""
    flags = {"--scenario": kind, "--batch-size": batch_size or None, "--input-length": input_length,
             "--output-length": output_length}
    if model is None:
        if workload is None:
            raise UserError("name a workload file (tpubench run workloads/qwen3_moe.yaml) or a model "
                            "(tpubench run --model Qwen/Qwen3-30B-A3B)", field="WORKLOAD")
        given = next((flag for flag, value in flags.items() if value is not None), None)
        if given:
            raise UserError(f"applies with --model; the workload file sets it in its scenario section "
                            f"({workload})", field=given)
        return workload
    if workload is not None:
        raise UserError(f"a workload file ({workload}) or --model, not both", field="--model")
    if os.environ.get("WORLD_SIZE", "1") != "1":
        raise UserError("under torchrun, run the workload file --model writes (run it once without torchrun, "
                        "or write one)", field="--model")
    from tpubench.run.from_model import ModelRun, workload_for
    from tpubench.workload_spec.point import DEFAULT_KIND

    path, note = workload_for(ModelRun(model, kind or DEFAULT_KIND, tuple(batch_size), input_length, output_length),
                              out)
    console.print(f"workload: {escape(str(path))}, from {escape(model)}'s config with random weights "
                  f"(edit it and run it again: tpubench run {escape(str(path))})", soft_wrap=True)
    if note:
        _warn_stderr(note)
    return path


@app.command()
def validate(
    workloads: List[Path] = typer.Argument(..., help="Workload YAML files."),
    max_points: Optional[int] = typer.Option(None, "--max-points", min=1,
                                             help="Refuse sweeps with more points than this (default 10,000)."),
):
    """Check workload files without running anything (nor importing torch or transformers)."""
    _no_collection_at_exit()
    with _without_pydantic_plugins():
        _validate(workloads, max_points)


@contextlib.contextmanager
def _without_pydantic_plugins():
    """No pydantic plugin while `validate` builds and applies tpubench's workload schema: looking
    for plugins (reading every installed package's entry points) is ~10 ms of a command that
    should take 0.3 s at most (issue 34). A plugin only observes validation, so the
    outcome is the same. typer does the same around its own parameter models; the variable is
    restored after (the user's own value too), so nothing started later inherits it, and `run`
    builds its models with the user's plugins."""
    previous = os.environ.get("PYDANTIC_DISABLE_PLUGINS")
    os.environ["PYDANTIC_DISABLE_PLUGINS"] = "1"
    try:
        yield
    finally:
        if previous is None:
            del os.environ["PYDANTIC_DISABLE_PLUGINS"]
        else:
            os.environ["PYDANTIC_DISABLE_PLUGINS"] = previous


def _no_collection_at_exit() -> None:
    """At exit Python runs its cyclic garbage collector over every object the process still has:
    ~20 ms of a `validate` (typer's and pydantic's start-up objects, all alive until then), for
    nothing to free that `validate` needs freed (it writes only to stdout and stderr, which exit
    flushes anyway). gc.freeze() at exit takes them out of that collection. Registered once, however
    often `validate` runs in a process; a process that goes on after it collects as before."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)


def _validate(workloads: List[Path], max_points: Optional[int]) -> None:
    from tpubench.models.config_check import covered_family
    from tpubench.run.sweep import check_sweep_size, scale_names
    from tpubench.run.workload import load_workload
    from tpubench.scenarios.registry import scenario_of

    for path in workloads:
        w = load_workload(path)   # schema, names, family and every scale's model config values
        limit = {"max_points": max_points} if max_points else {}
        sizes = {name: check_sweep_size(w, name, source=str(path), **limit) for name in scale_names(w)}
        detail = ", ".join(f"{name}: {n:,} point{'s' * (n != 1)}" for name, n in sizes.items())
        _check_compare_on(path, w.compare_on)
        subject = scenario_of(w.scenario.kind).subject(w)   # a model family, a pipeline, the server's model
        _print_ok(f"{path}: {w.name} ({subject}); {detail}")
        if w.model is not None and not covered_family(w.model.family):
            _warn_stderr(f"{path}: tpubench's config table does not cover '{w.model.family}': its model.config "
                         "keys are checked by transformers when the model is built")


def _check_compare_on(path: Path, compare_on, price_files: List[Path] = ()) -> None:
    """Every chip of a workload's `compare_on` resolved against the price and spec tables as
    `estimate` resolves it: the shipped tables, read without pandas, or the price table with your
    files over it."""
    if not compare_on:
        return
    from tpubench.estimate.chips import parse_target
    from tpubench.run.workload import where_in

    offers = _offers(price_files)
    for i, spec in enumerate(compare_on):
        try:
            parse_target(spec, offers, field="compare_on")
        except UserError as exc:
            raise UserError(exc.message, where=where_in(path, ("compare_on", i)), field="compare_on") from None


def _check_on(on: List[str], price_files: List[Path]) -> None:
    """Every `--on` chip resolved before anything is loaded or fitted (a bad one is refused in
    well under a second): against the shipped tables, or the price table with your files over it."""
    if not on:
        return
    from tpubench.estimate.chips import parse_target
    from tpubench.run.workload import MAX_COMPARE_ON

    if len(on) > MAX_COMPARE_ON:
        raise UserError(f"{len(on)} chips; name at most {MAX_COMPARE_ON} (each is estimated at every load a "
                        "workload sweeps)", field="--on")
    offers = _offers(price_files)
    for spec in on:
        parse_target(spec, offers, field="--on")


def _offers(price_files: List[Path]):
    """What chips the price table offers: the shipped table's without pandas, else the loaded table's."""
    from tpubench.estimate.chips import Offers

    return Offers.shipped() if not price_files else Offers.of(_load_prices(price_files, None))


@app.command()
def backends():
    """List every backend and device, whether it can run here, and why not."""
    from rich.table import Table

    from tpubench.backends import all_availability

    table = Table("backend", "device", "available", "detail")
    for a in all_availability():
        table.add_row(a.backend, a.device, "[green]yes[/green]" if a.available else "[red]no[/red]", escape(a.detail))
    _console().print(table)


def _warn_stderr(msg: str) -> None:
    _console(stderr=True).print(f"[yellow]warning:[/yellow] {escape(msg)}")


def _load_prices(price_files: List[Path], discount: Optional[float], clouds=(), regions=()):
    from tpubench.money.pricing import in_regions, load_prices

    return in_regions(load_prices(price_files, discount_pct=discount), clouds or (), regions or ())


@app.command()
def report(
    paths: List[Path] = typer.Argument(..., help="Result files or folders."),
    fmt: str = typer.Option("md", "--format", "-f", help="md, html or csv."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write here instead of the terminal."),
    prices: List[Path] = typer.Option([], "--prices", help="Your price file(s), layered over the shipped table."),
    plan: List[str] = typer.Option([], "--plan", help="on_demand, spot, commit_1y, commit_3y, reservation, "
                                                     "flex_start, capacity_block (repeatable)."),
    discount: Optional[float] = typer.Option(None, "--discount", help="Add a plan: on-demand less this percent."),
    cloud: List[str] = typer.Option([], "--cloud", help="Only this cloud's prices (repeatable; default: every cloud "
                                                         "in the table)."),
    region: List[str] = typer.Option([], "--region", help="Only this region's prices (repeatable; default: every "
                                                           "region in the table)."),
    instance: Optional[str] = typer.Option(None, "--instance"),
    what_if: Optional[str] = typer.Option(None, "--what-if-instance", help="Price every result as this instance."),
    all_runs: bool = typer.Option(False, "--all-runs", help="Keep every run of a point measured again "
                                                            "(default: only the latest per point)."),
    include_flagged: bool = typer.Option(False, "--include-flagged", help=_INCLUDE_FLAGGED_HELP),
    grid_gco2_per_kwh: Optional[float] = typer.Option(None, "--grid-gco2-per-kwh",
                                                      help="Grid carbon intensity to use instead of the regions'."),
    published_tolerance: float = typer.Option(10.0, "--published-tolerance", min=0.0,
                                              help="Percent within which your point agrees with published results "
                                                   "(tpubench import)."),
    tco: Optional[Path] = typer.Option(None, "--tco", help="CSV of TCO tiers (as for budget): on-demand $/Mtok "
                                                           "at each tier's rate beside the list price."),
    no_shipped: bool = typer.Option(False, "--no-shipped", help="Leave out the published reference rows shipped "
                                                                "with tpubench (listed apart, never priced)."),
    on: List[str] = typer.Option([], "--on", help="A chip to decide on for every workload, beside its compare_on: "
                                                  "tpu-v6e-8, H100:8, H100:8@fp8+kv_fp8, trn2 (repeatable); estimated, "
                                                  "labelled so, in the answer table."),
    table: str = typer.Option("report", "--table", help="report (everything) or answer (only the answer table: "
                                                        "with --format csv, its options and verdicts)."),
    figures: bool = typer.Option(False, "--figures", help="Also draw the figures to image files in OUT-figures/ "
                                                          "beside --out (markdown links them); needs vl-convert: "
                                                          "pip install 'tpubench[figures]'."),
    figure_format: str = typer.Option("svg", "--figure-format", help="svg or png, for --figures."),
):
    """$/Mtok per platform and plan (with CIs), throughput per chip, latency; markdown, HTML or CSV.
    Opens with the answer: per workload and plan, measured, estimated and published options priced
    side by side, with a verdict."""
    _check_on(on, prices)
    _no_collection_at_exit()     # a report over 10,000 results leaves millions of objects: 0.1 s to collect
    if figures:
        _check_figures(fmt, out, figure_format)
    from tpubench.output.collection import collection_paused
    from tpubench.output.found import holdings, require_readable
    from tpubench.output.frames import load_results

    found = holdings(paths)   # a missing, unreadable or empty folder: one line, before any work
    keep = "all" if all_runs else "latest"
    ready: dict = {}

    def prepare() -> None:
        """What the report needs besides the results, while forked workers parse them (a first
        report over thousands of files: docs/commands.md#report-cache)."""
        from tpubench.money.tco import load_tco
        from tpubench.output.report import data  # noqa: F401 - pandas and the report's modules

        # Clouds and regions filter the table itself, so measured, estimated and published options
        # all come from the regions asked for.
        ready["prices"] = _load_prices(prices, discount, cloud, region)
        ready["tco"] = None if tco is None else load_tco(tco)

    # Paused over the whole report, not only within each step: a collection between two steps would
    # walk every object the step before made (output/collection.py).
    with collection_paused():
        results = load_results(paths, warn=_warn_stderr, keep=keep, meanwhile=prepare)
        from tpubench.estimate.for_reports import estimates_for_report
        from tpubench.output.report import build_report, render

        data = build_report(paths, results=results, prices=ready["prices"], plans=plan or None,
                            instance=instance, what_if_instance=what_if, warn=_warn_stderr, keep=keep,
                            include_flagged=include_flagged, grid_gco2_per_kwh=grid_gco2_per_kwh,
                            published_tolerance=published_tolerance / 100, tco_tiers=ready["tco"],
                            include_shipped=not no_shipped, on=on, estimator=estimates_for_report)
        require_readable(found, len(data.results))
        if out is not None or fmt != "md":  # markdown on the terminal already lists them
            for w in data.warnings:
                _warn_stderr(w)
        images = _report_images(data, fmt, out, figure_format) if figures else None
        html_name = out.with_suffix(".html").name if out is not None else None
        _emit(render(data, fmt, table=table, images=images, html_name=html_name), out)


def _check_figures(fmt: str, out: Optional[Path], figure_format: str) -> None:
    """`report --figures`'s flags, checked before any file is read."""
    if out is None:
        raise UserError("--figures writes image files beside the report: give --out FILE", field="--figures")
    if fmt.lower() == "csv":
        raise UserError("--figures goes with --format md or html", field="--figures")
    if figure_format.lower() not in ("svg", "png"):
        raise UserError(f"unknown figure format '{figure_format}'; choose svg or png", field="--figure-format")


def _report_images(data, fmt: str, out: Path, figure_format: str):
    """`report --figures`: the report's figures drawn to OUT-figures/ beside --out (output/report/chart_images.py)."""
    from tpubench.output.report.chart_images import report_charts, write_images

    folder = out.parent / f"{out.stem}-figures"
    images = write_images(report_charts(data), folder, figure_format.lower(), relative_to=out.parent)
    _console().print(f"wrote {len(images)} figure(s) to {folder}")
    return images


def _sized_budget(command, amount: float, options, inputs) -> None:
    """A `tpubench budget` subcommand (cli_budget.py): its planner's sizing on the results, every
    flag checked (one line, exit 2) before a file is read."""
    from tpubench.budget.render import budget_format, render_budget
    from tpubench.output.found import holdings, require_readable
    from tpubench.output.frames import load_results
    from tpubench.output.report.data import older_runs_note

    budget_format(inputs.fmt)
    sizing = command.planner.sizing()
    sizing.check(amount, options, command.unit)
    prices = _load_prices(inputs.prices, inputs.discount, options.cloud, options.region)
    check_estimates(options, prices)
    # Estimates need no result of yours (the question before buying anything): where none names a
    # workload file, the estimate says to name one (--workload).
    found = holdings(inputs.paths, empty_ok=estimating(options))
    df = load_results(inputs.paths, warn=_warn_stderr, keep="all" if inputs.all_runs else "latest",
                      include_published=inputs.include_published, shipped=not inputs.no_shipped)
    measured = df[df["source"] == "measured"] if "source" in df else df
    if not estimating(options):
        require_readable(found, len(measured), published_used=inputs.include_published)
    _require_kinds(measured, command, found.where, sized_on_published=inputs.include_published)
    if df.attrs.get("older_runs_left_out"):
        _warn_stderr(older_runs_note(df.attrs["older_runs_left_out"]))
    result = sizing.plan(df, prices, amount, options, command.unit)
    # --on / --workload: the estimated options, sized apart from the measured ones (cli_budget.py).
    result = with_estimates(result, options, inputs, df, prices, _warn_stderr)
    _emit(render_budget(result, inputs.fmt), inputs.out)


def _require_kinds(measured, command, where: str, sized_on_published: bool) -> None:
    """A budget subcommand on results none of which is a point of its kinds (`budget serve` on
    generate points) is one line naming the subcommand that sizes on them, not an empty budget."""
    if measured.empty or sized_on_published:
        return
    found = sorted(set(measured["scenario_kind"].astype(str)))
    if set(found) & set(command.kinds):
        return
    from tpubench.budget.planners import budget_commands

    fits = [c.name for c in budget_commands() if set(found) & set(c.kinds)]
    use = f": {' or '.join(f'`tpubench budget {name}`' for name in fits)} sizes on those" if fits else ""
    raise UserError(f"none of the {len(measured)} measured result(s) here is a {' or '.join(command.kinds)} point "
                    f"(they are {', '.join(found)}){use}", where=where, field=f"budget {command.name}")


# One subcommand per budget planner, made when `tpubench budget` is first looked into (cli_budget.py).
app.add_typer(budget_app(_sized_budget), name="budget")


pricing_app = typer.Typer(help="Price tables: validate, list, import a SkyPilot catalog or a cloud's own price file.",
                          no_args_is_help=True, rich_markup_mode=None)
app.add_typer(pricing_app, name="pricing")


@pricing_app.command("validate")
def pricing_validate(files: List[Path] = typer.Argument(None, help="Price CSV files (default: the shipped table).")):
    """Check price files; the first problem is one line naming file, row and column (exit 2)."""
    from tpubench.money.pricing import SHIPPED_PRICES, validate_price_files

    counts = validate_price_files(files or [SHIPPED_PRICES])
    for name, n in counts.items():
        _console().print(f"[green]ok[/green] {name}: {n} price row(s)")


@pricing_app.command("list")
def pricing_list(
    accelerator: Optional[str] = typer.Option(None, "--accelerator", "-a", help="e.g. H100, 'TPU v6e', Trainium."),
    prices: List[Path] = typer.Option([], "--prices"),
    discount: Optional[float] = typer.Option(None, "--discount"),
):
    """The price table (shipped rows plus yours), USD per instance-hour per plan (a plan with an
    upfront part at its effective price: upfront spread over the term)."""
    from rich.table import Table

    from tpubench.money.plans import plan_label
    from tpubench.money.pricing import prices_wide, upfront_notes

    long = _load_prices(prices, discount)
    wide = prices_wide(long)
    if accelerator:
        wide = wide[wide["accelerator"].str.lower() == accelerator.lower()]
        if wide.empty:
            raise UserError(f"no price rows for accelerator '{accelerator}'", field="--accelerator")
    cols = [c for c in wide.columns if c != "source"]
    table = Table(*[plan_label(c) for c in cols])      # plan columns by their labels, the rest as named
    shown = wide[cols].assign(flagged=wide["flagged"].map({True: "⚠ flagged", False: ""}))
    for row in shown.itertuples(index=False):
        table.add_row(*[escape("" if (isinstance(v, float) and v != v) else
                               (f"{v:g}" if isinstance(v, float) else str(v))) for v in row])
    _console().print(table)
    for line in upfront_notes(long[long["instance_type"].isin(set(wide["instance_type"]))]):
        _console().print(escape(line))
    flagged = long[long["flagged"] & long["instance_type"].isin(set(wide["instance_type"]))]
    for r in flagged.drop_duplicates(["cloud", "region", "instance_type"]).itertuples(index=False):
        _console().print(escape(f"⚠ flagged {r.cloud} {r.region} {r.instance_type}: {r.flag_reason}"))
    if len(flagged):
        _console().print("report, budget and run use a flagged price only where no unflagged row prices the same "
                         "accelerator and plan; --include-flagged lets them compete, marked.")


@pricing_app.command("import-skypilot")
def pricing_import(
    vms_csv: Path = typer.Argument(..., help="A SkyPilot catalog vms.csv you downloaded."),
    cloud: str = typer.Option(..., "--cloud", help="gcp, aws or azure."),
    out: Path = typer.Option(Path("pricing/imported.csv"), "--out", "-o"),
    include_cpu: bool = typer.Option(False, "--include-cpu", help="Also import CPU-only VMs (priced per vCPU)."),
):
    """Turn a SkyPilot catalog into tpubench price rows (host + GPU summed, spot = lowest zone)."""
    from tpubench.money.pricing import write_price_csv
    from tpubench.money.sky_prices import import_skypilot

    rows = import_skypilot(vms_csv, cloud, include_cpu=include_cpu)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_price_csv(rows, out)
    _console().print(f"wrote {len(rows)} price row(s) to {out}; check it with: tpubench pricing validate {out}")


def _import_cloud_prices(cloud: str, file: Path, out: Optional[Path], as_of: Optional[str]) -> None:
    """Shared by import-gcp / import-aws / import-azure: import, write, say what was left out and why."""
    from importlib import import_module

    from tpubench.money.pricing import write_price_csv

    as_of = _checked_date(as_of, "--as-of")
    module = import_module(f"tpubench.money.price_imports.{cloud}")
    result = getattr(module, f"import_{cloud}")(file, as_of=as_of)
    table = result.table()
    out = out or Path("pricing") / f"{cloud}-imported.csv"
    write_price_csv(table, out, float_format="%.10g")
    plans_found = ", ".join(sorted(set(table["plan"]))) if len(table) else "none"
    _console().print(escape(f"wrote {len(table)} price row(s) to {out} (plans: {plans_found}); use it with "
                            f"--prices {out}, check it with: tpubench pricing validate {out}"))
    for line in result.summary():
        _console().print(escape(line))


_IMPORT_AS_OF_HELP = "Date the prices are valid for (YYYY-MM-DD); default: the file's own date."


@pricing_app.command("import-gcp")
def pricing_import_gcp(
    file: Path = typer.Argument(..., help="Cloud Billing Catalog API SKUs JSON you saved (services/ID/skus)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Default: pricing/gcp-imported.csv."),
    as_of: Optional[str] = typer.Option(None, "--as-of", help=_IMPORT_AS_OF_HELP),
):
    """GCP TPU prices (per chip-hour SKUs -> slices) by plan from a saved Cloud Billing Catalog file."""
    _import_cloud_prices("gcp", file, out, as_of)


@pricing_app.command("import-aws")
def pricing_import_aws(
    file: Path = typer.Argument(..., help="AWS Price List offer file (AmazonEC2 or AmazonSageMaker index.json)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Default: pricing/aws-imported.csv."),
    as_of: Optional[str] = typer.Option(None, "--as-of", help=_IMPORT_AS_OF_HELP),
):
    """AWS accelerator-instance prices (on-demand, reserved 1y/3y with upfront) from a saved offer file."""
    _import_cloud_prices("aws", file, out, as_of)


@pricing_app.command("import-azure")
def pricing_import_azure(
    file: Path = typer.Argument(..., help="Azure Retail Prices API JSON you saved (Items[])."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Default: pricing/azure-imported.csv."),
    as_of: Optional[str] = typer.Option(None, "--as-of", help=_IMPORT_AS_OF_HELP),
):
    """Azure accelerator-VM prices (on-demand, spot, reservations 1y/3y) from a saved Retail Prices file."""
    _import_cloud_prices("azure", file, out, as_of)


@pricing_app.command("refresh")
def pricing_refresh(
    from_dir: Optional[Path] = typer.Option(None, "--from", help="Rebuild offline from stored copies in this folder "
                                                                 "(skypilot/gcp/vms.csv, skypilot/aws/vms.csv, "
                                                                 "gcp/*.json, aws/*.json, azure/*.json)."),
    out: Path = typer.Option(Path("pricing/refreshed.csv"), "--out", "-o", help="Where the dated table is written."),
    store: Path = typer.Option(Path("pricing/catalogs"), "--store",
                               help="Without --from: where SkyPilot's fetched catalogs are stored (and the clouds' "
                                    "price files you saved are read from)."),
    against: List[Path] = typer.Option([], "--against", help="Price file(s) to compare with (default: the shipped "
                                                             "table)."),
    as_of: Optional[str] = typer.Option(None, "--as-of", help="Date of the stored copies (YYYY-MM-DD); default: "
                                                              "today when fetched, else each file's own date."),
    threshold: float = typer.Option(10.0, "--threshold", min=0.0, help="List prices that moved more than this percent."),
):
    """Rebuild the price table from the public catalogs (SkyPilot's, fetched by SkyPilot itself, and the clouds'
    price files you saved), write it dated, and print what moved. Reaches the network only without --from."""
    from tpubench.money import pricing, refresh

    as_of = _checked_date(as_of, "--as-of")
    labels = None
    if from_dir is None:
        labels, as_of = _fetch_skypilot_catalogs(store), as_of or pricing.today_utc().isoformat()
    table, notes = refresh.rebuild(refresh.find_store(from_dir or store), as_of=as_of, labels=labels)
    if table.empty:
        raise UserError("the stored files price nothing tpubench knows", where=str(from_dir or store))
    written = refresh.write_table(table, out)
    after = pricing.load_prices([written], shipped=False)        # the written file, checked like any --prices file
    before = pricing.load_prices(against, shipped=not against)
    console = _console()
    for line in notes:
        console.print(escape(line))
    dates = sorted(set(after["as_of"]))
    console.print(escape(f"wrote {len(after)} price(s) dated {', '.join(dates)} to {written}; use it with --prices "
                         f"{written}"))
    both, new, gone = refresh.coverage(before, after)
    rows = refresh.moved(before, after, threshold / 100)
    console.print(escape(f"{len(rows)} of {both} price(s) in both tables moved more than {threshold:g}%; {new} only in "
                         f"the new table, {gone} only in the old one"))
    for line in refresh.moved_lines(rows):
        console.print(escape(line))


def _checked_date(text: Optional[str], flag: str) -> Optional[str]:
    """An ISO date given on the command line, not in the future; None stays None."""
    if text is None:
        return None
    from datetime import date

    from tpubench.money.pricing import today_utc

    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise UserError(f"'{text}' is not an ISO date (YYYY-MM-DD)", field=flag) from None
    if day > today_utc():
        raise UserError(f"date {text} is in the future", field=flag)
    return day.isoformat()


def _fetch_skypilot_catalogs(store: Path) -> dict[str, str]:
    """SkyPilot's current gcp and aws catalogs, fetched by SkyPilot itself (launch/sky_bridge.py) and
    copied into `store`/skypilot/<cloud>/vms.csv; returns per cloud where its copy came from."""
    import shutil

    from tpubench.errors import ExternalFailure
    from tpubench.launch import skypilot
    from tpubench.money.refresh import SKYPILOT_CLOUDS

    answer = skypilot.call({"op": "catalog", "files": [f"{c}/vms.csv" for c in SKYPILOT_CLOUDS], "fetch": True},
                           what="fetching SkyPilot's catalogs")
    labels = {}
    for entry in answer["files"]:
        failed = [w for w in entry["warnings"] if "fail" in w.lower()]
        if failed or entry["modified_locally"]:
            why = failed[0] if failed else f"{entry['path']} was modified locally, so SkyPilot keeps it"
            raise ExternalFailure(f"SkyPilot did not fetch {entry['file']}: {why}")
        cloud = entry["file"].split("/")[0]
        target = store / "skypilot" / cloud / "vms.csv"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(entry["path"], target)
        labels[cloud] = f"catalogs/{entry['schema']}/{entry['file']} fetched by SkyPilot {answer['version']}"
    return labels


def _emit(text: str, out: Optional[Path]) -> None:
    if out is None:
        from tpubench.output.safe_text import terminal_text

        text = terminal_text(text)   # a result's ESC sequences never reach the terminal
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    _console().print(f"wrote {out}")


def _read(paths: List[Path]):
    from tpubench.records.result import read_results

    return read_results(paths, warn=_warn_stderr)


# ----------------------------------------------------------------------------- import (published results)

import_app = typer.Typer(help="Published results (InferenceX, MLPerf) beside yours: stored under RESULTS/published/, "
                              "compared in `tpubench report`, never priced or budgeted unless asked.",
                         no_args_is_help=True, rich_markup_mode=None)
app.add_typer(import_app, name="import")
_INTO_HELP = "Results folder to keep them in (its published/ folder), where `tpubench report` finds them."
_MODEL_HELP = "The model as your workloads name it (its Hugging Face id), to match your points; default: the publisher's name."


def _store_published(rows, notes: list[str], publisher: str, source: Path, into: Path, replace: bool) -> None:
    from tpubench.output.published import store_name, write_published

    for note in notes:
        _warn_stderr(note)
    if rows.empty:
        raise UserError("no published row to compare with in it", where=str(source))
    path = write_published(rows, into, store_name(publisher, source), replace=replace)
    _console().print(f"imported {len(rows)} published row(s) into {path}; see them beside yours: tpubench report {into}")


@import_app.command("inferencex")
def import_inferencex(
    file: Path = typer.Argument(..., help="A saved answer of InferenceX's /api/v1/benchmarks?model=... (JSON)."),
    into: Path = typer.Option(Path("results"), "--into", help=_INTO_HELP),
    model: Optional[str] = typer.Option(None, "--model", help=_MODEL_HELP),
    replace: bool = typer.Option(False, "--replace", help="Replace an earlier import of the same file."),
):
    """InferenceX API rows: throughput per GPU, interactivity, TTFT/TPOT per hardware, framework and load."""
    from tpubench.output.published.inferencex import PUBLISHER
    from tpubench.output.published.inferencex import import_inferencex as read

    rows, notes = read(file, model=model)
    _store_published(rows, notes, PUBLISHER, file, into, replace)


@import_app.command("mlperf")
def import_mlperf(
    folder: Path = typer.Argument(..., help="MLPerf Inference results: a submission tree (systems/ + results/) or "
                                            "a summary.csv."),
    into: Path = typer.Option(Path("results"), "--into", help=_INTO_HELP),
    model: Optional[str] = typer.Option(None, "--model", help=_MODEL_HELP),
    input_length: Optional[float] = typer.Option(None, "--input-length", min=1,
                                                 help="Input length to compare these results at (MLPerf fixes none; "
                                                      "a data set's mean, such as 505.6, is taken as it is)."),
    output_length: Optional[float] = typer.Option(None, "--output-length", min=1,
                                                  help="Output length to compare these results at (a mean may be "
                                                       "fractional)."),
    replace: bool = typer.Option(False, "--replace", help="Replace an earlier import of the same folder."),
):
    """MLPerf Inference LLM results: token rate per accelerator, TTFT/TPOT of Server runs, system and software."""
    from tpubench.output.published.mlperf import PUBLISHER
    from tpubench.output.published.mlperf import import_mlperf as read

    rows, notes = read(folder, model=model, input_length=input_length, output_length=output_length)
    _store_published(rows, notes, PUBLISHER, folder, into, replace)


@app.command()
def estimate(
    workload: Path = typer.Argument(..., help="Workload YAML file (its full model and its batch sizes or concurrency)."),
    on: List[str] = typer.Option([], "--on", help="A chip you have not measured: tpu-v6e-8, H100:8, trn2, or an "
                                                  "instance type from the price table, optionally @ a precision "
                                                  "(H100:8@fp8+kv_fp8) (repeatable)."),
    results: List[Path] = typer.Option([], "--results", help="Your own result folders: their accelerator rows "
                                                             "calibrate the estimate too."),
    prices: List[Path] = typer.Option([], "--prices", help="Your price file(s), layered over the shipped table."),
    plan: List[str] = typer.Option([], "--plan", help="Purchase plans to price (default: every plan priced)."),
    discount: Optional[float] = typer.Option(None, "--discount", help="Add a plan: on-demand less this percent."),
    fmt: str = typer.Option("table", "--format", "-f", help="table, json or csv."),
    out: Optional[Path] = typer.Option(None, "--out", help="Also keep the estimates as a record in "
                                                          "OUT/estimates/ (JSON, source: estimate): `tpubench report "
                                                          "OUT` puts them in its answer table."),
    stack_date: Optional[str] = typer.Option(None, "--stack-date", metavar="YYYY-MM-DD",
                                             help="Estimate a serving stack of this date (default: the calibration's "
                                                  "newest rows'); older stacks run slower."),
    sources: Optional[Path] = typer.Option(None, "--sources", help="Write every published and measured row the "
                                                                  "estimate is calibrated on here (Markdown; JSON "
                                                                  "for a .json name); the terminal gets one line."),
):
    """Estimate throughput, latency and $/Mtok on chips you have not measured: the roofline of the
    workload's model over an efficiency fitted on published (and your measured) rows of the chip's
    family, with a 90% prediction interval. Labelled estimate; never a measurement. A chip may name
    a precision to estimate the model at (H100:8@fp8, H100:8@fp8+kv_fp8 with an fp8 KV cache,
    tpu-v6e-8@int8_dynamic); the workload's own `compare_on` chips are estimated too."""
    if fmt not in ("table", "json", "csv"):
        raise UserError(f"unknown format '{fmt}': table, json or csv", field="--format")
    _check_on(on, prices)
    from tpubench.run.workload import load_workload

    _check_compare_on(workload, load_workload(workload).compare_on, prices)
    from tpubench.estimate.command import run_estimate
    from tpubench.estimate.render import as_csv, as_json, print_table, sources_document
    from tpubench.output.published.store import all_published

    report = run_estimate(workload, on, prices=_load_prices(prices, discount), results=results,
                          published=all_published(results, warn=_warn_stderr, checked=True), plans=plan or None,
                          stack_date=stack_date)
    if sources is not None:
        from tpubench.records.files import replace_file

        replace_file(sources, sources_document(report, as_json_file=sources.suffix == ".json").encode("utf-8"))
        _console(stderr=True).print(f"wrote the estimate's calibration rows to {escape(str(sources))}")
    if out is not None:
        from tpubench.estimate.records import write_record
        from tpubench.estimate.render import payload

        path = write_record(payload(report), report.workload, out)
        _console(stderr=True).print(f"wrote estimate record {escape(str(path))}")
    if fmt == "table":
        print_table(_console(), report, sources_file=None if sources is None else str(sources))
    else:
        _emit(as_json(report) if fmt == "json" else as_csv(report), None)


@app.command()
def compare(
    a: Path = typer.Argument(..., help="Baseline: a result file or a folder."),
    b: Path = typer.Argument(..., help="Candidate: a result file or a folder."),
    numerics: bool = typer.Option(False, "--numerics", help="Only the numerics parity (pairs across parallel layouts); "
                                                                     "exit 1 if any pair disagrees."),
    fail_if_slower: Optional[float] = typer.Option(None, "--fail-if-slower", metavar="PCT",
                                                   help="Exit 1 if, in a matched pair, B's output (or training) tokens/s "
                                                        "is more than PCT% below A's, beyond noise; per chip where the "
                                                        "chip counts differ. Unmatched points are listed, not judged."),
    allow_precision_mix: bool = typer.Option(False, "--allow-precision-mix",
                                             help="Pair points that differ only in dtype or quantisation "
                                                  "(each such pair says it crosses precisions)."),
):
    """Compare two runs (or folders of runs): ratios with uncertainty, verdicts, numerics parity.

    Points pair up only when they are the same point: workload, scale, shapes or serving load,
    lengths, endpoint, dtype and quantisation (unless --allow-precision-mix), execution mode and
    parallel layout. Throughput is compared per chip
    when the two sides ran on different numbers of chips."""
    from tpubench.console import render_comparisons
    from tpubench.output.compare import compare_results, slower_than

    comparisons, unmatched = compare_results(_read([a]), _read([b]), numerics_only=numerics,
                                             allow_precision_mix=allow_precision_mix)
    if not comparisons:
        why = next((u for u in unmatched if u.startswith("not the same point")), "")
        raise UserError(f"no matching successful runs between {a} and {b}" + (f": {why}" if why else ""))
    console = _console()
    render_comparisons(console, comparisons, unmatched, numerics_only=numerics)
    if numerics and any(c.numerics.verdict == "disagree" for c in comparisons):
        raise typer.Exit(1)
    if fail_if_slower is not None:
        tripped = slower_than(comparisons, fail_if_slower)
        for c in tripped:
            h = c.headline()
            console.print(f"[red]slower[/red] {escape(c.label)}: {h.metric} x{h.ratio:.3f} ± {h.half_width:.3f} "
                          f"(limit -{fail_if_slower:g}%)")
        if tripped:
            raise typer.Exit(1)


@app.command()
def export(
    paths: List[Path] = typer.Argument(..., help="Result files or folders."),
    to: str = typer.Option("csv", "--to", help="csv or parquet."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Output file (default: results.<format>)."),
    all_runs: bool = typer.Option(False, "--all-runs", help="Keep every run of a point measured again "
                                                            "(default: only the latest per point)."),
):
    """Write the tidy table (one row per run point, stable columns) for spreadsheets and notebooks."""
    from tpubench.output.export import export_table
    from tpubench.output.frames import load_results
    from tpubench.output.report.data import older_runs_note

    df = load_results(paths, warn=_warn_stderr, keep="all" if all_runs else "latest")
    if df.attrs.get("older_runs_left_out"):
        _warn_stderr(older_runs_note(df.attrs["older_runs_left_out"]))
    target = export_table(df, to, out or Path(f"results.{to}"))
    _console().print(f"wrote {len(df)} row(s) to {target}")


# ----------------------------------------------------------------------------- launch, collect


@app.command()
def launch(
    workload: Path = typer.Argument(..., help="Workload YAML file."),
    on: List[str] = typer.Option([], "--on", help="A target, as SkyPilot names accelerators (tpu-v6e-8, H100:8, "
                                                  "Trainium2:16) or an instance type (trn2.48xlarge); repeatable."),
    bucket: Optional[str] = typer.Option(None, "--bucket", envvar="TPUBENCH_BUCKET",
                                         help="Where results go: gs://NAME[/PREFIX] or s3://NAME[/PREFIX] "
                                              "(or $TPUBENCH_BUCKET)."),
    cloud: Optional[str] = typer.Option(None, "--cloud", help="Only this cloud (gcp, aws, azure)."),
    region: Optional[str] = typer.Option(None, "--region", help="Only this region."),
    spot: bool = typer.Option(False, "--spot",
                              help="Spot instances (SkyPilot recovers preempted jobs; measured points are kept)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Write the task files and print the commands; launch nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Launch even above --max-cost or without a price."),
    max_cost: float = typer.Option(50.0, "--max-cost", min=0, help="Estimated USD above which launching needs --yes."),
    tasks_dir: Path = typer.Option(Path("launch"), "--tasks-dir", help="Folder for task files and launch manifests."),
    scale: Optional[str] = typer.Option(None, "--scale", "-s", help="Scale to run there (default: full on accelerators)."),
    tensor_parallel: Optional[int] = typer.Option(None, "--tensor-parallel", "--tp", min=1),
    expert_parallel: Optional[int] = typer.Option(None, "--expert-parallel", "--ep", min=1),
    data_parallel: Optional[int] = typer.Option(None, "--data-parallel", "--dp", min=1),
    fsdp: Optional[bool] = typer.Option(None, "--fsdp/--no-fsdp"),
    install: Optional[str] = typer.Option(None, "--install", help="pip spec installed on the targets (default: this "
                                                                  "checkout, uploaded; else tpubench from PyPI)."),
    hours: Optional[float] = typer.Option(None, "--hours", min=0, help="Expected hours per target, instead of the estimate."),
    setup_minutes: float = typer.Option(15.0, "--setup-minutes", min=0,
                                       help="Provisioning and install time per target in the estimate."),
    prices: List[Path] = typer.Option([], "--prices", help="Your price file(s), layered over the shipped table."),
):
    """Measure one workload on several machine types at once: one SkyPilot managed job per target,
    priced before launch; `tpubench collect` brings the results home."""
    from tpubench.launch.launcher import LaunchOptions, launch_jobs, needs_confirmation, prepare
    from tpubench.launch.render import render_launch_plan

    options = LaunchOptions(targets=on, bucket=bucket, cloud=cloud, region=region, spot=spot, scale=scale,
                            tensor_parallel=tensor_parallel, expert_parallel=expert_parallel,
                            data_parallel=data_parallel, fsdp=fsdp, install=install, hours=hours,
                            setup_s=setup_minutes * 60, prices=prices)
    prepared = prepare(workload, options, tasks_dir, dry_run=dry_run)
    console = _console()
    render_launch_plan(console, prepared)
    why = needs_confirmation(prepared, max_cost)
    if dry_run:
        console.print(f"wrote {len(prepared.task_files)} task file(s) and the manifest to {escape(str(prepared.folder))}; "
                      "launch them with:")
        for entry in prepared.manifest["targets"]:
            console.print(f"  sky jobs launch {escape(entry['task_file'])} --name {entry['job_name']} --yes", soft_wrap=True)
        console.print(f"then: tpubench collect {escape(prepared.bucket.url(prepared.launch_id))}")
        if why:
            _warn_stderr(f"launching through tpubench would need --yes: {why}")
        return
    if why and not yes:
        raise UserError(f"not launched: {why}; add --yes to launch anyway (the task files are in {prepared.folder})",
                        field="--yes")
    from rich.status import Status

    with Status("", console=console) as status:
        def on_line(target, line):
            status.update(f"{escape(target.spec)}: {escape(line[-120:])}")

        def on_launched(target, job_id):
            done = f"managed job {job_id}" if job_id is not None else "[red]not launched[/red]"
            console.print(f"{escape(target.spec)}: {done}")

        try:
            entries = launch_jobs(prepared, on_line=on_line, on_launched=on_launched)
        except KeyboardInterrupt:
            _console(stderr=True).print(f"interrupted: the jobs launched so far are in "
                                        f"{escape(str(prepared.folder / 'manifest.json'))} (see `sky jobs queue`)")
            raise typer.Exit(130) from None
    for entry in entries:
        if entry.get("launch_error"):
            _warn_stderr(entry["launch_error"])
    console.print(f"follow them with `sky jobs queue`; bring the results home with `tpubench collect` "
                  f"(launch {prepared.launch_id})")
    if all(e.get("job_id") is None for e in entries):
        raise typer.Exit(1)


@app.command()
def doctor(
    out: Path = typer.Option(Path("results/doctor"), "--out", "-o", help="Folder for result files and the summary."),
    device: Optional[str] = typer.Option(None, "--device", "-d",
                                         help="Torch device to check (default: the host's chips, else cpu)."),
    workload: Path = typer.Option(Path("workloads/qwen3_moe.yaml"), "--workload", help="Workload run at batch 1."),
    quick: bool = typer.Option(False, "--quick", help="Tiny shapes, no torch.compile (CI on a CPU)."),
    run_timeout_s: float = typer.Option(1800.0, "--run-timeout-s", min=1.0,
                                        help="Stop a workload run (and say so) after this many seconds."),
    expert_parallel: Optional[int] = typer.Option(None, "--expert-parallel", "--ep", min=1,
                                                  help="Run the full model over N chips (one chip cannot hold it)."),
):
    """Check a fresh machine: the stack and what to install, the chips, the fence, memory, compile,
    a 2-chip collective, the smallest workload and the full model at batch 1; writes the result
    files and a readiness summary. Exit code 0 when ready, 1 when not."""
    from tpubench.doctor.command import DoctorOptions, run_doctor

    if not workload.is_file():
        raise UserError(f"{workload}: no such workload file", field="--workload")
    ready, _ = run_doctor(DoctorOptions(out=out, workload=workload, device=device, quick=quick,
                                        run_timeout_s=run_timeout_s, expert_parallel=expert_parallel))
    if not ready:
        raise typer.Exit(1)


@app.command()
def collect(
    sources: List[str] = typer.Argument(None, help="Result folders or bucket URLs (default: every launch in --tasks-dir)."),
    out: Path = typer.Option(Path("results"), "--out", "-o", help="The local results folder to merge into."),
    tasks_dir: Path = typer.Option(Path("launch"), "--tasks-dir", help="Where `tpubench launch` wrote its manifests."),
    launch_id: Optional[str] = typer.Option(None, "--launch-id", help="Only this launch."),
):
    """Bring launched results home: one copy per point and environment, the latest; a failed job's
    log tail is kept beside its task file."""
    from tpubench.launch.collect import fetch, merge_results
    from tpubench.launch.launcher import collect_launches
    from tpubench.launch.render import render_collected

    console = _console()
    if sources:
        folders = []
        for source in sources:
            if "://" in source:
                folders.append(fetch(source, tasks_dir / "fetched" / source.split("://", 1)[1].replace("/", "_")))
            elif not Path(source).exists():
                raise UserError("no such folder", where=source)
            else:
                folders.append(Path(source))
        summary = merge_results(folders, out, warn=_warn_stderr)
        console.print(f"{summary.found} result(s) found, {len(summary.added)} added to {escape(str(out))}, "
                      f"{summary.already_here} already there, {summary.older_copies} older cop(ies) left out")
        return
    reports = collect_launches(tasks_dir, out, launch_id=launch_id, warn=_warn_stderr)
    render_collected(console, reports, out)
    if any(r.fetch_failed_badly for r in reports):
        raise typer.Exit(1)


def _click_exceptions():
    """The module of the click exceptions typer raises: click's own, or the copy of click that
    typer ships since 0.2x (catching `click.ClickException` would then miss a misspelt option)."""
    import importlib

    base = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    return importlib.import_module(base.__module__)


def main() -> None:
    click_errors = _click_exceptions()
    # typer's own Abort and Exit, and click's where typer still uses click's.
    aborts = (KeyboardInterrupt, typer.Abort, getattr(click_errors, "Abort", typer.Abort))
    exits = (typer.Exit, getattr(click_errors, "Exit", typer.Exit))
    try:
        code = app(standalone_mode=False)  # click returns typer.Exit's code instead of raising it
    except UserError as exc:
        # emoji=False: "file.yaml:100: field" would otherwise print a rich emoji for ":100:".
        _console(stderr=True).print(f"[red]error:[/red] {escape(exc.one_line())}", soft_wrap=True, emoji=False)
        sys.exit(getattr(exc, "exit_code", 2))
    except aborts:
        _console(stderr=True).print("interrupted: every finished point is already on disk (use --resume)")
        sys.exit(130)
    except exits as exc:
        sys.exit(exc.exit_code)
    except click_errors.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug in tpubench, not bad input: one line unless asked for more
        if os.environ.get("TPUBENCH_DEBUG"):
            raise
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        _console(stderr=True).print(f"[red]internal error:[/red] {type(exc).__name__}: {escape(first)} "
                                    "(set TPUBENCH_DEBUG=1 for the traceback, and please report it)")
        sys.exit(1)
    if isinstance(code, int) and code:
        sys.exit(code)


if __name__ == "__main__":
    main()
