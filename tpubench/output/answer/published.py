"""The answer's published options: what others published on each chip, at the service level, priced
at list prices (never the publisher's own $ figure).

The rows that can take part mean one system on one node, as the estimate's calibration takes them
(no speculative decoding, no disaggregated serving), a model tpubench knows, and only a
configuration's newest run (estimate.calibration.runs_left_out). A sweep is one publisher's rows of
one model on one chip, chip count, stack, precision and pair of lengths, its points by the load that
ran (a server's batch cap where stated; MLPerf's Server and Interactive runs of one system are two
loads of one sweep, so the SLO picks between them by their latencies): its operating point at the
SLO is output/answer/operating_point's.

- The workload's own model (by its Hugging Face id) where anyone published it: per chip, the
  sweep at the lengths nearest the workload's (|ln input ratio| + |ln output ratio|), the cheapest
  that meets the SLO there, else its nearest miss; ranked when it meets the SLO and has a price.
- Other models are yardsticks, for reference, never ranked: per chip, the model of the same kind
  (dense or mixture-of-experts) nearest in parameters (estimate.models.model_distance), its sweep
  nearest the workload's lengths, its point at the SLO.

Priced as $/Mtok = $ per chip-second / (input + output tokens/s per chip) x 1e6: the row's total
rate, else its output rate x (I + O) / O.

Every row an answer may show passes the physics gate (estimate/gate.py) or is left out, with one
warning naming its file and row: the gate is asked once per report, about the rows that can take
part (a few hundred of the shipped ones), only when the report makes an answer with estimates.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pandas as pd

from tpubench.estimate.calibration import arrival_of, excluded, ran_batch, runs_left_out
from tpubench.estimate.chips import Target
from tpubench.estimate.gate import once, refused
from tpubench.estimate.models import model_distance, published_model, row_precision
from tpubench.estimate.pricing import plan_prices
from tpubench.measure.per_token import usd_per_mtok_from_chip_seconds
from tpubench.money.cost import usd_per_chip_second
from tpubench.money.price_gaps import missing_price
from tpubench.money.pricing import load_unpriced_notes
from tpubench.output.answer.operating_point import OperatingPoint, SweepPoint, better, operating_point
from tpubench.output.answer.options import (
    INTERVAL,
    PUBLISHED,
    operating_fields,
    option_row,
    price_words,
    sweep_rows,
)
from tpubench.output.answer.service_level import Slo, at_percentile
from tpubench.units import number

SWEEP = ["publisher", "_model", "accelerator", "chips", "framework", "_precision", "input_length", "output_length"]


def candidates(published: pd.DataFrame, warn: Callable[[str], None] | None = None) -> pd.DataFrame:
    """The published rows an answer may show (module notes), with `_model` (its id), `_shape` and
    `_precision` (its label): made once per report, whatever its workloads. A row the physics gate
    refuses is warned about through `warn` (once per process) and left out."""
    if published is None or published.empty:
        return pd.DataFrame()
    records = published.to_dict("records")
    keep = np.array([excluded(r) is None and again is None for r, again in zip(records, runs_left_out(records))],
                    dtype=bool)
    # Once per distinct model name (a few dozen among thousands of rows).
    by_name = {name: published_model(name[0]) or published_model(name[1])
               for name in set(zip(published["model"], published["published_model"]))}
    hits = [by_name[name] for name in zip(published["model"], published["published_model"])]
    labels = [(p.label if p else str(r.get("precision") or "")) for p, r in zip(map(row_precision, records), records)]
    frame = published.assign(_model=[h[0] if h else None for h in hits], _shape=[h[1] if h else None for h in hits],
                             _precision=labels)
    frame = frame[keep & frame["_model"].notna().to_numpy()]
    return frame[~refused(frame, once(warn))].reset_index(drop=True) if len(frame) else frame.reset_index(drop=True)


def total_rate(row) -> float:
    """Input + output tokens/s per chip: the row's own figure, else its output rate x (I + O) / O."""
    total = float(row.get("total_tokens_per_s_per_chip") or math.nan)
    if math.isfinite(total) and total > 0:
        return total
    try:
        i, o = float(row["input_length"]), float(row["output_length"])
        return float(row["output_tokens_per_s_per_chip"]) * (i + o) / o
    except (TypeError, ValueError, ZeroDivisionError):
        return math.nan


