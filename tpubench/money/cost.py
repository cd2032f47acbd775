"""Cost per token: pure functions over measured times, throughputs and prices.

Every result row is charged chip-seconds per unit of its output, each with its 95% CI, by the cost
basis of its scenario kind (`chip_seconds`): the function its package names
(`Scenario.cost_basis`, e.g. tpubench/scenarios/serve/cost.py, whose docstring gives the formula),
called once with all the rows of that kind, so that a basis may fit over several points. Rows
without a kind are the default kind's (workload_spec.point.DEFAULT_KIND), and so is a kind this
version does not know (`scenarios.registry.describing`).

What a unit of output is priced in is declared by the unit (scenarios/output_units.py; tokens in
scenarios/token_unit.py, training tokens in scenarios/train/unit.py, images in
scenarios/diffuse/unit.py), and this module loops over the registered units (`registry.units()`)
without naming one. For every unit and each of its figures X the basis writes
`X{chip_s_suffix}` (with `_ci95_low` / `_ci95_high`, NaN where a row has none), and at p USD per
chip-second it is priced as

    X{priced_suffix} = c_X * p * price_scale      (CI from c_X's bounds)

e.g. `blended_usd_per_mtok` = `blended_chip_s_per_token` * p * 1e6 ($/Mtok), `train_usd_per_mtok`
per million training tokens, `image_usd_per_kimage` = `image_chip_s_per_image` * p * 1000 ($ per
1,000 images). The unit's throughput per chip is its `throughput` / chips (CI from that column's
bounds), and a unit may derive more (`extra_costs`: the token unit's InferenceX-style figures,
money/token_costs.py). A row's unit is its kind's (`unit_rows`): a training row's token columns
and an inference row's `train_*` columns are NaN, so neither is ever read as the other
(docs/definitions.md#cost, #training, #diffusion).

For tokens: input, output and blended chip-seconds per token, with `split_method` / `split_note`
saying how input and output were told apart. Those per-token figures are ours (an offline
batch's split by prefill and decode time, a server's by a fit over probe points). Published
tables such as InferenceX charge the whole hour to output tokens: $/Mtok = price per chip-hour *
1e6 / (3600 * output tokens/s per chip), where output tokens/s per chip = `output_tokens_per_s` /
chips (every token kind writes that column: the batch's decode-inclusive rate, or the server's
rate over its window). Both are reported, labelled. Interactivity (tokens/s per user) is the
row's `interactivity_tokens_per_s` where it has one, else 1 / median TPOT.

A multi-chip point (tensor or expert parallel, docs/multi-chip.md) is priced as all of its chips: `chips`
is the world size (on a CPU, the vCPUs of all ranks; for a server, the chips it runs on), so its
throughput per chip is the measured throughput / chips and, at equal measured throughput, its
$/Mtok is `chips` times a single chip's. The layout (`tensor_parallel`, `expert_parallel`,
`world_size`; 1 for results that predate it) travels with every priced row, as do the scenario
kind (`scenario_kind`, the default kind for results that predate it) and the serving stack and load
(`server_name`, `server_version`, `concurrency`, `request_rate`; empty for offline runs).

Uncertainty: a cost proportional to a time takes that time's 95% CI; a cost proportional to
1/throughput takes its bounds from the opposite throughput bounds (the low cost bound comes from
the high throughput bound; measure/stats.py). The functions accept floats or numpy/pandas arrays alike.
"""

from __future__ import annotations

import math
from datetime import date

import numpy as np
import pandas as pd

from tpubench.errors import UserError
from tpubench.measure.per_token import SECONDS_PER_HOUR
from tpubench.measure.stats import ratio_with_uncertainty, verdict
from tpubench.money import accelerator_map, pricing, token_costs
from tpubench.money.energy import energy_columns, energy_figures
from tpubench.money.priced_rows import PRICE_NOTES, PricedRows
from tpubench.records.columns import numeric_column
from tpubench.scenarios import registry
from tpubench.scenarios.output_units import CI_BOUNDS
from tpubench.workload_spec.point import DEFAULT_KIND


