"""Import SkyPilot catalogs: turn a SkyPilot `vms.csv` (gcp or aws) into rows of a price file.

Kept apart from the price tables because it knows the catalog's layout and its quirks (placeholder
prices, GCP GPU machines split into a host row and a GPU row, TPU slice names counting TensorCores,
AWS local zones), none of which the price tables need; its output is an ordinary price file in the
columns of `pricing.BASIC_COLUMNS`, validated like any other when it is read.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Sequence

import pandas as pd

from tpubench.errors import UserError
from tpubench.hardware.accelerators import CPU_ARM, CPU_X86, normalize_accelerator
from tpubench.money.pricing import BASIC_COLUMNS as COLUMNS
from tpubench.money.pricing import FLAG_COLUMN

# Catalog values that are not prices (see pricing/README.md).
_PLACEHOLDER_PRICE = 700.0
# GCP GPU machines: host row + GPU row. Which GPU row belongs to which host family.
_GCP_GPU_HOSTS = [
    (re.compile(r"^a2-highgpu-(\d+)g$"), "A100"),
    (re.compile(r"^a2-megagpu-(\d+)g$"), "A100"),
    (re.compile(r"^a2-ultragpu-(\d+)g$"), "A100-80GB"),
    (re.compile(r"^a3-highgpu-(\d+)g$"), "H100"),
    (re.compile(r"^a3-megagpu-(\d+)g$"), "H100-MEGA"),
    (re.compile(r"^a3-ultragpu-(\d+)g$"), "H200"),
    (re.compile(r"^a4-highgpu-(\d+)g$"), "B200"),
    (re.compile(r"^g2-standard-(\d+)$"), "L4"),
]
_G2_L4_COUNT = {4: 1, 8: 1, 12: 1, 16: 1, 32: 1, 24: 2, 48: 4, 96: 8}
_GCP_GPU_FAMILY = re.compile(r"^(a\d|g\d)-")          # never priced as a CPU-only VM
_GCP_ARM_FAMILY = re.compile(r"^(t2a|c4a|n4a)-")
# TPU slice names count TensorCores for these generations (v5p-8 = 4 chips), chips for the rest.
_TPU_SLICE = re.compile(r"^tpu-(v2|v3|v4|v5p|v5litepod|v6e)-(\d+)$")
_TPU_CORES_PER_CHIP = {"v2": 2, "v3": 2, "v4": 2, "v5p": 2, "v5litepod": 1, "v6e": 1}
_AWS_REGULAR_ZONE = re.compile(r"^[a-z]+\d+-az\d+$")     # zone ids; local zones look like use1-atl2-az1

_GCP_REQUIRED = ("InstanceType", "vCPUs", "AcceleratorName", "AcceleratorCount", "Region",
                 "AvailabilityZone", "Price", "SpotPrice")
_AWS_REQUIRED = _GCP_REQUIRED + ("Arch",)


def _catalog_price(series: pd.Series) -> pd.Series:
    """Catalog cells to floats, with placeholders, zeros and empty cells as NaN."""
    values = pd.to_numeric(series.replace("", math.nan), errors="coerce")
    return values.where((values > 0) & (values != _PLACEHOLDER_PRICE))


def _per_region(zoned: pd.DataFrame) -> pd.DataFrame:
    """Zone rows -> region rows: on-demand is the region's price (the highest, should zones ever
    disagree, so a budget never understates it); spot is the lowest across the region's zones."""
    keys = ["region", "instance_type", "accelerator", "chips_per_instance"]
    out = zoned.groupby(keys, as_index=False).agg(on_demand=("price", "max"), spot=("spot", "min"))
    return out.dropna(subset=["on_demand", "spot"], how="all")


def _read_catalog(path: Path, required: Sequence[str]) -> pd.DataFrame:
    if not path.is_file():
        raise UserError("no such catalog file", where=str(path))
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise UserError(f"not a readable CSV: {str(exc).splitlines()[0]}", where=str(path)) from None
    for col in required:
        if col not in df.columns:
            raise UserError("missing column in the SkyPilot catalog", where=f"{path}:1", field=col)
    df["price"] = _catalog_price(df["Price"])
    df["spot"] = _catalog_price(df["SpotPrice"])
    return df


def _whole_count(text: str) -> int | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return int(value) if value >= 1 and value == int(value) else None


