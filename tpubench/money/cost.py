"""Cost per token: pure functions over measured times, throughputs and prices.

Every time-attributed figure derives from three chip-seconds-per-token figures of a result row,
each with its 95% CI (`chip_seconds_per_token`), read from the columns the row provides
(docs/definitions.md#cost: by column, never by scenario kind):

- a row with `blended_s_per_token` (seconds of the whole server per token over the measured
  window, as scenario `serve` writes it, with `_ci95_low` / `_ci95_high`) spends

    c_all = blended_s_per_token * chips   (CI: the column's bounds times chips)

  and its input/output split comes from what the engine spends, never from request time (under
  continuous batching a request's time before its first token is not the chip's time on its
  prompt). `serve_split` fits it when several points of the same server and load (same workload,
  stack, hardware, chips, layout, concurrency or rate, endpoint) were measured at input/output
  mixes at least `MIN_PROBE_MIX_SPREAD` apart in output share: the window's chip-seconds per
  second, `chips`, is fitted over those points by non-negative least squares as

    chips = c_in * input_tokens_per_s + c_out * output_tokens_per_s     (`fit_chip_seconds_per_token`)

  and every point of the group gets that c_in and c_out (`split_method` "probe fit over N points",
  `split_note` the fit's rms misfit; CIs: the widest relative CI of the group's blended figures).
  Otherwise, or when the fit is not defensible (one coefficient at zero, misfit over
  `MAX_PROBE_FIT_RMS`, an invalid point), c_in and c_out are NaN: `split_method` "blended only",
  `split_note` the reason. The result's own `input_s_per_token` / `output_s_per_token` (the window
  split by sum TTFT / sum E2E) are not used.

- any other row (an offline batch of B sequences, input length I, output length O, as scenario
  `generate` writes it) spends, from its mean TTFT and E2E:

    c_in  = TTFT * chips         / (B * I)          prefill chip-seconds per input token
    c_out = (E2E - TTFT) * chips / (B * O)          decode chip-seconds per output token (O > 1)
    c_all = E2E * chips          / (B * (I + O))    all chip-seconds per token

  with CIs from the TTFT, TPOT (decode time is TPOT * (O - 1)) and E2E CIs. A single output token
  is produced by prefill: there is no decode time to attribute, so c_out is NaN for O = 1.

Each figure is taken from the server columns where the row has `blended_s_per_token` and from
the TTFT/E2E formula otherwise (`split_method` "time-attributed": prefill and decode chip time
are really apart in an offline batch). Priced at p USD per chip-second (docs/definitions.md#cost):

    $/Mtok input = c_in * p * 1e6      $/Mtok output = c_out * p * 1e6      $/Mtok blended = c_all * p * 1e6

That split is ours ("time-attributed"). Published tables such as InferenceX charge the whole hour
to output tokens: $/Mtok = price per chip-hour * 1e6 / (3600 * output tokens/s per chip), where
output tokens/s per chip = `output_tokens_per_s` / chips (every kind writes that column: the batch's
decode-inclusive rate, or the server's rate over its window). Both are reported, labelled.
Interactivity (tokens/s per user) is the row's `interactivity_tokens_per_s` where it has one, else
1 / median TPOT.

A multi-chip point (tensor or expert parallel, docs/multi-chip.md) is priced as all of its chips: `chips`
is the world size (on a CPU, the vCPUs of all ranks; for a server, the chips it runs on), so its
throughput per chip is the measured throughput / chips and, at equal measured throughput, its
$/Mtok is `chips` times a single chip's. The layout (`tensor_parallel`, `expert_parallel`,
`world_size`; 1 for results that predate it) travels with every priced row, as do the scenario
kind (`scenario_kind`, "generate" for results that predate it) and the serving stack and load
(`server_name`, `server_version`, `concurrency`, `request_rate`; empty for offline runs).

Training (scenario `train`, docs/definitions.md#training) is priced from its own columns: a row with
`train_s_per_token` (seconds of the whole world per training token, with `_ci95_low` /
`_ci95_high`) spends

    c_train = train_s_per_token * chips          chip-seconds per training token
    $/M training tokens = c_train * p * 1e6      (`train_usd_per_mtok`, CI from the column's bounds)

and its training tokens/s per chip is `train_tokens_per_s` / chips (CI from that column's bounds).
Those `train_*` columns are NaN for rows without training figures, and the inference $/Mtok columns
are NaN for rows without inference figures (a training row has no TTFT, E2E or output tokens), so
neither is ever read as the other; `is_training` tells the rows apart by column.

Uncertainty: a cost proportional to a time takes that time's 95% CI; a cost proportional to
1/throughput takes its bounds from the opposite throughput bounds (the low cost bound comes from
the high throughput bound). The functions accept floats or numpy/pandas arrays alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date

import numpy as np
import pandas as pd

from tpubench.money import accelerator_map, pricing
from tpubench.errors import UserError
from tpubench.spec.point import DEFAULT_KIND
from tpubench.measure.stats import ratio_with_uncertainty, verdict

SECONDS_PER_HOUR = 3600.0
TOKENS_PER_MTOK = 1e6


def usd_per_chip_second(usd_per_instance_hour, chips_per_instance):
    """Instance $/h spread over its chips and the seconds of an hour."""
    return usd_per_instance_hour / chips_per_instance / SECONDS_PER_HOUR


def usd_per_mtok(chip_seconds, usd_per_chip_s, tokens):
    """USD per million tokens for `tokens` that took `chip_seconds` at `usd_per_chip_s`."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(np.multiply(chip_seconds, usd_per_chip_s) * TOKENS_PER_MTOK, tokens)


