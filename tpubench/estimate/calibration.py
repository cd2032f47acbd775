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

import datetime
import math
from collections import Counter
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from tpubench.errors import UserError
from tpubench.estimate.chips import Chip, chip, chip_family
from tpubench.estimate.features import (
    CLOSED_LOOP,
    INTERACTIVE,
    OPEN_LOOP,
    STATIC,
    TERMS,
    Point,
    Roofline,
    observed_cycle_s,
    prefill_one_s,
    roofline,
    sequences_that_fit,
    terms,
)
from tpubench.estimate.models import published_model, row_precision
from tpubench.estimate.physics import efficiency_refusal
from tpubench.hardware.model_shape import ModelShape


@dataclass
class Observations:
    X: np.ndarray
    y: np.ndarray                 # log efficiency
    families: list[str]
    rows: pd.DataFrame            # one per observation: who, what, where, roofline and observed times
    points: list[Point] = field(default_factory=list)
    specs: list[Chip] = field(default_factory=list)
    roofs: list[Roofline] = field(default_factory=list)
    left_out: Counter = field(default_factory=Counter)
    # The newest published row's date: the stack an estimate assumes (features.TERMS: stack_age_years).
    stack_date: str = ""

    def subset(self, keep: np.ndarray) -> "Observations":
        """The observations where `keep` (a boolean mask) is True."""
        pick = [i for i, k in enumerate(keep) if k]
        return Observations(X=self.X[keep], y=self.y[keep], families=[self.families[i] for i in pick],
                            rows=self.rows[keep].reset_index(drop=True), points=[self.points[i] for i in pick],
                            specs=[self.specs[i] for i in pick], roofs=[self.roofs[i] for i in pick],
                            stack_date=self.stack_date)

    def mine(self, pick: np.ndarray) -> "Observations":
        """The observations at positions `pick`, as if measured by you (`source` measured): what
        the leave-one-out check hands the calibration as your own rows (estimate/validate.py)."""
        keep = np.zeros(len(self.y), dtype=bool)
        keep[pick] = True
        out = self.subset(keep)
        out.rows["source"] = "measured"
        return out

    def __add__(self, other: "Observations") -> "Observations":
        return Observations(X=np.vstack([self.X, other.X]), y=np.concatenate([self.y, other.y]),
                            families=self.families + other.families,
                            rows=pd.concat([self.rows, other.rows], ignore_index=True),
                            points=self.points + other.points, specs=self.specs + other.specs,
                            roofs=self.roofs + other.roofs, stack_date=max(self.stack_date, other.stack_date))


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


def excluded(row: dict) -> str | None:
    """Why a row does not calibrate (module notes: it means another system, or lacks a figure), or None."""
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


# What makes two rows runs of one configuration: a publisher's stack at one operating point.
CONFIGURATION = ("source", "publisher", "model", "published_model", "accelerator", "chips", "framework", "precision",
                 "weight_dtype", "activation_dtype", "kv_cache_dtype", "input_length", "output_length", "concurrency",
                 "running_batch", "spec_decoding", "disaggregated", "multinode")
SUPERSEDED = "superseded by a newer run of the same configuration"
REPEATED = "the same measurement listed twice"


def _cell(value) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def runs_left_out(records: list[dict]) -> list[str | None]:
    """Per row, why it does not calibrate although it could: a run superseded by a newer run of the
    same configuration (CONFIGURATION; a publisher re-measures as its software improves, and the
    estimate is for the stack as it runs today, so only the newest run of a configuration
    calibrates), or the same measurement listed a second time (MLPerf's llama2-70b-99 and -99.9 of
    one system: one run, two accuracy targets). Rows without a date are never superseded."""
    newest: dict[tuple, str] = {}
    keys = [tuple(_cell(r.get(c)) for c in CONFIGURATION if c != "published_model") for r in records]
    for key, r in zip(keys, records):
        newest[key] = max(newest.get(key, ""), _cell(r.get("date"))[:10])
    out, seen = [], set()
    for key, r in zip(keys, records):
        date = _cell(r.get("date"))[:10]
        measured = (key, date, _cell(r.get("output_tokens_per_s_per_chip")))
        out.append(SUPERSEDED if date and date < newest[key] else REPEATED if measured in seen else None)
        seen.add(measured)
    return out


