"""Which instance and accelerator a cloud's price SKU stands for: the mapping every importer uses,
written down in docs/extending/prices.md.

* Whole instances (AWS EC2 / SageMaker instance types, Azure VM sizes): the accelerator and chip
  count come from the shipped price table (tpubench/data/prices.csv: every instance it prices) and
  from `EXTRA_INSTANCES` below for accelerator instances it does not price yet. SageMaker names are
  the EC2 name with "ml." in front and map like it. An instance in neither is not an accelerator
  instance tpubench knows: its SKU is skipped and counted.
* GCP TPUs are sold per chip-hour: a TPU SKU prices every slice shape in `TPU_SLICES` (and any
  other slice of that accelerator the shipped table prices) at chips x the chip-hour price.

Every accelerator named here must be a row of tpubench/data/accelerators.csv (tests check it), so an
imported price always joins the measured results.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Accelerator instances not in the shipped price table (instance type -> accelerator, chips).
# Counts from the clouds' instance-type pages (AWS accelerated computing; Azure ND/NC series).
EXTRA_INSTANCES: dict[str, dict[str, tuple[str, int]]] = {
    "aws": {
        # p4d: 8 x A100 40GB (the Price List's own gpu "8", gpuMemory "320 GB HBM2"); p4de carries
        # the 80GB part (AWS P4 instance page).
        "p4d.24xlarge": ("A100 40GB", 8),
        "p4de.24xlarge": ("A100 80GB", 8),
        "trn1.2xlarge": ("Trainium", 1),
        "trn2.3xlarge": ("Trainium2", 1),
        "inf2.8xlarge": ("Inferentia2", 1),
        "inf2.24xlarge": ("Inferentia2", 6),
        "g6.xlarge": ("L4", 1),
        "g6.12xlarge": ("L4", 4),
        "g6.48xlarge": ("L4", 8),
    },
    "azure": {
        "Standard_NC40ads_H100_v5": ("H100", 1),
        "Standard_NC80adis_H100_v5": ("H100", 2),
        "Standard_ND96isr_H200_v5": ("H200", 8),
        "Standard_ND96amsr_A100_v4": ("A100 80GB", 8),
    },
    "gcp": {},
}

# GCP TPU slice shapes priced from a per-chip-hour SKU: accelerator -> (slice name, chips).
# v4 and v5p slice names count TensorCores (2 per chip); v5e and v6e names count chips.
TPU_SLICES: dict[str, tuple[tuple[str, int], ...]] = {
    "TPU v4": (("tpu-v4-8", 4),),
    "TPU v5p": (("tpu-v5p-8", 4),),
    "TPU v5e": (("tpu-v5litepod-1", 1), ("tpu-v5litepod-4", 4), ("tpu-v5litepod-8", 8)),
    "TPU v6e": (("tpu-v6e-1", 1), ("tpu-v6e-4", 4), ("tpu-v6e-8", 8)),
    # TPU7x (Ironwood) names count TensorCores like v5p (2 per chip): tpu7x-8 is one
    # tpu7x-standard-4t host of 4 chips (2x2x1), tpu7x-16 two hosts (2x2x2).
    "TPU7x": (("tpu7x-8", 4), ("tpu7x-16", 8)),
}

# GCP TPU SKU descriptions -> accelerator, most specific first ("v5p" before "v5", "v5e" / "v5 lite").
# Real descriptions glue the generation to "Tpu" ("TpuV6e running in Dallas", "Tpu-v5p ...",
# "TPU7x running in Americas") or name it bare after a word ("DWS Defined Duration V6e running in
# Columbus", "Reserved V6e TPU in Columbus in Calendar Mode"), so a generation may follow "tpu"
# with no word boundary between them. A bare "v4" / "v7" is too common a token elsewhere: those
# need the "tpu" prefix.
_TPU = r"(?:\btpu[\s_-]?|\b)"
_TPU_GENERATIONS = (
    (re.compile(_TPU + r"v6e\b|trillium", re.I), "TPU v6e"),
    (re.compile(_TPU + r"v5e\b|" + _TPU + r"v5\s*lite", re.I), "TPU v5e"),
    (re.compile(_TPU + r"v5p\b", re.I), "TPU v5p"),
    (re.compile(r"\btpu[\s_-]?v4\b", re.I), "TPU v4"),
    (re.compile(r"\btpu[\s_-]?v?7x?\b|\bv7x\b|ironwood", re.I), "TPU7x"),
)


@lru_cache(maxsize=1)
def _shipped_instances() -> dict[str, dict[str, tuple[str, int]]]:
    from tpubench.money.pricing import load_prices

    table = load_prices()[["cloud", "instance_type", "accelerator", "chips_per_instance"]].drop_duplicates()
    out: dict[str, dict[str, tuple[str, int]]] = {}
    for cloud, instance_type, accelerator, chips in table.itertuples(index=False):
        out.setdefault(cloud, {})[instance_type] = (accelerator, int(chips))
    return out


def instance_accelerator(cloud: str, instance_type: str) -> tuple[str, int] | None:
    """(accelerator, chips per instance) of a whole instance, or None when tpubench does not know it
    as an accelerator instance. SageMaker "ml.<type>" maps like the EC2 type."""
    name = instance_type[3:] if cloud == "aws" and instance_type.startswith("ml.") else instance_type
    known = _shipped_instances().get(cloud, {}).get(name) or EXTRA_INSTANCES.get(cloud, {}).get(name)
    if known is None or known[0].startswith("CPU"):
        return None
    return known


def tpu_accelerator(description: str) -> str | None:
    """The TPU generation a GCP SKU description names, or None."""
    for pattern, accelerator in _TPU_GENERATIONS:
        if pattern.search(description):
            return accelerator
    return None


def tpu_slices(accelerator: str) -> list[tuple[str, int]]:
    """Slice shapes (name, chips) a per-chip-hour price of `accelerator` is turned into."""
    shapes = dict(TPU_SLICES.get(accelerator, ()))
    for instance_type, (acc, chips) in _shipped_instances().get("gcp", {}).items():
        if acc == accelerator and instance_type.startswith("tpu-"):
            shapes.setdefault(instance_type, chips)
    return sorted(shapes.items(), key=lambda kv: (kv[1], kv[0]))
