"""`--on` values -> targets: a machine type in SkyPilot's terms, checked against the price table.

A target is written as SkyPilot writes accelerators (`H100:8`, `tpu-v6e-8`, `Trainium2:16`) or as an
instance type from the price table (`trn2.48xlarge`, `a3-highgpu-8g`). Either way it must match a
priced row (with `--cloud`/`--region` when given): a typo is a one-line error with a "did you mean",
and the row it matched is what the cost estimate uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from tpubench.hardware.accelerators import CPU_ARM, CPU_X86
from tpubench.errors import UserError
from tpubench.money.pricing import did_you_mean, prefer_unflagged

# Price-table accelerator names -> SkyPilot's accelerator names (TPUs are named by slice instead).
SKYPILOT_ACCELERATORS = {
    "H100": "H100", "H200": "H200", "B200": "B200", "B300": "B300", "L4": "L4", "A100": "A100",
    "A100 80GB": "A100-80GB", "Trainium": "Trainium", "Trainium2": "Trainium2", "Inferentia2": "Inferentia2",
}
# Which `tpubench run --device` and which install extra each vendor's chips take.
_DEVICE_BY_VENDOR_PREFIX = (("TPU", "tpu"), ("Trainium", "neuron"), ("Inferentia", "neuron"))
_TARGET = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._ -]*?)(?::(?P<count>\d+))?$")


@dataclass(frozen=True)
class Target:
    spec: str                  # as the user wrote it
    accelerators: str | None   # SkyPilot's resources.accelerators ('tpu-v6e-8', 'H100:8'); None for CPU VMs
    instance_type: str | None  # set when the user named an instance (the estimate is priced on it)
    cloud: str | None          # pinned cloud (--cloud, or that of the named instance, TPU slice or --region)
    region: str | None         # pinned region (--region)
    accelerator: str           # the price table's name ('TPU v6e', 'H100', 'Trainium2')
    chips_per_node: int
    device: str                # what `tpubench run --device` gets there
    priced_as: dict            # the cheapest matching price row: cloud, region, instance_type, usd_per_hour
    note: str = ""             # why usd_per_hour is None, when it is

    @property
    def slug(self) -> str:
        """For file and job names: 'tpu-v6e-8', 'H100-8', 'trn2.48xlarge'."""
        return re.sub(r"[^A-Za-z0-9._-]+", "-", self.spec).strip("-")

    @property
    def is_tpu_slice(self) -> bool:
        return self.device == "tpu"


def device_for(accelerator: str) -> str:
    if accelerator in (CPU_X86, CPU_ARM):
        return "cpu"
    for prefix, device in _DEVICE_BY_VENDOR_PREFIX:
        if accelerator.startswith(prefix):
            return device
    return "cuda"


def resolve_targets(specs: list[str], prices: pd.DataFrame, *, plan: str = "on_demand",
                    cloud: str | None = None, region: str | None = None) -> list[Target]:
    """Every `--on` value as a Target priced under `plan` (a known machine without a price under
    `plan` gets `usd_per_hour` None and a note); duplicates and unknown names are refused."""
    if not specs:
        raise UserError("name at least one target: --on tpu-v6e-8 --on H100:8 --on trn2.48xlarge", field="--on")
    rows = prices
    for flag, value, column in (("--cloud", cloud, "cloud"), ("--region", region, "region")):
        if value is not None:
            if value not in set(prices[column]):
                raise UserError(f"no price rows for {column} '{value}'{did_you_mean(value, set(prices[column]))}",
                                field=flag)
            rows = rows[rows[column] == value]
    seen: dict[str, str] = {}
    targets = []
    for spec in specs:
        target = _resolve(spec.strip(), prices, rows, plan, cloud, region)
        key = target.slug.lower()
        if key in seen:
            raise UserError(f"'{spec}' is the same target as '{seen[key]}'", field="--on")
        seen[key] = spec
        targets.append(target)
    return targets


def _resolve(spec: str, all_prices: pd.DataFrame, rows: pd.DataFrame, plan: str,
             cloud: str | None, region: str | None) -> Target:
    m = _TARGET.match(spec)
    if not m:
        raise UserError(f"'{spec}' is not a target: write an accelerator as SkyPilot does (H100:8, tpu-v6e-8) "
                        "or an instance type (trn2.48xlarge)", field="--on")
    name, count = m.group("name"), int(m.group("count")) if m.group("count") else None
    where = f" in {' '.join(x for x in (cloud, region) if x)}" if (cloud or region) else ""
    by_instance = rows[rows["instance_type"].str.lower() == name.lower()]
    if not by_instance.empty and count in (None, 1):
        return _target(spec, by_instance, plan, named_instance=True, region=region)
    accelerator = {v.lower(): k for k, v in SKYPILOT_ACCELERATORS.items()}.get(name.lower())
    if accelerator is not None:
        offered = rows[rows["accelerator"] == accelerator]
        wanted = count or 1
        matching = offered[offered["chips_per_instance"] == wanted]
        if not matching.empty:
            return _target(spec, matching, plan, named_instance=False, region=region, cloud=cloud)
        if not offered.empty:
            counts = sorted(set(offered["chips_per_instance"]))
            raise UserError(f"no instance with {wanted} x {name} in the price table{where} "
                            f"(priced counts: {', '.join(map(str, counts))})", field="--on")
    if accelerator or (all_prices["instance_type"].str.lower() == name.lower()).any():
        raise UserError(f"'{spec}' has no price row{where} in the price table (drop --cloud/--region, "
                        "or add one with --prices FILE)", field="--on")
    raise UserError(f"unknown target '{spec}'{did_you_mean(spec, _choices(all_prices))}", field="--on")


def _choices(prices: pd.DataFrame) -> set[str]:
    choices = set(prices["instance_type"])
    for accelerator, chips in prices[["accelerator", "chips_per_instance"]].drop_duplicates().itertuples(index=False):
        if accelerator in SKYPILOT_ACCELERATORS:
            choices.add(f"{SKYPILOT_ACCELERATORS[accelerator]}:{int(chips)}")
    return choices


def _target(spec: str, rows: pd.DataFrame, plan: str, *, named_instance: bool, region: str | None,
            cloud: str | None = None) -> Target:
    # A flagged price (spot above on-demand...) is never the estimate while an unflagged one exists.
    priced = prefer_unflagged(rows[rows["plan"] == plan])
    best = (priced if not priced.empty else rows).sort_values(
        ["usd_per_instance_hour", "cloud", "region"], kind="stable").iloc[0]
    accelerator = str(best["accelerator"])
    chips = int(best["chips_per_instance"])
    device = device_for(accelerator)
    instance = str(best["instance_type"])
    if device == "tpu":
        sky_accelerators = instance                      # SkyPilot names TPUs by slice
    elif accelerator in SKYPILOT_ACCELERATORS:
        sky_accelerators = f"{SKYPILOT_ACCELERATORS[accelerator]}:{chips}"
    else:
        sky_accelerators = None                          # a CPU VM: its instance type says it all
    # A named instance, a TPU slice or a region belongs to one cloud: pin it, so SkyPilot launches
    # where the estimate was priced.
    pinned_cloud = str(best["cloud"]) if (named_instance or device == "tpu" or region) else cloud
    note = ""
    if priced.empty:
        other = ", ".join(f"{r.plan} ${r.usd_per_instance_hour:,.2f}/h ({r.cloud} {r.region})"
                          for r in rows.sort_values("plan").itertuples(index=False))
        note = f"no {plan} price in the table (priced: {other}); add one with --prices FILE"
    return Target(spec=spec, accelerators=sky_accelerators,
                  instance_type=instance if named_instance else None, cloud=pinned_cloud, region=region,
                  accelerator=accelerator, chips_per_node=chips, device=device,
                  priced_as={"cloud": str(best["cloud"]), "region": str(best["region"]), "instance_type": instance,
                             "plan": plan, "as_of": str(best["as_of"]),
                             "usd_per_hour": None if priced.empty else float(best["usd_per_instance_hour"])},
                  note=note)
