"""`tpubench budget KIND PATHS --VOLUME N [options]`: one subcommand per budget planner and the kinds
it sizes on (tpubench/budget/planners.py: serve, generate, tokens, train, images, and one per unit a
new scenario brings), made when `tpubench budget` is first looked into, not at start-up.

Every subcommand has the same common options, declared once: the results, prices and output
(`INPUTS` below) and the filters of budget/request.BudgetOptions marked common. It adds its
planner's volume flag and the options its planner reads, and only those, so its --help lists what
applies. An option of another subcommand, or the form before subcommands (`tpubench budget RESULTS
--tokens-per-day N`), is a one-line error naming the subcommand(s) to use (exit 2).
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Optional

import typer
import typer.core
import typer.models

from tpubench.cli_group import DeferredTyper
from tpubench.errors import UserError

HELP = ("Size a fleet, or a training run, per platform and plan for a volume of work: one subcommand per kind "
        "of work (`tpubench budget KIND --help` lists its options).")
# The click error a misspelt or misplaced option raises (typer ships its own copy of click).
_USAGE_ERROR = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


@dataclass(frozen=True)
class BudgetInputs:
    """What every budget subcommand reads besides its volume and BudgetOptions: results, prices, output."""

    paths: list[Path]
    prices: list[Path]
    discount: float | None
    fmt: str
    out: Path | None
    all_runs: bool
    include_published: bool
    no_shipped: bool


# The parameters of BudgetInputs, declared once for every subcommand: (name, type, typer parameter).
INPUTS = (
    ("paths", List[Path], typer.Argument(..., help="Result files or folders.")),
    ("prices", List[Path], typer.Option([], "--prices", help="Your price file(s), layered over the shipped table.")),
    ("discount", Optional[float], typer.Option(None, "--discount", help="Add a plan: on-demand less this percent.")),
    ("fmt", str, typer.Option("md", "--format", "-f", help="md or csv.")),
    ("out", Optional[Path], typer.Option(None, "--out", "-o", help="Write here instead of the terminal.")),
    ("all_runs", bool, typer.Option(False, "--all-runs", help="Keep every run of a point measured again "
                                                              "(default: only the latest per point).")),
    ("include_published", bool, typer.Option(False, "--include-published",
                                             help="Also size on published results: those imported beside yours "
                                                  "(tpubench import) and the reference rows shipped with "
                                                  "tpubench; left out by default.")),
    ("no_shipped", bool, typer.Option(False, "--no-shipped", help="With --include-published: only the imported "
                                                                  "rows, not the shipped reference rows.")),
)

# Runs a subcommand: (BudgetCommand, volume, BudgetOptions, BudgetInputs) -> None (cli.py's).
Run = Callable[[object, float, object, BudgetInputs], None]


def budget_app(run: Run) -> typer.Typer:
    """The `tpubench budget` group; `run` sizes and prints the budget a subcommand asks for."""
    return DeferredTyper(lambda: [_command_info(command, run) for command in _commands()], cls=BudgetGroup,
                         help=HELP, no_args_is_help=True, rich_markup_mode=None)


def _commands() -> list:
    from tpubench.budget.planners import budget_commands

    return budget_commands()


def _command_info(command, run: Run) -> typer.models.CommandInfo:
    return typer.models.CommandInfo(name=command.name, cls=PlannerCommand, callback=_callback(command, run),
                                    help=command.help, short_help=command.short_help)


def _option_parameter(f, hints: dict) -> inspect.Parameter:
    """A BudgetOptions field as a typer option: a tuple field is a repeatable option (a list)."""
    hint = hints[f.name]
    repeatable = any(typing.get_origin(a) is tuple for a in typing.get_args(hint))
    info = typer.Option([] if repeatable else f.default, f.metadata["flag"], help=f.metadata["help"])
    return inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=info,
                             annotation=List[str] if repeatable else hint)


def _parameters(command) -> list[inspect.Parameter]:
    """The subcommand's parameters: the results, its volume, what its planner reads, then the common ones."""
    from tpubench.budget.request import BudgetOptions, option_fields

    hints = typing.get_type_hints(BudgetOptions)
    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter(INPUTS[0][0], keyword, default=INPUTS[0][2], annotation=INPUTS[0][1]),
              inspect.Parameter("amount", keyword, annotation=float,
                                default=typer.Option(..., command.flag, help=command.volume_help))]
    params += [_option_parameter(f, hints) for f in option_fields(common=False)
               if f.metadata["flag"] in command.planner.reads]
    params += [_option_parameter(f, hints) for f in option_fields(common=True)]
    params += [inspect.Parameter(name, keyword, default=info, annotation=kind) for name, kind, info in INPUTS[1:]]
    return params


