"""The workload section of scenario `generate` (docs/scenarios/generate.md).

    scenario: {kind: generate, batch_size: [1, 8], input_length: 1024, output_length: 128}

A section without `kind` is this one (every workload generated before other scenarios existed).
"""

from __future__ import annotations

from typing import Literal, Union

from pydantic import PositiveInt, field_validator

from tpubench.spec.sections import DecodeLoop, Strict, axis


class GenerateSection(Strict):
    """Offline batches: every sequence gets exactly output_length tokens."""

    kind: Literal["generate"] = "generate"
    batch_size: Union[PositiveInt, list[PositiveInt]]
    input_length: Union[PositiveInt, list[PositiveInt]]
    output_length: Union[PositiveInt, list[PositiveInt]]
    # tpubench: its own fenced step per token; hf_generate: transformers' model.generate() (torch),
    # the baseline a generate() user gets (docs/scenarios/generate.md#decode-loop). A sweep axis.
    decode_loop: Union[DecodeLoop, list[DecodeLoop]] = "tpubench"

    _non_empty = field_validator("batch_size", "input_length", "output_length", "decode_loop")(
        classmethod(lambda cls, v: axis(v)))
