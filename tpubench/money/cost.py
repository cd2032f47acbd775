"""Cost per token: pure functions over measured times, throughputs and prices.

Every result row is charged chip-seconds per unit of its output, each with its 95% CI, by the cost
basis of its scenario kind (`chip_seconds`): the function its package names
(`Scenario.cost_basis`, e.g. tpubench/scenarios/serve/cost.py, whose docstring gives the formula),
called once with all the rows of that kind, so that a basis may fit over several points. Rows
without a kind are the default kind's (workload_spec.point.DEFAULT_KIND), and so is a kind this version does
not know (`scenarios.registry.describing`). The bases write standard columns, NaN where a kind has
none: `{input,output,blended}_chip_s_per_token` (per input token, per output token, per token of
either kind) with `split_method` / `split_note` saying how input and output were told apart, and
`train_chip_s_per_token` (per training token), each with `_ci95_low` / `_ci95_high`
(docs/definitions.md#cost). Priced at p USD per chip-second, every `X_chip_s_per_token` becomes

    $/Mtok X = c_X * p * 1e6      (`X_usd_per_mtok`, CI from c_X's bounds)

Those per-token figures are ours (an offline batch's split by prefill and decode time, a server's
by a fit over probe points). Published tables such as InferenceX charge the whole hour
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
kind (`scenario_kind`, the default kind for results that predate it) and the serving stack and load
(`server_name`, `server_version`, `concurrency`, `request_rate`; empty for offline runs).

Training (docs/definitions.md#training) is priced per million training tokens
(`train_usd_per_mtok`, from `train_chip_s_per_token`), and its training tokens/s per chip is
`train_tokens_per_s` / chips (CI from that column's bounds). Those `train_*` columns are NaN for rows
without training figures, and the inference $/Mtok columns are NaN for rows without inference
figures (a training row has no TTFT, E2E or output tokens), so neither is ever read as the other;
`is_training` tells the rows apart by column.

Images (a scenario whose unit is an image, docs/definitions.md#diffusion) are priced per 1,000
images: every `X_chip_s_per_image` column a cost basis writes becomes

    $/1k images X = c_X * p * 1000      (`X_usd_per_kimage`, CI from c_X's bounds)

NaN on rows without it; images/s per chip is `images_per_s` / chips (CI from its bounds).

Uncertainty: a cost proportional to a time takes that time's 95% CI; a cost proportional to
1/throughput takes its bounds from the opposite throughput bounds (the low cost bound comes from
the high throughput bound; measure/stats.py). The functions accept floats or numpy/pandas arrays alike.
"""

from __future__ import annotations

import math
from datetime import date

import numpy as np
import pandas as pd

from tpubench.money import accelerator_map, pricing
from tpubench.money.energy import ENERGY_COLUMNS, add_energy
from tpubench.errors import UserError
from tpubench.measure.per_token import TOKENS_PER_MTOK, usd_per_mtok_from_chip_seconds
from tpubench.measure.stats import cost_ci_from_throughput_ci, ratio_with_uncertainty, verdict
from tpubench.records.columns import numeric_column
from tpubench.scenarios import registry
from tpubench.workload_spec.point import DEFAULT_KIND

SECONDS_PER_HOUR = 3600.0


def usd_per_chip_second(usd_per_instance_hour, chips_per_instance):
    """Instance $/h spread over its chips and the seconds of an hour."""
    return usd_per_instance_hour / chips_per_instance / SECONDS_PER_HOUR


def inferencex_usd_per_mtok(output_tokens_per_s, chips, usd_per_chip_hour):
    """The whole chip-hour charged to output tokens, as InferenceX-style tables do."""
    with np.errstate(divide="ignore", invalid="ignore"):
        per_chip = np.divide(output_tokens_per_s, chips)
        return np.divide(np.multiply(usd_per_chip_hour, TOKENS_PER_MTOK), np.multiply(SECONDS_PER_HOUR, per_chip))


