"""The `tpubench` command: thin; parses, calls the library, renders. One error handler.

Start-up imports neither torch nor jax (nor pandas): each command imports what it needs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from tpubench.errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Measure a PyTorch workload on TPU, GPU, Trainium, JAX or CPU and price it per token.")


def _console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


# ----------------------------------------------------------------------------- run


@app.command()
def run(
    workload: Path = typer.Argument(..., help="Workload YAML file."),
    device: Optional[str] = typer.Option(None, "--device", "-d",
                                         help="cpu, cuda, tpu, neuron, xla, mps (default: the accelerator present, else cpu)."),
    backend: str = typer.Option("torch", "--backend", "-b", help="torch or jax."),
    scale: Optional[str] = typer.Option(None, "--scale", "-s",
                                        help="'full' or a scale named in the file (default: small on CPU, full on an accelerator)."),
    out: Path = typer.Option(Path("results"), "--out", "-o", help="Folder for result files."),
    resume: bool = typer.Option(False, "--resume", help="Skip points already measured in --out for this environment."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="With --resume, measure failed points again."),
    price: bool = typer.Option(True, "--price/--no-price", help="Print what the run costs per token."),
):
    """Measure every point of a workload's sweep and write one result file per point."""
    from tpubench.console import RichReporter, render_run_table
    from tpubench.runner import run_sweep

    console = _console()
    with RichReporter(console) as reporter:
        outcomes = run_sweep(workload, backend=backend, device=device, scale=scale, out_dir=out,
                             resume=resume, retry_failed=retry_failed, reporter=reporter)
    render_run_table(console, outcomes)
    if price:
        from tpubench.console import render_run_cost

        render_run_cost(console, [o.path for o in outcomes if o.path])
    failed = [o for o in outcomes if o.result is not None and o.result.status == "failed"]
    if failed and len(failed) == len([o for o in outcomes if not o.skipped]):
        raise typer.Exit(1)


@app.command()
def validate(workloads: List[Path] = typer.Argument(..., help="Workload YAML files.")):
    """Check workload files without running anything."""
    from tpubench.workload import expand, load_workload

    console = _console()
    for path in workloads:
        w = load_workload(path)
        sizes = {name: len(expand(w, name, source=str(path))) for name in ["full", *w.scales]}
        detail = ", ".join(f"{name}: {n} point{'s' * (n != 1)}" for name, n in sizes.items())
        console.print(f"[green]ok[/green] {path}: {w.name} ({w.model.family}); {detail}")


@app.command()
def backends():
    """List every backend and device, whether it can run here, and why not."""
    from rich.table import Table

    from tpubench.backends import all_availability

    table = Table("backend", "device", "available", "detail")
    for a in all_availability():
        table.add_row(a.backend, a.device, "[green]yes[/green]" if a.available else "[red]no[/red]", a.detail)
    _console().print(table)


def main() -> None:
    import click

    try:
        app(standalone_mode=False)
    except UserError as exc:
        _console(stderr=True).print(f"[red]error:[/red] {exc.one_line()}", soft_wrap=True)
        sys.exit(2)
    except (KeyboardInterrupt, click.exceptions.Abort):
        _console(stderr=True).print("interrupted: every finished point is already on disk (use --resume)")
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