@dataclass(frozen=True)
class TokenCosts:
    input_usd_per_mtok: float
    output_usd_per_mtok: float
    blended_usd_per_mtok: float


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


def generate_chip_seconds_per_token(ttft_s, e2e_s, chips, batch_size, input_length,
                                    output_length) -> ChipSecondsPerToken:
    """An offline batch: prefill chip-seconds over input tokens, decode chip-seconds over output
    tokens (NaN for a single output token: prefill made it), all chip-seconds over all tokens."""
    with np.errstate(divide="ignore", invalid="ignore"):
        input_tokens = np.multiply(batch_size, input_length)
        output_tokens = np.multiply(batch_size, output_length)
        decode = np.divide(np.multiply(np.subtract(e2e_s, ttft_s), chips), output_tokens)
        return ChipSecondsPerToken(
            input=np.divide(np.multiply(ttft_s, chips), input_tokens),
            output=_nan_unless(np.asarray(output_length, dtype=float) > 1, decode),
            blended=np.divide(np.multiply(e2e_s, chips), input_tokens + output_tokens),
        )


def usd_per_mtok_from_chip_seconds(chip_s_per_token, usd_per_chip_s):
    """USD per million tokens at `chip_s_per_token` chip-seconds each."""
    return usd_per_mtok(chip_s_per_token, usd_per_chip_s, 1)


def time_attributed_costs(ttft_s, e2e_s, chips, batch_size, input_length, output_length,
                          usd_per_chip_s) -> TokenCosts:
    """An offline batch priced: prefill chip-seconds over input tokens, decode chip-seconds over
    output tokens, and all chip-seconds over all tokens."""
    c = generate_chip_seconds_per_token(ttft_s, e2e_s, chips, batch_size, input_length, output_length)
    return TokenCosts(
        input_usd_per_mtok=usd_per_mtok_from_chip_seconds(c.input, usd_per_chip_s),
        output_usd_per_mtok=usd_per_mtok_from_chip_seconds(c.output, usd_per_chip_s),
        blended_usd_per_mtok=usd_per_mtok_from_chip_seconds(c.blended, usd_per_chip_s),
    )


def mix_chip_seconds_per_token(input_chip_s, output_chip_s, output_share: float):
    """Chip-seconds per token of a traffic mix with `output_share` output tokens (the output
    figure is not needed, and may be NaN, when the mix has no output)."""
    return np.multiply(1 - output_share, input_chip_s) + (
        np.multiply(output_share, output_chip_s) if output_share else 0.0)


def inferencex_usd_per_mtok(output_tokens_per_s, chips, usd_per_chip_hour):
    """The whole chip-hour charged to output tokens, as InferenceX-style tables do."""
    with np.errstate(divide="ignore", invalid="ignore"):
        per_chip = np.divide(output_tokens_per_s, chips)
        return np.divide(np.multiply(usd_per_chip_hour, TOKENS_PER_MTOK), np.multiply(SECONDS_PER_HOUR, per_chip))