def tokens_per_usd(usd_per_mtok_value):
    """Tokens one dollar buys at a given $/Mtok."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.divide(TOKENS_PER_MTOK, usd_per_mtok_value)


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
# Images (docs/definitions.md#diffusion): $ per 1,000 images and the chip-seconds behind it, and
# what was measured per image.
IMAGES_PER_KIMAGE = 1000
IMAGE_COST_COLUMNS = [f"image_{name}{bound}" for name in ("usd_per_kimage", "chip_s_per_image")
                      for bound in ("", "_ci95_low", "_ci95_high")]
IMAGE_PERFORMANCE_COLUMNS = [
    "images_per_s", "images_per_s_per_chip", "images_per_s_per_chip_ci95_low", "images_per_s_per_chip_ci95_high",
    "image_mean_s", "image_p50_s", "image_p99_s", "image_ci95_low_s", "image_ci95_high_s", "call_p50_s", "call_p99_s",
    "text_encode_s_per_image", "prepare_s_per_image", "denoise_s_per_image", "vae_decode_s_per_image",
    "postprocess_s_per_image", "denoise_step_p50_s", "denoise_mfu", "resolution_px", "denoise_steps",
]
PERFORMANCE_COLUMNS = [
    "output_tokens_per_s", "output_tokens_per_s_per_chip", "output_tokens_per_s_per_chip_ci95_low",
    "output_tokens_per_s_per_chip_ci95_high", "interactivity_tokens_per_s_per_user",
    "ttft_mean_s", "ttft_p50_s", "ttft_p90_s", "ttft_p95_s", "ttft_p99_s", "ttft_min_s", "ttft_max_s",
    "tpot_mean_s", "tpot_p50_s", "tpot_p90_s", "tpot_p95_s", "tpot_p99_s", "tpot_min_s", "tpot_max_s",
    "e2e_mean_s", "e2e_p50_s", "e2e_p99_s", "prefill_mfu", "decode_mbu",
    "input_tokens_per_s", "requests_per_s", "goodput_requests_per_s", "failure_rate",
    # A server's share of input tokens served from its prefix cache (scenarios/serve/cost.py) and
    # its engine's peak KV-cache usage (serving/engine_metrics.py).
    "cached_input_share", "engine_kv_cache_usage_peak",
]
PRICED_COLUMNS = (IDENTITY_COLUMNS + PRICE_COLUMNS + PERFORMANCE_COLUMNS + COST_COLUMNS
                  + TRAIN_PERFORMANCE_COLUMNS + TRAIN_COST_COLUMNS + IMAGE_PERFORMANCE_COLUMNS + IMAGE_COST_COLUMNS
                  + ENERGY_COLUMNS)
UNPRICED_COLUMNS = ["file", "workload", "scale", "status", "backend", "device", "accelerator", "chips",
                    "priced_accelerator", "reason", "scenario_kind", "server_name", "server_version"]


def _ensure(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    missing = {col: None for col in columns if col not in df}
    return with_columns(df, missing) if missing else df


def with_columns(df: pd.DataFrame, new: dict) -> pd.DataFrame:
    """`df` with the `new` columns (replacing same-named ones) added at once: a frame grown column
    by column is fragmented (pandas warns "highly fragmented", and later code slows)."""
    return pd.concat([df.drop(columns=[c for c in new if c in df]), pd.DataFrame(new, index=df.index)], axis=1)


LAYOUT_COLUMNS = ["tensor_parallel", "expert_parallel", "world_size"]


def _with_layout(df: pd.DataFrame) -> pd.DataFrame:
    """The parallel layout as ints, 1 (one chip, no sharding) where a result predates it."""
    for col in LAYOUT_COLUMNS:
        values = pd.to_numeric(df[col], errors="coerce") if col in df else pd.Series(1, index=df.index)
        df[col] = values.fillna(1).astype(int)
    return df


def _kinds(df: pd.DataFrame) -> pd.Series:
    """Each row's scenario kind: results that predate it are of the default kind (workload_spec.point.DEFAULT_KIND)."""
    kinds = df["scenario_kind"] if "scenario_kind" in df else pd.Series(None, index=df.index, dtype=object)
    return kinds.where(kinds.notna() & kinds.astype(str).ne(""), DEFAULT_KIND)


def _with_kind(df: pd.DataFrame) -> pd.DataFrame:
    """`scenario_kind` on every row: results that predate it are of the default kind (workload_spec.point.DEFAULT_KIND)."""
    df["scenario_kind"] = _kinds(df)
    return df


# What a cost basis writes (module docstring): chip-seconds per unit with CIs, and the split.
CHIP_SECONDS_COLUMNS = [c for c in COST_COLUMNS + TRAIN_COST_COLUMNS if "_chip_s_per_token" in c]
IMAGE_CHIP_SECONDS_COLUMNS = [c for c in IMAGE_COST_COLUMNS if "_chip_s_per_image" in c]
SPLIT_LABEL_COLUMNS = ["split_method", "split_note"]
BASIS_COLUMNS = CHIP_SECONDS_COLUMNS + IMAGE_CHIP_SECONDS_COLUMNS + SPLIT_LABEL_COLUMNS


