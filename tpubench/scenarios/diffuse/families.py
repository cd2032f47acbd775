"""The pipeline families of scenario `diffuse` (families.json beside this file): each family's
components with their configs written out, its tokenizer slots and the schedulers it takes, and
how a scale's component configs resolve from them. Pure data and dict merging: describing a
workload (`tpubench validate`) reads it without importing torch or diffusers."""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from pathlib import Path

PRESETS = ("full", "small")
# The keys of a scale's `config` besides component names: the preset the components start from and
# the sweep axes a scale may shrink (a small scale draws smaller images in fewer steps).
SCALE_KEYS = ("preset", "resolution", "steps", "guidance", "max_sequence_length")


@lru_cache(maxsize=1)
def table() -> dict:
    data = json.loads((Path(__file__).with_name("families.json")).read_text(encoding="utf-8"))
    data.pop("_comment", None)
    return data


def family(name: str) -> dict:
    return table()[name]


def names() -> list[str]:
    return list(table())


def component_names(name: str) -> list[str]:
    return list(family(name)["components"])


def tokenizer_lengths(name: str, preset: str) -> dict[str, int]:
    """Each tokenizer slot's max_length at a preset (the small preset shortens the T5 prompt)."""
    fam = family(name)
    small = fam["small"] if preset == "small" else {}
    return {slot: (small.get(slot) or spec)["max_length"] for slot, spec in fam["tokenizers"].items()}


def resolve_components(name: str, preset: str, overrides: dict[str, dict]) -> dict[str, dict]:
    """{component: config} of a family at a preset with a workload's overrides on top."""
    fam = family(name)
    out = {}
    for comp, spec in fam["components"].items():
        config = copy.deepcopy(spec["config"])
        if preset == "small":
            config.update(copy.deepcopy(fam["small"].get(comp, {})))
        config.update(copy.deepcopy(overrides.get(comp, {})))
        out[comp] = config
    return out


def denoiser(name: str) -> str:
    """The component each denoising step calls: `transformer` (Flux, SD3) or `unet` (SDXL)."""
    return family(name)["denoiser"]
