"""TCO tiers (docs/definitions.md#budget-tco): what a fleet costs at rates other than the clouds' list
prices, read from a user's CSV (`tpubench budget tokens --tco FILE`, `tpubench report --tco FILE`), shown
beside list on-demand: a budget's monthly cost per tier (`tier_costs`), a report's $/Mtok per tier
(`tier_usd_per_mtok`).

List prices are what a cloud's price page says; what a fleet costs in practice depends on where it
runs: a hyperscaler at a negotiated rate, a neocloud's per-GPU-hour rate, owned hardware amortised
(capex over its life, plus power). A tier file says, per tier, accelerator and (optionally) cloud,
either a rate per chip-hour or a multiple of the list on-demand price:

    tier,accelerator,cloud,usd_per_chip_hour,list_multiplier,adds_energy,source,as_of
    hyperscaler,,,,0.7,,negotiated 30% off list,2026-11-01
    neocloud,H100,,2.10,,,provider quote,2026-11-15
    owned,H100,,1.05,,true,capex 25k USD over 4 y + hosting,2026-10-01

- `tier` (required): a name, letters, digits, space, `_` or `-`.
- `accelerator`: the price table's accelerator name (as in `tpubench pricing list`); empty or `*`
  means every accelerator.
- `cloud`: only that cloud's platforms; empty means all.
- exactly one of `usd_per_chip_hour` (> 0) and `list_multiplier` (> 0, times the platform's list
  on-demand USD per chip-hour).
- `adds_energy` (true/false, default false): the rate excludes power (owned capacity); the fleet's
  energy at `--power-price` and `--pue` is added to its monthly cost.
- `source` and `as_of` (ISO date, not in the future) are required: a rate with no provenance is a guess.

Per platform the most specific row of each tier applies (accelerator and cloud, then accelerator,
then cloud, then neither). A tier prices the same fleet the budget sized on that platform (its
rented chips, the CI from the throughput's):

    tier monthly = rented_chips * tier USD per chip-hour * 730  (+ the monthly energy when adds_energy)
"""

from __future__ import annotations

import math
import re
from datetime import date
from pathlib import Path

import pandas as pd

from tpubench.errors import UserError
from tpubench.money.table_files import check_header, parse_number, read_rows

COLUMNS = ("tier", "accelerator", "cloud", "usd_per_chip_hour", "list_multiplier", "adds_energy", "source", "as_of")
REQUIRED = ("tier", "source", "as_of")
_TIER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _-]*$")
_TRUE, _FALSE = {"true", "yes", "1", "y"}, {"false", "no", "0", "n", ""}
ANY = "*"

TIER_COLUMNS = [
    "workload", "scale", "priced_accelerator", "cloud", "region", "instance_type", "rented_chips",
    "list_usd_per_chip_hour", "list_monthly_usd", "tier", "tier_usd_per_chip_hour", "tier_basis",
    "monthly_usd", "monthly_usd_ci95_low", "monthly_usd_ci95_high", "energy_in_monthly_usd",
    "saving_vs_list_usd_per_month", "tier_source", "tier_as_of",
]


def tier_column(tier: str) -> str:
    """The budget CSV's column of a tier's monthly cost: "Neo cloud" -> tco_neo_cloud_monthly_usd."""
    return "tco_" + "_".join(str(tier).lower().replace("-", " ").split()) + "_monthly_usd"


def _positive(text: str, where: str, field: str) -> float | None:
    value = parse_number(text, where, field)
    if value is not None and not value > 0:
        raise UserError(f"must be a positive number, got {text.strip()}", where=where, field=field)
    return value


