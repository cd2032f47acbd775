"""Price tables: load and validate the shipped and user price CSVs, layer user files over the shipped
table, add a discount, choose between flagged and unflagged prices, and read the other shipped
reference tables (unpriced instances, per-chip specs). Mapping runtime device names to priced
accelerators is `money.accelerator_map`; importing SkyPilot catalogs is `money.sky_prices`.

A price file is a CSV with the columns in `COLUMNS`; one row per (cloud, region, instance_type)
with USD per hour for the *whole instance* in each plan column (a TPU slice is priced whole; a CPU
VM counts vCPUs as its chips). Empty plan cells mean "not offered / not known".

In memory prices are long: one row per (cloud, region, instance_type, plan), so every price keeps
its own source and `as_of` date even when a user file only adds a negotiated 1-year rate to a row
that the shipped table already has.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Sequence

import pandas as pd

from tpubench.records.csv_safety import neutralize_frame
from tpubench.errors import UserError
from tpubench.money.table_files import check_header, did_you_mean, read_rows

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
SHIPPED_PRICES = DATA_DIR / "prices.csv"
SHIPPED_UNPRICED = DATA_DIR / "unpriced.csv"
SHIPPED_ACCELERATORS = DATA_DIR / "accelerators.csv"

KEY_COLUMNS = ("cloud", "region", "instance_type")
INSTANCE_COLUMNS = ("accelerator", "chips_per_instance")
PLANS = ("on_demand", "spot", "commit_1y", "commit_3y")
PROVENANCE_COLUMNS = ("source", "as_of")
# Optional: true marks a row whose prices are suspect (as a "[FLAG: ...]" note in its source does).
FLAG_COLUMN = "flagged"
COLUMNS = KEY_COLUMNS + INSTANCE_COLUMNS + PLANS + PROVENANCE_COLUMNS + (FLAG_COLUMN,)
REQUIRED_COLUMNS = KEY_COLUMNS + ("as_of",)

# Columns of the long table every other module reads.
LONG_COLUMNS = [
    "cloud", "region", "instance_type", "accelerator", "chips_per_instance", "plan",
    "usd_per_instance_hour", "usd_per_chip_hour", "source", "as_of", "origin", "flagged", "flag_reason",
]
# A source note that flags its row, as the shipped table writes it: "[FLAG: GPU SKU mismatch ...]".
_FLAG_NOTE = re.compile(r"\[FLAG:?\s*([^\]]*)\]", re.IGNORECASE)
_TRUE_WORDS = {"true", "yes", "1", "y"}
_FALSE_WORDS = {"false", "no", "0", "n"}

STALE_AFTER_DAYS = 180


# ----------------------------------------------------------------------------- dates


def today_utc() -> date:
    return datetime.now(timezone.utc).date()


def price_age_days(as_of: str | date, today: date | None = None) -> int:
    """Whole days between a price's `as_of` date and `today` (UTC today when not given)."""
    d = as_of if isinstance(as_of, date) else date.fromisoformat(str(as_of))
    return ((today or today_utc()) - d).days


def stale_price_warnings(prices: pd.DataFrame, today: date | None = None,
                         max_age_days: int = STALE_AFTER_DAYS) -> list[str]:
    """One warning per `as_of` date older than `max_age_days`, counting the prices it covers."""
    if prices.empty:
        return []
    today = today or today_utc()
    out = []
    for as_of, group in prices.groupby("as_of", sort=True):
        age = price_age_days(as_of, today)
        if age > max_age_days:
            rows = group[list(KEY_COLUMNS)].drop_duplicates()
            out.append(f"{len(rows)} instance price row(s) dated {as_of} are {age} days old "
                       f"(over {max_age_days}): check them against the clouds' pricing pages")
    return out


# ----------------------------------------------------------------------------- reading files


@dataclass
class _Instance:
    accelerator: str
    chips_per_instance: int
    origin: str


@dataclass
class _Price:
    usd_per_instance_hour: float
    source: str
    as_of: str
    origin: str
    flag_reason: str = ""      # why the price is suspect; "" when it is not flagged


