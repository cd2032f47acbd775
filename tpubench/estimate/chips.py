"""Chips for the estimate: the family a chip is calibrated with, its peaks for a number format, and
the `--on` values (`tpu-v6e-8`, `H100:8`, `trn2`, an instance type from the price table).

No pandas at import: `tpubench validate` checks a workload's `compare_on` here, and `estimate` and
`report` check `--on` before they load anything, against `Offers.shipped()` (the shipped price
table read with the csv module) or the offers of a loaded price table (`Offers.of`)."""

from __future__ import annotations

import csv
import difflib
import functools
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Union

from tpubench.errors import UserError
from tpubench.hardware.accelerators import (
    SPECS_FILE,
    chip_memory_bytes,
    chip_peak_flops,
    chip_peaks,
    normalize_accelerator,
)
from tpubench.money.price_imports.mapping import TPU_SLICES
from tpubench.workload_spec.targets import split_target

if TYPE_CHECKING:
    import pandas as pd

# The price table shipped with tpubench (money.pricing.SHIPPED_PRICES, which imports pandas).
_SHIPPED_PRICES = SPECS_FILE.with_name("prices.csv")

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
class Offers:
    """What a price table says about chips, all a target's name is resolved against: its instance
    types (each with its accelerator and chips) and, per accelerator, the chip counts one can rent."""

    instances: dict[str, tuple[str, str, int]]      # lower-cased instance type -> (type, accelerator, chips)
    chip_counts: dict[str, tuple[int, ...]]          # accelerator -> chips per instance, smallest first

    @classmethod
    def of_rows(cls, rows) -> "Offers":
        """From (instance_type, accelerator, chips_per_instance) rows."""
        instances: dict[str, tuple[str, str, int]] = {}
        counts: dict[str, set[int]] = {}
        for instance_type, accelerator, chips in rows:
            instance_type, accelerator, chips = str(instance_type), str(accelerator), int(float(chips))
            instances.setdefault(instance_type.lower(), (instance_type, accelerator, chips))
            counts.setdefault(accelerator, set()).add(chips)
        return cls(instances, {acc: tuple(sorted(n)) for acc, n in counts.items()})

    @classmethod
    def of(cls, prices: "pd.DataFrame") -> "Offers":
        """From a long price table (money.pricing.load_prices)."""
        return cls.of_rows(prices[["instance_type", "accelerator", "chips_per_instance"]].itertuples(index=False))

    @staticmethod
    @functools.lru_cache(maxsize=1)
    def shipped() -> "Offers":
        """From the shipped price table, read without pandas (the file load_prices reads first)."""
        with open(_SHIPPED_PRICES, newline="", encoding="utf-8") as fh:
            return Offers.of_rows((r["instance_type"], r["accelerator"], r["chips_per_instance"])
                                  for r in csv.DictReader(fh))

    @property
    def accelerators(self) -> set[str]:
        return set(self.chip_counts)


@dataclass(frozen=True)
class Target:
    spec: str                  # as the user wrote it
    accelerator: str           # the spec table's and price table's name
    chips: int
    instance_type: str | None  # when the user named one (pricing then uses only its rows)
    quantization: str | None = None  # estimate the workload's model quantised so (`H100:8@fp8`); None: as written


def parse_target(spec: str, prices: Union["pd.DataFrame", Offers], *, field: str = "--on",
                 where: str | None = None) -> Target:
    """One `--on` value (or `compare_on` entry: `field`, `where` the workload file) as a Target; a
    bad one is a UserError naming the field. `prices`: a long price table or its Offers."""
    try:
        name, count, quantization = split_target(spec)
    except ValueError as exc:
        raise UserError(str(exc), field=field, where=where) from None
    text = " ".join(str(spec).split())
    offers = prices if isinstance(prices, Offers) else Offers.of(prices)
    target = _resolve(text, name, count, spec, offers, field, where)
    return replace(target, quantization=quantization)


def _resolve(text: str, name: str, count: int | None, spec: str, offers: Offers, field: str,
             where: str | None) -> Target:
    def error(message: str) -> UserError:
        return UserError(message, field=field, where=where)

    instance = offers.instances.get(name.lower())
    if instance is not None and count is None:
        instance_type, accelerator, chips = instance
        return _checked(Target(text, accelerator, chips, instance_type), error)
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
        raise error(f"'{spec}' is not an instance type or a TPU slice name (tpu-v6e-8, v5p-8, tpu7x-8)"
                    f"{_count_hint(name, offers)}; write the chip count after a colon (H100:8, TPU7x:4)")
    accelerator = _accelerator(name, offers)
    if accelerator is None:
        raise error(f"unknown chip '{spec}'{_suggestion(name, offers)} (write tpu-v6e-8, H100:8, trn2, "
                    "or an instance type from the price table)")
    if count is not None:
        chips = int(count)
        if chips < 1:
            raise error(f"'{spec}': the chip count must be at least 1")
    else:
        offered = sorted(offers.chip_counts.get(accelerator, ())
                         or {chips for _, chips in TPU_SLICES.get(accelerator, ())})
        if not offered:
            raise error(f"'{spec}': no price row says how many {accelerator} chips an instance has; "
                        f"write {accelerator}:CHIPS")
        chips = int(offered[0])   # the smallest machine one can rent
    return _checked(Target(text, accelerator, chips, None), error)


def _accelerator(name: str, offers: Offers) -> str | None:
    """The spec table's accelerator a chip name stands for, None when it names none with peaks."""
    accelerator = _ALIASES.get(name.lower()) or normalize_accelerator(name, known=offers.accelerators)
    return accelerator if accelerator is not None and chip_peaks(accelerator) is not None else None


# A count written the way other tools write it: 'A100x8', '8xH100', 'H100 x 8', 'H100-8'.
_GLUED_COUNT = (re.compile(r"^(?P<name>.*?[A-Za-z].*?)(?:\s*x\s*|[\s_-]+)(?P<n>\d+)$", re.I),
                re.compile(r"^(?P<n>\d+)\s*x\s*(?P<name>.*[A-Za-z].*)$", re.I))


def _count_hint(name: str, offers: Offers) -> str:
    """' (did you mean 'A100:8'?)' where `name` is a known chip with its count written otherwise."""
    for pattern in _GLUED_COUNT:
        m = pattern.match(name)
        if m and _accelerator(m.group("name").strip(), offers):
            return f" (did you mean '{m.group('name').strip()}:{m.group('n')}'?)"
    return ""


def _suggestion(name: str, offers: Offers) -> str:
    """' (did you mean ...?)' for an unknown chip name: the same chip with its count after a colon
    where a count was written otherwise ('A100x8' -> 'A100:8'), else the closest known name."""
    hint = _count_hint(name, offers)
    if hint:
        return hint
    known = {k.lower(): k for k in sorted(offers.accelerators | set(_ALIASES))}
    close = difflib.get_close_matches(name.lower(), list(known), n=1)
    return f" (did you mean '{known[close[0]]}'?)" if close else ""


def _checked(target: Target, error) -> Target:
    if chip_peaks(target.accelerator) is None:
        raise error(f"'{target.spec}': no peak FLOP/s or memory bandwidth for {target.accelerator} in "
                    "data/accelerators.csv, so no roofline")
    return target


__all__ = ["Chip", "Offers", "Target", "chip", "chip_family", "parse_target"]