def chip_seconds(df: pd.DataFrame) -> pd.DataFrame:
    """`BASIS_COLUMNS` of every row of `df` (one row per result, `chips` set), on its index: each
    kind's rows charged by its scenario's cost basis (module docstring), all rows of a kind at once;
    NaN, and an empty split, where a kind has no such figure."""
    # A kind this version does not know is charged by the scenario that describes it.
    kinds = _kinds(df).map(lambda kind: registry.describing(kind).kind)
    parts = [registry.cost_basis_of(kind)(rows) for kind, rows in df.groupby(kinds, sort=False)]
    out = pd.concat(parts) if parts else pd.DataFrame(index=df.index)
    out = out.reindex(index=df.index, columns=list(dict.fromkeys(BASIS_COLUMNS + list(out.columns))))
    out[SPLIT_LABEL_COLUMNS] = out[SPLIT_LABEL_COLUMNS].astype(object).fillna("")
    return out


def is_training(df: pd.DataFrame) -> pd.Series:
    """Rows that carry training figures (a training throughput or time per training token)."""
    return numeric_column(df, "train_s_per_token").notna() | numeric_column(df, "train_tokens_per_s").notna()


def is_imaging(df: pd.DataFrame) -> pd.Series:
    """Rows that carry per-image figures (images/s or chip-seconds per image)."""
    return numeric_column(df, "images_per_s").notna() | numeric_column(df, "image_chip_s_per_image").notna()


def add_train_costs(df: pd.DataFrame) -> pd.DataFrame:
    """Training throughput per chip for rows with training figures (module docstring); NaN on every
    other row. Their $ per million training tokens is priced with every other figure (add_costs)."""
    chips = numeric_column(df, "chips")
    tput = numeric_column(df, "train_tokens_per_s")
    new = {"train_tokens_per_s": tput, "train_tokens_per_s_per_chip": tput / chips}
    for bound in ("_ci95_low", "_ci95_high"):
        new[f"train_tokens_per_s_per_chip{bound}"] = numeric_column(df, f"train_tokens_per_s{bound}") / chips
    new.update({col: numeric_column(df, col) for col in TRAIN_PERFORMANCE_COLUMNS if col not in df and col not in new})
    return with_columns(df, new)


def add_costs(priced: pd.DataFrame) -> pd.DataFrame:
    """Per-chip performance and every $/Mtok column (with CIs) for rows of results joined to prices,
    which carry their chip-seconds already (`chip_seconds`, in price_results)."""
    df = priced
    chips = numeric_column(df, "chips")
    per_chip_s = usd_per_chip_second(df["usd_per_chip_hour"].astype(float), 1)

    # Every chip-seconds-per-token figure priced: X_chip_s_per_token -> X_usd_per_mtok.
    new = {column.replace("_chip_s_per_token", "_usd_per_mtok"):
           usd_per_mtok_from_chip_seconds(numeric_column(df, column), per_chip_s) for column in CHIP_SECONDS_COLUMNS}

    tput = numeric_column(df, "output_tokens_per_s")
    tput_low, tput_high = numeric_column(df, "output_tokens_per_s_ci95_low"), numeric_column(df, "output_tokens_per_s_ci95_high")
    inferencex = new["inferencex_usd_per_mtok"] = inferencex_usd_per_mtok(tput, chips, df["usd_per_chip_hour"])
    low, high = cost_ci_from_throughput_ci(inferencex, tput, tput_low, tput_high)
    new["inferencex_usd_per_mtok_ci95_low"], new["inferencex_usd_per_mtok_ci95_high"] = low, high
    new["tokens_per_usd"] = tokens_per_usd(new["blended_usd_per_mtok"])
    new["output_tokens_per_usd_inferencex"] = tokens_per_usd(inferencex)

    new["output_tokens_per_s"] = tput
    new["output_tokens_per_s_per_chip"] = tput / chips
    new["output_tokens_per_s_per_chip_ci95_low"] = tput_low / chips
    new["output_tokens_per_s_per_chip_ci95_high"] = tput_high / chips
    new["interactivity_tokens_per_s_per_user"] = interactivity_tokens_per_s(df)
    new.update({col: numeric_column(df, col) for col in PERFORMANCE_COLUMNS if col not in df and col not in new})
    return add_image_costs(add_train_costs(with_columns(df, new)), per_chip_s)


