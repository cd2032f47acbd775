"""Calibration rows: published rows (and the user's measured ones) turned into observations of
log efficiency with their terms, and the count of rows left out by reason.

A row calibrates only when its roofline can be computed and means the same thing as the
estimate's: a single-node, aggregated, non-speculative run (a disaggregated or speculative
system is another system), with its model's shape known, the precision, concurrency, lengths,
chips and throughput given, and the chip's peaks in data/accelerators.csv. MLPerf scenario rows
give no concurrency or input length, so they are counted out, not guessed. Each observation keeps
its operating point and chip, so the leave-one-out check can ask `predict.estimate` about it
exactly as the command would.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tpubench.errors import UserError
from tpubench.estimate.chips import Chip, chip, chip_family
from tpubench.estimate.features import TERMS, Point, observed_cycle_s, roofline, terms
from tpubench.estimate.models import cache_bytes, compute_precision, precision_bytes, published_model
from tpubench.hardware.model_shape import ModelShape


@dataclass
class Observations:
    X: np.ndarray
    y: np.ndarray                 # log efficiency
    families: list[str]
    rows: pd.DataFrame            # one per observation: who, what, where, roofline and observed times
    points: list[Point] = field(default_factory=list)
    specs: list[Chip] = field(default_factory=list)
    left_out: Counter = field(default_factory=Counter)

    def subset(self, keep: np.ndarray) -> "Observations":
        """The observations where `keep` (a boolean mask) is True."""
        pick = [i for i, k in enumerate(keep) if k]
        return Observations(X=self.X[keep], y=self.y[keep], families=[self.families[i] for i in pick],
                            rows=self.rows[keep].reset_index(drop=True), points=[self.points[i] for i in pick],
                            specs=[self.specs[i] for i in pick])


SWEEP = ("publisher", "model", "accelerator")


def sweeps(rows: pd.DataFrame) -> list[str]:
    """Each observation's sweep: one publisher's rows of one model on one chip (a concurrency or
    length sweep), which sit closer to each other than to anything a user will ask about."""
    if rows.empty:
        return []
    return [" | ".join(map(str, key)) for key in rows[list(SWEEP)].itertuples(index=False)]


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _truthy(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "false", "0", "no", "none", "nan")
    return bool(value) and not (isinstance(value, float) and math.isnan(value))


def ran_batch(row: dict) -> float:
    """The concurrency that ran: the server's batch cap where the source records one below the
    client's concurrency (`running_batch`), else the concurrency."""
    ran = _num(row.get("running_batch"))
    return ran if ran > 0 and math.isfinite(ran) else _num(row.get("concurrency"))


def _why_not(row: dict) -> str | None:
    if not row.get("valid", True):
        return "marked invalid by its publisher"
    if _truthy(row.get("spec_decoding")):
        return "speculative decoding (not modelled)"
    if _truthy(row.get("disaggregated")) or _truthy(row.get("multinode")):
        return "disaggregated or multi-node (not modelled)"
    for column, what in (("concurrency", "concurrency"), ("input_length", "input length"),
                         ("output_length", "output length"), ("chips", "chips"),
                         ("output_tokens_per_s_per_chip", "throughput")):
        value = _num(row.get(column))
        if not (value > 0 and math.isfinite(value)):
            return f"no {what}"
    return None


def _model(row: dict) -> tuple[str, ModelShape] | None:
    if isinstance(row.get("shape"), ModelShape):
        return row["model"], row["shape"]
    return published_model(row.get("model")) or published_model(row.get("published_model"))


def observations(rows: pd.DataFrame) -> Observations:
    """Observations from rows with the columns of tpubench.output.published.rows (plus `source`,
    `measured` or `published`; published when absent)."""
    xs, ys, fams, kept, points, specs = [], [], [], [], [], []
    left: Counter = Counter()
    for row in rows.to_dict("records"):
        why = _why_not(row)
        model = _model(row) if why is None else None
        wbytes = precision_bytes(row.get("precision"))
        accelerator = str(row.get("accelerator")) if row.get("accelerator") else None
        spec = chip(accelerator, compute_precision(row.get("precision"))) if accelerator else None
        family = chip_family(accelerator)
        if why is None and model is None:
            why = "model architecture not in data/published_models.json"
        if why is None and wbytes is None:
            why = "unknown precision"
        if why is None and (spec is None or family is None):
            why = "chip has no peaks in data/accelerators.csv"
        if why:
            left[why] += 1
            continue
        point = Point(shape=model[1], weight_bytes=wbytes, kv_bytes=cache_bytes(row.get("precision")),
                      compute_precision=compute_precision(row.get("precision")), chips=int(_num(row["chips"])),
                      concurrency=ran_batch(row), input_len=_num(row["input_length"]),
                      output_len=_num(row["output_length"]))
        roof = roofline(point, spec.peak_flops, spec.peak_bytes_per_s)
        rate = _num(row["output_tokens_per_s_per_chip"])
        observed = observed_cycle_s(point, rate)
        xs.append(terms(point, roof))
        ys.append(math.log(roof.cycle_s / observed))
        fams.append(family)
        points.append(point)
        specs.append(spec)
        kept.append({
            "source": row.get("source") or "published", "publisher": row.get("publisher"),
            "reference": row.get("reference"), "date": row.get("date"), "model": model[0],
            "accelerator": spec.accelerator, "family": family, "chips": point.chips,
            "concurrency": point.concurrency, "input_length": point.input_len, "output_length": point.output_len,
            "precision": row.get("precision"), "framework": row.get("framework"),
            "output_tokens_per_s_per_chip": rate, "roofline_cycle_s": roof.cycle_s, "observed_cycle_s": observed,
            "efficiency": roof.cycle_s / observed, "decode_bound": roof.decode_bound,
        })
    X = np.array(xs) if xs else np.zeros((0, len(TERMS)))
    return Observations(X=X, y=np.array(ys), families=fams, rows=pd.DataFrame(kept), points=points, specs=specs,
                        left_out=left)


def measured_rows(paths) -> pd.DataFrame:
    """The user's own generate results under `paths` (read by records.result.read_results, which skips
    what is not a result) as calibration rows: batch as concurrency, the model's shape from the
    config the result recorded, its dtype as precision, `source = measured`. Failed, invalid and
    non-generate results, and models whose shape cannot be read, are left out."""
    from tpubench.hardware.accelerators import normalize_accelerator
    from tpubench.records.result import read_results
    from tpubench.scenarios.registry import describing

    rows = []
    for f, result in read_results(paths, warn=lambda msg: None):
        point, env = result.point, result.environment
        if result.status != "ok" or not result.validity.valid:
            continue
        if not describing(point.get("scenario_kind")).calibrates_estimate or not point.get("model_config"):
            continue
        try:
            shape = ModelShape.from_config(point.get("family"), point["model_config"])
        except (KeyError, TypeError, ValueError, UserError):   # a config the shape builder cannot read
            continue
        chips = _num(env.get("chips") or env.get("accelerator_count"))
        rows.append({
            "source": "measured", "publisher": "you", "reference": str(f), "date": result.started_at,
            "model": point.get("workload"), "shape": shape, "precision": point.get("dtype"),
            "accelerator": normalize_accelerator(env.get("accelerator_name"), result.device),
            "chips": chips, "concurrency": point.get("batch_size"), "input_length": point.get("input_length"),
            "output_length": point.get("output_length"),
            "output_tokens_per_s_per_chip": _num(result.metrics.get("output_tokens_per_s")) / chips,
        })
    return pd.DataFrame(rows)


__all__ = ["SWEEP", "Observations", "measured_rows", "observations", "sweeps"]