def load_tco(path: str | Path, today: date | None = None) -> pd.DataFrame:
    """The tier rows of a TCO file, validated (module docstring); a bad cell is a one-line UserError
    naming file:line and column."""
    from tpubench.money.pricing import today_utc

    path = Path(path)
    today = today or today_utc()
    header_line, header, rows = read_rows(path, "TCO tier file", COLUMNS)
    check_header(path, header_line, header, COLUMNS, REQUIRED, f"TCO tier columns are {', '.join(COLUMNS)}")
    if "usd_per_chip_hour" not in header and "list_multiplier" not in header:
        raise UserError("no rate column; add usd_per_chip_hour or list_multiplier", where=f"{path}:{header_line}")
    records, seen, spellings = [], {}, {}
    for line, cells in rows:
        where = f"{path}:{line}"
        if len(cells) != len(header):
            raise UserError(f"row has {len(cells)} fields but the header has {len(header)}", where=where)
        cell = {c: v.strip() for c, v in zip(header, cells)}
        tier = cell["tier"]
        if not _TIER_NAME.match(tier):
            raise UserError(f"'{tier}' is not a tier name (letters, digits, space, _ or -)", where=where, field="tier")
        rate = _positive(cell.get("usd_per_chip_hour", ""), where, "usd_per_chip_hour")
        multiplier = _positive(cell.get("list_multiplier", ""), where, "list_multiplier")
        if (rate is None) == (multiplier is None):
            raise UserError("give exactly one of usd_per_chip_hour and list_multiplier", where=where,
                            field="usd_per_chip_hour")
        energy_word = cell.get("adds_energy", "").lower()
        if energy_word not in _TRUE | _FALSE:
            raise UserError(f"'{cell['adds_energy']}' is not true or false", where=where, field="adds_energy")
        if not cell["source"]:
            raise UserError("empty; say where the rate comes from", where=where, field="source")
        try:
            as_of = date.fromisoformat(cell["as_of"])
        except ValueError:
            raise UserError(f"'{cell['as_of']}' is not an ISO date (YYYY-MM-DD)", where=where, field="as_of") from None
        if as_of > today:
            raise UserError(f"date {as_of} is in the future", where=where, field="as_of")
        # One tier, one spelling: "Neocloud" and "neocloud" would be two tiers sharing one CSV column.
        first = spellings.setdefault(tier_column(tier), tier)
        if first != tier:
            raise UserError(f"tier '{tier}' is spelt '{first}' on an earlier row; spell a tier one way",
                            where=where, field="tier")
        accelerator = cell.get("accelerator", "") or ANY
        cloud = (cell.get("cloud", "") or ANY).lower()
        key = (tier.lower(), accelerator.lower(), cloud)
        if key in seen:
            raise UserError(f"duplicate row: line {seen[key]} already gives tier '{tier}' for this accelerator "
                            "and cloud", where=where, field="tier")
        seen[key] = line
        records.append({"tier": tier, "accelerator": accelerator, "cloud": cloud, "usd_per_chip_hour": rate,
                        "list_multiplier": multiplier, "adds_energy": energy_word in _TRUE,
                        "source": cell["source"], "as_of": as_of.isoformat(), "origin": where})
    if not records:
        raise UserError("no tier rows", where=str(path))
    return pd.DataFrame.from_records(records)


def tier_row(tiers: pd.DataFrame, tier: str, accelerator: str, cloud: str) -> pd.Series | None:
    """The most specific row of `tier` for a platform (module docstring), or None."""
    rows = tiers[tiers["tier"] == tier]
    acc = rows["accelerator"].str.lower()
    cl = rows["cloud"]
    for want_acc, want_cloud in ((accelerator.lower(), cloud.lower()), (accelerator.lower(), ANY),
                                 (ANY, cloud.lower()), (ANY, ANY)):
        hit = rows[(acc == want_acc) & (cl == want_cloud)]
        if len(hit):
            return hit.iloc[0]
    return None


def _tier_rate(match: pd.Series, list_usd_per_chip_hour: float) -> tuple[float, str]:
    """(USD per chip-hour, basis) of a tier row: its own rate, or its multiple of the list price."""
    if pd.notna(match["usd_per_chip_hour"]):
        return float(match["usd_per_chip_hour"]), "rate"
    return float(match["list_multiplier"]) * list_usd_per_chip_hour, f"x{match['list_multiplier']:g} list"


