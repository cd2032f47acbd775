"""Price tables: load and validate the shipped and user price CSVs, layer user files over the shipped
table, add a discount, choose between flagged and unflagged prices, and read the other shipped
reference tables (unpriced instances, per-chip specs). Mapping runtime device names to priced
accelerators is `money.accelerator_map`; importing SkyPilot catalogs is `money.sky_prices`.

A price file is a CSV in one of two forms. Wide (`COLUMNS`): one row per (cloud, region,
instance_type) with USD per hour for the *whole instance* in each plan column (a TPU slice is priced
whole; a CPU VM counts vCPUs as its chips); empty plan cells mean "not offered / not known"; the
optional `commit_1y_upfront` / `commit_3y_upfront` cells add an upfront part (USD per instance for
the term) and `preemption_rate_per_h` / `preemption_rate_per_day` a spot preemption rate. Long
(`LONG_FILE_COLUMNS`, told apart by its `plan` column): one row per (cloud, region, instance_type,
plan) with `usd_per_instance_hour` (the hourly part), optional `upfront_usd`, `term_months` and
preemption rate; the importers of the clouds' price files write this form. The plan vocabulary
(which plans exist, their terms, how upfront parts are amortised) is `money.plans`.

In memory prices are long: one row per (cloud, region, instance_type, plan), so every price keeps
its own source and `as_of` date even when a user file only adds a negotiated 1-year rate to a row
that the shipped table already has. `usd_per_instance_hour` there is the plan's *effective* hourly
price (upfront spread over the term, `plans.effective_usd_per_hour`), which is what every cost uses;
the parts stay beside it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Sequence

import pandas as pd

from tpubench.errors import UserError
from tpubench.money import plans as plan_vocab
from tpubench.money import price_age
from tpubench.money.table_files import check_header, did_you_mean, parse_number, read_rows
from tpubench.records.csv_safety import neutralize_frame
from tpubench.records.files import replace_file

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
SHIPPED_PRICES = DATA_DIR / "prices.csv"
SHIPPED_UNPRICED = DATA_DIR / "unpriced.csv"
SHIPPED_ACCELERATORS = DATA_DIR / "accelerators.csv"

KEY_COLUMNS = ("cloud", "region", "instance_type")
INSTANCE_COLUMNS = ("accelerator", "chips_per_instance")
PLANS = plan_vocab.PLAN_NAMES
PROVENANCE_COLUMNS = ("source", "as_of")
# Optional: true marks a row whose prices are suspect (as a "[FLAG: ...]" note in its source does).
FLAG_COLUMN = "flagged"
# Spot's preemption rate, events per hour or per day (one of the two per row).
PREEMPTION_COLUMNS = ("preemption_rate_per_h", "preemption_rate_per_day")
# Wide form: the upfront part (USD per instance for the whole term) of the plans that have a fixed term.
UPFRONT_COLUMNS = {f"{p.name}_upfront": p.name for p in plan_vocab.PLAN_LIST
                   if p.upfront and p.term_months is not None}
COLUMNS = (KEY_COLUMNS + INSTANCE_COLUMNS + PLANS + tuple(UPFRONT_COLUMNS) + PREEMPTION_COLUMNS
           + PROVENANCE_COLUMNS + (FLAG_COLUMN,))
# The wide layout before purchase options (what the SkyPilot importer writes: its catalogs carry no more).
BASIC_COLUMNS = KEY_COLUMNS + INSTANCE_COLUMNS + ("on_demand", "spot", "commit_1y", "commit_3y") \
    + PROVENANCE_COLUMNS + (FLAG_COLUMN,)
# Long form: one row per plan; `usd_per_instance_hour` is the hourly part.
LONG_FILE_COLUMNS = (KEY_COLUMNS + INSTANCE_COLUMNS
                     + ("plan", "usd_per_instance_hour", "upfront_usd", "term_months") + PREEMPTION_COLUMNS
                     + PROVENANCE_COLUMNS + (FLAG_COLUMN,))
REQUIRED_COLUMNS = KEY_COLUMNS + ("as_of",)

# Columns of the long table every other module reads. `usd_per_instance_hour` / `usd_per_chip_hour`
# are effective prices (upfront amortised); `hourly_usd_per_instance_hour` is the part billed per hour.
LONG_COLUMNS = [
    "cloud", "region", "instance_type", "accelerator", "chips_per_instance", "plan",
    "usd_per_instance_hour", "usd_per_chip_hour", "source", "as_of", "origin", "flagged", "flag_reason",
    "hourly_usd_per_instance_hour", "upfront_usd", "term_months", "preemption_rate_per_h",
]
# A source note that flags its row, as the shipped table writes it: "[FLAG: GPU SKU mismatch ...]".
_FLAG_NOTE = re.compile(r"\[FLAG:?\s*([^\]]*)\]", re.IGNORECASE)
_TRUE_WORDS = {"true", "yes", "1", "y"}
_FALSE_WORDS = {"false", "no", "0", "n"}

STALE_AFTER_DAYS = price_age.STALE_AFTER_DAYS
# An effective price above this many USD per chip-hour is a unit or parsing error, not a price (GCP
# nanos read as units, an upfront fee read as hourly): the dearest chips list at tens of USD per
# chip-hour (about 6.9 for an H100 in an AWS p5.48xlarge on demand).
MAX_USD_PER_CHIP_HOUR = 1000.0


# ----------------------------------------------------------------------------- dates


def today_utc() -> date:
    return price_age.today_utc()


def price_age_days(as_of: str | date, today: date | None = None) -> int:
    """Whole days between a price's `as_of` date and `today` (UTC today when not given)."""
    return price_age.age_days(as_of, today or today_utc())


