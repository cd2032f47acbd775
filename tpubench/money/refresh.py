"""`tpubench pricing refresh`: rebuild the price table from stored copies of the public catalogs and
say what moved.

A store is a folder laid out as

    skypilot/gcp/vms.csv   skypilot/aws/vms.csv     SkyPilot's catalogs (`sky_prices.import_skypilot`)
    gcp/*.json                                      Cloud Billing Catalog SKU lists (`price_imports.gcp`)
    aws/*.json                                      AWS Price List offer files (`price_imports.aws`)
    azure/*.json                                    Azure Retail Prices responses (`price_imports.azure`)

(any part may be missing, not all). The rebuilt table is a long-form price file: one row per
(cloud, region, instance type, plan), each with its own source and date. SkyPilot's rows come
first; a cloud's own price file, where it prices the same instance and plan, replaces them (the
catalog is derived from those files). Nothing here reaches the network: fetching SkyPilot's current
catalogs into a store is the command's job, through SkyPilot itself (launch/sky_bridge.py).

What moved: per (cloud, region, instance type, plan) priced both before and after, the effective
price per instance-hour's relative change; a change over `MOVE_THRESHOLD` (10%) either way is
listed, with rows only one side has counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from tpubench.errors import UserError
from tpubench.money import pricing
from tpubench.money.price_imports import aws, azure, gcp
from tpubench.money.sky_prices import import_skypilot

SKYPILOT_CLOUDS = ("gcp", "aws")
IMPORTERS = {"gcp": gcp.import_gcp, "aws": aws.import_aws, "azure": azure.import_azure}
MOVE_THRESHOLD = 0.10
KEY = ["cloud", "region", "instance_type", "plan"]


@dataclass
class Store:
    """The files of a store folder, by kind."""
    folder: Path
    skypilot: dict[str, Path] = field(default_factory=dict)       # cloud -> vms.csv
    price_files: dict[str, list[Path]] = field(default_factory=dict)  # cloud -> JSON files

    def files(self) -> list[Path]:
        return list(self.skypilot.values()) + [p for paths in self.price_files.values() for p in paths]


def find_store(folder: str | Path) -> Store:
    """The catalogs and price files in `folder` (module notes); a folder with none is a UserError."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UserError("no such folder of stored catalogs", where=str(folder), field="--from")
    store = Store(folder)
    for cloud in SKYPILOT_CLOUDS:
        vms = folder / "skypilot" / cloud / "vms.csv"
        if vms.is_file():
            store.skypilot[cloud] = vms
    for cloud in IMPORTERS:
        files = sorted((folder / cloud).glob("*.json")) if (folder / cloud).is_dir() else []
        if files:
            store.price_files[cloud] = files
    if not store.files():
        raise UserError("no catalog or price file: expected skypilot/gcp/vms.csv, skypilot/aws/vms.csv, gcp/*.json, "
                        "aws/*.json or azure/*.json", where=str(folder), field="--from")
    return store


def wide_to_long(wide: pd.DataFrame) -> pd.DataFrame:
    """A wide price table (a column per plan, `sky_prices`' layout) as long-form rows, one per
    priced plan, each keeping its row's source and date."""
    records = []
    plans = [p for p in pricing.PLANS if p in wide]
    for row in wide.to_dict("records"):
        for plan in plans:
            value = row.get(plan)
            if value is None or (isinstance(value, float) and math.isnan(value)):
                continue
            records.append({**{c: row.get(c, "") for c in pricing.KEY_COLUMNS + pricing.INSTANCE_COLUMNS},
                            "plan": plan, "usd_per_instance_hour": float(value), "source": row.get("source", ""),
                            "as_of": row.get("as_of", ""), "flagged": row.get(pricing.FLAG_COLUMN, "")})
    return pd.DataFrame.from_records(records, columns=list(pricing.LONG_FILE_COLUMNS))