def usd_per_chip_second(usd_per_instance_hour, chips_per_instance):
    """Instance $/h spread over its chips and the seconds of an hour."""
    return usd_per_instance_hour / chips_per_instance / SECONDS_PER_HOUR




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
    "file", "workload", "scale", "family", "dtype", "quantization", "weight_dtype", "activation_dtype",
    "kv_cache_dtype", "experts_implementation", "execution_mode",
    "batch_size", "input_length", "output_length", "backend", "device", "accelerator", "chips",
    "tensor_parallel", "expert_parallel", "world_size", "valid", "invalid_reasons", "noisy", "headline_cv", "host",
    "torch_version",
    "transformers_version", "jax_version",
    "tpubench_version", "started_at", "iterations",
    "scenario_kind", "server_name", "server_version", "concurrency", "request_rate",
]
PRICE_COLUMNS = [
    "priced_accelerator", "cloud", "region", "instance_type", "chips_per_instance", "plan",
    "usd_per_instance_hour", "usd_per_chip_hour", "price_source", "price_as_of", "price_age_days",
    "price_flagged", "price_flag_reason", "what_if",
]


def unit_columns() -> list[str]:
    """Each registered unit's performance columns, then its cost columns (scenarios.output_units),
    in registry order: what a priced row carries between its price and its energy."""
    return [c for unit in registry.units() for c in (*unit.performance, *unit.cost_columns())]


def priced_columns() -> list[str]:
    """The columns of a priced row (`price_results`), built from the registered units."""
    return list(dict.fromkeys(IDENTITY_COLUMNS + PRICE_COLUMNS + unit_columns() + energy_columns()))


# The shipped scenarios' priced columns (a scenario registered later, e.g. a test's, is priced
# through `priced_columns()`).
PRICED_COLUMNS = priced_columns()
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


def _label_columns() -> list[str]:
    """The labels the cost bases write beside their figures (e.g. how input and output were split)."""
    return list(dict.fromkeys(c for u in registry.units() for c in u.basis_labels))


def basis_columns() -> list[str]:
    """What the cost bases write (module docstring): every unit's chip-seconds with CIs, then their labels."""
    return list(dict.fromkeys([c for u in registry.units() for c in u.chip_seconds_columns()] + _label_columns()))


def chip_seconds(df: pd.DataFrame) -> pd.DataFrame:
    """`basis_columns()` of every row of `df` (one row per result, `chips` set), on its index: each
    kind's rows charged by its scenario's cost basis (module docstring), all rows of a kind at once;
    NaN, and an empty split, where a kind has no such figure."""
    # A kind this version does not know is charged by the scenario that describes it.
    codes, known = pd.factorize(_kinds(df))
    kinds = pd.Series(np.array([registry.describing(kind).kind for kind in known], dtype=object)[codes], index=df.index)
    parts = [registry.cost_basis_of(kind)(rows) for kind, rows in df.groupby(kinds, sort=False)]
    out = pd.concat(parts) if parts else pd.DataFrame(index=df.index)
    out = out.reindex(index=df.index, columns=list(dict.fromkeys(basis_columns() + list(out.columns))))
    labels = _label_columns()
    out[labels] = out[labels].astype(object).fillna("")
    return out


def unit_keys(df: pd.DataFrame) -> pd.Series:
    """Each row's unit of output (its key): its scenario kind's first unit (registry.unit_of; a
    kind this version does not know is the default kind's)."""
    # Looked up once a distinct kind, and set by position (66,000 priced rows have a few kinds).
    codes, kinds = pd.factorize(_kinds(df))
    keys = np.array([registry.unit_of(kind).key for kind in kinds], dtype=object)
    return pd.Series(keys[codes], index=df.index, dtype=object)


def unit_rows(df: pd.DataFrame, unit) -> pd.Series:
    """Rows ranked, shown and budgeted in `unit` (an OutputUnit)."""
    return unit_keys(df).eq(unit.key) if len(df) else pd.Series(False, index=df.index, dtype=bool)


def priced_from_chip_seconds(chip_s, usd_per_chip_s, scale: float):
    """USD per `scale` units at `chip_s` chip-seconds each ($/Mtok: scale 1e6; $/1k images: 1e3)."""
    return np.multiply(chip_s, usd_per_chip_s) * scale