def stale_price_warnings(prices: pd.DataFrame, today: date | None = None,
                         max_age_days: int | None = None) -> list[str]:
    """One warning per `as_of` date whose prices are older than their plan allows (money.price_age:
    spot after 30 days, the rest after 180; `max_age_days` sets one limit for every plan), counting
    the instance rows it covers and naming the command that refreshes them."""
    if prices.empty:
        return []
    today = today or today_utc()
    plan_of = prices["plan"] if "plan" in prices else pd.Series("on_demand", index=prices.index)
    limits = plan_of.map(price_age.stale_after_days) if max_age_days is None else max_age_days
    ages = prices["as_of"].map(lambda d: price_age_days(d, today))
    old = prices[ages > limits].assign(_age=ages, _limit=limits)
    out = []
    for (as_of, limit), group in old.groupby(["as_of", "_limit"], sort=True):
        rows = group[list(KEY_COLUMNS)].drop_duplicates()
        plans = ", ".join(plan_vocab.plan_label(p) for p in dict.fromkeys(group.get("plan", ["on_demand"])))
        out.append(f"{len(rows)} instance price row(s) dated {as_of} ({plans}) are {int(group['_age'].iloc[0])} days "
                   f"old (over {limit}): refresh with `{price_age.REFRESH_COMMAND}`")
    return out


# ----------------------------------------------------------------------------- reading files


@dataclass
class _Instance:
    accelerator: str
    chips_per_instance: int
    origin: str


@dataclass
class _Price:
    hourly_usd: float          # the part billed per instance-hour (0 for an all-upfront commitment)
    source: str
    as_of: str
    origin: str
    flag_reason: str = ""      # why the price is suspect; "" when it is not flagged
    upfront_usd: float = 0.0   # per instance, for the whole term
    term_months: float | None = None
    preemption_rate_per_h: float | None = None

    @property
    def usd_per_instance_hour(self) -> float:
        """The effective hourly price: the upfront part spread over the term (money.plans)."""
        return plan_vocab.effective_usd_per_hour(self.hourly_usd, self.upfront_usd, self.term_months)


def _parse_positive_price(text: str, where: str, field: str) -> float | None:
    value = parse_number(text, where, field, "USD per instance-hour")
    if value is not None and value <= 0:
        raise UserError(f"price must be a positive number of USD per instance-hour, got {text.strip()} "
                        "(leave the cell empty when a plan is not offered)", where=where, field=field)
    return value


def _parse_hourly(text: str, where: str, field: str, upfront: float) -> float | None:
    """A plan's hourly part: positive, or zero when an upfront payment covers the whole term."""
    if upfront > 0:
        value = parse_number(text, where, field, "USD per instance-hour")
        if value is not None and value < 0:
            raise UserError(f"hourly price must be >= 0 USD per instance-hour, got {text.strip()}",
                            where=where, field=field)
        return value
    return _parse_positive_price(text, where, field)