def tokens_per_usd(usd_per_mtok_value):
    """Tokens one dollar buys at a given $/Mtok."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(TOKENS_PER_MTOK, usd_per_mtok_value)


def cost_ci_from_time_ci(cost, time_mean, time_low, time_high):
    """(low, high) of a cost proportional to a time whose 95% CI is [time_low, time_high]."""
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.divide(cost, time_mean)
        return np.multiply(scale, time_low), np.multiply(scale, time_high)


def cost_ci_from_throughput_ci(cost, throughput_mean, throughput_low, throughput_high):
    """(low, high) of a cost proportional to 1/throughput: the low cost bound comes from the high
    throughput bound; a throughput CI reaching zero leaves the cost unbounded above."""
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.multiply(cost, throughput_mean)
        low = np.divide(scaled, throughput_high)
        high = np.where(np.asarray(throughput_low) > 0, np.divide(scaled, throughput_low), np.inf)
    if np.ndim(high) == 0:
        return float(low), float(high)
    return low, high


# Costs closer than this are a tie even when their intervals collapse (whole-instance rounding
# gives a fleet's monthly cost no spread, and cents a month decide nothing).
NEGLIGIBLE_COST_RATIO = 1e-3


def compare_costs(a: float, a_half: float, b: float, b_half: float) -> str:
    """'cheaper', 'dearer' or 'tie within noise': a against b, each with its 95% half-width."""
    ratio, half = ratio_with_uncertainty(a, a_half, b, b_half)
    if math.isfinite(ratio) and abs(ratio - 1) < NEGLIGIBLE_COST_RATIO:
        return "tie within noise"
    return verdict(ratio, half, higher_is_better=False, words=("cheaper", "dearer"))


def half_width(low, high):
    """Half the width of a (possibly asymmetric) interval; NaN bounds give NaN."""
    return np.subtract(high, low) / 2


# ----------------------------------------------------------------------------- serving input/output split

SPLIT_TIME_ATTRIBUTED = "time-attributed"
SPLIT_BLENDED_ONLY = "blended only"
# Output shares (output tokens / all tokens) of a probe's points must span at least this much:
# closer mixes leave the two per-token costs at the mercy of the noise.
MIN_PROBE_MIX_SPREAD = 0.2
# A fit that misses its points by more than this (rms, relative to the chips) is no model of them.
MAX_PROBE_FIT_RMS = 0.2
# What makes serve points "the same server and load" (the columns a result has of these).
PROBE_GROUP_COLUMNS = [
    "workload", "scale", "family", "dtype", "server_name", "server_version", "served_model", "endpoint",
    "accelerator", "device", "chips", "tensor_parallel", "expert_parallel", "world_size", "host",
    "instance", "concurrency", "request_rate",
]
SPLIT_COLUMNS = ["split_method", "split_note"] + [
    f"probe_{kind}_chip_s_per_token{bound}" for kind in ("input", "output")
    for bound in ("", "_ci95_low", "_ci95_high")]


def probe_method(points: int) -> str:
    return f"probe fit over {points} points"


def fit_chip_seconds_per_token(chip_seconds, input_tokens, output_tokens) -> tuple[float, float]:
    """(a, b) >= 0 minimising sum (a * input_tokens + b * output_tokens - chip_seconds)^2: chip-seconds
    per input token and per output token. Two unknowns, so the non-negative least squares is solved
    exactly: the unconstrained solution when both are >= 0, else the better one-variable fit."""
    y, x, z = (np.asarray(v, dtype=float) for v in (chip_seconds, input_tokens, output_tokens))
    sxx, szz, sxz, sxy, szy = x @ x, z @ z, x @ z, x @ y, z @ y
    det = sxx * szz - sxz * sxz
    if det > 1e-12 * sxx * szz:
        a, b = (sxy * szz - szy * sxz) / det, (szy * sxx - sxy * sxz) / det
        if a >= 0 and b >= 0:
            return float(a), float(b)
    candidates = [(max(sxy / sxx, 0.0) if sxx > 0 else 0.0, 0.0), (0.0, max(szy / szz, 0.0) if szz > 0 else 0.0)]
    return min(candidates, key=lambda ab: float(np.sum((ab[0] * x + ab[1] * z - y) ** 2)))


@dataclass(frozen=True)
class ProbeSplit:
    """Chip-seconds per input and output token of one server and load (NaN without a split)."""

    input: float
    output: float
    method: str
    note: str


def probe_split(chips, input_tokens_per_s, output_tokens_per_s) -> ProbeSplit:
    """The input/output split of points measured at one server and load (module docstring): fitted
    when their mixes differ enough and the fit is defensible, else NaN with the reason."""
    y, r_in, r_out = (np.asarray(v, dtype=float) for v in (chips, input_tokens_per_s, output_tokens_per_s))
    # A point without both token rates (a result that predates them) cannot be a probe.
    usable = np.isfinite(y) & np.isfinite(r_in) & np.isfinite(r_out) & (r_in >= 0) & (r_out >= 0) & (r_in + r_out > 0)
    y, r_in, r_out = y[usable], r_in[usable], r_out[usable]
    n = y.size
    if n < 2:
        return ProbeSplit(math.nan, math.nan, SPLIT_BLENDED_ONLY,
                          "one point at this server and load: no input-heavy and output-heavy probe points")
    share = r_out / (r_in + r_out)
    spread = float(share.max() - share.min())
    if spread < MIN_PROBE_MIX_SPREAD:
        return ProbeSplit(math.nan, math.nan, SPLIT_BLENDED_ONLY,
                          f"the {n} points at this server and load have output shares {share.min():.2f}-"
                          f"{share.max():.2f}; a probe needs mixes at least {MIN_PROBE_MIX_SPREAD:g} apart")
    a, b = fit_chip_seconds_per_token(y, r_in, r_out)
    if a <= 0 or b <= 0:
        return ProbeSplit(math.nan, math.nan, SPLIT_BLENDED_ONLY,
                          f"the fit over {n} points puts no chip time on {'input' if a <= 0 else 'output'} tokens")
    rms = float(np.sqrt(np.mean((a * r_in + b * r_out - y) ** 2)) / np.mean(y))
    if rms > MAX_PROBE_FIT_RMS:
        return ProbeSplit(math.nan, math.nan, SPLIT_BLENDED_ONLY,
                          f"the linear fit misses its {n} points by {rms:.0%} rms (over {MAX_PROBE_FIT_RMS:.0%})")
    return ProbeSplit(a, b, probe_method(n), f"rms misfit {rms:.1%}; output shares {share.min():.2f}-{share.max():.2f}")


def _has_server_figures(df: pd.DataFrame) -> pd.Series:
    """Rows whose cost comes from a server's window (a `blended_s_per_token` figure)."""
    return numeric_column(df, "blended_s_per_token").notna()