# What money derives for a unit once its rows are priced, beyond its priced chip-seconds, by unit
# key (the unit's `extra_cost_columns` name the columns): the token's InferenceX-style $/Mtok and
# tokens per dollar. A unit without an entry gets nothing more.
EXTRA_COSTS = {"token": token_costs.extra_costs}


def cost_figures(df: pd.DataFrame) -> dict:
    """For rows of results joined to prices, which carry their chip-seconds already (`chip_seconds`,
    in price_results), every registered unit's figures (name -> values on df's index): each
    `X{chip_s_suffix}` priced as `X{priced_suffix}` (with CIs, module docstring), its throughput
    per chip (CI from the throughput's bounds), what EXTRA_COSTS derives for it, and its
    performance columns (NaN where a row has none)."""
    chips = numeric_column(df, "chips")
    per_chip_s = usd_per_chip_second(df["usd_per_chip_hour"].astype(float), 1)
    new: dict = {}
    for unit in registry.units():
        mine = {unit.priced_column(column): priced_from_chip_seconds(numeric_column(df, column), per_chip_s,
                                                                     unit.price_scale)
                for column in unit.chip_seconds_columns()}
        mine[unit.throughput] = numeric_column(df, unit.throughput)
        for bound, column in zip(CI_BOUNDS, unit.per_chip_columns()):
            mine[column] = numeric_column(df, f"{unit.throughput}{bound}") / chips
        derive = EXTRA_COSTS.get(unit.key)
        if derive is not None:
            mine.update(derive(df, mine))
        new.update(mine)
        new.update({col: numeric_column(df, col) for col in (*unit.performance, *unit.cost_columns())
                    if col not in df and col not in new})
    return new



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


def _carried(ok: pd.DataFrame, basis: pd.DataFrame) -> pd.DataFrame:
    """What of the priced results their table keeps (PricedRows.measured): the columns a priced row
    shows (priced_columns), their chip-seconds, and every column that is not text (what
    cost_figures, energy_figures and the units' hooks read, through numeric_column, which reads a text
    column as NaN unless it holds numbers, and results' metrics are numbers)."""
    kept = set(priced_columns()) | set(basis.columns) | {"priced_accelerator"}
    return ok[[c for c in ok.columns if c in kept or not isinstance(ok[c].dtype, pd.StringDtype)]]


