"""What `tpubench budget` is asked, before any file is read (docs/commands.md#budget-per-unit).

A budget is sized on one volume: an amount of one unit of output (tokens per day, training tokens,
images per day, ...). Each unit is sized by a planner (a `BudgetPlanner`: PLANNERS below, by unit
key, for the units money has a planner of its own for; the generic per-day planner for any other),
which declares the flag its volume is given with, the largest volume it sizes, and which of the
other options (`BudgetOptions`) it reads. The command loops over the registry's units to find the
planner of the volume given (`--tokens-per-day`, or the generic `--volume UNIT=AMOUNT`); an option
the chosen planner does not read is refused rather than ignored.

This module imports nothing heavy: the planners (pandas) are named "module:attribute" in this
package and imported only when a budget is asked for.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable, Sequence

from tpubench.errors import UserError

VOLUME_FLAG = "--volume"
MAX_USD_PER_KWH = 1e3
MAX_PUE = 10.0


def check_number(value, flag: str, what: str, *, low: float = 0.0, high: float, low_open: bool = True) -> float:
    """`value` as a float when it is a finite number in (low, high] (or [low, high] with
    low_open=False), else a one-line UserError naming the flag: NaN, inf, negative and huge values
    never reach the sizing."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > low if low_open else value >= low) and value <= high
    if not ok:
        bound = f"{'>' if low_open else '>='} {low:g} and <= {high:g}"
        raise UserError(f"{what}: a finite number {bound}, got {value}", field=flag)
    return float(value)


@dataclass(frozen=True)
class Power:
    """What energy costs a fleet (docs/definitions.md#budget-energy): a power price, the data
    centre's PUE, and whether the prices are of owned capacity (energy then adds to the monthly
    cost; a cloud's rental price already includes it, so there it is only shown)."""

    usd_per_kwh: float | None = None
    pue: float = 1.0
    owned: bool = False
    grid_gco2_per_kwh: float | None = None

    def __post_init__(self):
        if self.usd_per_kwh is not None:
            check_number(self.usd_per_kwh, "--power-price", "a power price is USD per kWh", low_open=False,
                         high=MAX_USD_PER_KWH)
        check_number(self.pue, "--pue", "a PUE is facility power over IT power", low=1.0, low_open=False,
                     high=MAX_PUE)
        if self.grid_gco2_per_kwh is not None:   # coal is about 1,000 g/kWh
            check_number(self.grid_gco2_per_kwh, "--grid-gco2-per-kwh", "a grid intensity is grams CO2e per kWh",
                         low_open=False, high=1e4)
        if self.owned and self.usd_per_kwh is None:
            raise UserError("owned capacity needs a power price to add", field="--power-price")


def _flag(default, name: str):
    """A sizing option: its default and the flag it is given with (a planner lists those it reads)."""
    return field(default=default, metadata={"flag": name})


@dataclass(frozen=True)
class BudgetOptions:
    """Every option of `tpubench budget` but the volume. The first five filter what competes and
    apply to every planner; the rest carry their flag, and a planner reads only those it declares
    (`BudgetPlanner.reads`)."""

    plans: tuple[str, ...] | None = None
    cloud: str | None = None
    region: str | None = None
    scenarios: tuple[str, ...] | None = None
    include_flagged: bool = False
    output_share: float = _flag(0.25, "--output-share")
    peak_factor: float = _flag(1.0, "--peak-factor")
    slo_ttft_ms: float | None = _flag(None, "--slo-ttft-ms")
    slo_tpot_ms: float | None = _flag(None, "--slo-tpot-ms")
    max_image_latency_s: float | None = _flag(None, "--max-image-latency-s")
    current: str | None = _flag(None, "--current")
    split: bool = _flag(False, "--split")
    months: float | None = _flag(None, "--months")
    peak_hours: float | None = _flag(None, "--peak-hours")
    spot_lost_hours: float = _flag(0.25, "--spot-lost-hours")
    spot_preemption_rate: float | None = _flag(None, "--spot-preemption-rate")
    tco: Path | None = _flag(None, "--tco")
    power_price: float | None = _flag(None, "--power-price")
    pue: float = _flag(1.0, "--pue")
    owned: bool = _flag(False, "--owned")
    grid_gco2_per_kwh: float | None = _flag(None, "--grid-gco2-per-kwh")

    def given(self) -> list[str]:
        """The flags of the sizing options set away from their default (NaN counts as set)."""
        return [f.metadata["flag"] for f in fields(self)
                if "flag" in f.metadata and getattr(self, f.name) != f.default]

    def power(self) -> Power:
        return Power(self.power_price, self.pue, self.owned, self.grid_gco2_per_kwh)

    @staticmethod
    def ms_to_s(value: float | None) -> float | None:
        return None if value is None else value / 1e3


POWER_FLAGS = ("--power-price", "--pue", "--owned", "--grid-gco2-per-kwh")


