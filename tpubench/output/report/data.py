"""What every report format shows, computed once: priced rows, the per-platform summary, price
provenance, warnings. Renderers only format this; they never recompute a number."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from tpubench.money import cost, pricing, tco
from tpubench.money.priced_rows import PricedRows
from tpubench.output.answer.assemble import Answer, assemble
from tpubench.output.answer.options import estimate_options, measured_columns, measured_options
from tpubench.output.answer.published import candidates, published_options
from tpubench.output.answer.service_level import Slo, slo_of
from tpubench.output.collection import paused_collection
from tpubench.output.python_strings import python_strings
from tpubench.output.report import headline
from tpubench.output.report.format import flagged_price_notes
from tpubench.output.report.kernel_speedups import speedups
from tpubench.output.report.published import DEFAULT_TOLERANCE, published_beside
from tpubench.records.usable import usable_mask
from tpubench.scenarios import registry
from tpubench.version import __version__

PLATFORM_KEYS = ["priced_accelerator", "cloud", "region", "instance_type"]
# The software a point's tokens came from: an offline run, or a serving stack (a platform may have
# both, and a budget owner compares them).
STACK_KEYS = ["scenario_kind", "server_name", "server_version"]
# A quantised model is an option of its own beside the unquantised one (its verdict says when it
# is compared across precisions).
PRECISION_KEYS = ["quantization"]
GROUP_KEYS = ["workload", "scale"] + PLATFORM_KEYS + STACK_KEYS + PRECISION_KEYS + ["plan"]


@dataclass
class ReportData:
    results: pd.DataFrame            # every loaded result, one row each
    # result x price row x plan, as three tables (money/priced_rows.py); `priced` is their frame
    # (cost.PRICED_COLUMNS), built only for a consumer that reads every priced row (the CSV report).
    priced_rows: PricedRows
    unpriced: pd.DataFrame           # results that could not be priced, with the reason
    summary: pd.DataFrame            # cheapest point per workload x platform x plan
    price_sources: pd.DataFrame      # source, as_of, age of the prices the report used
    plans: list[str]
    primary_plan: str | None         # the plan figures use
    warnings: list[str] = field(default_factory=list)
    # Per unit of output (its key, registry.units()): the cheapest point per workload x platform x
    # plan by the unit's headline cost, over the rows of that unit only (`summarise`): units are
    # never mixed. `summary` is the first unit's.
    summaries: dict = field(default_factory=dict)
    what_if_instance: str | None = None
    generated_at: str = ""
    tpubench_version: str = __version__
    # Published results beside yours (report/published.py): one row per measured point and matching
    # published front; `published_rows` counts the published rows, shipped and imported (0: no section).
    published: pd.DataFrame = field(default_factory=pd.DataFrame)
    published_rows: int = 0
    # Every published row (report/published_list.py): shipped with tpubench and imported, each with
    # its publisher, date and reference; listed in their own section, never priced.
    published_list: pd.DataFrame = field(default_factory=pd.DataFrame)
    # TCO tiers (money/tco.tier_usd_per_mtok) with `--tco`: each platform's cheapest on-demand point
    # at each tier's rate beside the list price; None without a tier file (no section).
    tco: pd.DataFrame | None = None
    # MoE kernel A/B (report/kernel_speedups.py): one row per arm of each point measured with two
    # arms or more, its decode speed-up over the baseline it names; empty: no section.
    kernel_speedups: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The report's first section (report/headline.py): the summaries' 'cheapest' row per workload and
    # plan, per unit; empty: nothing priced.
    headline: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The answer (output/answer): per workload, measured, estimated and published options
    # priced side by side, and a verdict; what "At a glance" opens with.
    answer: Answer = field(default_factory=Answer)

    @property
    def priced(self) -> pd.DataFrame:
        return self.priced_rows.frame()

    def unit_positions(self, unit) -> np.ndarray:
        """The positions of the priced rows of `unit` (an OutputUnit), for `priced_rows.take`."""
        return _positions_of(self.priced_rows, unit)

    def summary_of(self, unit) -> pd.DataFrame:
        """The summary of `unit` (an OutputUnit), empty when none of its rows was priced."""
        return self.summaries.get(unit.key, pd.DataFrame())

    @property
    def counts(self) -> dict[str, int]:
        r = self.results
        status = r["status"] if "status" in r else pd.Series(dtype=object)
        fine = usable_mask(r)
        noisy = r["noisy"].fillna(False).astype(bool) if "noisy" in r else pd.Series(False, index=r.index)
        return {"results": len(r), "ok": int((status == "ok").sum()), "failed": int((status == "failed").sum()),
                "invalid": int(((status == "ok") & ~fine).sum()), "noisy": int((fine & noisy).sum()),
                "priced": self.priced_rows.results_priced(),
                "unpriced": len(self.unpriced)}


def generate_decode_notes(results: pd.DataFrame) -> list[str]:
    """Per device, the results whose decode ran an experts implementation transformers' generate()
    would have switched there (models/torch_models.generate_decode_note wrote it on the result)."""
    if results.empty or "warnings" not in results:
        return []
    hit = results[results["warnings"].fillna("").astype(str).str.contains("generate() would switch", regex=False)]
    return [f"{n} result(s) on {device}: decode used experts implementation grouped_mm; transformers' generate() "
            f"switches it to batched_mm for decode there, so these decode speeds are not what generate() users get"
            for device, n in hit.groupby("device").size().items()]


def older_runs_note(left_out: int) -> str:
    """The line reports and the budget show when load_results(keep="latest") left runs out."""
    return (f"{left_out} older result(s) of points measured again were left out (the latest per point "
            "and environment is kept; --all-runs keeps them)")


def summarise(priced: PricedRows | pd.DataFrame, unit=None) -> pd.DataFrame:
    """The cheapest operating point (lowest headline cost of `unit`, an OutputUnit, the first
    registered one by default; valid runs first) per workload, platform, stack (offline, or each
    serving stack) and plan, with a verdict against the cheapest of the same plan. Only rows of
    `unit` take part (cost.unit_rows: by their scenario kind). Ranked on a number per group and the
    few columns it ranks on; the winners are taken whole."""
    rows = priced if isinstance(priced, PricedRows) else PricedRows.of_frame(priced)
    unit = unit or registry.units()[0]
    column = unit.headline
    in_unit = _positions_of(rows, unit)
    if not len(in_unit):
        return rows.take(in_unit).assign(vs_cheapest=pd.Series(dtype=object))
    ranked = rows.select(["valid", column], in_unit)
    group = rows.group_of(GROUP_KEYS)[in_unit]
    best = rows.take(in_unit[_first_positions(pd.DataFrame({"group": group}), ["group"],
                                              _invalid=~usable_mask(ranked).to_numpy(),
                                              **{column: ranked[column].to_numpy()})])
    if "quantization" not in best:   # rows made before the axis (or by hand): all unquantised
        best = best.assign(quantization="none")
    best = best.sort_values(["workload", "scale", "plan", column], kind="stable")
    verdicts = []
    for _, group_rows in best.groupby(["workload", "scale", "plan"], sort=False, dropna=False):
        valid = group_rows[usable_mask(group_rows)]
        ref = (valid if len(valid) else group_rows).iloc[0]
        ref_half = cost.half_width(ref[f"{column}_ci95_low"], ref[f"{column}_ci95_high"])
        for idx, row in group_rows.iterrows():
            if idx == ref.name:
                verdicts.append((idx, "cheapest"))
                continue
            half = cost.half_width(row[f"{column}_ci95_low"], row[f"{column}_ci95_high"])
            said = cost.compare_costs(row[column], _finite(half), ref[column], _finite(ref_half))
            verdicts.append((idx, said + (" (crosses precisions)" if _precision(row) != _precision(ref) else "")))
    best["vs_cheapest"] = pd.Series(dict(verdicts))
    return best.reset_index(drop=True)


def _precision(row) -> tuple:
    """A row's dtype and quantisation, a missing quantisation (a published row, an old result) as none."""
    q = row.get("quantization")
    return str(row.get("dtype")), q if isinstance(q, str) and q else "none"