def price_results(df: pd.DataFrame, prices: pd.DataFrame, plans=None, cloud=None, region=None,
                  instance=None, what_if_instance: str | None = None,
                  today: date | None = None, include_flagged: bool = False,
                  grid_gco2_per_kwh: float | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Join results to prices: (priced, unpriced), `priced` as one frame (`price_rows` keeps its
    three tables apart; this is its `frame()`, with `priced.attrs[PRICE_NOTES]`).

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
    rows, unpriced = price_rows(df, prices, plans=plans, cloud=cloud, region=region, instance=instance,
                                what_if_instance=what_if_instance, today=today, include_flagged=include_flagged,
                                grid_gco2_per_kwh=grid_gco2_per_kwh)
    priced = rows.frame()
    priced.attrs[PRICE_NOTES] = rows.notes
    return priced, unpriced


def price_rows(df: pd.DataFrame, prices: pd.DataFrame, plans=None, cloud=None, region=None,
               instance=None, what_if_instance: str | None = None,
               today: date | None = None, include_flagged: bool = False,
               grid_gco2_per_kwh: float | None = None) -> tuple[PricedRows, pd.DataFrame]:
    """price_results' priced rows as three tables (money/priced_rows.py): the priced results, the
    price rows, and per pair the costs; nothing is copied to every pair until a consumer asks."""
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
    price_side = _price_side(chosen, today)
    carried = _carried(ok, basis)
    if what_if_instance:
        measured = carried.drop(columns=["priced_accelerator"]).reset_index(drop=True)
        result_at = np.repeat(np.arange(len(measured)), len(price_side))
        price_at = np.tile(np.arange(len(price_side)), len(measured))
        unmatched = ok.iloc[0:0].copy()
    else:
        measured = carried.reset_index(drop=True)
        result_at, price_at = PricedRows.pairs(measured["priced_accelerator"].to_numpy(dtype=object),
                                               price_side["priced_accelerator"].to_numpy(dtype=object))
        unmatched = ok[~ok["priced_accelerator"].isin(set(price_side["priced_accelerator"]))].copy()
        # The key as the results have it (what a merge on it keeps): the same names, their dtype.
        price_side["priced_accelerator"] = price_side["priced_accelerator"].astype(measured["priced_accelerator"].dtype)
    unpriced = _unpriced(failed, no_chips, unmatched, all_accelerators)

    rows = PricedRows(measured, price_side, result_at, price_at, pd.DataFrame(index=pd.RangeIndex(len(result_at))),
                      notes=price_notes)
    figures = _pair_figures(rows, grid_gco2_per_kwh)
    figures["what_if"] = bool(what_if_instance)
    columns = priced_columns()
    rows.figures = pd.DataFrame({c: figures[c] for c in columns if c in figures}, index=pd.RangeIndex(len(rows)))
    rows.columns = columns
    return rows, unpriced


def _price_side(chosen: pd.DataFrame, today: date | None) -> pd.DataFrame:
    """The chosen price rows as priced rows name their columns, each with its age."""
    price_side = chosen.rename(columns={"accelerator": "priced_accelerator", "source": "price_source",
                                        "as_of": "price_as_of", "flagged": "price_flagged",
                                        "flag_reason": "price_flag_reason"}).drop(columns=["origin"])
    # Each price row's age, worked out on the price rows (a few hundred), not on 66,000 priced ones.
    today = today or pricing.today_utc()
    ages = {d: pricing.price_age_days(d, today) for d in price_side["price_as_of"].unique()}
    return price_side.assign(price_age_days=price_side["price_as_of"].map(ages)).reset_index(drop=True)


def _unpriced(failed: pd.DataFrame, no_chips: pd.DataFrame, unmatched: pd.DataFrame, all_accelerators) -> pd.DataFrame:
    notes_table = pricing.load_unpriced_notes()
    # One reason per chip: the note for every plan where there is one (plan ""), else its first plan's.
    by_chip = notes_table.sort_values("plan", kind="stable") if "plan" in notes_table else notes_table
    notes = {r.accelerator: f"{r.reason} ({r.source})" for r in by_chip.drop_duplicates("accelerator").itertuples()}
    unmatched["reason"] = [
        _unpriced_reason(raw, dev, canon, all_accelerators, notes)
        for raw, dev, canon in zip(unmatched["accelerator"], unmatched["device"], unmatched["priced_accelerator"])
    ]
    unpriced = pd.concat([failed, no_chips, unmatched], ignore_index=True)
    return _ensure(unpriced, UNPRICED_COLUMNS)[UNPRICED_COLUMNS].reset_index(drop=True)


# What the pairs' costs read of their price rows (cost_figures: the price; energy_figures: where).
_PRICE_INPUTS = ["usd_per_chip_hour", "cloud", "region"]


def _pair_figures(rows: PricedRows, grid_gco2_per_kwh: float | None) -> dict:
    """cost_figures and energy_figures of every pair, from a frame of what they read: the results'
    columns that are not text (numeric_column reads a text column as NaN unless it holds numbers,
    and results' metrics are numbers) and the price rows' price and place. The results' other text,
    copied to 66,000 pairs, was most of pricing's time. A column the figures only made because
    that frame lacks it (an empty one a result without it gets) is left to the table that has it."""
    measured = rows.measured
    numeric = [c for c in measured.columns if not isinstance(measured[c].dtype, pd.StringDtype)
               and measured[c].dtype != object]
    inputs = pd.concat([measured[numeric].take(rows.result_at).reset_index(drop=True),
                        rows.prices[[c for c in _PRICE_INPUTS if c in rows.prices]].take(rows.price_at)
                        .reset_index(drop=True)], axis=1)
    figures = {**cost_figures(inputs), **energy_figures(inputs, user_gco2_per_kwh=grid_gco2_per_kwh)}
    return {c: v for c, v in figures.items() if c in inputs or (c not in measured and c not in rows.prices)}
