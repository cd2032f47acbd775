"""Arithmetic per token shared by the scenarios' cost bases and by money: USD per million tokens
from chip-seconds, and the chip-seconds and rate of a traffic mix of input and output tokens.

It sits below the scenarios because a scenario's own priced entry points (an offline batch's
`time_attributed_costs`, its traffic-mix rate) use it and a scenario never imports money; money
uses the same functions, so both price a chip-second alike. The functions accept floats or
numpy/pandas arrays alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

TOKENS_PER_MTOK = 1e6
SECONDS_PER_HOUR = 3600.0


def usd_per_mtok(chip_seconds, usd_per_chip_s, tokens):
    """USD per million tokens for `tokens` that took `chip_seconds` at `usd_per_chip_s`."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(np.multiply(chip_seconds, usd_per_chip_s) * TOKENS_PER_MTOK, tokens)


def usd_per_mtok_from_chip_seconds(chip_s_per_token, usd_per_chip_s):
    """USD per million tokens at `chip_s_per_token` chip-seconds each."""
    return usd_per_mtok(chip_s_per_token, usd_per_chip_s, 1)


def mix_chip_seconds_per_token(input_chip_s, output_chip_s, output_share: float):
    """Chip-seconds per token of a traffic mix with `output_share` output tokens (the output
    figure is not needed, and may be NaN, when the mix has no output)."""
    return np.multiply(1 - output_share, input_chip_s) + (
        np.multiply(output_share, output_chip_s) if output_share else 0.0)


def mix_rate(input_chip_s_per_token, output_chip_s_per_token, output_share: float):
    """Tokens/s per chip for a traffic mix from a point's chip-seconds per token (budget/tokens.py's
    docstring); NaN when the mix has output tokens and the point no output figure."""
    with np.errstate(divide="ignore", invalid="ignore"):
        per_token = mix_chip_seconds_per_token(np.asarray(input_chip_s_per_token, dtype=float),
                                               np.asarray(output_chip_s_per_token, dtype=float),
                                               output_share)
        return 1.0 / per_token


@dataclass(frozen=True)
class ChipSecondsPerToken:
    """Chip-seconds spent per input token, per output token and per token of either kind."""

    input: float
    output: float
    blended: float


def _nan_unless(mask, values):
    """`values` where `mask`, NaN elsewhere; a pandas Series keeps its index, a scalar stays one."""
    if isinstance(values, pd.Series):
        return values.where(mask)
    out = np.where(mask, values, np.nan)
    return float(out) if np.ndim(out) == 0 else out


def batch_chip_seconds_per_token(ttft_s, e2e_s, chips, batch_size, input_length,
                                 output_length) -> ChipSecondsPerToken:
    """A batch of B sequences of I input and O output tokens that took TTFT to its first tokens and
    E2E to its last, on `chips` chips, is charged (docs/definitions.md#cost):

        c_in  = TTFT * chips         / (B * I)          prefill chip-seconds per input token
        c_out = (E2E - TTFT) * chips / (B * O)          decode chip-seconds per output token (O > 1)
        c_all = E2E * chips          / (B * (I + O))    all chip-seconds per token

    Prefill makes the first output token, so E2E - TTFT is O - 1 decode steps; a single output
    token has no decode time to attribute (c_out NaN for O = 1). A measured offline batch (scenario
    generate's cost basis) and an estimated one (tpubench/estimate) are both charged by this."""
    with np.errstate(divide="ignore", invalid="ignore"):
        input_tokens = np.multiply(batch_size, input_length)
        output_tokens = np.multiply(batch_size, output_length)
        decode = np.divide(np.multiply(np.subtract(e2e_s, ttft_s), chips), output_tokens)
        return ChipSecondsPerToken(
            input=np.divide(np.multiply(ttft_s, chips), input_tokens),
            output=_nan_unless(np.asarray(output_length, dtype=float) > 1, decode),
            blended=np.divide(np.multiply(e2e_s, chips), input_tokens + output_tokens),
        )