def _parse_number(text: str, where: str, field: str, what: str) -> float | None:
    """None for an empty cell, else a finite float; anything else names file, row and column."""
    text = text.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"'{text}' is not a number ({what})", where=where, field=field) from None
    if not math.isfinite(value):
        raise UserError(f"'{text}' is not a finite number ({what})", where=where, field=field)
    return value


def _parse_positive_price(text: str, where: str, field: str) -> float | None:
    value = _parse_number(text, where, field, "USD per instance-hour")
    if value is not None and value <= 0:
        raise UserError(f"price must be a positive number of USD per instance-hour, got {text.strip()} "
                        "(leave the cell empty when a plan is not offered)", where=where, field=field)
    return value


def _parse_chips(text: str, where: str) -> int | None:
    value = _parse_number(text, where, "chips_per_instance", "chips")
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


def _merge_file(path: Path, instances: dict, prices: dict, today: date) -> None:
    """Validate one price file and layer its rows over `instances` / `prices` (later wins per cell)."""
    header_line, header, rows = read_rows(path, "price file", COLUMNS)
    # An unknown column is most often a plan name of the user's own (e.g. "reserved"): say which plans exist.
    check_header(path, header_line, header, COLUMNS, REQUIRED_COLUMNS,
                 f"price plans are {', '.join(PLANS)} (a percentage off is --discount), other columns "
                 f"{', '.join(KEY_COLUMNS + INSTANCE_COLUMNS + PROVENANCE_COLUMNS + (FLAG_COLUMN,))}")
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
        if key in seen_keys:
            raise UserError(f"duplicate row: line {seen_keys[key]} already prices {'/'.join(key)}",
                            where=where, field="instance_type")
        seen_keys[key] = line

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
        row_prices = {plan: _parse_positive_price(cell[plan], where, plan) for plan in PLANS if plan in cell}
        if all(v is None for v in row_prices.values()):
            raise UserError(f"no price in any plan column ({', '.join(p for p in PLANS if p in cell)})",
                            where=where)
        for plan, value in row_prices.items():
            if value is not None:
                prices[(key, plan)] = _Price(value, source, as_of, where, flag_reason)


def _to_long(instances: dict, prices: dict) -> pd.DataFrame:
    records = []
    for (key, plan), p in prices.items():
        inst = instances[key]
        records.append({
            "cloud": key[0], "region": key[1], "instance_type": key[2],
            "accelerator": inst.accelerator, "chips_per_instance": inst.chips_per_instance,
            "plan": plan, "usd_per_instance_hour": p.usd_per_instance_hour,
            "usd_per_chip_hour": p.usd_per_instance_hour / inst.chips_per_instance,
            "source": p.source, "as_of": p.as_of, "origin": p.origin,
            "flagged": bool(p.flag_reason), "flag_reason": p.flag_reason,
        })
    df = pd.DataFrame.from_records(records, columns=LONG_COLUMNS)
    df["chips_per_instance"] = df["chips_per_instance"].astype(int)
    df["flagged"] = df["flagged"].astype(bool)
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
    base["usd_per_instance_hour"] *= factor
    base["usd_per_chip_hour"] *= factor
    base["source"] = base["source"] + f" less {percent:g}% discount"
    return pd.concat([prices, base], ignore_index=True)


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
    return wide[keys + plans + ["source", "as_of", FLAG_COLUMN]]


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


def write_price_csv(wide: pd.DataFrame, path: str | Path) -> Path:
    path = Path(path)
    neutralize_frame(wide).to_csv(path, index=False, float_format="%.6g")
    return path


# ----------------------------------------------------------------------------- reference tables


def load_accelerator_specs(path: str | Path | None = None) -> pd.DataFrame:
    """Per-chip peaks (FLOP/s, bytes, bytes/s) indexed by canonical accelerator name."""
    return pd.read_csv(path or SHIPPED_ACCELERATORS).set_index("accelerator")


def load_unpriced_notes(path: str | Path | None = None) -> pd.DataFrame:
    """Instances known to exist but with no public price: why, and where to look."""
    return pd.read_csv(path or SHIPPED_UNPRICED, dtype=str, keep_default_na=False)

