"""The workload section of scenario `diffuse` (docs/scenarios/diffuse.md).

    scenario: {kind: diffuse, pipeline: flux, resolution: [512, 1024], steps: 28, images_per_prompt: [1, 4],
               guidance: 3.5, scheduler: default, dtype: bfloat16}

Component configs come from the family's table (families.json), overridden per component under
`components` (every scale) or a scale's `config` (that scale; `preset: small` starts from the
family's small preset). `weights: pretrained` loads `hub_id`, a Hub id or a local folder.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import Field, PositiveInt, field_validator

from tpubench.spec.sections import Dtype, Strict, axis

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
    resolution: Union[PositiveInt, list[PositiveInt]] = 1024               # square images, pixels a side
    steps: Union[PositiveInt, list[PositiveInt]] = 28                     # denoising steps
    images_per_prompt: Union[PositiveInt, list[PositiveInt]] = 1          # the batch: images of one call
    guidance: Union[float, list[float]] = 3.5
    scheduler: Union[Scheduler, list[Scheduler]] = "default"
    dtype: Union[Dtype, list[Dtype]] = "bfloat16"
    prompt_words: PositiveInt = 12                  # words of the prompt drawn from the seed
    max_sequence_length: PositiveInt | None = None  # T5 prompt tokens (Flux, SD3); None: the family's

    _non_empty = field_validator("resolution", "steps", "images_per_prompt", "guidance", "scheduler",
                                 "dtype")(classmethod(lambda cls, v: axis(v)))

    @field_validator("guidance")
    @classmethod
    def _guidance_positive(cls, v):
        for g in (v if isinstance(v, list) else [v]):
            if not g >= 0:
                raise ValueError(f"guidance is a scale of 0 or more, got {g}")
        return v