def _parse_nonnegative(text: str, where: str, field: str, what: str) -> float:
    value = parse_number(text, where, field, what)
    if value is not None and value < 0:
        raise UserError(f"must be >= 0 ({what}), got {text.strip()}", where=where, field=field)
    return value or 0.0


def _parse_preemption(cell: dict, where: str) -> float | None:
    """Spot preemption rate in events per hour, from the per-hour or the per-day column."""
    per_h = _parse_nonnegative(cell.get("preemption_rate_per_h", ""), where, "preemption_rate_per_h",
                               "preemptions per hour") if cell.get("preemption_rate_per_h") else None
    per_day = _parse_nonnegative(cell.get("preemption_rate_per_day", ""), where, "preemption_rate_per_day",
                                 "preemptions per day") if cell.get("preemption_rate_per_day") else None
    if per_h is not None and per_day is not None:
        raise UserError("give the preemption rate per hour or per day, not both", where=where,
                        field="preemption_rate_per_day")
    if per_day is not None:
        return plan_vocab.preemption_rate_per_hour(per_day, "day")
    return per_h


def _parse_term(text: str, where: str, plan: plan_vocab.Plan) -> float | None:
    """A row's term in months: the plan's fixed term (a different one is an error), else the cell."""
    value = parse_number(text, where, "term_months", "months")
    if value is not None and value <= 0:
        raise UserError(f"term must be a positive number of months, got {text.strip()}", where=where,
                        field="term_months")
    if plan.term_months is not None:
        if value is not None and value != plan.term_months:
            raise UserError(f"{plan.name} is a {plan.term_months:g}-month term, got {text.strip()} "
                            "(other terms: plan reservation with its term_months)", where=where,
                            field="term_months")
        return plan.term_months
    return value


def _parse_chips(text: str, where: str) -> int | None:
    value = parse_number(text, where, "chips_per_instance", "chips")
    if value is not None and (value < 1 or value != int(value)):
        raise UserError(f"chips per instance must be a whole number >= 1, got {text.strip()}",
                        where=where, field="chips_per_instance")
    return None if value is None else int(value)


def _parse_as_of(text: str, where: str, today: date) -> str:
    text = text.strip()
    try:
        d = date.fromisoformat(text)
    except ValueError:
        raise UserError(f"'{text}' is not an ISO date (YYYY-MM-DD)", where=where, field="as_of") from None
    if d > today:
        raise UserError(f"date {text} is in the future", where=where, field="as_of")
    return d.isoformat()


def _parse_flagged(text: str, where: str) -> bool | None:
    """None for an empty cell, else the boolean the cell spells."""
    word = text.strip().lower()
    if not word:
        return None
    if word in _TRUE_WORDS | _FALSE_WORDS:
        return word in _TRUE_WORDS
    raise UserError(f"'{text.strip()}' is not true or false", where=where, field=FLAG_COLUMN)


def _row_flag_reason(flagged: bool | None, source: str) -> str:
    """Why a file row's prices are flagged: its `flagged` cell, else its source's [FLAG: ...] notes.
    An explicit `flagged` false clears the source's notes (the user vouches for the row)."""
    if flagged is False:
        return ""
    notes = [m.strip() for m in _FLAG_NOTE.findall(source)]
    if notes:
        return "; ".join(n for n in notes if n) or "flagged in its source"
    return "flagged in the price file" if flagged else ""


def _flag_spot_above_on_demand(prices: dict) -> None:
    """Spot dearer than on-demand for one instance means one of them is not the instance's price
    (a SKU mismatch in the catalog): flag both, and every price of the file rows they came from
    (a price already flagged keeps its own reason)."""
    for key in {k for k, _ in prices}:
        on_demand, spot = prices.get((key, "on_demand")), prices.get((key, "spot"))
        if on_demand is None or spot is None or spot.usd_per_instance_hour <= on_demand.usd_per_instance_hour:
            continue
        reason = (f"spot {spot.usd_per_instance_hour:g} above on-demand {on_demand.usd_per_instance_hour:g} "
                  "USD/h (SKU mismatch suspected)")
        origins = {on_demand.origin, spot.origin}
        for plan in PLANS:
            price = prices.get((key, plan))
            if price is not None and price.origin in origins and not price.flag_reason:
                price.flag_reason = reason


