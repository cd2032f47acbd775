"""The workload section of scenario `diffuse` (docs/scenarios/diffuse.md).

    scenario: {kind: diffuse, pipeline: flux, resolution: [512, 1024], steps: 28, images_per_prompt: [1, 4],
               guidance: 3.5, scheduler: default, dtype: bfloat16}

Component configs come from the family's table (families.json), overridden per component under
`components` (every scale) or a scale's `config` (that scale; `preset: small` starts from the
family's small preset). `weights: pretrained` loads `hub_id`, a Hub id or a local folder.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_validator

from tpubench.scenarios import FieldProblem
from tpubench.workload_spec.sections import Dtype, Strict, as_list, axis

# Bounds of every value (docs/workloads.md#limits), generous: the published pipelines make 1024 to
# 2048 px images in 4 to 50 steps at guidance 1 to 15; what lies outside is a typo or a unit slip.
MAX_RESOLUTION = 8192            # pixels a side: 64 megapixels
MAX_STEPS = 1000                 # the timesteps these models are trained on: more are not steps
MAX_IMAGES = 1024                # images one call makes
MAX_CALL_PIXELS = 1 << 30        # images x pixels of one call: 1,024 images of 1024 x 1024
MAX_GUIDANCE = 100.0
MAX_PROMPT_WORDS = 1024          # more than any text encoder reads (CLIP 77, T5 512 tokens)
MAX_T5_TOKENS = 512              # diffusers' Flux and SD3 pipelines refuse a longer max_sequence_length
# A component config override (`components`, a scale's per-component config): integers are sizes
# (widths, heads, channels, vocabularies) or, for a key naming layers, layer counts; floats are
# factors (a VAE's scaling and shift).
MAX_COMPONENT_SIZE = 1 << 18
MAX_COMPONENT_LAYERS = 1024
MAX_COMPONENT_FACTOR = 1e6

Resolution = Annotated[int, Field(gt=0, le=MAX_RESOLUTION)]
Steps = Annotated[int, Field(gt=0, le=MAX_STEPS)]
Images = Annotated[int, Field(gt=0, le=MAX_IMAGES)]
Guidance = Annotated[float, Field(ge=0, le=MAX_GUIDANCE)]

Pipeline = Literal["flux", "sd3", "sdxl"]
Scheduler = Literal["default", "flow_match_euler", "flow_match_heun", "euler", "euler_ancestral", "ddim",
                    "dpmpp_2m"]


class DiffuseSection(Strict):
    """Images from text prompts with a Diffusers pipeline, measured per stage."""

    kind: Literal["diffuse"]
    pipeline: Pipeline
    weights: Literal["random", "pretrained"] = "random"
    hub_id: str | None = None                       # a Hub id or a local folder (weights: pretrained)
    components: dict[str, dict[str, Any]] = Field(default_factory=dict)   # config overrides per component
    resolution: Union[Resolution, list[Resolution]] = 1024               # square images, pixels a side
    steps: Union[Steps, list[Steps]] = 28                                 # denoising steps
    images_per_prompt: Union[Images, list[Images]] = 1                    # the batch: images of one call
    guidance: Union[Guidance, list[Guidance]] = 3.5
    scheduler: Union[Scheduler, list[Scheduler]] = "default"
    dtype: Union[Dtype, list[Dtype]] = "bfloat16"
    prompt_words: int = Field(12, gt=0, le=MAX_PROMPT_WORDS)   # words of the prompt drawn from the seed
    # T5 prompt tokens (Flux, SD3); None: the family's
    max_sequence_length: Annotated[int, Field(gt=0, le=MAX_T5_TOKENS)] | None = None

    _non_empty = field_validator("resolution", "steps", "images_per_prompt", "guidance", "scheduler",
                                 "dtype")(classmethod(lambda cls, v: axis(v)))


# The values a scale's `config` may shrink (families.SCALE_KEYS), as (kind, low, high).
SCALE_VALUE_BOUNDS = {"resolution": ("int", 1, MAX_RESOLUTION), "steps": ("int", 1, MAX_STEPS),
                      "guidance": ("number", 0.0, MAX_GUIDANCE), "max_sequence_length": ("int", 1, MAX_T5_TOKENS)}


def check_scale_values(own: dict, cfg_loc: tuple) -> None:
    """A scale's own resolution, steps, guidance and max_sequence_length (each but the last a
    value or a list) within the section's bounds: FieldProblem naming the key."""
    for key, (kind, lo, hi) in SCALE_VALUE_BOUNDS.items():
        if key not in own:
            continue
        values = own[key] if key != "max_sequence_length" else [own[key]]   # one value: the sweep reads one
        for v in as_list(values):
            if kind == "int" and (isinstance(v, bool) or not isinstance(v, int) or v < lo):
                raise FieldProblem(cfg_loc + (key,), f"expected a positive integer, got {v!r}")
            if kind == "number" and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= lo):
                raise FieldProblem(cfg_loc + (key,), f"{key} is a scale of 0 or more, got {v!r}")
            if v > hi:
                raise FieldProblem(cfg_loc + (key,), f"{v:,} is more than {key}'s limit of {hi:,} "
                                                     "(docs/workloads.md#limits)")


def check_call_pixels(resolutions: list[int], images: list[int], loc: tuple, scale: str) -> None:
    """The largest call of a scale within MAX_IMAGES images and MAX_CALL_PIXELS pixels (a scale's
    batch_size override is bounded as any batch by the schema, here as images)."""
    if max(images) > MAX_IMAGES:
        raise FieldProblem(loc, f"{max(images):,} images in one call, more than a call's {MAX_IMAGES:,} "
                                f"(docs/workloads.md#limits; scale '{scale}')")
    side = max(resolutions)
    pixels = max(images) * side ** 2
    if pixels > MAX_CALL_PIXELS:
        raise FieldProblem(loc, f"{max(images):,} images of {side:,} x {side:,} px in one call: "
                                f"{pixels:,} pixels, more than a call's {MAX_CALL_PIXELS:,} "
                                f"(docs/workloads.md#limits; scale '{scale}')")


def check_component_value(path: tuple, key: str, value: Any, default: Any) -> None:
    """One component config override against the family's own value for that key (its type) and
    the bounds above: FieldProblem at `path`."""
    if isinstance(default, bool) or isinstance(default, str) or default is None:
        if default is not None and type(value) is not type(default):
            raise FieldProblem(path, f"expected {'true or false' if isinstance(default, bool) else 'a string'}, "
                                     f"got {value!r}"[:120])
        return
    if isinstance(default, list) and not isinstance(value, list):
        default = default[0] if default else value   # diffusers takes one value for every block too
    if isinstance(default, list):
        if not value or len(value) > 64:
            raise FieldProblem(path, f"expected a list of 1 to 64 entries like {default!r}, got {value!r}"[:160])
        for i, item in enumerate(value):
            check_component_value(path + (i,), key, item, default[0] if default else item)
        return
    limit = MAX_COMPONENT_LAYERS if "layers" in key else MAX_COMPONENT_SIZE
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
            raise FieldProblem(path, f"expected an integer in [1, {limit:,}], got {value!r}"[:120])
    elif isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or abs(value) > MAX_COMPONENT_FACTOR:
            raise FieldProblem(path, f"expected a number within +-{MAX_COMPONENT_FACTOR:g}, got {value!r}"[:120])