def tier_costs(options: pd.DataFrame, tiers: pd.DataFrame, power) -> tuple[pd.DataFrame, list[str]]:
    """Each platform's fleet (budget option rows) at each tier's rate, beside its list on-demand cost.

    The fleet is the option's: its instances at each CI bound are recovered from the monthly cost
    bounds (monthly rental = instances * USD per instance-hour * 730), energy taken out where owned
    capacity put it in. `power` is budget/request.Power: an `adds_energy` tier needs its power price."""
    notes: list[str] = []
    rows = []
    keys = ["workload", "scale", "priced_accelerator", "cloud", "region", "instance_type"]
    unmatched = set(tiers["tier"])
    for key, group in options.groupby(keys, sort=False, dropna=False):
        on_demand = group[group["plan"] == "on_demand"]
        row = (on_demand if len(on_demand) else group).iloc[0]
        hourly = float(row["usd_per_instance_hour"])
        per_instance = float(row["chips_per_instance"])
        energy = float(row["monthly_energy_usd"]) if pd.notna(row.get("monthly_energy_usd")) else math.nan
        in_options = bool(row.get("energy_in_monthly_usd", False))
        # Rented chip-hours a month at the point and the CI bounds, from the option's monthly cost.
        chip_hours = {}
        for bound in ("", "_ci95_low", "_ci95_high"):
            rental = float(row["monthly_usd" + bound]) - (energy if in_options else 0.0)
            chip_hours[bound] = rental / hourly * per_instance
        # List = on-demand; without an on-demand price the fleet still prices at a tier's own rate.
        list_chip = hourly / per_instance if len(on_demand) else math.nan
        list_monthly = chip_hours[""] * list_chip
        for tier in dict.fromkeys(tiers["tier"]):
            match = tier_row(tiers, tier, str(row["priced_accelerator"]), str(row["cloud"]))
            if match is None:
                continue
            unmatched.discard(tier)
            if match["adds_energy"] and power.usd_per_kwh is None:
                raise UserError(f"tier {tier} adds energy ({match['origin']}): give --power-price (and --pue)",
                                field="--tco")
            rate, basis = _tier_rate(match, list_chip)
            added = energy if match["adds_energy"] else 0.0
            monthly = {b: h * rate + added for b, h in chip_hours.items()}
            rows.append({**dict(zip(keys, key)), "rented_chips": int(row["rented_chips"]),
                         "list_usd_per_chip_hour": list_chip, "list_monthly_usd": list_monthly,
                         "tier": tier, "tier_usd_per_chip_hour": rate, "tier_basis": basis,
                         "monthly_usd": monthly[""], "monthly_usd_ci95_low": monthly["_ci95_low"],
                         "monthly_usd_ci95_high": monthly["_ci95_high"],
                         "energy_in_monthly_usd": bool(match["adds_energy"]),
                         "saving_vs_list_usd_per_month": list_monthly - monthly[""],
                         "tier_source": match["source"], "tier_as_of": match["as_of"]})
    if unmatched and len(options):
        notes.append(f"TCO tier(s) {', '.join(sorted(unmatched))} match no platform in this budget "
                     "(their accelerator or cloud)")
    table = pd.DataFrame(rows, columns=TIER_COLUMNS)
    if table["energy_in_monthly_usd"].astype(bool).any() and table.loc[
            table["energy_in_monthly_usd"].astype(bool), "monthly_usd"].isna().any():
        notes.append("a tier that adds energy has no cost where the point was measured without energy")
    return table, notes


# ----------------------------------------------------------------------------- in `tpubench report`

REPORT_TIER_KEYS = ["workload", "scale", "priced_accelerator", "cloud", "region", "instance_type",
                    "scenario_kind", "server_name", "server_version", "backend"]
_PER_MTOK = [f"{figure}_usd_per_mtok{bound}" for figure in ("blended", "inferencex")
             for bound in ("", "_ci95_low", "_ci95_high")]
REPORT_TIER_COLUMNS = REPORT_TIER_KEYS + ["list_usd_per_chip_hour", "tier", "tier_usd_per_chip_hour", "tier_basis",
                                          "excludes_energy", "tier_source", "tier_as_of"] + _PER_MTOK


def tier_usd_per_mtok(summary: pd.DataFrame, tiers: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Each platform's cheapest on-demand point (a report summary row, plan on_demand) priced at each
    tier's rate instead of the list price. A $/Mtok is proportional to the chip-hour price
    (money/cost.py), so, CI bounds alike,

        tier $/Mtok = list $/Mtok * tier USD per chip-hour / list USD per chip-hour

    for the blended and the InferenceX-compatible figure. An `adds_energy` tier's rate excludes
    power, and so does its $/Mtok here (`excludes_energy`; `tpubench budget tokens --power-price` adds it)."""
    notes: list[str] = []
    rows = []
    listed = summary[summary["plan"] == "on_demand"] if len(summary) else summary
    if len(summary) and listed.empty:
        notes.append("TCO tiers are priced against the list on-demand price, and no point has one")
    unmatched = set(tiers["tier"])
    for _, row in listed.iterrows():
        list_chip = float(row["usd_per_chip_hour"])
        for tier in dict.fromkeys(tiers["tier"]):
            match = tier_row(tiers, tier, str(row["priced_accelerator"]), str(row["cloud"]))
            if match is None:
                continue
            unmatched.discard(tier)
            rate, basis = _tier_rate(match, list_chip)
            ratio = rate / list_chip
            rows.append({**{k: row.get(k) for k in REPORT_TIER_KEYS}, "list_usd_per_chip_hour": list_chip,
                         "tier": tier, "tier_usd_per_chip_hour": rate, "tier_basis": basis,
                         "excludes_energy": bool(match["adds_energy"]), "tier_source": match["source"],
                         "tier_as_of": match["as_of"],
                         **{c: float(row[c]) * ratio if c in row else math.nan for c in _PER_MTOK}})
    if unmatched and len(listed):
        notes.append(f"TCO tier(s) {', '.join(sorted(unmatched))} match no platform in this report "
                     "(their accelerator or cloud)")
    return pd.DataFrame(rows, columns=REPORT_TIER_COLUMNS), notes
