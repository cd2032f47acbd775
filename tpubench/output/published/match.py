"""Your measured points beside published ones: pure functions, no I/O.

A measured point is compared with the published results of the same model, input and output
lengths, accelerator and (where both say it) precision, one front per publisher setup (speculative
decoding or not, disaggregated or not, multi-node or not: `setup_label`), never one front across them.
Those published points form a curve of
output tokens/s per chip against interactivity (tokens/s one user sees, 1 / median TPOT); its
Pareto front is the points no other point beats on both axes (the best the publisher showed at
each interactivity). The front is interpolated linearly at the measured point's interactivity:

    front points (x1, y1), (x2, y2) with x1 <= x <= x2:
        published(x) = y1 + (y2 - y1) * (x - x1) / (x2 - x1)
    deviation = measured / published(x) - 1

Outside the front's interactivity range there is no published figure to compare with (the front
says nothing beyond its ends), and the row says so. The verdict: |deviation| <= tolerance
"agrees within 10%"; below, "differs by -35%: check your stack"; above, the point beats the
published front, which usually means the match is not like for like.
"""

from __future__ import annotations

import functools
import math
import re

import numpy as np
import pandas as pd

from tpubench.hardware.accelerators import normalize_accelerator
from tpubench.money.token_costs import interactivity_tokens_per_s
from tpubench.output.published.rows import SOURCE_PUBLISHED
from tpubench.records.columns import numeric_column

DEFAULT_TOLERANCE = 0.10

COLUMNS = ["workload", "scale", "model", "accelerator", "chips", "input_length", "output_length", "batch_size",
           "concurrency", "stack", "interactivity_tokens_per_s", "output_tokens_per_s_per_chip", "publisher",
           "published_accelerator", "published_precision", "published_frameworks", "front_points",
           "front_interactivity_low", "front_interactivity_high", "published_tokens_per_s_per_chip",
           "deviation", "verdict", "file", "front", "published_setup"]


def pareto_mask(x, y) -> np.ndarray:
    """Mask of the points no other point matches or beats in both x and y (higher is better in
    both); non-finite points are never on it, and of equal points one is kept. The report's
    throughput-vs-interactivity figure rings the same points."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    keep = np.zeros(x.size, dtype=bool)
    idx = np.flatnonzero(np.isfinite(x) & np.isfinite(y))
    # Sweep by x descending (ties: y descending); a point is on the front if its y beats every y
    # seen so far, i.e. no point with x >= its x has y >= its y.
    best_y = -math.inf
    for i in idx[np.lexsort((-y[idx], -x[idx]))]:
        if y[i] > best_y:
            keep[i] = True
            best_y = y[i]
    return keep


def pareto_front(x, y) -> list[tuple[float, float]]:
    """The front's points (x, y) by x ascending (so y descending): see pareto_mask."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    keep = pareto_mask(x, y)
    return sorted(zip(x[keep].tolist(), y[keep].tolist()))


def interpolate_front(front: list[tuple[float, float]], x: float) -> float:
    """The front's throughput at interactivity `x`, linear between neighbours; NaN outside it."""
    if not front or not math.isfinite(x) or x < front[0][0] or x > front[-1][0]:
        return math.nan
    for (x1, y1), (x2, y2) in zip(front, front[1:]):
        if x1 <= x <= x2:
            return y1 if x2 == x1 else y1 + (y2 - y1) * (x - x1) / (x2 - x1)
    return front[0][1]   # a one-point front, at exactly its interactivity


def verdict(deviation: float, tolerance: float = DEFAULT_TOLERANCE) -> str:
    """'agrees within 10%', 'differs by -35%: check your stack', or, above the front, a hint that
    the match may not be like for like."""
    if not math.isfinite(deviation):
        return "no published point at this interactivity"
    if abs(deviation) <= tolerance + 1e-12:
        return f"agrees within {tolerance:.0%}"
    if deviation < 0:
        return f"differs by {deviation:+.0%}: check your stack"
    return f"differs by {deviation:+.0%}: above the published front; check the match (model, lengths, precision)"


def model_key(name) -> str:
    """'deepseek-ai/DeepSeek-R1-0528' and 'DeepSeek-R1-0528' -> 'deepseekr10528'."""
    if not isinstance(name, str):
        return ""
    return re.sub(r"[^a-z0-9]", "", name.rsplit("/", 1)[-1].lower())


def accelerator_key(name) -> str:
    """The price table's canonical name ('h200', 'NVIDIA H200' -> 'H200'), else the bare name."""
    if not isinstance(name, str) or not name.strip():
        return ""
    return _accelerator_key(name)