def observations(rows: pd.DataFrame) -> Observations:
    """Observations from rows with the columns of tpubench.output.published.rows (plus `source`,
    `measured` or `published`; published when absent)."""
    xs, ys, fams, kept, points, specs, roofs = [], [], [], [], [], [], []
    left: Counter = Counter()
    records = rows.to_dict("records")
    newest = stack_date(records)
    for row, repeat in zip(records, runs_left_out(records)):
        why = excluded(row) or repeat
        model = _model(row) if why is None else None
        precision = row_precision(row)
        accelerator = str(row.get("accelerator")) if row.get("accelerator") else None
        spec = chip(accelerator, precision.compute) if accelerator and precision else None
        family = chip_family(accelerator)
        if why is None and model is None:
            why = "model architecture not in data/published_models.json"
        if why is None and precision is None:
            why = "unknown precision"
        if why is None and (spec is None or family is None):
            why = "chip has no peaks in data/accelerators.csv"
        if why:
            left[why] += 1
            continue
        point = Point(shape=model[1], weight_bytes=precision.weight_bytes, kv_bytes=precision.kv_bytes,
                      compute_precision=precision.compute, chips=int(_num(row["chips"])),
                      concurrency=ran_batch(row), input_len=_num(row["input_length"]),
                      output_len=_num(row["output_length"]), precision=precision.label,
                      stack_age_years=stack_age_years(row.get("date"), newest))
        point, why = _what_ran(point, spec)
        if why:
            left[why] += 1
            continue
        roof = roofline(point, spec.peak_flops, spec.peak_bytes_per_s)
        rate = _num(row["output_tokens_per_s_per_chip"])
        observed = observed_cycle_s(point, rate)
        why = efficiency_refusal(roof.cycle_s / observed, row)     # a row that beats physics (physics.py)
        if why:
            left[why] += 1
            continue
        xs.append(terms(point, roof))
        ys.append(math.log(roof.cycle_s / observed))
        fams.append(family)
        points.append(point)
        specs.append(spec)
        roofs.append(roof)
        kept.append({
            "source": row.get("source") or "published", "publisher": row.get("publisher"),
            "reference": row.get("reference"), "date": row.get("date"), "model": model[0],
            "accelerator": spec.accelerator, "family": family, "chips": point.chips,
            "concurrency": point.concurrency, "input_length": point.input_len, "output_length": point.output_len,
            "precision": precision.label, "framework": row.get("framework"),
            "output_tokens_per_s_per_chip": rate, "roofline_cycle_s": roof.cycle_s, "observed_cycle_s": observed,
            "efficiency": roof.cycle_s / observed, "decode_bound": roof.decode_bound,
            "clients": _num(row["concurrency"]), "arrival": arrival_of(row),
            # One prompt's prefill: only a row with a latency to fit or score needs it (a roofline is not free).
            "prefill_one_s": (prefill_one_s(point, spec.peak_flops, spec.peak_bytes_per_s)
                              if _latency(row, "ttft") > 0 or _latency(row, "tpot") > 0 else math.nan),
            "ttft_s": _latency(row, "ttft"), "tpot_s": _latency(row, "tpot"),
            "ttft_p99_s": _num(row.get("ttft_p99_s")), "tpot_p99_s": _num(row.get("tpot_p99_s")),
        })
    X = np.array(xs) if xs else np.zeros((0, len(TERMS)))
    return Observations(X=X, y=np.array(ys), families=fams, rows=pd.DataFrame(kept), points=points, specs=specs,
                        roofs=roofs, left_out=left, stack_date=newest)


