"""Chips for the estimate: the family a chip is calibrated with, its peaks for a number format, and
the `--on` values (`tpu-v6e-8`, `H100:8`, `trn2`, an instance type from the price table)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import pandas as pd

from tpubench.errors import UserError
from tpubench.hardware.accelerators import chip_memory_bytes, chip_peak_flops, chip_peaks, normalize_accelerator
from tpubench.money.price_imports.mapping import TPU_SLICES
from tpubench.money.table_files import did_you_mean
from tpubench.workload_spec.targets import split_target

# A family is a vendor's generation of chips sharing a software stack: its rows calibrate each
# other (the roofline already accounts for each chip's own peaks).
_FAMILIES = (
    (re.compile(r"^TPU"), "Google TPU"),
    (re.compile(r"^(Trainium|Inferentia)"), "AWS Trainium/Inferentia"),
    (re.compile(r"^MI\d"), "AMD Instinct"),
    (re.compile(r"^(GB|B)\d00"), "NVIDIA Blackwell"),
    (re.compile(r"^(GH|H)\d00"), "NVIDIA Hopper"),
    (re.compile(r"^A100"), "NVIDIA Ampere"),
    (re.compile(r"^(L4|L40S|A10G)"), "NVIDIA Ada/Ampere PCIe"),
    (re.compile(r"^RTX PRO"), "NVIDIA RTX PRO (Blackwell, GDDR7)"),
)
# Short names a user types that the runtime-name patterns do not know.
_ALIASES = {"trn2": "Trainium2", "trn1": "Trainium", "inf2": "Inferentia2", "v6e": "TPU v6e",
            "v5e": "TPU v5e", "v5p": "TPU v5p", "v4": "TPU v4", "ironwood": "TPU7x", "tpu7x": "TPU7x",
            "v7x": "TPU7x", "7x": "TPU7x"}
# A TPU slice name ("tpu-v6e-8", "v5p-8", "tpu7x-8") counts chips (v5e, v6e) or TensorCores (v4,
# v5p, TPU7x: two per chip); the price importer's slice table (money.price_imports.mapping) knows
# which, and this reads it rather than keeping a second list.
_SLICE = re.compile(r"^(?:tpu[\s_-]*)?(?P<gen>v6e|v5e|v5litepod|v5p|v4|v?7x)[\s_-]+(?P<n>\d+)$", re.I)


def _slice_generations() -> dict[str, tuple[str, int]]:
    """'v6e' -> ('TPU v6e', 1 TensorCore per chip), 'v5p' -> ('TPU v5p', 2), '7x' -> ('TPU7x', 2)..."""
    out = {}
    for accelerator, shapes in TPU_SLICES.items():
        name, chips = shapes[0]
        m = re.match(r"^tpu-?(?P<gen>.+)-(?P<n>\d+)$", name)
        out[m.group("gen")] = (accelerator, int(m.group("n")) // chips)
    out.setdefault("v5e", out.get("v5litepod"))
    out.setdefault("v7x", out.get("7x"))
    return out


def chip_family(accelerator: str | None) -> str | None:
    for pattern, family in _FAMILIES:
        if accelerator and pattern.search(accelerator):
            return family
    return None


@dataclass(frozen=True)
class Chip:
    """One chip's peaks for one number format."""

    accelerator: str
    peak_flops: float
    peak_bytes_per_s: float
    memory_bytes: int | None


def chip(accelerator: str, precision: str | None) -> Chip | None:
    """The chip's peaks from data/accelerators.csv; None when the table has no figures for it."""
    peaks = chip_peaks(accelerator)
    flops = chip_peak_flops(accelerator, precision)
    if peaks is None or flops is None:
        return None
    return Chip(accelerator, flops, peaks["memory_bandwidth_bytes_per_s"], chip_memory_bytes(accelerator))


@dataclass(frozen=True)
class Target:
    spec: str                  # as the user wrote it
    accelerator: str           # the spec table's and price table's name
    chips: int
    instance_type: str | None  # when the user named one (pricing then uses only its rows)
    quantization: str | None = None  # estimate the workload's model quantised so (`H100:8@fp8`); None: as written


def parse_target(spec: str, prices: pd.DataFrame, *, field: str = "--on", where: str | None = None) -> Target:
    """One `--on` value (or `compare_on` entry: `field`, `where` the workload file) as a Target; a
    bad one is a UserError naming the field."""
    try:
        name, count, quantization = split_target(spec)
    except ValueError as exc:
        raise UserError(str(exc), field=field, where=where) from None
    text = " ".join(str(spec).split())
    target = _resolve(text, name, count, spec, prices, field, where)
    return replace(target, quantization=quantization)


def _resolve(text: str, name: str, count: int | None, spec: str, prices: pd.DataFrame, field: str,
             where: str | None) -> Target:
    def error(message: str) -> UserError:
        return UserError(message, field=field, where=where)

    instances = prices[prices["instance_type"].str.lower() == name.lower()]
    if not instances.empty and count is None:
        row = instances.iloc[0]
        return _checked(Target(text, str(row["accelerator"]), int(row["chips_per_instance"]), str(row["instance_type"])),
                        error)
    slice_ = _SLICE.match(name)
    if slice_ and count is None and slice_.group("gen").lower() in _slice_generations():
        gen = slice_.group("gen").lower()
        accelerator, per = _slice_generations()[gen]
        n = int(slice_.group("n"))
        if n < per or n % per:
            raise error(f"'{spec}': a {gen} slice name counts TensorCores, {per} per chip")
        return _checked(Target(text, accelerator, n // per, None), error)
    if re.search(r"[\s_-]\d+$", name):
        # A trailing number that is neither an instance nor a slice name would otherwise be dropped
        # by the name match ('tpu-v7-8' read as some TPU7x count): ask for the count explicitly.
        raise error(f"'{spec}' is not an instance type or a TPU slice name (tpu-v6e-8, v5p-8, tpu7x-8); "
                    "write the chip count after a colon (H100:8, TPU7x:4)")
    accelerator = _ALIASES.get(name.lower()) or normalize_accelerator(name, known=set(prices["accelerator"]))
    if accelerator is None or chip_peaks(accelerator) is None:
        known = sorted(set(prices["accelerator"]) | set(_ALIASES))
        raise error(f"unknown chip '{spec}'{did_you_mean(name, known)} (write tpu-v6e-8, H100:8, trn2, "
                    "or an instance type from the price table)")
    if count is not None:
        chips = int(count)
        if chips < 1:
            raise error(f"'{spec}': the chip count must be at least 1")
    else:
        offered = sorted(set(prices.loc[prices["accelerator"] == accelerator, "chips_per_instance"])
                         or {chips for _, chips in TPU_SLICES.get(accelerator, ())})
        if not offered:
            raise error(f"'{spec}': no price row says how many {accelerator} chips an instance has; "
                        f"write {accelerator}:CHIPS")
        chips = int(offered[0])   # the smallest machine one can rent
    return _checked(Target(text, accelerator, chips, None), error)


def _checked(target: Target, error) -> Target:
    if chip_peaks(target.accelerator) is None:
        raise error(f"'{target.spec}': no peak FLOP/s or memory bandwidth for {target.accelerator} in "
                    "data/accelerators.csv, so no roofline")
    return target


__all__ = ["Chip", "Target", "chip", "chip_family", "parse_target"]