def _callback(command, run: Run) -> Callable:
    """The subcommand's function, its signature made for typer from `_parameters`."""
    params = _parameters(command)
    inputs = [name for name, _, _ in INPUTS]

    def budget(**given):
        from tpubench.budget.request import BudgetOptions

        got = BudgetInputs(**{name: given.pop(name) for name in inputs})
        amount = given.pop("amount")
        # A repeatable option comes as a list; BudgetOptions holds a tuple, None when not given.
        values = {k: (tuple(v) or None) if isinstance(v, list) else v for k, v in given.items()}
        run(command, amount, BudgetOptions(scenarios=command.scenarios, **values), got)

    budget.__signature__ = inspect.Signature(params)
    budget.__annotations__ = {p.name: p.annotation for p in params}
    return budget


def estimating(options) -> bool:
    """Whether a budget asks for estimates (`--on` or `--workload`: only the token planner reads them)."""
    return bool(getattr(options, "on", None) or getattr(options, "workload", None))


def check_estimates(options, prices) -> None:
    """`--on` and `--workload` checked before any result is read: a chip neither the price table nor
    the spec table knows, or a workload file that is not there, is a one-line error (exit 2)."""
    if not estimating(options):
        return
    from tpubench.estimate.chips import parse_target

    for spec in options.on or ():
        parse_target(spec, prices)
    for path in options.workload or ():
        if not Path(path).is_file():
            raise UserError(f"no such workload file: {path}", field="--workload")


def with_estimates(result, options, inputs: BudgetInputs, results, prices, warn: Callable[[str], None]):
    """`result` (a token budget) with its estimated options (budget/estimated.py) where the budget asks
    for them: each workload file named by --workload, else by the results (as `tpubench report` finds
    them: estimate/for_reports.py), estimated on its compare_on chips and --on's, calibrated on the
    published rows the report would use. Sized apart: `result.options` is left as it was."""
    if not estimating(options):
        return result
    from tpubench.budget.estimated import estimated_budget
    from tpubench.budget.tokens import SIZING_SPLIT
    from tpubench.estimate.for_reports import estimates_for_report
    from tpubench.output.report.published import gather_published

    measured, published = gather_published(inputs.paths, results, warn, shipped=not inputs.no_shipped)
    workloads = [Path(p) for p in options.workload] if options.workload else None
    made = estimates_for_report(inputs.paths, measured, on=list(options.on or ()), prices=prices,
                                published=published, plans=list(options.plans) if options.plans else None,
                                warn=warn, workloads=workloads)
    if not made.contexts and not made.notes and made.rows.empty:
        raise UserError("no result here names a workload file to estimate: name one with --workload FILE",
                        field="--workload")
    result.estimates = estimated_budget(made, result.traffic, result.slo, options, prices,
                                        split=result.sizing == SIZING_SPLIT)
    return result


def _kind_first(args: list[str], word: str | None = None) -> UserError:
    """The form before subcommands (`tpubench budget RESULTS --tokens-per-day N`), or a kind misspelt
    (`word`): which subcommand to name first, from the volume flag given where there is one."""
    commands = _commands()
    given = [c.name for c in commands if c.flag in args and c.scenarios is None]
    said = f"'{word}' is not a kind of budget; " if word else ""
    return UserError(f"{said}name the kind first: `tpubench budget {given[0] if given else 'KIND'} PATHS ...` "
                     f"(kinds: {', '.join(c.name for c in commands)})", field="budget")


class BudgetGroup(typer.core.TyperGroup):
    """`tpubench budget`: a kind first, else a one-line error naming the kind to use."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        given = list(args)   # click's parser consumes `args`
        try:
            return super().parse_args(ctx, args)
        except _USAGE_ERROR as exc:   # an option before the kind: `budget --tokens-per-day 1e9 results`
            if getattr(exc, "option_name", None) and any(c.flag in given for c in _commands()):
                raise _kind_first(given) from None
            raise

    def resolve_command(self, ctx, args: list[str]):
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            raise _kind_first(args, args[0])
        return super().resolve_command(ctx, args)


class PlannerCommand(typer.core.TyperCommand):
    """A budget subcommand: an option only other subcommands have is a one-line error naming them."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except _USAGE_ERROR as exc:
            flag = getattr(exc, "option_name", None)   # set on "No such option" only
            owners = [c.name for c in _commands() if flag in c.flags()] if flag else []
            if owners:
                raise UserError(f"applies to `tpubench budget {'|'.join(owners)}`, not to `tpubench budget "
                                f"{self.name}`", field=flag) from None
            raise
