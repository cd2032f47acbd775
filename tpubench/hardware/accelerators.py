"""Accelerator names and specs: map what a runtime reports to the canonical names of the price and
spec tables, and read a chip's peaks. No pandas: the measurement side uses it at run time.

The spec table (data/accelerators.csv) holds per chip, in base units, the peaks and, for the
chip-to-chip links, `interconnect_bytes_per_s`: the vendor's per-chip figure (all of the chip's
links together) in bytes/s, and `interconnect_direction`, what that figure counts:
`bidirectional` (both directions summed, as Google's ICI and NVIDIA's NVLink figures are quoted:
a chip can send half of it while it receives the other half) or `unstated` (AWS's NeuronLink
figures say neither). Empty where no public source gives a figure (TPU v4, L4, Inferentia2, CPU).
"""

from __future__ import annotations

import csv
import functools
import re
from pathlib import Path
from typing import Iterable

SPECS_FILE = Path(__file__).resolve().parent.parent / "data" / "accelerators.csv"
CPU_X86 = "CPU x86 vCPU"
CPU_ARM = "CPU arm vCPU"

# Ordered: the first pattern that matches the lower-cased runtime name wins, so specific names
# (Trainium2, H100 PCIe, A100 80GB) come before the general ones.
_ACCELERATOR_PATTERNS = [(re.compile(p), name) for p, name in [
    (r"tpu[\s_-]*7x|tpu[\s_-]*v7|ironwood", "TPU7x"),
    (r"tpu[\s_-]*v6[\s_-]*(e\b|lite)|tpu-v6e|trillium", "TPU v6e"),
    (r"tpu[\s_-]*v5[\s_-]*(e\b|lite)|v5litepod", "TPU v5e"),
    (r"tpu[\s_-]*v5p?\b", "TPU v5p"),   # JAX names v5p just "TPU v5"
    (r"tpu[\s_-]*v4", "TPU v4"),
    (r"tpu[\s_-]*v3", "TPU v3"),
    (r"tpu[\s_-]*v2", "TPU v2"),
    (r"trainium[\s_-]*2|\btrn2", "Trainium2"),
    (r"trainium|\btrn1", "Trainium"),
    (r"inferentia[\s_-]*2|\binf2", "Inferentia2"),
    (r"\bgb300\b", "GB300"),
    (r"\bgb200\b", "GB200"),
    (r"\bb300\b", "B300"),
    (r"\bb200\b", "B200"),
    # H200 NVL (PCIe card, 600 W, 835 dense bf16 TFLOPS) is another chip than the H200 SXM
    # (700 W, 989): "NVIDIA H200 NVL", MLPerf's "H200-NVL-141GB". Not GH200 (the lookbehind).
    (r"(?<![a-z0-9])h200[\s_-]*nvl", "H200 NVL"),
    (r"\bh200\b", "H200"),
    (r"\bh100\b.*\bpcie\b", "H100 PCIe"),
    (r"\bh100\b.*\bnvl\b", "H100 NVL"),
    (r"\bh100\b", "H100"),
    (r"\ba100\b.*80\s*gb", "A100 80GB"),
    (r"\ba100\b", "A100 40GB"),          # the GCP/AWS catalogs' plain "A100" is the 40GB part
    (r"\bl40s\b", "L40S"),
    (r"\bl4\b", "L4"),
    # RTX PRO 6000 Blackwell: the Server Edition (1597 GB/s) is the data-center card benchmarks name
    # ("NVIDIA RTX PRO 6000 Blackwell Server Edition"); the Workstation and Max-Q editions (1792 GB/s)
    # are other SKUs with no row, so a name that says so matches nothing.
    (r"rtx[\s_-]*pro[\s_-]*6000(?!.*\b(workstation|max[\s_-]*q)\b)", "RTX PRO 6000 Blackwell Server Edition"),
    (r"\ba10g\b", "A10G"),
    # AMD Instinct: "AMD Instinct MI300X 192GB HBM3" (MLPerf), InferenceX's "mi355x" keys.
    (r"\bmi300x\b", "MI300X"),
    (r"\bmi325x\b", "MI325X"),
    (r"\bmi350x\b", "MI350X"),
    (r"\bmi355x\b", "MI355X"),
]]
_ARM_CPU = re.compile(r"\barm|aarch64|neoverse|graviton|ampere|axion|apple m\d|cortex")
_VENDOR_PREFIX = re.compile(r"^(nvidia|aws|google|amd|intel)\s+", re.I)