def _median(row: dict, metric: str) -> float:
    for stat in ("p50", "mean"):
        value = _num(row.get(f"{metric}_{stat}_s"))
        if value > 0:
            return value
    return math.nan


def _num(value) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return math.nan
    return value if math.isfinite(value) else math.nan


def _p99(row: dict, metric: str, tails) -> float:
    """A row's 99th percentile: its own, else its median x the calibration's p99 / median for rows
    that arrive as it did (estimate.predict.Calibration.tail; `tails` None: unknown)."""
    own = _num(row.get(f"{metric}_p99_s"))
    if own > 0 or tails is None:
        return own
    ratio, n = tails.tail(f"{metric}_s", arrival_of(row))
    return _median(row, metric) * ratio if n else math.nan


def sweep_points(rows: list[dict], usd_per_chip_hour: float, slo: Slo, tails=None) -> list[SweepPoint]:
    """A published sweep priced at one price per chip-hour, latencies at the SLO's percentile (a
    99th percentile the row does not give from `tails`: _p99)."""
    per_chip_s = usd_per_chip_second(usd_per_chip_hour, 1)
    out = []
    for i, r in enumerate(rows):
        usd = float(usd_per_mtok_from_chip_seconds(1.0 / total_rate(r), per_chip_s))
        out.append(SweepPoint(
            load=ran_batch(r), ttft_s=at_percentile(_median(r, "ttft"), _p99(r, "ttft", tails), slo.percentile),
            tpot_s=at_percentile(_median(r, "tpot"), _p99(r, "tpot", tails), slo.percentile), usd_per_mtok=usd,
            usd_per_mtok_low=usd, usd_per_mtok_high=usd, tokens_per_s_per_chip=_num(r["output_tokens_per_s_per_chip"]),
            position=i))
    return out