@functools.lru_cache(maxsize=4096)
def _accelerator_key(name: str) -> str:
    # Kept per name: a report asks it of every shipped row (2,900 rows, a few dozen names).
    return normalize_accelerator(name) or re.sub(r"[^a-z0-9]", "", name.lower())


def precision_key(name) -> str:
    """bf16/bfloat16 -> bf16, float32 -> fp32, fp8 variants -> fp8, nvfp4/mxfp4 -> fp4; '' unknown."""
    if not isinstance(name, str):
        return ""
    low = name.strip().lower()
    table = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16", "fp16": "fp16",
             "float32": "fp32", "fp32": "fp32", "float": "fp32"}
    if low in table:
        return table[low]
    for marker, key in (("fp8", "fp8"), ("float8", "fp8"), ("fp4", "fp4"), ("int8", "int8"), ("int4", "int4")):
        if marker in low:
            return key
    return low


def setup_label(spec_decoding, disaggregated, multinode) -> str:
    """How the publisher ran its points, as one label: 'aggregated, single-node',
    'disaggregated, multi-node, speculative decoding (mtp)'; what the publisher does not say is
    left out ('setup not stated' when it says nothing). Fronts are drawn per label: a
    speculative-decoding or multi-node disaggregated system is not the single-node one."""
    def known(v):
        return v is True or v is False
    parts = []
    if known(disaggregated):
        parts.append("disaggregated" if disaggregated else "aggregated")
    if known(multinode):
        parts.append("multi-node" if multinode else "single-node")
    if isinstance(spec_decoding, str) and spec_decoding.strip():
        method = spec_decoding.strip().lower()
        parts.append("no speculative decoding" if method == "none" else f"speculative decoding ({method})")
    return ", ".join(parts) or "setup not stated"


def _setups(pub: pd.DataFrame) -> pd.Series:
    columns = [pub[c] if c in pub else pd.Series(None, index=pub.index, dtype=object)
               for c in ("spec_decoding", "disaggregated", "multinode")]
    return pd.Series([setup_label(s, d, m) for s, d, m in zip(*columns)], index=pub.index, dtype=object)