def serve_split(results: pd.DataFrame) -> pd.DataFrame:
    """`SPLIT_COLUMNS` for every row of `results` (one row per result): server rows get their
    group's probe fit (valid points only) or "blended only" with the reason; offline inference rows
    "time-attributed"; training rows nothing."""
    out = pd.DataFrame({"split_method": "", "split_note": ""}, index=results.index, dtype=object)
    for col in SPLIT_COLUMNS[2:]:
        out[col] = math.nan
    server = _has_server_figures(results)
    out.loc[~server & ~is_training(results), "split_method"] = SPLIT_TIME_ATTRIBUTED
    if not server.any():
        return out
    rows = results[server]
    valid = rows["valid"].astype(bool) if "valid" in rows else pd.Series(True, index=rows.index)
    if "status" in rows:
        valid &= rows["status"].eq("ok")
    out.loc[rows.index[~valid], ["split_method", "split_note"]] = [
        SPLIT_BLENDED_ONLY, "invalid point: left out of any probe fit"]
    keys = [c for c in PROBE_GROUP_COLUMNS if c in rows]
    fitted = rows[valid]
    groups = fitted.groupby(keys, dropna=False, sort=False) if keys else [((), fitted)]
    for _, group in groups:
        split = probe_split(numeric_column(group, "chips"), numeric_column(group, "input_tokens_per_s"),
                            numeric_column(group, "output_tokens_per_s"))
        out.loc[group.index, ["split_method", "split_note"]] = [split.method, split.note]
        blended = numeric_column(group, "blended_s_per_token")
        low = float((numeric_column(group, "blended_s_per_token_ci95_low") / blended).min())
        high = float((numeric_column(group, "blended_s_per_token_ci95_high") / blended).max())
        for kind, value in (("input", split.input), ("output", split.output)):
            out.loc[group.index, f"probe_{kind}_chip_s_per_token"] = value
            out.loc[group.index, f"probe_{kind}_chip_s_per_token_ci95_low"] = value * low
            out.loc[group.index, f"probe_{kind}_chip_s_per_token_ci95_high"] = value * high
    return out


# ----------------------------------------------------------------------------- pricing results