def _sweeps(rows: pd.DataFrame, wl) -> list[list[dict]]:
    """A model's rows on one chip as sweeps, those at the lengths nearest the workload's only."""
    point = wl.points[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        lengths = (np.abs(np.log(rows["input_length"].to_numpy(float) / point.input_len))
                   + np.abs(np.log(rows["output_length"].to_numpy(float) / point.output_len)))
    lengths = np.nan_to_num(lengths, nan=math.inf)
    near = rows[lengths <= lengths.min() + 1e-9]
    return [group.to_dict("records") for _, group in near.groupby(SWEEP, sort=False, dropna=False)]


def _best(sweeps: list[list[dict]], usd_per_chip_hour: float, slo: Slo, tails):
    """(operating point, its sweep's rows, points) of the sweeps: ranked first, then the cheapest."""
    best = None
    for rows in sweeps:
        points = sweep_points(rows, usd_per_chip_hour, slo, tails)
        op = operating_point(points, slo)
        if op is not None and better(op, best[0] if best else None):
            best = (op, rows, points)
    return best


def published_options(candidates: pd.DataFrame, wl, workload: str, prices: pd.DataFrame, plans: list[str],
                      limit: int, slo: Slo, unpriced: pd.DataFrame | None = None,
                      tails=None) -> tuple[list[dict], list[dict]]:
    """(option rows, sweep rows) of the published rows for workload `workload` (module notes): the
    workload's own model per chip, ranked where it meets the SLO; the nearest other model per chip
    (the `limit` nearest chips), for reference. A chip of the workload's own model without a price in
    a plan is listed so (`unpriced`: money.price_gaps), another model's is left out. `tails`
    (estimate.predict.Calibration) gives a 99th percentile a row does not."""
    if candidates is None or candidates.empty or not wl.points:
        return [], []
    unpriced = load_unpriced_notes() if unpriced is None else unpriced
    mine = wl.points[0].shape
    own = published_model(wl.hub_id)
    distance = {model: (-1.0 if own and model == own[0] else model_distance(shape, mine))
                for model, shape in dict(zip(candidates["_model"], candidates["_shape"])).items()}
    frame = candidates.assign(_distance=candidates["_model"].map(distance))
    frame = frame[np.isfinite(frame["_distance"])]
    options, sweeps = [], []
    chips_shown = 0
    for accelerator, rows in sorted(frame.groupby("accelerator", sort=False), key=lambda kv: kv[1]["_distance"].min()):
        nearest = rows[rows["_distance"] == rows["_distance"].min()]
        same_model = bool(nearest["_distance"].iloc[0] < 0)
        if not same_model and chips_shown >= limit:
            continue
        chips_shown += not same_model
        made = _chip_options(nearest, wl, workload, str(accelerator), prices, plans, slo, same_model, unpriced, tails)
        options += made[0]
        sweeps += made[1]
    return options, sweeps


def _chip_options(rows: pd.DataFrame, wl, workload: str, accelerator: str, prices: pd.DataFrame, plans: list[str],
                  slo: Slo, same_model: bool, unpriced, tails) -> tuple[list[dict], list[dict]]:
    chips = int(rows["chips"].iloc[0])
    table = plan_prices(prices, Target(accelerator, accelerator, chips, None), plans)
    priced = {price["plan"]: price for price in table.to_dict("records")}
    options, sweeps = [], []
    for plan in plans if same_model else list(priced):
        price = priced.get(plan)
        if price is None:
            options.append(_unpriced(rows.iloc[0].to_dict(), workload, plan, missing_price(accelerator, plan, unpriced)))
            continue
        op, sweep, points = _best(_sweeps(rows, wl), float(price["usd_per_chip_hour"]), slo, tails)
        row = sweep[op.point.position]
        options.append(_option(row, workload, plan, price, op, same_model))
        sweeps += sweep_rows(workload, plan, options[-1]["option"], PUBLISHED, points, op)
    return options, sweeps


def _name(row: dict) -> str:
    return f"{row['accelerator']} ×{number(row['chips'])} · {row.get('framework') or 'stack not named'}"


def _reference(row: dict) -> str:
    return f"{row['publisher']} ({row['date']}): {row['reference']}"


def _option(row: dict, workload: str, plan: str, price: dict, op: OperatingPoint, same_model: bool) -> dict:
    """One published option at its operating point, priced in one plan."""
    why = ("" if op.ranked else f"does not meet the SLO: {op.miss}") if same_model else \
        f"another model ({row['_model']}): a yardstick, not your workload"
    return option_row(
        workload=workload, plan=plan, source=PUBLISHED, option=_name(row), accelerator=row["accelerator"],
        chips=row["chips"], precision=row["_precision"], interval=INTERVAL[PUBLISHED],
        usd_per_chip_hour=float(price["usd_per_chip_hour"]), chips_per_instance=price["chips_per_instance"],
        price_basis="published throughput x " + price_words(price["cloud"], price["instance_type"], price["region"],
                                                             price["usd_per_chip_hour"], price["as_of"]),
        price_as_of=str(price["as_of"]), region=str(price["region"]), in_verdict=same_model and op.ranked,
        why_not=why, reference=_reference(row), note=_note(row), **operating_fields(op))


def _note(row: dict) -> str:
    """The model and lengths a published option is of ('qwen3-30b-a3b I=1024 O=1024')."""
    return f"{row['_model']} I={number(row['input_length'])} O={number(row['output_length'])}"


def _unpriced(row: dict, workload: str, plan: str, why: str) -> dict:
    return option_row(workload=workload, plan=plan, source=PUBLISHED, option=_name(row), accelerator=row["accelerator"],
                      chips=row["chips"], precision=row["_precision"], interval=INTERVAL[PUBLISHED], why_not=why,
                      reference=_reference(row), note=_note(row))


__all__ = ["SWEEP", "candidates", "published_options", "sweep_points", "total_rate"]