def _wide_row_prices(cell: dict, where: str) -> dict[str, tuple]:
    """One wide-form row's prices: plan -> (hourly, upfront, term months, preemption rate per hour)."""
    preemption = _parse_preemption(cell, where)
    out = {}
    for plan in PLANS:
        if plan not in cell:
            continue
        info = plan_vocab.PLANS[plan]
        upfront_col = f"{plan}_upfront"
        upfront = _parse_nonnegative(cell.get(upfront_col, ""), where, upfront_col, "USD per instance for the term")
        hourly = _parse_hourly(cell[plan], where, plan, upfront)
        if hourly is None:
            if upfront:
                raise UserError(f"an upfront part needs the plan's hourly price in {plan} (0 when all of it "
                                "is paid upfront)", where=where, field=upfront_col)
            continue
        out[plan] = (hourly, upfront, info.term_months, preemption if info.interruptible else None)
    if not out:
        raise UserError(f"no price in any plan column ({', '.join(p for p in PLANS if p in cell)})", where=where)
    if preemption is not None and "spot" not in out:
        field = next(c for c in PREEMPTION_COLUMNS if cell.get(c))
        raise UserError("a preemption rate needs the spot price in the same row", where=where, field=field)
    return out


def _long_row_prices(cell: dict, where: str) -> dict[str, tuple]:
    """One long-form row's price: {plan: (hourly, upfront, term months, preemption rate per hour)}."""
    name = cell["plan"]
    info = plan_vocab.PLANS.get(name)
    if info is None:
        raise UserError(f"unknown plan '{name}'{did_you_mean(name, PLANS)}; plans are {', '.join(PLANS)}",
                        where=where, field="plan")
    upfront = _parse_nonnegative(cell.get("upfront_usd", ""), where, "upfront_usd", "USD per instance for the term")
    if upfront and not info.upfront:
        raise UserError(f"{name} has no upfront part (plans with one: "
                        f"{', '.join(p.name for p in plan_vocab.PLAN_LIST if p.upfront)})", where=where,
                        field="upfront_usd")
    term = _parse_term(cell.get("term_months", ""), where, info)
    if term is not None and (name == "on_demand" or info.interruptible):
        raise UserError(f"{name} has no term", where=where, field="term_months")
    if upfront and term is None:
        raise UserError("an upfront payment needs term_months to spread over", where=where, field="term_months")
    hourly = _parse_hourly(cell["usd_per_instance_hour"], where, "usd_per_instance_hour", upfront)
    if hourly is None:
        raise UserError("empty; the plan's hourly price (0 when all of it is paid upfront)", where=where,
                        field="usd_per_instance_hour")
    preemption = _parse_preemption(cell, where)
    if preemption is not None and not info.interruptible:
        raise UserError(f"a preemption rate applies to spot, not {name}", where=where,
                        field=next(c for c in PREEMPTION_COLUMNS if cell.get(c)))
    return {name: (hourly, upfront, term, preemption)}