def _positions_of(rows: PricedRows, unit) -> np.ndarray:
    """The positions of the pairs of `unit` (cost.unit_rows, by their result's kind): the unit
    worked out once a result, not once each of its 66,000 priced rows (10,000 results)."""
    kinds = rows.measured if "scenario_kind" in rows.measured else rows.select(["scenario_kind"])
    in_unit = cost.unit_rows(kinds, unit).to_numpy(dtype=bool)
    return np.flatnonzero(rows.measured_values(in_unit) if kinds is rows.measured else in_unit)


def _first_positions(frame: pd.DataFrame, keys: list[str], **ranks) -> np.ndarray:
    """The positions in `frame` of its first row per distinct `keys` once sorted (stable) by the
    `ranks` arrays in order, in that order: the rows
    `frame.assign(**ranks).sort_values(list(ranks), kind="stable").drop_duplicates(keys)` keeps.
    Ranked on those few columns, then the winners taken whole: sorting every column of 66,000
    priced rows (10,000 results) to keep a few was most of a summary's time."""
    ranked = frame[keys].assign(**{f"_rank{i}": v for i, v in enumerate(ranks.values())}, _at=np.arange(len(frame)))
    ranked = ranked.sort_values([f"_rank{i}" for i in range(len(ranks))], kind="stable")
    return ranked["_at"].to_numpy()[~ranked.duplicated(keys, keep="first").to_numpy()]