def normalize_accelerator(raw_name: str | None, device: str | None = None,
                          known: Iterable[str] | None = None) -> str | None:
    """The canonical accelerator name the price table uses, or None when there is none.

    'NVIDIA H100 80GB HBM3' -> 'H100', 'TPU v6 lite' -> 'TPU v6e', 'TPU v5 lite' -> 'TPU v5e',
    'NVIDIA H200 NVL' -> 'H200 NVL' (not 'H200'), 'AMD Instinct MI355X 288GB HBM3e' and 'mi355x' -> 'MI355X',
    any x86 CPU on device 'cpu' -> 'CPU x86 vCPU'. An Arm CPU maps to 'CPU arm vCPU' only when
    `known` (the priced accelerators) has such a row. A name in `known` matches itself.

    A name that names an accelerator wins over `device`: `device` is where tpubench ran, and a
    serve result measures a server elsewhere (a URL server declared `H100` measured from a
    CPU-only client has device 'cpu' and is an H100); a CPU's name (Xeon, EPYC, 'CPU ...') is a
    CPU whatever the device (a CPU server tpubench started on a GPU host).
    """
    name = " ".join(str(raw_name or "").split())
    low = name.lower()
    dev = (device or "").lower()
    known_set = set(known or ())
    # A system of two kinds of chip ("AMD Instinct MI300X ... (x32), AMD Instinct MI325X ... (x16)",
    # as MLPerf names one) is no one accelerator: no canonical name rather than the first one's.
    kinds = {_match(part) for part in low.split(",")} - {None}
    if len(kinds) > 1:
        return None
    if kinds:
        return kinds.pop()
    if dev == "cpu" or low.startswith("cpu") or "xeon" in low or "epyc" in low:
        if _ARM_CPU.search(low):
            return CPU_ARM if CPU_ARM in known_set else None
        return CPU_X86
    if dev == "mps":
        return None
    if known_set:
        bare = _VENDOR_PREFIX.sub("", name).lower()
        for k in known_set:
            if k.lower() in (low, bare):
                return k
    return None


def _match(low: str) -> str | None:
    for pattern, canonical in _ACCELERATOR_PATTERNS:
        if pattern.search(low):
            return canonical
    return None


@functools.lru_cache(maxsize=1)
def _specs() -> dict[str, dict[str, str]]:
    with open(SPECS_FILE, newline="", encoding="utf-8") as fh:
        return {row["accelerator"]: row for row in csv.DictReader(fh)}


def interconnect_send_bytes_per_s(figure: float | None, direction: str | None) -> float | None:
    """What one chip can send per second over all its links: half a bidirectional figure; an
    `unstated` one taken whole, the most it could mean, so a time floor from it stays a floor."""
    if figure is None or not figure > 0:
        return None
    return figure / 2 if (direction or "").strip().lower() == "bidirectional" else figure


def chip_memory_bytes(canonical: str | None) -> int | None:
    """Memory of one chip from the shipped spec table (None when the table has no figure)."""
    value = _specs().get(canonical or "", {}).get("memory_bytes")
    return int(value) if value else None


def chip_peaks(canonical: str | None) -> dict[str, float] | None:
    """Peak dense bf16 FLOP/s and memory bytes/s of one chip, from the shipped spec table, with
    its interconnect figure (None where the table has none) and the send bandwidth that implies."""
    row = _specs().get(canonical or "")
    if not row or not row.get("peak_bf16_flops") or not row.get("memory_bandwidth_bytes_per_s"):
        return None
    link = float(row["interconnect_bytes_per_s"]) if row.get("interconnect_bytes_per_s") else None
    direction = row.get("interconnect_direction") or None
    return {"peak_bf16_flops": float(row["peak_bf16_flops"]),
            "memory_bandwidth_bytes_per_s": float(row["memory_bandwidth_bytes_per_s"]),
            "interconnect_bytes_per_s": link, "interconnect_direction": direction,
            "interconnect_send_bytes_per_s": interconnect_send_bytes_per_s(link, direction),
            "source": row.get("source", "")}


def chip_peak_flops(canonical: str | None, precision: str | None) -> float | None:
    """Peak dense FLOP/s of one chip for the number format its matmuls take as inputs: integer
    formats (int8, int4) at the int8 figure, else the fp8 one; float8 and narrower floats (fp4) at
    the fp8 figure; each falling back to the bf16 figure where the table has none (a chip without
    such units, TPU v6e's fp8 say, runs those matmuls at its bf16 rate); None when unknown."""
    row = _specs().get(canonical or "")
    if not row:
        return None
    narrow = str(precision or "").lower().replace("-", "").replace("_", "")
    integer = any(tag in narrow for tag in ("int8", "int4", "w8a8"))
    if integer and row.get("peak_int8_ops"):
        return float(row["peak_int8_ops"])
    narrow_float = any(tag in narrow for tag in ("fp8", "fp4", "float8", "float4", "e4m3", "e5m2"))
    if (integer or narrow_float) and row.get("peak_fp8_flops"):
        return float(row["peak_fp8_flops"])
    return float(row["peak_bf16_flops"]) if row.get("peak_bf16_flops") else None