def _merge_file(path: Path, instances: dict, prices: dict, today: date) -> None:
    """Validate one price file and layer its rows over `instances` / `prices` (later wins per cell)."""
    header_line, header, rows = read_rows(path, "price file", COLUMNS)
    long_form = "plan" in header
    if long_form:
        check_header(path, header_line, header, LONG_FILE_COLUMNS,
                     REQUIRED_COLUMNS + ("plan", "usd_per_instance_hour"),
                     f"a price file with a plan column has one row per plan and the columns "
                     f"{', '.join(LONG_FILE_COLUMNS)}")
    else:
        # An unknown column is most often a plan name of the user's own (e.g. "reserved"): say which plans exist.
        check_header(path, header_line, header, COLUMNS, REQUIRED_COLUMNS,
                     f"price plans are {', '.join(PLANS)} (a percentage off is --discount), other columns "
                     f"{', '.join(c for c in COLUMNS if c not in PLANS)}")
        if not any(p in header for p in PLANS):
            raise UserError(f"no price column; add at least one of {', '.join(PLANS)}", where=f"{path}:{header_line}")
    seen_keys: dict[tuple, int] = {}
    for line, cells in rows:
        where = f"{path}:{line}"
        if len(cells) != len(header):
            raise UserError(f"row has {len(cells)} fields but the header has {len(header)}", where=where)
        cell = {col: value.strip() for col, value in zip(header, cells)}
        for col in KEY_COLUMNS:
            if not cell[col]:
                raise UserError("empty; every row names its cloud, region and instance_type",
                                where=where, field=col)
        key = (cell["cloud"].lower(), cell["region"], cell["instance_type"])
        row_key = key + ((cell["plan"],) if long_form else ())
        if row_key in seen_keys:
            raise UserError(f"duplicate row: line {seen_keys[row_key]} already prices {'/'.join(row_key)}",
                            where=where, field="plan" if long_form else "instance_type")
        seen_keys[row_key] = line

        accelerator = cell.get("accelerator", "")
        chips = _parse_chips(cell.get("chips_per_instance", ""), where)
        known = instances.get(key)
        if known is None:
            if not accelerator:
                raise UserError("required for an instance no earlier price file defines",
                                where=where, field="accelerator")
            if chips is None:
                raise UserError("required for an instance no earlier price file defines",
                                where=where, field="chips_per_instance")
            instances[key] = _Instance(accelerator, chips, where)
        else:
            if accelerator:
                known.accelerator = accelerator
            if chips is not None:
                known.chips_per_instance = chips

        as_of = _parse_as_of(cell["as_of"], where, today)
        source = cell.get("source", "") or f"user price file {path}"
        flag_reason = _row_flag_reason(_parse_flagged(cell.get(FLAG_COLUMN, ""), where), source)
        row_prices = _long_row_prices(cell, where) if long_form else _wide_row_prices(cell, where)
        for plan, (hourly, upfront, term, preemption) in row_prices.items():
            price = _Price(hourly, source, as_of, where, flag_reason, upfront, term, preemption)
            _check_plausible(price, instances[key].chips_per_instance, where,
                             "usd_per_instance_hour" if long_form else plan)
            prices[(key, plan)] = price


def _check_plausible(price: _Price, chips: int, where: str, field: str) -> None:
    """A finite effective price of at most MAX_USD_PER_CHIP_HOUR per chip-hour; more is a unit error."""
    per_chip = price.usd_per_instance_hour / chips
    if not math.isfinite(per_chip) or per_chip > MAX_USD_PER_CHIP_HOUR:
        raise UserError(f"{per_chip:g} USD per chip-hour (effective, upfront spread over the term) is not a "
                        f"price: over {MAX_USD_PER_CHIP_HOUR:g}; check the file's units", where=where, field=field)


def _to_long(instances: dict, prices: dict) -> pd.DataFrame:
    records = []
    for (key, plan), p in prices.items():
        inst = instances[key]
        effective = p.usd_per_instance_hour
        records.append({
            "cloud": key[0], "region": key[1], "instance_type": key[2],
            "accelerator": inst.accelerator, "chips_per_instance": inst.chips_per_instance,
            "plan": plan, "usd_per_instance_hour": effective,
            "usd_per_chip_hour": effective / inst.chips_per_instance,
            "source": p.source, "as_of": p.as_of, "origin": p.origin,
            "flagged": bool(p.flag_reason), "flag_reason": p.flag_reason,
            "hourly_usd_per_instance_hour": p.hourly_usd, "upfront_usd": p.upfront_usd,
            "term_months": math.nan if p.term_months is None else p.term_months,
            "preemption_rate_per_h": math.nan if p.preemption_rate_per_h is None else p.preemption_rate_per_h,
        })
    df = pd.DataFrame.from_records(records, columns=LONG_COLUMNS)
    df["chips_per_instance"] = df["chips_per_instance"].astype(int)
    df["flagged"] = df["flagged"].astype(bool)
    for col in ("hourly_usd_per_instance_hour", "upfront_usd", "term_months", "preemption_rate_per_h"):
        df[col] = df[col].astype(float)
    order = {plan: i for i, plan in enumerate(PLANS)}
    df["_plan_order"] = df["plan"].map(order)
    df = df.sort_values(["cloud", "instance_type", "region", "_plan_order"], kind="stable")
    return df.drop(columns="_plan_order").reset_index(drop=True)


