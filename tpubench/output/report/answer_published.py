"""The answer table's published rows (output/report/answer.py): the published operating points
nearest a workload, priced at list prices.

Nearest, per chip: among the rows that mean one system on one node (as the estimate's calibration
takes them), the same model where anyone published it on that chip (by Hugging Face id,
estimate/models.py's aliases), else the model of the same kind (dense, or mixture-of-experts)
nearest in parameters (distance |ln active ratio| + |ln total ratio| / 2: what a token touches
matters most); of that model's rows, the one nearest the workload's lengths (|ln input ratio| +
|ln output ratio|), its highest throughput per chip there. The chips whose rows are nearest come
first. Priced as its throughput x the price table's list price per chip-hour
for that chip and plan: blended $/Mtok = $ per chip-second / (input + output tokens/s per chip) x
1e6, the total rate from the row, else from its output rate and lengths.

A row picked passes the physics gate (estimate/gate.py) or gives way to the next nearest
on its chip, with one warning naming its file and row: the gate is asked only about the rows an
answer would show (a few dozen), not about every candidate, so a report pays for it per chip shown.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pandas as pd

from tpubench.estimate.calibration import excluded
from tpubench.estimate.chips import Target
from tpubench.estimate.gate import once, refused
from tpubench.estimate.models import published_model, row_precision
from tpubench.estimate.pricing import plan_prices
from tpubench.measure.per_token import usd_per_mtok_from_chip_seconds
from tpubench.money.cost import usd_per_chip_second
from tpubench.money.price_gaps import missing_price
from tpubench.money.pricing import load_unpriced_notes
from tpubench.output.report.answer import INTERVAL, PUBLISHED, load_words, price_words
from tpubench.units import number


def _distance(shape, mine) -> float:
    if (shape.n_experts > 0) != (mine.n_experts > 0):
        return math.inf
    return abs(math.log(shape.active_params / mine.active_params)) + abs(math.log(shape.total_params / mine.total_params)) / 2


def candidates(published: pd.DataFrame) -> pd.DataFrame:
    """The published rows an answer may show (one system on one node, a model tpubench knows), with
    `_model` (its id) and `_shape`: made once per report, whatever its workloads."""
    if published is None or published.empty:
        return pd.DataFrame()
    records = published.to_dict("records")
    keep = np.array([excluded(r) is None for r in records], dtype=bool)
    # Once per distinct model name (a few dozen among thousands of rows).
    by_name = {name: published_model(name[0]) or published_model(name[1])
               for name in set(zip(published["model"], published["published_model"]))}
    hits = [by_name[name] for name in zip(published["model"], published["published_model"])]
    frame = published.assign(_model=[h[0] if h else None for h in hits], _shape=[h[1] if h else None for h in hits])
    return frame[keep & frame["_model"].notna().to_numpy()].reset_index(drop=True)


def nearest_rows(candidates: pd.DataFrame, wl, warn: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Per chip, the row of `candidates` nearest `wl` (estimate.points.WorkloadPoints; module notes)
    that passes the physics gate, nearest chips' rows first, with `_same_model`."""
    if candidates is None or candidates.empty or not wl.points:
        return pd.DataFrame()
    mine, point = wl.points[0].shape, wl.points[-1]
    own = published_model(wl.hub_id)
    shapes = dict(zip(candidates["_model"], candidates["_shape"]))
    distance = {model: (-1.0 if own and model == own[0] else _distance(shape, mine)) for model, shape in shapes.items()}
    with np.errstate(divide="ignore", invalid="ignore"):
        lengths = (np.abs(np.log(candidates["input_length"].to_numpy(float) / point.input_len))
                   + np.abs(np.log(candidates["output_length"].to_numpy(float) / point.output_len)))
    frame = candidates.assign(_distance=candidates["_model"].map(distance),
                              _lengths=np.nan_to_num(lengths, nan=math.inf))
    frame = frame[np.isfinite(frame["_distance"])]
    frame = frame.assign(_same_model=frame["_distance"] < 0)
    frame = frame.sort_values(["_distance", "_lengths", "output_tokens_per_s_per_chip"], ascending=[True, True, False],
                              kind="stable")
    return _physical_firsts(frame, warn)


def _physical_firsts(frame: pd.DataFrame, warn) -> pd.DataFrame:
    """Per chip, the first row of `frame` that the physics gate passes, warned about once per
    process (the report's estimate, or its previous workload, may have met the row already)."""
    while True:
        firsts = frame.drop_duplicates("accelerator")
        bad = refused(firsts, once(warn)) if len(firsts) else np.zeros(0, dtype=bool)
        if not bad.any():
            return firsts.reset_index(drop=True)
        frame = frame.drop(firsts.index[bad])


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


def published_options(candidates: pd.DataFrame, wl, workload: str, prices: pd.DataFrame, plans: list[str],
                      limit: int, warn: Callable[[str], None] | None = None) -> list[dict]:
    """The answer's rows of the published rows (`candidates`) nearest workload `workload` (module
    notes). A row of the workload's own model with no price in a plan is listed as such (TPU7x has
    no list price yet); another model's row without one is left out, and so is a row the physics
    gate refuses (warned about through `warn`)."""
    out, unpriced = [], load_unpriced_notes()
    for row in nearest_rows(candidates, wl, warn).head(limit).to_dict("records"):
        same_model = bool(row["_same_model"])
        table = plan_prices(prices, Target(str(row["accelerator"]), str(row["accelerator"]), int(row["chips"]), None),
                            plans)
        priced = {price["plan"]: price for price in table.to_dict("records")}
        for plan in plans if same_model else list(priced):
            out.append(_option(row, workload, plan, priced.get(plan), same_model, unpriced))
    return out


def _option(row: dict, workload: str, plan: str, price: dict | None, same_model: bool, unpriced: pd.DataFrame) -> dict:
    """One published row priced in one plan (`price` None: the price table has none for its chip)."""
    precision = row_precision(row)
    reference = f"{row['publisher']} ({row['date']}): {row['reference']}"
    usd = math.nan if price is None else float(usd_per_mtok_from_chip_seconds(
        1.0 / total_rate(row), usd_per_chip_second(price["usd_per_chip_hour"], 1)))
    why = (missing_price(str(row["accelerator"]), plan, unpriced) if price is None and same_model
           else "" if same_model else f"another model ({row['_model']}): a yardstick, not your workload; {reference}")
    basis = "" if price is None else "published throughput x " + price_words(
        price["cloud"], price["instance_type"], price["region"], price["usd_per_chip_hour"], price["as_of"])
    return {"workload": workload, "plan": plan, "source": PUBLISHED,
            "option": f"{row['accelerator']} ×{number(row['chips'])} · {row.get('framework') or 'stack not named'}",
            "accelerator": row["accelerator"], "chips": row["chips"], "point": f"{row['_model']} {load_words(row)}",
            "precision": precision.label if precision else str(row.get("precision") or ""),
            "tokens_per_s_per_chip": row["output_tokens_per_s_per_chip"], "usd_per_mtok": usd, "usd_per_mtok_low": usd,
            "usd_per_mtok_high": usd, "interval": INTERVAL[PUBLISHED], "price_basis": basis,
            "in_verdict": same_model and price is not None, "why_not": why, "note": reference, "launch_on": "",
            "price_as_of": None if price is None else price["as_of"]}


__all__ = ["candidates", "nearest_rows", "published_options", "total_rate"]