# Result columns carried into every priced row: what was measured, on which hardware and software.
IDENTITY_COLUMNS = [
    "file", "workload", "scale", "family", "dtype", "experts_implementation", "execution_mode",
    "batch_size", "input_length", "output_length", "backend", "device", "accelerator", "chips",
    "tensor_parallel", "expert_parallel", "world_size", "valid", "invalid_reasons", "host", "torch_version",
    "transformers_version", "jax_version",
    "tpubench_version", "started_at", "iterations",
    "scenario_kind", "server_name", "server_version", "concurrency", "request_rate",
]
PRICE_COLUMNS = [
    "priced_accelerator", "cloud", "region", "instance_type", "chips_per_instance", "plan",
    "usd_per_instance_hour", "usd_per_chip_hour", "price_source", "price_as_of", "price_age_days",
    "price_flagged", "price_flag_reason", "what_if",
]
COST_COLUMNS = [
    "input_usd_per_mtok", "input_usd_per_mtok_ci95_low", "input_usd_per_mtok_ci95_high",
    "output_usd_per_mtok", "output_usd_per_mtok_ci95_low", "output_usd_per_mtok_ci95_high",
    "blended_usd_per_mtok", "blended_usd_per_mtok_ci95_low", "blended_usd_per_mtok_ci95_high",
    "inferencex_usd_per_mtok", "inferencex_usd_per_mtok_ci95_low", "inferencex_usd_per_mtok_ci95_high",
    "tokens_per_usd", "output_tokens_per_usd_inferencex",
] + [f"{kind}_chip_s_per_token{bound}" for kind in ("input", "output", "blended")
     for bound in ("", "_ci95_low", "_ci95_high")] + ["split_method", "split_note"]
# Training (section 17): $ per million training tokens and the chip-seconds behind it.
TRAIN_COST_COLUMNS = [f"train_{name}{bound}" for name in ("usd_per_mtok", "chip_s_per_token")
                      for bound in ("", "_ci95_low", "_ci95_high")]
TRAIN_PERFORMANCE_COLUMNS = [
    "train_tokens_per_s", "train_tokens_per_s_per_chip", "train_tokens_per_s_per_chip_ci95_low",
    "train_tokens_per_s_per_chip_ci95_high", "step_mean_s", "step_p50_s", "step_ci95_low_s",
    "step_ci95_high_s", "mfu", "loss_first", "loss_last",
]
PERFORMANCE_COLUMNS = [
    "output_tokens_per_s", "output_tokens_per_s_per_chip", "output_tokens_per_s_per_chip_ci95_low",
    "output_tokens_per_s_per_chip_ci95_high", "interactivity_tokens_per_s_per_user",
    "ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p95_s", "ttft_p99_s", "ttft_min_s", "ttft_max_s",
    "tpot_mean_s", "tpot_p50_s", "tpot_p90_s", "tpot_p95_s", "tpot_p99_s", "tpot_min_s", "tpot_max_s",
    "e2e_mean_s", "e2e_p50_s", "e2e_p99_s", "prefill_mfu", "decode_mbu",
    "input_tokens_per_s", "requests_per_s", "goodput_requests_per_s", "failure_rate",
]
PRICED_COLUMNS = (IDENTITY_COLUMNS + PRICE_COLUMNS + PERFORMANCE_COLUMNS + COST_COLUMNS
                  + TRAIN_PERFORMANCE_COLUMNS + TRAIN_COST_COLUMNS)
UNPRICED_COLUMNS = ["file", "workload", "scale", "status", "backend", "device", "accelerator", "chips",
                    "priced_accelerator", "reason", "scenario_kind", "server_name", "server_version"]


def numeric_column(df: pd.DataFrame, name: str) -> pd.Series:
    """A column as floats, NaN where the results predate it."""
    if name in df:
        return pd.to_numeric(df[name], errors="coerce")
    return pd.Series(math.nan, index=df.index, dtype=float)


