"""Calibration rows: published rows (and the user's measured ones) turned into observations of
log efficiency with their terms, and the count of rows left out by reason.

A row calibrates only when its roofline can be computed and means the same thing as the
estimate's: a single-node, aggregated, non-speculative run (a disaggregated or speculative
system is another system), with its model's shape known, the precision, concurrency, lengths,
chips and throughput given, and the chip's peaks in data/accelerators.csv. MLPerf scenario rows
give no concurrency or input length, so they are counted out, not guessed.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tpubench.estimate.chips import chip, chip_family
from tpubench.estimate.features import TERMS, Point, observed_cycle_s, roofline, terms
from tpubench.estimate.models import precision_bytes, published_model
from tpubench.hardware.model_shape import ModelShape

# Engines keep the KV cache in 16 bits unless told otherwise; the published rows do not say.
DEFAULT_KV_BYTES = 2.0


@dataclass
class Observations:
    X: np.ndarray
    y: np.ndarray                 # log efficiency
    families: list[str]
    rows: pd.DataFrame            # one per observation: who, what, where, roofline and observed times
    left_out: Counter = field(default_factory=Counter)


def _num(value) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def _truthy(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "false", "0", "no", "none", "nan")
    return bool(value) and not (isinstance(value, float) and math.isnan(value))


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


def observations(published: pd.DataFrame) -> Observations:
    """Observations from rows with the columns of tpubench.output.published.rows (plus `source`,
    `measured` or `published`; published when absent)."""
    xs, ys, fams, kept = [], [], [], []
    left: Counter = Counter()
    for row in published.to_dict("records"):
        why = _why_not(row)
        model = ((row["model"], row["shape"]) if isinstance(row.get("shape"), ModelShape)
                 else published_model(row.get("model")) or published_model(row.get("published_model")))
        wbytes = precision_bytes(row.get("precision"))
        spec = chip(str(row.get("accelerator")), str(row.get("precision"))) if row.get("accelerator") else None
        family = chip_family(str(row.get("accelerator")))
        if why is None and model is None:
            why = "model architecture not in data/published_models.json"
        if why is None and wbytes is None:
            why = "unknown precision"
        if why is None and (spec is None or family is None):
            why = "chip has no peaks in data/accelerators.csv"
        if why:
            left[why] += 1
            continue
        kv_bytes = _num(row.get("kv_bytes"))
        point = Point(shape=model[1], weight_bytes=wbytes, kv_bytes=kv_bytes if kv_bytes > 0 else DEFAULT_KV_BYTES,
                      chips=int(_num(row["chips"])), concurrency=_num(row["concurrency"]),
                      input_len=_num(row["input_length"]), output_len=_num(row["output_length"]))
        roof = roofline(point, spec.peak_flops, spec.peak_bytes_per_s)
        observed = observed_cycle_s(point, _num(row["output_tokens_per_s_per_chip"]))
        xs.append(terms(point, roof))
        ys.append(math.log(roof.cycle_s / observed))
        fams.append(family)
        kept.append({
            "source": row.get("source") or "published", "publisher": row.get("publisher"),
            "reference": row.get("reference"), "date": row.get("date"), "model": model[0],
            "accelerator": spec.accelerator, "family": family, "chips": point.chips,
            "concurrency": point.concurrency, "input_length": point.input_len, "output_length": point.output_len,
            "precision": row.get("precision"), "framework": row.get("framework"),
            "output_tokens_per_s_per_chip": _num(row["output_tokens_per_s_per_chip"]),
            "roofline_cycle_s": roof.cycle_s, "observed_cycle_s": observed,
            "efficiency": roof.cycle_s / observed, "decode_bound": roof.decode_bound,
        })
    X = np.array(xs) if xs else np.zeros((0, len(TERMS)))
    return Observations(X=X, y=np.array(ys), families=fams, rows=pd.DataFrame(kept), left_out=left)


def measured_rows(paths) -> pd.DataFrame:
    """The user's own generate results (result JSON files under `paths`) as calibration rows:
    batch as concurrency, the model's shape from the config the result recorded, its dtype as
    precision, `source = measured`. Failed, invalid and non-generate results are left out."""
    import json
    from pathlib import Path

    from tpubench.hardware.accelerators import normalize_accelerator

    files = []
    for p in map(Path, [paths] if isinstance(paths, (str, Path)) else paths):
        files.extend(sorted(p.rglob("*.json")) if p.is_dir() else [p])
    rows = []
    for f in files:
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
            point, env, metrics = data["point"], data["environment"], data["metrics"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if data.get("status") != "ok" or not (data.get("validity") or {}).get("valid", False):
            continue
        if point.get("scenario_kind", "generate") != "generate" or not point.get("model_config"):
            continue
        try:
            shape = ModelShape.from_config(point.get("family"), point["model_config"])
        except Exception:  # a family the shape builder cannot read: the row does not calibrate
            continue
        chips = env.get("chips") or env.get("accelerator_count")
        rows.append({
            "source": "measured", "publisher": "you", "reference": str(f), "date": data.get("started_at"),
            "model": point.get("workload"), "shape": shape, "precision": point.get("dtype"),
            "accelerator": normalize_accelerator(env.get("accelerator_name"), data.get("device")),
            "chips": chips, "concurrency": point.get("batch_size"), "input_length": point.get("input_length"),
            "output_length": point.get("output_length"),
            "output_tokens_per_s_per_chip": (metrics.get("output_tokens_per_s") or math.nan) / (chips or math.nan),
            "kv_bytes": precision_bytes(point.get("dtype")),
        })
    return pd.DataFrame(rows)


__all__ = ["DEFAULT_KV_BYTES", "Observations", "measured_rows", "observations"]