def _finite(x) -> float:
    x = float(x)
    return x if np.isfinite(x) else 0.0


def price_provenance(prices: pd.DataFrame, priced: pd.DataFrame, today: date,
                     max_age_days: int = pricing.STALE_AFTER_DAYS) -> pd.DataFrame:
    """Distinct (source, as_of) of the prices used (all loaded prices when nothing was priced)."""
    if len(priced):
        used = priced[["price_source", "price_as_of", "cloud", "region", "instance_type"]].rename(
            columns={"price_source": "source", "price_as_of": "as_of"})
    else:
        used = prices[["source", "as_of", "cloud", "region", "instance_type"]]
    table = (used.drop_duplicates().groupby(["source", "as_of"], as_index=False)
             .agg(instance_rows=("instance_type", "size")))
    table["age_days"] = [pricing.price_age_days(d, today) for d in table["as_of"]]
    table["stale"] = table["age_days"] > max_age_days
    return table.sort_values(["as_of", "source"]).reset_index(drop=True)


@paused_collection
@python_strings
def build_report(source, *, prices: pd.DataFrame | None = None, price_files: Sequence[str | Path] = (),
                 plans: Sequence[str] | None = None, discount_pct: float | None = None, cloud=None,
                 region=None, instance=None, what_if_instance: str | None = None,
                 today: date | None = None, warn: Callable[[str], None] | None = None,
                 keep: str = "latest", include_flagged: bool = False,
                 grid_gco2_per_kwh: float | None = None,
                 published_tolerance: float = DEFAULT_TOLERANCE, include_shipped: bool = True,
                 tco_tiers: pd.DataFrame | None = None, on: Sequence[str] = (),
                 estimator: Callable | None = None, results: pd.DataFrame | None = None) -> ReportData:
    """Load results (paths or a DataFrame from `load_results`), price them and summarise.

    `keep` is load_results': "latest" counts a point measured several times once (its most recent
    result), "all" keeps every run. A DataFrame is used as it was loaded; either way, when older
    runs were left out (df.attrs["older_runs_left_out"]) a warning says how many. Flagged prices
    take part only where no unflagged row prices the accelerator and plan, unless `include_flagged`
    (cost.choose_prices); the warnings say which were set aside and which flagged ones were used.
    `grid_gco2_per_kwh` replaces the regions' grid intensity in the carbon figures. Published
    results imported beside the results are compared with them (within `published_tolerance`,
    a fraction) and never priced (report/published.py); so are the reference rows shipped with
    tpubench (data/published/) unless `include_shipped` is False. `tco_tiers` (money/tco.load_tco) adds each
    platform's on-demand $/Mtok at each TCO tier's rate (`ReportData.tco`). `estimator`
    (estimate.for_reports.estimates_for_report: the commands pass it) makes the answer table's
    estimates and reads its workloads' architectures (report/answer.py); without it the answer holds
    your measured options only. `on` names chips to estimate every workload on, beside those its
    workload file's `compare_on` names. `results` are the results under the paths `source`, already
    loaded (`load_results` with the same `keep`: `tpubench report` reads them while it imports and
    loads the rest); the paths still name the folders of published imports and workload files.
    """
    today = today or pricing.today_utc()
    from tpubench.output.frames import check_keep, load_results

    if isinstance(source, pd.DataFrame) or results is not None:
        check_keep(keep)
        results = source if results is None else results
    else:
        results = load_results(source, warn=warn, keep=keep)
    results, published, published_list = published_beside(source, results, warn, published_tolerance,
                                                           shipped=include_shipped)
    if prices is None:
        prices = pricing.load_prices(price_files, discount_pct=discount_pct, today=today)
    elif discount_pct is not None:
        prices = pricing.apply_discount(prices, discount_pct)
    priced, unpriced = cost.price_rows(results, prices, plans=plans, cloud=cloud, region=region,
                                       instance=instance, what_if_instance=what_if_instance, today=today,
                                       include_flagged=include_flagged, grid_gco2_per_kwh=grid_gco2_per_kwh)
    # What the price rows say is read once a price row used, not once a pair.
    used_prices = priced.used_prices()
    used_plans = pricing.plan_names(used_prices) if len(priced) else list(plans or pricing.plan_names(prices))
    primary = "on_demand" if "on_demand" in used_plans else (used_plans[0] if used_plans else None)
    provenance = price_provenance(prices, used_prices, today)
    used = used_prices.rename(columns={"price_as_of": "as_of"}) if len(priced) else prices
    warnings = pricing.stale_price_warnings(used, today) + priced.notes + flagged_price_notes(used_prices)
    warnings += generate_decode_notes(results)
    left_out = int(results.attrs.get("older_runs_left_out", 0) or 0)
    if left_out:
        warnings.append(older_runs_note(left_out))
    if what_if_instance:
        warnings.insert(0, f"what-if pricing: every result is priced as if its per-chip speed were had on "
                           f"{what_if_instance}, whatever it was measured on")
    summaries = {unit.key: summarise(priced, unit) for unit in registry.units()}
    data = ReportData(results=results, priced_rows=priced, unpriced=unpriced, summary=next(iter(summaries.values())),
                      price_sources=provenance, plans=used_plans, primary_plan=primary,
                      warnings=warnings, summaries=summaries, what_if_instance=what_if_instance,
                      generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      published=published, published_rows=len(published_list), published_list=published_list,
                      kernel_speedups=speedups(results))
    if tco_tiers is not None:      # money/tco.load_tco's rows: $/Mtok per tier beside list on-demand
        data.tco, tco_notes = tco.tier_usd_per_mtok(data.summary, tco_tiers)
        warnings += tco_notes
    data.headline = headline.pick(data)
    data.answer = _answer(data, source, prices, plans, on, estimator, warn, today)
    if data.counts["invalid"]:
        warnings.append(f"{data.counts['invalid']} run(s) are invalid (marked); their costs are not trustworthy and "
                        "are never ranked")
    if data.counts["noisy"]:
        warnings.append(f"{data.counts['noisy']} run(s) are noisy (marked with their CV): measured on a busy host or "
                        "with varying timings; priced and ranked with their wider 95% CIs")
    return data


