"""The workload section of scenario `train` (docs/scenarios/train.md).

    scenario: {kind: train, batch_size: [1, 4], sequence_length: 2048, gradient_accumulation: 2,
               optimizer: {name: adamw, lr: 1.0e-4}, precision: bf16_autocast}
"""

from __future__ import annotations

from typing import Literal, Union

from pydantic import Field, PositiveInt, field_validator

from tpubench.spec.sections import Strict, axis


class Optimizer(Strict):
    name: Literal["adamw", "sgd"] = "adamw"
    lr: float = Field(1e-4, gt=0)
    betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = Field(0.1, ge=0)
    eps: float = Field(1e-8, gt=0)


class TrainSection(Strict):
    """Training steps (forward, backward, optimizer step) on seeded random token batches."""

    kind: Literal["train"]
    batch_size: Union[PositiveInt, list[PositiveInt]]        # sequences per data-parallel rank per micro-step
    sequence_length: Union[PositiveInt, list[PositiveInt]]
    gradient_accumulation: PositiveInt = 1                   # micro-steps per optimizer step
    optimizer: Optimizer = Optimizer()
    activation_checkpointing: bool = False
    # bf16_autocast: float32 master weights, bfloat16 compute; bf16: pure bfloat16; fp32: float32.
    precision: Literal["bf16_autocast", "bf16", "fp32"] = "bf16_autocast"

    _non_empty = field_validator("batch_size", "sequence_length")(classmethod(lambda cls, v: axis(v)))