def usd_per_kimage_from_chip_seconds(chip_s_per_image, usd_per_chip_s):
    """USD per 1,000 images at `chip_s_per_image` chip-seconds each."""
    return np.multiply(chip_s_per_image, usd_per_chip_s) * IMAGES_PER_KIMAGE


def add_image_costs(df: pd.DataFrame, usd_per_chip_s) -> pd.DataFrame:
    """Every chip-seconds-per-image figure priced (X_chip_s_per_image -> X_usd_per_kimage) and
    images/s per chip, for rows with per-image figures; NaN on every other row (module docstring)."""
    new = {column.replace("_chip_s_per_image", "_usd_per_kimage"):
           usd_per_kimage_from_chip_seconds(numeric_column(df, column), usd_per_chip_s)
           for column in df.columns if "_chip_s_per_image" in column}
    chips = numeric_column(df, "chips")
    new["images_per_s"] = numeric_column(df, "images_per_s")
    new["images_per_s_per_chip"] = new["images_per_s"] / chips
    for bound in ("_ci95_low", "_ci95_high"):
        new[f"images_per_s_per_chip{bound}"] = numeric_column(df, f"images_per_s{bound}") / chips
    new.update({col: numeric_column(df, col) for col in IMAGE_PERFORMANCE_COLUMNS + IMAGE_COST_COLUMNS
                if col not in df and col not in new})
    return with_columns(df, new)


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
                  today: date | None = None, include_flagged: bool = False,
                  grid_gco2_per_kwh: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Join results to prices: (priced, unpriced).

    `priced` has one row per result x matching price row x plan with the columns of
    `PRICED_COLUMNS`. A result matches the price rows of its accelerator (runtime name mapped by
    `hardware.accelerators.normalize_accelerator`); with `what_if_instance` every result is instead priced as if
    its per-chip speed were had on that instance (`what_if` is True on those rows). Price rows are
    those of `choose_prices`: a flagged row (`price_flagged`, with `price_flag_reason`) only where no
    unflagged one prices the accelerator and plan, unless `include_flagged`. Invalid runs are
    priced and keep `valid=False` so reports can mark them; failed runs are never priced and appear
    in `unpriced` with the reason, as do results whose accelerator has no price. Each result's
    chip-seconds come from its kind's cost basis over all the results given of that kind (a server's
    input/output split is fitted over its probe points). `priced.attrs[PRICE_NOTES]`
    says which flagged prices were set aside for the accelerators these results ran on. Rows measured
    with energy get joules and carbon per token (money/energy.py; the grid intensity of their price
    row's region, or `grid_gco2_per_kwh`).
    """
    all_accelerators = set(prices["accelerator"])
    results = _with_kind(_with_layout(_ensure(df.copy(), ["status", "error", "accelerator", "device", "chips",
                                                          "file", "workload", "scale", "backend"])))
    ok_mask = results["status"].eq("ok")
    failed = results[~ok_mask].copy()
    failed["priced_accelerator"] = None
    # A skipped point was never run on purpose (a kernel with no build for the device, a capacity
    # search past its knee): its reason is not a failure's.
    failed["reason"] = (failed["status"].map(lambda s: "not run: " if s == "skipped" else "run failed: ")
                        + failed["error"].fillna("no error recorded").astype(str))

    ok = results[ok_mask].copy()
    # A point whose chips are unknown (a server's that could not be read) is never priced as some
    # number of chips: it is unpriced, with why (docs/chips-prices-pairs.md#chips-of-a-server).
    no_chips = ok[pd.to_numeric(ok["chips"], errors="coerce").isna()].copy()
    no_chips["priced_accelerator"] = None
    no_chips["reason"] = ("the chips it ran on are unknown (the result's warnings say why); declare "
                          "server.hardware (accelerator, chips) to price it")
    ok = ok.drop(index=no_chips.index)
    # Each result's chip-seconds, from its kind's cost basis over all the results of that kind.
    basis = chip_seconds(ok)
    ok = ok.drop(columns=[c for c in basis if c in ok]).join(basis)
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
    priced = add_energy(add_costs(_ensure(priced, IDENTITY_COLUMNS)), user_gco2_per_kwh=grid_gco2_per_kwh)
    priced = priced[PRICED_COLUMNS].reset_index(drop=True)
    priced.attrs[PRICE_NOTES] = price_notes
    return priced, unpriced