@dataclass(frozen=True)
class BudgetPlanner:
    """How one unit of output is budgeted: the volume it is sized on and the function sizing it.

    `plan(results, prices, amount, options, unit)` returns a result object with a `markdown`
    attribute ("module:function" rendering it; output/report.render_budget) and an `options` frame
    (the CSV). `check(amount, options)`, when given, checks the planner's own options before any
    file is read (the volume itself is checked here, against `most`)."""

    volume_words: str                   # "tokens per day": in messages and help
    amount_words: str                   # "tokens": "must be a positive number of tokens"
    most: float                         # the largest volume it sizes: more is a typo, never a plan
    plan: Callable
    flag: str | None = None             # its own flag ("--tokens-per-day"); --volume UNIT=AMOUNT always works
    reads: tuple[str, ...] = ()         # the BudgetOptions flags it uses; any other set is refused
    check: Callable | None = None

    def volume_text(self, unit) -> str:
        """Its volume in words; "{plural}" in `volume_words` is the unit's plural (a planner any unit names)."""
        return self.volume_words.format(plural=unit.plural)

    def check_amount(self, amount, flag: str, unit=None) -> float:
        words = self.amount_words.format(plural=unit.plural if unit is not None else "units")
        return check_number(amount, flag, f"must be a positive number of {words}", high=self.most)


# The planner of a unit of output, by its key ("module:attribute" in this package): those with
# their own sizing; any other unit (one a new scenario brings) is sized per day at its steady rate.
PLANNERS = {
    "token": "tpubench.money.budget:TOKENS",
    "training_token": "tpubench.money.training_budget:TRAINING",
    "image": "tpubench.money.image_budget:IMAGES",
}
GENERIC_PLANNER = "tpubench.money.unit_budget:PER_DAY"


def unit_planners(units) -> list[tuple[object, BudgetPlanner]]:
    """(unit, its planner) for every unit, in the registry's order."""
    from tpubench.scenarios.output_units import load

    return [(unit, load(PLANNERS.get(unit.key, GENERIC_PLANNER))) for unit in units]


def _volume_choices(planners) -> str:
    flags = [p.flag for _, p in planners if p.flag]
    keys = ", ".join(f"{u.key}: {p.volume_text(u)}" for u, p in planners)
    return f"{', '.join(flags)} or {VOLUME_FLAG} UNIT=AMOUNT ({keys})"


def parse_volume(spec: str, planners) -> tuple[object, BudgetPlanner, float]:
    """'UNIT=AMOUNT' (a `--volume` value) -> (unit, planner, amount); the amount checked by the caller."""
    key, sep, amount = spec.partition("=")
    by_key = {unit.key: (unit, planner) for unit, planner in planners}
    if not sep or key.strip() not in by_key:
        raise UserError(f"'{spec}' is not UNIT=AMOUNT with UNIT one of {', '.join(by_key)}", field=VOLUME_FLAG)
    try:
        value = float(amount)
    except ValueError:
        raise UserError(f"'{amount}' in '{spec}' is not a number", field=VOLUME_FLAG) from None
    return (*by_key[key.strip()], value)


@dataclass(frozen=True)
class Volume:
    unit: object                 # the OutputUnit sized on
    planner: BudgetPlanner
    amount: float
    flag: str                    # the flag it was given with (errors name it)


def chosen_volume(flag_values: dict[str, float | None], specs: Sequence[str], planners) -> Volume:
    """The one volume asked for, from the planners' own flags (`flag_values`: flag -> value or None)
    and `--volume` specs; exactly one is required."""
    chosen = []
    for unit, planner in planners:
        if planner.flag and flag_values.get(planner.flag) is not None:
            chosen.append(Volume(unit, planner, flag_values[planner.flag], planner.flag))
    for spec in specs:
        unit, planner, amount = parse_volume(spec, planners)
        chosen.append(Volume(unit, planner, amount, VOLUME_FLAG))
    unknown = [flag for flag, value in flag_values.items()
               if value is not None and flag not in {p.flag for _, p in planners}]
    if unknown:   # a flag of a unit this registry no longer budgets
        raise UserError(f"no unit of output is budgeted by {', '.join(unknown)}", field=unknown[0])
    if len(chosen) != 1:
        first = next((p.flag for _, p in planners if p.flag), VOLUME_FLAG)
        raise UserError(f"give exactly one volume to size on: {_volume_choices(planners)}", field=first)
    return chosen[0]


def check_request(volume: Volume, options: BudgetOptions, planners) -> None:
    """Every input checked before a file is read (one line, exit 2): an option the chosen planner does
    not read is refused, naming the volumes it applies to; then the volume, power and the
    planner's own options."""
    misapplied = [flag for flag in options.given() if flag not in volume.planner.reads]
    if misapplied:
        owners = [p.flag or f"{VOLUME_FLAG} {u.key}=..." for u, p in planners
                  if p is not volume.planner and set(misapplied) & set(p.reads)]
        verb = "applies" if len(misapplied) == 1 else "apply"
        raise UserError(f"{', '.join(misapplied)} {verb} to {' or '.join(dict.fromkeys(owners)) or 'no volume'}, "
                        f"not to a budget of {volume.planner.volume_text(volume.unit)}", field=volume.flag)
    volume.planner.check_amount(volume.amount, volume.flag, volume.unit)
    options.power()
    if volume.planner.check is not None:
        volume.planner.check(volume.amount, options)