def _length_key(v) -> int | None:
    """The integer a length is matched by (a published and a measured length are the same when
    their keys are equal); None where it is no finite number, which matches nothing."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if math.isfinite(f) else None


def _measured_points(results: pd.DataFrame) -> pd.DataFrame:
    df = results
    if "source" in df:
        df = df[df["source"].fillna("measured") != SOURCE_PUBLISHED]
    if "status" in df:
        df = df[df["status"] == "ok"]
    if df.empty:
        return df
    chips = numeric_column(df, "chips").where(lambda c: c > 0)
    df = df.assign(output_tokens_per_s_per_chip=numeric_column(df, "output_tokens_per_s") / chips,
                   interactivity_tokens_per_s=interactivity_tokens_per_s(df))
    ok = np.isfinite(df["output_tokens_per_s_per_chip"]) & np.isfinite(df["interactivity_tokens_per_s"])
    return df[ok]


def _stack(row) -> str:
    name, version = row.get("server_name"), row.get("server_version")
    if isinstance(name, str) and name:
        return f"{name} {version}" if isinstance(version, str) and version else name
    return str(row.get("backend") or "")


def _published_fronts(pub: pd.DataFrame) -> dict:
    """The published fronts by what a measured point is matched on: {(model key, accelerator key,
    input length key, output length key): [(publisher, precision key, setup, front, accelerator,
    precision, frameworks on the front), ...]}, each list in the order of groupby(sort=True) over
    (publisher, accelerator, precision, setup). Computed once for all measured points: a report
    over thousands of points would otherwise filter and group the published rows once per point."""
    fronts: dict = {}
    keys = ["_model", "_acc", "_in", "_out", "publisher", "_prec", "_setup"]
    for (model, acc, n_in, n_out, publisher, prec, setup), group in pub.groupby(keys, sort=True, dropna=False):
        front = pareto_front(group["interactivity_tokens_per_s"], group["output_tokens_per_s_per_chip"])
        if not front:
            continue
        points = set(front)
        on_front = [(float(x), float(y)) in points for x, y in
                    zip(group["interactivity_tokens_per_s"], group["output_tokens_per_s_per_chip"])]
        frameworks = ", ".join(sorted({str(v) for v in group["framework"][on_front].dropna()}))
        fronts.setdefault((model, acc, int(n_in), int(n_out)), []).append(
            (publisher, prec, setup, front, group["accelerator"].iloc[0], group["precision"].iloc[0], frameworks))
    return fronts


def compare_published(results: pd.DataFrame, published: pd.DataFrame,
                      tolerance: float = DEFAULT_TOLERANCE) -> pd.DataFrame:
    """One row per measured point and matching published front (publisher, accelerator,
    precision and setup: speculative decoding, disaggregation, multi-node; see setup_label): the
    front interpolated at the point's interactivity, the deviation and the verdict
    (`front` holds the front's (interactivity, tokens/s per chip) points, for a figure).
    `results` is load_results' DataFrame; `published` read_published's (rows.COLUMNS)."""
    measured = _measured_points(results)
    pub = published[published["valid"].astype(bool)] if len(published) else published
    if measured.empty or pub.empty:
        return pd.DataFrame(columns=COLUMNS)
    # A point's bucket key from its columns, all points at once; only points with a bucket are read row by row.
    def column(c):   # as Python objects: iterating an Arrow-backed text column costs ~1 us a cell
        return measured[c].to_numpy(dtype=object) if c in measured else [None] * len(measured)

    acc_keys: dict = {}     # accelerator_key per distinct name: thousands of points share a few
    model_keys: dict = {}   # model_key likewise
    buckets = []
    for hub_id, workload, accelerator, n_in, n_out in zip(column("hub_id"), column("workload"),
                                                          column("accelerator"), column("input_length"),
                                                          column("output_length")):
        n_in, n_out = _length_key(n_in), _length_key(n_out)
        if n_in is None or n_out is None:
            buckets.append(None)
            continue
        if isinstance(accelerator, str):
            if accelerator not in acc_keys:
                acc_keys[accelerator] = accelerator_key(accelerator)
            acc = acc_keys[accelerator]
        else:
            acc = accelerator_key(accelerator)
        name = hub_id if isinstance(hub_id, str) and hub_id else workload
        model = model_keys.get(name) if isinstance(name, str) else None
        if model is None:
            model = model_key(name)
            if isinstance(name, str):
                model_keys[name] = model
        buckets.append((model, acc, n_in, n_out))
    # Fronts only of the published rows some point can match: thousands of shipped rows, a few buckets.
    pub = pub.assign(_model=pub["model"].map(model_key), _acc=pub["accelerator"].map(accelerator_key),
                     _in=pd.Series([_length_key(v) for v in pub["input_length"]], index=pub.index, dtype=object),
                     _out=pd.Series([_length_key(v) for v in pub["output_length"]], index=pub.index, dtype=object))
    wanted = set(b for b in buckets if b is not None)
    pub = pub[[key in wanted for key in zip(pub["_model"], pub["_acc"], pub["_in"], pub["_out"])]]
    pub = pub.assign(_prec=pub["precision"].map(precision_key), _setup=_setups(pub))
    fronts = _published_fronts(pub) if len(pub) else {}
    buckets = [fronts.get(b) if b is not None else None for b in buckets]
    out = []
    hits = [i for i, b in enumerate(buckets) if b]
    for (_, m), candidates in zip(measured.iloc[hits].iterrows(), [buckets[i] for i in hits]):
        name = m.get("hub_id") if isinstance(m.get("hub_id"), str) and m.get("hub_id") else m.get("workload")
        prec = precision_key(m.get("dtype"))
        for publisher, pub_prec, setup, front, pub_acc, pub_precision, frameworks in candidates:
            if not (pub_prec == "" or prec == "" or pub_prec == prec):
                continue
            x, y = float(m["interactivity_tokens_per_s"]), float(m["output_tokens_per_s_per_chip"])
            ref = interpolate_front(front, x)
            deviation = y / ref - 1 if ref > 0 else math.nan
            out.append({
                "workload": m.get("workload"), "scale": m.get("scale"), "model": name,
                "accelerator": m.get("accelerator"), "chips": m.get("chips"),
                "input_length": m.get("input_length"), "output_length": m.get("output_length"),
                "batch_size": m.get("batch_size"), "concurrency": m.get("concurrency"), "stack": _stack(m),
                "interactivity_tokens_per_s": x, "output_tokens_per_s_per_chip": y, "publisher": publisher,
                "published_accelerator": pub_acc,
                "published_precision": pub_precision,
                "published_frameworks": frameworks,
                "front_points": len(front), "front_interactivity_low": front[0][0],
                "front_interactivity_high": front[-1][0], "published_tokens_per_s_per_chip": ref,
                "deviation": deviation, "verdict": verdict(deviation, tolerance) if math.isfinite(deviation)
                else (f"outside the published interactivity range ({front[0][0]:.3g}–{front[-1][0]:.3g} "
                      "tokens/s per user)"),
                "file": m.get("file"), "front": front, "published_setup": setup,
            })
    return pd.DataFrame(out, columns=COLUMNS)
