"""The workload section of scenario `generate` (docs/scenarios/generate.md).

    scenario: {kind: generate, batch_size: [1, 8], input_length: 1024, output_length: 128}

A section without `kind` is this one (every workload generated before other scenarios existed).

Every value is bounded (docs/workloads.md#limits): by the schema on its own, then per scale against
the model it runs (`check_scale`): a sequence within the model's context, a batch within a
batch's tokens.
"""

from __future__ import annotations

from typing import Literal, Union

from pydantic import field_validator

from tpubench.scenarios import FieldProblem
from tpubench.workload_spec.sections import (
    FULL_SCALE,
    MAX_BATCH_TOKENS,
    BatchSize,
    DecodeLoop,
    MeanTokens,
    Strict,
    as_list,
    axis,
)


class GenerateSection(Strict):
    """Offline batches: every sequence gets exactly output_length tokens."""

    kind: Literal["generate"] = "generate"
    batch_size: Union[BatchSize, list[BatchSize]]
    # Whole tokens for a measured batch; a mean (505.6) is for `tpubench estimate` only (sweep.py).
    input_length: Union[MeanTokens, list[MeanTokens]]
    output_length: Union[MeanTokens, list[MeanTokens]]
    # tpubench: its own fenced step per token; hf_generate: transformers' model.generate() (torch),
    # the baseline a generate() user gets (docs/scenarios/generate.md#decode-loop). A sweep axis.
    decode_loop: Union[DecodeLoop, list[DecodeLoop]] = "tpubench"

    _non_empty = field_validator("batch_size", "input_length", "output_length", "decode_loop")(
        classmethod(lambda cls, v: axis(v)))


def context_of(config: dict) -> tuple[int | None, str]:
    """The tokens one sequence may hold in the model of a scale (its resolved config), and words
    saying where that number comes from; None when the config gives none (the family's default
    then applies, which only transformers knows)."""
    positions = config.get("max_position_embeddings")
    if isinstance(positions, int) and not isinstance(positions, bool) and positions > 0:
        return positions, "model.config.max_position_embeddings"
    return None, ""


def effective(workload, scale: str, field: str) -> tuple[list[int], tuple]:
    """A length or batch axis of one scale (its own override, else the section's) and the path in
    the file it comes from."""
    override = workload.scales[scale].scenario if scale != FULL_SCALE else None
    if override is not None and getattr(override, field) is not None:
        return as_list(getattr(override, field)), ("scales", scale, "scenario", field)
    return as_list(getattr(workload.scenario, field)), ("scenario", field)


def check_scale(workload, scale: str, config: dict) -> None:
    """One scale's points against its model (`config`: the resolved model config): the longest
    prompt plus the longest answer within the model's context, and the largest batch's tokens
    within MAX_BATCH_TOKENS. Out of bounds is a FieldProblem naming the field."""
    batches, batch_loc = effective(workload, scale, "batch_size")
    inputs, input_loc = effective(workload, scale, "input_length")
    outputs, output_loc = effective(workload, scale, "output_length")
    longest_in, longest_out = max(inputs), max(outputs)
    context, source = context_of(config)
    if context is not None and longest_in + longest_out > context:
        loc = input_loc if longest_in >= longest_out else output_loc
        raise FieldProblem(loc, f"{longest_in:,} prompt + {longest_out:,} output tokens exceed the model's context "
                                f"of {context:,} tokens ({source}, scale '{scale}')")
    tokens = max(batches) * (longest_in + longest_out)
    if tokens > MAX_BATCH_TOKENS:
        raise FieldProblem(batch_loc, f"a batch of {max(batches):,} sequences of {longest_in + longest_out:,} tokens "
                                      f"holds {tokens:,} tokens, more than a batch's {MAX_BATCH_TOKENS:,} "
                                      f"(docs/workloads.md#limits; scale '{scale}')")