def stack_date(records: list[dict]) -> str:
    """The newest date of the published rows (yours where there are none): the stack the estimate's
    rows were newest on, which an estimate assumes unless asked for another."""
    published = [r for r in records if (r.get("source") or "published") != "measured"] or records
    return max((_cell(r.get("date"))[:10] for r in published), default="")


def stack_age_years(date, newest: str) -> float:
    """Years from a row's date to `newest` (0 for a row without a date, or newer: the newest stack)."""
    day, reference = _day(date), _day(newest)
    if day is None or reference is None:
        return 0.0
    return max(0.0, (reference - day).days / 365.25)


def _day(value) -> datetime.date | None:
    try:
        return datetime.date.fromisoformat(_cell(value)[:10])
    except ValueError:
        return None


def arrival_of(row: dict) -> str:
    """How a row's requests arrived (features.ARRIVALS): a static batch, an open loop at a rate (MLPerf
    Server, whose concurrency is Little's law's; Interactive at its tighter latency bound), else a
    closed loop of clients (a benchmark client's max concurrency)."""
    basis = str(row.get("concurrency_basis") or "").lower()
    if "static batch" in basis:
        return STATIC
    if basis.startswith("little's law"):
        return INTERACTIVE if str(row.get("scenario") or "").strip().lower() == "interactive" else OPEN_LOOP
    return CLOSED_LOOP


def _latency(row: dict, metric: str) -> float:
    """A row's median TTFT or TPOT in seconds, else its mean; NaN when the source gives neither."""
    for stat in ("p50", "mean"):
        value = _num(row.get(f"{metric}_{stat}_s"))
        if value > 0 and math.isfinite(value):
            return value
    return math.nan


def _what_ran(point: Point, spec: Chip) -> tuple[Point, str | None]:
    """The point with the batch that could run: no more sequences than the chips' memory holds
    beside the weights (features.sequences_that_fit; a client sending more only queues), or why the
    row cannot have run as stated (not even one sequence fits: its figures say otherwise)."""
    fits = sequences_that_fit(point, spec.memory_bytes)
    if fits < 1:
        return point, "the weights and one sequence do not fit in its chips' memory as modelled"
    return (replace(point, concurrency=float(math.floor(fits))) if point.concurrency > fits else point), None


def measured_rows(paths) -> pd.DataFrame:
    """The user's own generate results under `paths` (read by records.result.read_results, which skips
    what is not a result) as calibration rows: batch as concurrency, the model's shape from the
    config the result recorded, its dtype as precision, `source = measured`. Failed, invalid and
    non-generate results, and models whose shape cannot be read, are left out."""
    from tpubench.hardware.accelerators import normalize_accelerator
    from tpubench.records.result import read_results
    from tpubench.records.usable import result_is_usable
    from tpubench.scenarios.registry import describing

    rows = []
    for f, result in read_results(paths, warn=lambda msg: None):
        point, env = result.point, result.environment
        if not result_is_usable(result):
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
            # The three dtypes the point ran in (results since model.quantization); older results
            # name only `dtype`, which says all three.
            **{k: (result.precision or {}).get(k) for k in ("weight_dtype", "activation_dtype", "kv_cache_dtype")},
            "accelerator": normalize_accelerator(env.get("accelerator_name"), result.device),
            "chips": chips, "concurrency": point.get("batch_size"), "input_length": point.get("input_length"),
            "output_length": point.get("output_length"),
            "output_tokens_per_s_per_chip": _num(result.metrics.get("output_tokens_per_s")) / chips,
            # A generate point is a static batch; its latencies calibrate the latency fit like a publisher's.
            "concurrency_basis": "static batch",
            **{k: result.metrics.get(k) for k in ("ttft_p50_s", "tpot_p50_s")},
        })
    return pd.DataFrame(rows)


__all__ = ["CONFIGURATION", "SWEEP", "Observations", "arrival_of", "excluded", "measured_rows", "observations",
           "stack_age_years", "stack_date",
           "runs_left_out", "sweeps"]