# Published rows per workload: the nearest chips' rows of other models (the workload's own model on every chip).
MAX_PUBLISHED = 6
# A workload whose file was not found (so neither its slo nor its model is known): its points are
# compared as they are, each sweep at its cheapest point.
NO_SERVICE_LEVEL = Slo(ttft_s=None, tpot_s=None, source="no workload file found: compared without a service level")


def _answer(data: ReportData, source, prices: pd.DataFrame, plans, on: Sequence[str], estimator, warn,
            today) -> Answer:
    """The answer (output/answer): your measured options of the first unit (inference tokens), and
    with an `estimator` the estimates for the chips each workload is decided between and the
    published rows of its model and the nearest others, each at the workload's service level."""
    unit = registry.units()[0]
    made = (estimator(source, data.results, on=on, prices=prices, published=data.published_list, plans=plans,
                      warn=warn) if estimator else None)
    estimates, contexts = (made.rows, made.contexts) if made else (pd.DataFrame(), {})
    cal = made.calibration if made else None
    plans = list(plans or pricing.plan_names(prices))
    slos = {workload: slo_of(wl, path) for workload, (path, wl) in contexts.items()}
    # Only the columns the options read, not every priced column copied per group.
    rows = data.priced_rows
    read = [c for c in measured_columns(unit.headline, unit.throughput) if c in rows.columns]
    options, sweeps = measured_options(rows.select(read, _positions_of(rows, unit)), unit.headline,
                                       unit.throughput, slos, NO_SERVICE_LEVEL)
    estimated = estimate_options(estimates, plans, slos, NO_SERVICE_LEVEL)
    options, sweeps = options + estimated[0], sweeps + estimated[1]
    nearby = candidates(data.published_list, warn) if contexts else None
    for workload, (_, wl) in contexts.items():
        found = published_options(nearby, wl, workload, prices, plans, MAX_PUBLISHED, slos[workload], tails=cal)
        options, sweeps = options + found[0], sweeps + found[1]
    results = data.results
    newest = (results.groupby("workload")["started_at"].max().astype(str).to_dict()
              if len(results) and {"workload", "started_at"} <= set(results.columns) else {})
    volumes = {workload: wl.volume for workload, (_, wl) in contexts.items() if wl.volume is not None}
    return assemble(options, sweeps, {w: path for w, (path, _) in contexts.items()}, slos,
                    made.notes if made else [], newest=newest, today=today,
                    pairs=cal.pairs if cal is not None else None, volumes=volumes)


def result_rows(data: ReportData, unit=None) -> pd.DataFrame:
    """One row per priced result of `unit` (an OutputUnit, the first registered one by default):
    its cheapest price in the primary plan, or in any plan when the primary one has no price for it
    (Trainium2 has spot prices only, for instance)."""
    unit = unit or registry.units()[0]
    rows = data.priced_rows
    in_unit = _positions_of(rows, unit)
    if not len(in_unit):
        return rows.take(in_unit)
    column = unit.headline
    ranked = rows.select(["plan", column], in_unit)
    best = in_unit[_first_positions(pd.DataFrame({"file": rows.group_of(["file"])[in_unit]}), ["file"],
                                    _other_plan=(ranked["plan"] != data.primary_plan).to_numpy(),
                                    **{column: ranked[column].to_numpy()})]
    # Sorted on the sort keys alone (the same stable order), then the rows taken whole once.
    order_by = (["workload", "scale", "priced_accelerator", "chips"] + STACK_KEYS
                + ["batch_size", "concurrency", "request_rate", "input_length", "output_length"])
    order = rows.select(order_by, best).sort_values(order_by, kind="stable").index
    return rows.take(best[order.to_numpy()])