def _ensure(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    for col in columns:
        if col not in df:
            df[col] = None
    return df


LAYOUT_COLUMNS = ["tensor_parallel", "expert_parallel", "world_size"]


def _with_layout(df: pd.DataFrame) -> pd.DataFrame:
    """The parallel layout as ints, 1 (one chip, no sharding) where a result predates it."""
    for col in LAYOUT_COLUMNS:
        values = pd.to_numeric(df[col], errors="coerce") if col in df else pd.Series(1, index=df.index)
        df[col] = values.fillna(1).astype(int)
    return df


def _with_kind(df: pd.DataFrame) -> pd.DataFrame:
    """`scenario_kind` on every row: results that predate it are of the default kind (spec.point.DEFAULT_KIND)."""
    kinds = df["scenario_kind"] if "scenario_kind" in df else pd.Series(None, index=df.index, dtype=object)
    df["scenario_kind"] = kinds.where(kinds.notna() & kinds.astype(str).ne(""), DEFAULT_KIND)
    return df


def chip_seconds_per_token(df: pd.DataFrame) -> pd.DataFrame:
    """The three chip-seconds-per-token figures of every row, with their 95% CIs (columns
    `{input,output,blended}_chip_s_per_token[_ci95_low|_ci95_high]`): for a server row, blended
    from `blended_s_per_token` times chips and input/output from `serve_split`'s `probe_*` columns
    (NaN when the row has none); for any other row, from its TTFT and E2E (module docstring)."""
    chips = numeric_column(df, "chips")
    ttft, e2e = numeric_column(df, "ttft_mean_s"), numeric_column(df, "e2e_mean_s")
    computed = generate_chip_seconds_per_token(ttft, e2e, chips, numeric_column(df, "batch_size"),
                                               numeric_column(df, "input_length"), numeric_column(df, "output_length"))
    # The measured time each generate figure is proportional to, for its CI.
    drivers = {"input": ("ttft_mean_s", "ttft_ci95_low_s", "ttft_ci95_high_s"),
               "output": ("tpot_mean_s", "tpot_ci95_low_s", "tpot_ci95_high_s"),
               "blended": ("e2e_mean_s", "e2e_ci95_low_s", "e2e_ci95_high_s")}
    out = pd.DataFrame(index=df.index)
    server = _has_server_figures(df)
    for kind, (mean, low, high) in drivers.items():
        value = pd.Series(getattr(computed, kind), index=df.index, dtype=float)
        value_low, value_high = cost_ci_from_time_ci(value, numeric_column(df, mean), numeric_column(df, low), numeric_column(df, high))
        name = f"{kind}_chip_s_per_token"
        if kind == "blended":
            # The server's whole window over all its tokens.
            given = {bound: numeric_column(df, f"blended_s_per_token{bound}") * chips
                     for bound in ("", "_ci95_low", "_ci95_high")}
        else:
            # The split serve_split derived (NaN where it found none): never the request-time split.
            given = {bound: numeric_column(df, f"probe_{name}{bound}") for bound in ("", "_ci95_low", "_ci95_high")}
        out[name] = given[""].where(server, value)
        out[f"{name}_ci95_low"] = given["_ci95_low"].where(server, value_low)
        out[f"{name}_ci95_high"] = given["_ci95_high"].where(server, value_high)
    return out


def train_chip_seconds_per_token(df: pd.DataFrame) -> pd.DataFrame:
    """Chip-seconds per training token with its 95% CI (`train_chip_s_per_token[_ci95_low|_ci95_high]`):
    the row's `train_s_per_token` columns times chips; NaN for rows without them."""
    chips = numeric_column(df, "chips")
    return pd.DataFrame({f"train_chip_s_per_token{bound}": numeric_column(df, f"train_s_per_token{bound}") * chips
                         for bound in ("", "_ci95_low", "_ci95_high")}, index=df.index)


def is_training(df: pd.DataFrame) -> pd.Series:
    """Rows that carry training figures (a training throughput or time per training token)."""
    return numeric_column(df, "train_s_per_token").notna() | numeric_column(df, "train_tokens_per_s").notna()


def add_train_costs(df: pd.DataFrame) -> pd.DataFrame:
    """$ per million training tokens (with CIs) and training throughput per chip, for rows with
    training figures (module docstring); NaN on every other row."""
    chips = numeric_column(df, "chips")
    per_chip_s = usd_per_chip_second(df["usd_per_chip_hour"].astype(float), 1)
    chip_s = train_chip_seconds_per_token(df)
    for bound in ("", "_ci95_low", "_ci95_high"):
        df[f"train_chip_s_per_token{bound}"] = chip_s[f"train_chip_s_per_token{bound}"]
        df[f"train_usd_per_mtok{bound}"] = usd_per_mtok_from_chip_seconds(
            chip_s[f"train_chip_s_per_token{bound}"], per_chip_s)
    tput = numeric_column(df, "train_tokens_per_s")
    df["train_tokens_per_s"] = tput
    df["train_tokens_per_s_per_chip"] = tput / chips
    for bound in ("_ci95_low", "_ci95_high"):
        df[f"train_tokens_per_s_per_chip{bound}"] = numeric_column(df, f"train_tokens_per_s{bound}") / chips
    for col in TRAIN_PERFORMANCE_COLUMNS:
        if col not in df:
            df[col] = numeric_column(df, col)
    return df


def add_costs(priced: pd.DataFrame) -> pd.DataFrame:
    """Per-chip performance and every $/Mtok column (with CIs) for rows of results joined to prices."""
    df = priced
    chips = numeric_column(df, "chips")
    per_chip_s = usd_per_chip_second(df["usd_per_chip_hour"], 1)

    chip_s = chip_seconds_per_token(df)
    for column in chip_s:
        df[column] = chip_s[column]
    for kind in ("input", "output", "blended"):
        for bound in ("", "_ci95_low", "_ci95_high"):
            df[f"{kind}_usd_per_mtok{bound}"] = usd_per_mtok_from_chip_seconds(
                chip_s[f"{kind}_chip_s_per_token{bound}"], per_chip_s)

    tput = numeric_column(df, "output_tokens_per_s")
    tput_low, tput_high = numeric_column(df, "output_tokens_per_s_ci95_low"), numeric_column(df, "output_tokens_per_s_ci95_high")
    df["inferencex_usd_per_mtok"] = inferencex_usd_per_mtok(tput, chips, df["usd_per_chip_hour"])
    low, high = cost_ci_from_throughput_ci(df["inferencex_usd_per_mtok"], tput, tput_low, tput_high)
    df["inferencex_usd_per_mtok_ci95_low"], df["inferencex_usd_per_mtok_ci95_high"] = low, high
    df["tokens_per_usd"] = tokens_per_usd(df["blended_usd_per_mtok"])
    df["output_tokens_per_usd_inferencex"] = tokens_per_usd(df["inferencex_usd_per_mtok"])

    df["output_tokens_per_s"] = tput
    df["output_tokens_per_s_per_chip"] = tput / chips
    df["output_tokens_per_s_per_chip_ci95_low"] = tput_low / chips
    df["output_tokens_per_s_per_chip_ci95_high"] = tput_high / chips
    df["interactivity_tokens_per_s_per_user"] = interactivity_tokens_per_s(df)
    for col in PERFORMANCE_COLUMNS:
        if col not in df:
            df[col] = numeric_column(df, col)
    return add_train_costs(df)


def interactivity_tokens_per_s(df: pd.DataFrame) -> pd.Series:
    """Tokens/s one user sees: the row's `interactivity_tokens_per_s` where it has one (a server's
    1 / median TPOT over requests), else 1 / median TPOT."""
    with np.errstate(divide="ignore", invalid="ignore"):
        from_tpot = 1.0 / numeric_column(df, "tpot_p50_s")
    given = numeric_column(df, "interactivity_tokens_per_s")
    return given.where(given.notna(), from_tpot)


def _filter_prices(prices: pd.DataFrame, plans, cloud, region, instance) -> pd.DataFrame:
    prices = pricing.select_plans(prices, plans)
    for column, value, flag in (("cloud", cloud, "--cloud"), ("region", region, "--region"),
                                ("instance_type", instance, "--instance")):
        if value:
            values = {v.lower() for v in ([value] if isinstance(value, str) else value)}
            kept = prices[prices[column].str.lower().isin(values)]
            if kept.empty:
                choices = ", ".join(sorted(set(prices[column])))
                raise UserError(f"no price rows for {column} {', '.join(sorted(values))}; known: {choices}",
                                field=flag)
            prices = kept
    return prices


def _unpriced_reason(raw, device, canonical, all_accelerators, notes: dict[str, str]) -> str:
    if canonical is None:
        return (f"accelerator '{raw}' on device '{device}' has no price row; add one in a price file "
                "(see pricing/README.md)")
    if canonical in all_accelerators:
        return f"no {canonical} price row matches the chosen cloud/region/instance/plan"
    if canonical in notes:
        return f"{canonical}: {notes[canonical]}"
    return f"no price row for {canonical}; add one in a price file (see pricing/README.md)"


PRICE_NOTES = "price_notes"


def choose_prices(prices: pd.DataFrame, plans=None, cloud=None, region=None, instance=None,
                  what_if_instance: str | None = None, include_flagged: bool = False,
                  accelerators=None) -> tuple[pd.DataFrame, list[str]]:
    """The price rows results may be priced on, and notes on what was set aside: the filters, then
    flagged rows only where no unflagged row prices the same accelerator and plan
    (`pricing.prefer_unflagged`; every flagged row with `include_flagged`). `accelerators` (e.g.
    the priced rows' `priced_accelerator`) limits the notes to the accelerators that matter."""
    filtered = _filter_prices(prices, plans, cloud, region, instance)
    if what_if_instance:
        filtered = filtered[filtered["instance_type"] == what_if_instance]
        if filtered.empty:
            raise UserError(f"no price rows for instance '{what_if_instance}' with the chosen filters",
                            field="--what-if-instance")
    chosen = pricing.prefer_unflagged(filtered, include_flagged)
    relevant = filtered if accelerators is None else filtered[filtered["accelerator"].isin(set(accelerators))]
    note = pricing.flagged_set_aside_note(relevant, chosen)
    return chosen, [note] if note else []


def price_results(df: pd.DataFrame, prices: pd.DataFrame, plans=None, cloud=None, region=None,
                  instance=None, what_if_instance: str | None = None,
                  today: date | None = None, include_flagged: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Join results to prices: (priced, unpriced).

    `priced` has one row per result x matching price row x plan with the columns of
    `PRICED_COLUMNS`. A result matches the price rows of its accelerator (runtime name mapped by
    `hardware.accelerators.normalize_accelerator`); with `what_if_instance` every result is instead priced as if
    its per-chip speed were had on that instance (`what_if` is True on those rows). Price rows are
    those of `choose_prices`: a flagged row (`price_flagged`, with `price_flag_reason`) only where no
    unflagged one prices the accelerator and plan, unless `include_flagged`. Invalid runs are
    priced and keep `valid=False` so reports can mark them; failed runs are never priced and appear
    in `unpriced` with the reason, as do results whose accelerator has no price. Server rows get
    their input/output split from `serve_split` over all the results given. `priced.attrs[PRICE_NOTES]`
    says which flagged prices were set aside for the accelerators these results ran on.
    """
    all_accelerators = set(prices["accelerator"])
    results = _with_kind(_with_layout(_ensure(df.copy(), ["status", "error", "accelerator", "device", "chips",
                                                          "file", "workload", "scale", "backend"])))
    ok_mask = results["status"].eq("ok")
    failed = results[~ok_mask].copy()
    failed["priced_accelerator"] = None
    failed["reason"] = "run failed: " + failed["error"].fillna("no error recorded").astype(str)

    ok = results[ok_mask].copy()
    # A point whose chips are unknown (a server's that could not be read) is never priced as some
    # number of chips: it is unpriced, with why (docs/chips-prices-pairs.md#chips-of-a-server).
    no_chips = ok[pd.to_numeric(ok["chips"], errors="coerce").isna()].copy()
    no_chips["priced_accelerator"] = None
    no_chips["reason"] = ("the chips it ran on are unknown (the result's warnings say why); declare "
                          "server.hardware (accelerator, chips) to price it")
    ok = ok.drop(index=no_chips.index)
    ok = ok.drop(columns=[c for c in SPLIT_COLUMNS if c in ok]).join(serve_split(ok))
    ok["priced_accelerator"] = accelerator_map.map_accelerators(ok["accelerator"], ok["device"], all_accelerators)
    chosen, price_notes = choose_prices(prices, plans, cloud, region, instance, what_if_instance, include_flagged,
                                        accelerators=None if what_if_instance else ok["priced_accelerator"])
    price_side = chosen.rename(columns={"accelerator": "priced_accelerator", "source": "price_source",
                                        "as_of": "price_as_of", "flagged": "price_flagged",
                                        "flag_reason": "price_flag_reason"}).drop(columns=["origin"])
    if what_if_instance:
        measured = ok.drop(columns=["priced_accelerator"])
        priced = measured.merge(price_side, how="cross")
        priced["what_if"] = True
        unmatched = ok.iloc[0:0].copy()
    else:
        priced = ok.merge(price_side, on="priced_accelerator", how="inner")
        priced["what_if"] = False
        unmatched = ok[~ok["priced_accelerator"].isin(set(price_side["priced_accelerator"]))].copy()

    notes_table = pricing.load_unpriced_notes()
    notes = {r.accelerator: f"{r.reason} ({r.source})" for r in notes_table.itertuples()}
    unmatched["reason"] = [
        _unpriced_reason(raw, dev, canon, all_accelerators, notes)
        for raw, dev, canon in zip(unmatched["accelerator"], unmatched["device"], unmatched["priced_accelerator"])
    ]
    unpriced = pd.concat([failed, no_chips, unmatched], ignore_index=True)
    unpriced = _ensure(unpriced, UNPRICED_COLUMNS)[UNPRICED_COLUMNS].reset_index(drop=True)

    today = today or pricing.today_utc()
    ages = {d: pricing.price_age_days(d, today) for d in set(priced["price_as_of"])}
    priced["price_age_days"] = priced["price_as_of"].map(ages)
    priced = add_costs(_ensure(priced, IDENTITY_COLUMNS))[PRICED_COLUMNS].reset_index(drop=True)
    priced.attrs[PRICE_NOTES] = price_notes
    return priced, unpriced