def rebuild(store: Store, *, as_of: str | None = None, labels: dict[str, str] | None = None) -> tuple[pd.DataFrame, list[str]]:
    """(the long-form price rows of every file in `store`, one note per file: what it gave and what
    it left out). `as_of` dates rows whose file says no date of its own (default: the file's date);
    `labels` names where a SkyPilot catalog came from (cloud -> words) in its rows' source."""
    parts, notes = [], []
    for cloud, path in store.skypilot.items():
        label = (labels or {}).get(cloud) or f"stored copy {path}"
        wide = import_skypilot(path, cloud, source=f"SkyPilot catalog {cloud}/vms.csv ({label})", as_of=as_of)
        rows = wide_to_long(wide)
        parts.append(rows)
        notes.append(f"{path}: {len(wide)} instance row(s), {len(rows)} price(s)")
    for cloud, paths in store.price_files.items():
        for path in paths:
            result = IMPORTERS[cloud](path, as_of=as_of)
            table = result.table()
            parts.append(table)
            skipped = sum(result.skipped.values())
            notes.append(f"{path}: {len(table)} price(s)" + (f", {skipped} SKU(s) left out (reasons: pricing "
                                                                f"import-{cloud})" if skipped else ""))
    frames = [p for p in parts if len(p)]
    if not frames:
        return pd.DataFrame(columns=list(pricing.LONG_FILE_COLUMNS)), notes
    table = pd.concat(frames, ignore_index=True)
    # Later sources win per instance and plan: a cloud's own file over the catalog derived from it.
    table = table.drop_duplicates(KEY, keep="last")
    return table.sort_values(KEY, kind="stable").reset_index(drop=True), notes


def write_table(table: pd.DataFrame, out: str | Path) -> Path:
    """The rebuilt table as a long-form price file (atomic), checked by loading it back."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pricing.write_price_csv(table[list(pricing.LONG_FILE_COLUMNS)], out, float_format="%.10g")
    return out


def moved(before: pd.DataFrame, after: pd.DataFrame, threshold: float = MOVE_THRESHOLD) -> pd.DataFrame:
    """Prices (long tables, `pricing.load_prices`' columns) of the same instance and plan whose
    effective USD per instance-hour changed by more than `threshold` either way, largest first."""
    cols = KEY + ["accelerator", "usd_per_instance_hour", "usd_per_chip_hour", "as_of"]
    both = before[cols].merge(after[cols], on=KEY, suffixes=("_before", "_after"))
    change = both["usd_per_instance_hour_after"] / both["usd_per_instance_hour_before"] - 1.0
    both = both.assign(change=change)
    out = both[change.abs() > threshold + 1e-9]      # exactly the threshold (11 / 10 - 1 in floats) has not moved more
    return out.reindex(out["change"].abs().sort_values(ascending=False).index).reset_index(drop=True)


def coverage(before: pd.DataFrame, after: pd.DataFrame) -> tuple[int, int, int]:
    """(prices in both, only in the rebuilt table, only in the old one)."""
    old = set(map(tuple, before[KEY].itertuples(index=False)))
    new = set(map(tuple, after[KEY].itertuples(index=False)))
    return len(old & new), len(new - old), len(old - new)


def moved_lines(rows: pd.DataFrame) -> list[str]:
    """One line per moved price: where, which plan, from and to per chip-hour, the change, the dates."""
    from tpubench.money.plans import plan_label

    return [f"{r.cloud} {r.region} {r.instance_type} ({r.accelerator_after}) {plan_label(r.plan)}: "
            f"${r.usd_per_chip_hour_before:.4g} -> ${r.usd_per_chip_hour_after:.4g}/chip-h ({r.change:+.0%}; "
            f"{r.as_of_before} -> {r.as_of_after})" for r in rows.itertuples(index=False)]


__all__ = ["IMPORTERS", "MOVE_THRESHOLD", "SKYPILOT_CLOUDS", "Store", "coverage", "find_store", "moved", "moved_lines",
           "rebuild", "wide_to_long", "write_table"]