def _import_gcp(df: pd.DataFrame, include_cpu: bool) -> pd.DataFrame:
    hosts = df[df["InstanceType"] != ""]
    extras = df[df["InstanceType"] == ""]
    tpus = extras[extras["AcceleratorName"].str.startswith("tpu-")]
    gpus = extras[~extras["AcceleratorName"].str.startswith("tpu-") & (extras["AcceleratorName"] != "")]
    parts = []

    # TPU rows price the whole slice; the slice size is in the name.
    slices = []
    for _, r in tpus.iterrows():
        m = _TPU_SLICE.match(r["AcceleratorName"])
        if not m:
            continue
        generation, size = m.group(1), int(m.group(2))
        chips = max(1, size // _TPU_CORES_PER_CHIP[generation])
        slices.append({"region": r["Region"], "instance_type": r["AcceleratorName"],
                       "accelerator": normalize_accelerator(r["AcceleratorName"], "tpu"),
                       "chips_per_instance": chips, "price": r["price"], "spot": r["spot"]})
    if slices:
        parts.append(_per_region(pd.DataFrame(slices)))

    # GPU machines: the host row plus the GPU row of the same zone; both must be real prices.
    gpu_rows = gpus.assign(count=gpus["AcceleratorCount"].map(_whole_count))
    gpu_index = {(r.AcceleratorName, r.count, r.AvailabilityZone): (r.price, r.spot)
                 for r in gpu_rows.itertuples(index=False)}
    machines, cpu_vms = [], []
    for r in hosts.itertuples(index=False):
        gpu_name, count = None, None
        for pattern, name in _GCP_GPU_HOSTS:
            m = pattern.match(r.InstanceType)
            if m:
                size = int(m.group(1))
                gpu_name, count = name, (_G2_L4_COUNT.get(size) if name == "L4" else size)
                break
        if gpu_name and count:
            gpu = gpu_index.get((gpu_name, count, r.AvailabilityZone))
            if gpu is None:
                continue
            machines.append({"region": r.Region, "instance_type": r.InstanceType,
                             "accelerator": normalize_accelerator(gpu_name, "cuda"),
                             "chips_per_instance": count,
                             "price": r.price + gpu[0], "spot": r.spot + gpu[1]})
        elif r.AcceleratorName:
            count = _whole_count(r.AcceleratorCount)
            accelerator = normalize_accelerator(r.AcceleratorName)
            if accelerator and count:
                machines.append({"region": r.Region, "instance_type": r.InstanceType,
                                 "accelerator": accelerator, "chips_per_instance": count,
                                 "price": r.price, "spot": r.spot})
        elif include_cpu and not _GCP_GPU_FAMILY.match(r.InstanceType):
            vcpus = _whole_count(r.vCPUs)
            if vcpus:
                arm = bool(_GCP_ARM_FAMILY.match(r.InstanceType))
                cpu_vms.append({"region": r.Region, "instance_type": r.InstanceType,
                                "accelerator": CPU_ARM if arm else CPU_X86, "chips_per_instance": vcpus,
                                "price": r.price, "spot": r.spot})
    for rows in (machines, cpu_vms):
        if rows:
            parts.append(_per_region(pd.DataFrame(rows)))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _import_aws(df: pd.DataFrame, include_cpu: bool) -> pd.DataFrame:
    df = df[df["AvailabilityZone"].str.match(_AWS_REGULAR_ZONE)].copy()
    # AWS lists the on-demand price as the spot price where there is no spot market.
    df.loc[df["spot"] == df["price"], "spot"] = math.nan
    rows = []
    for r in df.itertuples(index=False):
        if r.AcceleratorName:
            accelerator = normalize_accelerator(r.AcceleratorName)
            count = _whole_count(r.AcceleratorCount)
        elif include_cpu:
            accelerator = CPU_ARM if "arm" in r.Arch else CPU_X86
            count = _whole_count(r.vCPUs)
        else:
            continue
        if accelerator and count:
            rows.append({"region": r.Region, "instance_type": r.InstanceType, "accelerator": accelerator,
                         "chips_per_instance": count, "price": r.price, "spot": r.spot})
    return _per_region(pd.DataFrame(rows)) if rows else pd.DataFrame()


def import_skypilot(vms_csv: str | Path, cloud: str, *, include_cpu: bool = False,
                    source: str | None = None, as_of: str | date | None = None) -> pd.DataFrame:
    """A SkyPilot `vms.csv` (gcp or aws) -> a price table in the CSV layout of `COLUMNS`.

    Rules (reference README): GCP GPU machines are the host row plus the zone's GPU row; TPU rows
    price the whole slice (chips from the slice name); 700.0 placeholders, 0.0 prices and empty
    cells are skipped (a 0.0 host price leaves that machine unpriced); AWS spot equal to on-demand
    is no spot price; AWS local zones are left out. Per region, on-demand is the region's price and
    spot the lowest across its zones. CPU-only VMs (priced per vCPU) only with `include_cpu`.
    `as_of` defaults to the catalog file's modification date.
    """
    path = Path(vms_csv)
    cloud = cloud.lower()
    if cloud not in ("gcp", "aws"):
        raise UserError(f"cannot import '{cloud}' catalogs; supported: gcp, aws", field="--cloud")
    df = _read_catalog(path, _GCP_REQUIRED if cloud == "gcp" else _AWS_REQUIRED)
    table = _import_gcp(df, include_cpu) if cloud == "gcp" else _import_aws(df, include_cpu)
    if as_of is None:
        as_of = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).date()
    if table.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    table.insert(0, "cloud", cloud)
    for plan in ("commit_1y", "commit_3y"):
        table[plan] = math.nan
    table["source"] = source or f"SkyPilot catalog {path.name} imported by tpubench"
    table["as_of"] = as_of.isoformat() if isinstance(as_of, date) else str(as_of)
    table["chips_per_instance"] = table["chips_per_instance"].astype(int)
    table = table.sort_values(["instance_type", "region"], kind="stable").reset_index(drop=True)
    # Left empty: a spot price above on-demand is flagged, with its reason, wherever a price file is read.
    table[FLAG_COLUMN] = ""
    return table[list(COLUMNS)]
