"""The workload section of scenario `train` (docs/scenarios/train.md).

    scenario: {kind: train, batch_size: [1, 4], sequence_length: 2048, gradient_accumulation: 2,
               optimizer: {name: adamw, lr: 1.0e-4}, precision: bf16_autocast}

Every value is bounded (docs/workloads.md#limits): by the schema on its own, then per scale against
the model it trains (`check_scale`): a sequence within the model's context, a micro-batch and an
optimizer step within their tokens.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, field_validator

from tpubench.scenarios import FieldProblem
from tpubench.workload_spec.sections import FULL_SCALE, MAX_BATCH_TOKENS, BatchSize, SequenceTokens, Strict, as_list, axis

# Micro-steps per optimizer step: one step runs them all before the clock can stop it.
MAX_ACCUMULATION = 1 << 12
# Tokens one optimizer step runs on one data-parallel rank (micro-batch tokens x micro-steps): one
# step is the unit of measurement, so a step of more would outlast any measurement's time limit.
MAX_STEP_TOKENS = 1 << 30
# A beta of 1 divides AdamW's bias correction by zero; a learning rate or weight decay above 10 is a
# unit slip (real runs use 1e-5 to 1e-2 and 0 to 0.1).
Beta = Annotated[float, Field(ge=0, lt=1)]


class Optimizer(Strict):
    name: Literal["adamw", "sgd"] = "adamw"
    lr: float = Field(1e-4, gt=0, le=10)
    betas: tuple[Beta, Beta] = (0.9, 0.95)
    weight_decay: float = Field(0.1, ge=0, le=10)
    eps: float = Field(1e-8, gt=0, le=1)


class TrainSection(Strict):
    """Training steps (forward, backward, optimizer step) on seeded random token batches."""

    kind: Literal["train"]
    batch_size: Union[BatchSize, list[BatchSize]]        # sequences per data-parallel rank per micro-step
    sequence_length: Union[SequenceTokens, list[SequenceTokens]]
    gradient_accumulation: int = Field(1, gt=0, le=MAX_ACCUMULATION)   # micro-steps per optimizer step
    optimizer: Optimizer = Optimizer()
    activation_checkpointing: bool = False
    # bf16_autocast: float32 master weights, bfloat16 compute; bf16: pure bfloat16; fp32: float32.
    precision: Literal["bf16_autocast", "bf16", "fp32"] = "bf16_autocast"

    _non_empty = field_validator("batch_size", "sequence_length")(classmethod(lambda cls, v: axis(v)))


def _effective(workload, scale: str, field: str, own: str) -> tuple[list[int], tuple]:
    """An axis of one scale (its own override `own`, else the section's `field`) and its path in the file."""
    override = workload.scales[scale].scenario if scale != FULL_SCALE else None
    if override is not None and getattr(override, own) is not None:
        return as_list(getattr(override, own)), ("scales", scale, "scenario", own)
    return as_list(getattr(workload.scenario, field)), ("scenario", field)


def check_scale(workload, scale: str, config: dict) -> None:
    """One scale's points against its model (`config`: the resolved model config): a training
    sequence within the model's positions, the largest micro-batch within MAX_BATCH_TOKENS and an
    optimizer step within MAX_STEP_TOKENS. Out of bounds is a FieldProblem naming the field."""
    lengths, length_loc = _effective(workload, scale, "sequence_length", "sequence_length")
    batches, batch_loc = _effective(workload, scale, "batch_size", "batch_size")
    positions = config.get("max_position_embeddings")
    if positions and max(lengths) > positions:
        raise FieldProblem(length_loc, f"{max(lengths)} tokens exceed the model's max_position_embeddings "
                                       f"({positions}, scale '{scale}')")
    tokens = max(batches) * max(lengths)
    if tokens > MAX_BATCH_TOKENS:
        raise FieldProblem(batch_loc, f"a micro-batch of {max(batches):,} sequences of {max(lengths):,} tokens holds "
                                      f"{tokens:,} tokens, more than a batch's {MAX_BATCH_TOKENS:,} "
                                      f"(docs/workloads.md#limits; scale '{scale}')")
    steps = workload.scenario.gradient_accumulation
    if tokens * steps > MAX_STEP_TOKENS:
        raise FieldProblem(("scenario", "gradient_accumulation"),
                           f"{steps:,} micro-steps of {tokens:,} tokens: {tokens * steps:,} tokens an optimizer step, "
                           f"more than a step's {MAX_STEP_TOKENS:,} (docs/workloads.md#limits; scale '{scale}')")