def load_prices(paths: Sequence[str | Path] = (), *, shipped: bool = True,
                discount_pct: float | None = None, discount_base: str = "on_demand",
                today: date | None = None) -> pd.DataFrame:
    """The long price table: the shipped CSV (unless `shipped=False`) with `paths` layered on top.

    A later file overrides, cell by cell, rows with the same (cloud, region, instance_type): it may
    add a plan (e.g. a negotiated `commit_1y`) and keep the rest. `discount_pct` adds a plan
    `<discount_base>-<pct>%` priced at that plan less the percentage.
    """
    today = today or today_utc()
    files = ([SHIPPED_PRICES] if shipped else []) + [Path(p) for p in paths]
    if not files:
        raise UserError("no price files given", field="--prices")
    instances: dict = {}
    prices: dict = {}
    for path in files:
        _merge_file(path, instances, prices, today)
    _flag_spot_above_on_demand(prices)
    long = _to_long(instances, prices)
    if discount_pct is not None:
        long = apply_discount(long, discount_pct, discount_base)
    return long


def validate_price_files(paths: Sequence[str | Path], *, today: date | None = None) -> dict[str, int]:
    """Validate files layered over the shipped table (a UserError names file:line and column) and
    return, per file, how many instance rows it prices after layering."""
    long = load_prices(paths, today=today)
    files = long["origin"].str.rsplit(":", n=1).str[0]
    return {str(p): int(long.loc[files == str(Path(p)), list(KEY_COLUMNS)].drop_duplicates().shape[0])
            for p in paths}


def apply_discount(prices: pd.DataFrame, percent: float, base_plan: str = "on_demand") -> pd.DataFrame:
    """Add plan `<base_plan>-<percent>%`: every `base_plan` price less `percent` percent."""
    if not isinstance(percent, (int, float)) or not math.isfinite(percent) or not 0 < percent < 100:
        raise UserError(f"a discount is a percentage between 0 and 100, got {percent}", field="--discount")
    if base_plan not in set(prices["plan"]):
        raise UserError(f"no '{base_plan}' prices to discount; plans present: "
                        f"{', '.join(plan_names(prices))}", field="--discount")
    base = prices[prices["plan"] == base_plan].copy()
    factor = 1 - percent / 100
    base["plan"] = f"{base_plan}-{percent:g}%"
    # The discount applies to the whole plan price: its hourly and upfront parts alike.
    for col in ("usd_per_instance_hour", "usd_per_chip_hour", "hourly_usd_per_instance_hour", "upfront_usd"):
        if col in base:
            base[col] *= factor
    base["source"] = base["source"] + f" less {percent:g}% discount"
    return pd.concat([prices, base], ignore_index=True)


def in_regions(prices: pd.DataFrame, clouds: Sequence[str] = (), regions: Sequence[str] = ()) -> pd.DataFrame:
    """Only the price rows of the named clouds and regions (case-insensitive; each empty = all): the
    table every answer, estimate and budget then reads, so each names a region the user may use. A
    name no row has is a UserError listing those it does have."""
    for column, wanted, flag in (("cloud", clouds, "--cloud"), ("region", regions, "--region")):
        if not wanted:
            continue
        names = {str(w).lower() for w in wanted}
        kept = prices[prices[column].astype(str).str.lower().isin(names)]
        missing = sorted(names - set(kept[column].astype(str).str.lower()))
        if missing:
            known = ", ".join(sorted(set(prices[column].astype(str))))
            raise UserError(f"no price rows for {column} {', '.join(missing)}; known: {known}", field=flag)
        prices = kept
    return prices.reset_index(drop=True)


def plan_names(prices: pd.DataFrame) -> list[str]:
    present = list(pd.unique(prices["plan"]))
    return [p for p in PLANS if p in present] + [p for p in present if p not in PLANS]


def select_plans(prices: pd.DataFrame, plans: Sequence[str] | None) -> pd.DataFrame:
    """Only the named plans (all when None); an unknown plan name is a UserError."""
    if not plans:
        return prices
    present = plan_names(prices)
    for plan in plans:
        if plan not in present:
            raise UserError(f"unknown plan '{plan}'{did_you_mean(plan, present)}; plans with prices: "
                            f"{', '.join(present)}", field="--plan")
    return prices[prices["plan"].isin(list(plans))].reset_index(drop=True)


def prices_wide(prices: pd.DataFrame) -> pd.DataFrame:
    """Back to the CSV layout (one row per instance, a column per plan) for listing or writing."""
    if prices.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    keys = list(KEY_COLUMNS + INSTANCE_COLUMNS)
    table = prices.pivot_table(index=keys, columns="plan", values="usd_per_instance_hour", aggfunc="first")
    provenance = prices.groupby(keys, sort=False).agg(
        source=("source", lambda s: " | ".join(dict.fromkeys(s))),
        as_of=("as_of", "min"), flagged=("flagged", "any"))
    wide = table.join(provenance).reset_index()
    plans = plan_names(prices)
    for plan in plans:
        if plan not in wide:
            wide[plan] = math.nan
    extra = []
    if "preemption_rate_per_h" in prices and prices["preemption_rate_per_h"].notna().any():
        rates = prices.dropna(subset=["preemption_rate_per_h"]).groupby(keys, sort=False)["preemption_rate_per_h"].first()
        wide = wide.join(rates.rename("spot_preemptions_per_h"), on=keys)
        extra = ["spot_preemptions_per_h"]
    return wide[keys + plans + extra + ["source", "as_of", FLAG_COLUMN]]


def upfront_notes(prices: pd.DataFrame) -> list[str]:
    """One line per price with an upfront part, showing how its effective hourly price is made."""
    if "upfront_usd" not in prices:
        return []
    rows = prices[prices["upfront_usd"].fillna(0) > 0]
    return [f"{plan_vocab.plan_label(r.plan)} {r.cloud} {r.region} {r.instance_type}: "
            f"{r.hourly_usd_per_instance_hour:g} USD/h + "
            f"{r.upfront_usd:,.0f} USD upfront over {r.term_months:g} months = {r.usd_per_instance_hour:.4g} USD/h effective"
            for r in rows.itertuples(index=False)]


def with_flags(prices: pd.DataFrame) -> pd.DataFrame:
    """`prices` with the `flagged` and `flag_reason` columns (unflagged where a table built by hand
    lacks them)."""
    if "flagged" in prices and "flag_reason" in prices:
        return prices
    return prices.assign(flagged=prices.get("flagged", False), flag_reason=prices.get("flag_reason", ""))


def prefer_unflagged(prices: pd.DataFrame, include_flagged: bool = False) -> pd.DataFrame:
    """The price rows a choice may use: a flagged row only where no unflagged row prices the same
    accelerator under the same plan (every row with `include_flagged`). A flagged price is one its
    source calls suspect (spot above on-demand, a lower bound...): left in, it would win "cheapest"
    by its error."""
    prices = with_flags(prices)
    if include_flagged or prices.empty:
        return prices
    flagged = prices["flagged"].astype(bool)
    honest = set(map(tuple, prices.loc[~flagged, ["accelerator", "plan"]].itertuples(index=False)))
    covered = pd.Series([(a, p) in honest for a, p in zip(prices["accelerator"], prices["plan"])],
                        index=prices.index, dtype=bool)
    return prices[~(flagged & covered)]


def flagged_set_aside_note(prices: pd.DataFrame, chosen: pd.DataFrame) -> str | None:
    """The line saying how many flagged prices `prefer_unflagged` left out, or None."""
    prices = with_flags(prices)
    left_out = prices[prices["flagged"].astype(bool) & ~prices.index.isin(chosen.index)]
    if left_out.empty:
        return None
    rows = left_out[list(KEY_COLUMNS)].drop_duplicates()
    names = ", ".join(sorted(set("/".join(r) for r in rows.astype(str).itertuples(index=False))))
    return (f"{len(rows)} flagged price row(s) set aside because an unflagged row prices the same accelerator "
            f"and plan ({names}); --include-flagged lets them compete, marked ⚠")


def write_price_csv(wide: pd.DataFrame, path: str | Path, float_format: str = "%.6g") -> Path:
    """A price table as CSV (cells a spreadsheet would run as formulas neutralised). Importers of
    upfront payments pass more digits: %.6g would round 1,234,567 USD."""
    text = neutralize_frame(wide).to_csv(index=False, float_format=float_format)
    return replace_file(path, text.encode("utf-8"))       # atomic: never a half-written price file


# ----------------------------------------------------------------------------- reference tables


def load_accelerator_specs(path: str | Path | None = None) -> pd.DataFrame:
    """Per-chip peaks (FLOP/s, bytes, bytes/s) indexed by canonical accelerator name."""
    return pd.read_csv(path or SHIPPED_ACCELERATORS).set_index("accelerator")


def load_unpriced_notes(path: str | Path | None = None) -> pd.DataFrame:
    """Instances known to exist but with no public price: why, and where to look."""
    return pd.read_csv(path or SHIPPED_UNPRICED, dtype=str, keep_default_na=False)

