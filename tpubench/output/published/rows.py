"""The columns of a published result, and how one becomes a row of `load_results`' DataFrame.

A published row is one operating point someone else measured and published (an InferenceX API row,
an MLPerf Inference result): who published it, the model and lengths, the load (concurrency), the
hardware (accelerator, chips) and software (framework, version, precision), throughput per chip,
interactivity (tokens/s one user sees: 1 / median TPOT, the definition tpubench's own figures use)
and the latencies where the publisher gives them. Seconds and tokens/s in the data, as everywhere.

`as_result_rows` maps them onto the columns of tpubench's own results (output_tokens_per_s over
all chips, ttft_p50_s, ...) with `source = "published"`, so a notebook can plot both together;
reports and budgets leave them out unless asked (`load_results(include_published=True)`).
"""

from __future__ import annotations

import math

import pandas as pd

SOURCE_MEASURED = "measured"
SOURCE_PUBLISHED = "published"

# The stored columns, in this order (store.py writes and reads exactly these).
COLUMNS = [
    "publisher", "submitter", "model", "published_model", "input_length", "output_length", "concurrency",
    "scenario", "accelerator", "chips", "framework", "framework_version", "precision",
    "output_tokens_per_s_per_chip", "total_tokens_per_s_per_chip", "interactivity_tokens_per_s",
    "ttft_p50_s", "ttft_mean_s", "ttft_p99_s", "tpot_p50_s", "tpot_mean_s", "tpot_p99_s", "e2e_p50_s",
    "valid", "date", "reference",
    # How the publisher ran it: fronts are drawn per (spec_decoding, disaggregated, multinode) group,
    # never across them (a speculative-decoding or multi-node disaggregated run is another system).
    "spec_decoding", "disaggregated", "multinode",
    # Chips that produced the output tokens (a disaggregated row's decode GPUs); NaN = all `chips`.
    "decode_chips",
    # Where a $ figure came from: "list" (a cloud's list price) or the publisher's own cost model
    # (e.g. "InferenceX TCO"), with its $ per million output tokens; the two are never mixed.
    "cost_basis", "publisher_usd_per_mtok",
    # Precision split as the source states it (`precision` stays the publisher's own summary word):
    # the weights', the activations' (matmul inputs) and the KV cache's dtype; empty = not stated.
    "weight_dtype", "activation_dtype", "kv_cache_dtype",
    # What ran, beside what the client asked for: a server caps the sequences it batches at once
    # (vLLM's --max-num-seqs), so a client concurrency above it queues; `running_batch` is the
    # batch that ran (NaN = `concurrency`), and the estimate calibrates on it.
    "running_batch",
    # How `concurrency` and the lengths were obtained: e.g. "client" / "static batch" / "Little's
    # law: completed samples/s x mean latency"; "exact" / "nominal (random-range-ratio 0.8)" /
    # "dataset mean". Empty = as the source states them.
    "concurrency_basis", "length_basis",
]
_NUMERIC = {"input_length", "output_length", "concurrency", "chips", "output_tokens_per_s_per_chip",
            "total_tokens_per_s_per_chip", "interactivity_tokens_per_s", "ttft_p50_s", "ttft_mean_s",
            "ttft_p99_s", "tpot_p50_s", "tpot_mean_s", "tpot_p99_s", "e2e_p50_s",
            "decode_chips", "publisher_usd_per_mtok", "running_batch"}


def published_frame(rows: list[dict] | pd.DataFrame) -> pd.DataFrame:
    """Rows (dicts, or a DataFrame, with any of COLUMNS) as a DataFrame with exactly COLUMNS, numbers
    as floats."""
    df = (rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(rows)).reindex(columns=COLUMNS)
    for column in _NUMERIC:
        df[column] = pd.to_numeric(df[column], errors="coerce").astype(float)
    df["valid"] = df["valid"].map(_truth).astype(bool)
    # How it was run: True/False, or None where the publisher does not say (kept apart from False).
    for column in ("disaggregated", "multinode"):
        df[column] = df[column].map(_flag).astype(object)
    df["spec_decoding"] = df["spec_decoding"].map(_spec_method).astype(object)
    return df


def _flag(value) -> bool | None:
    """A stored yes/no cell: True, False, or None when unknown (empty)."""
    if isinstance(value, str):
        low = value.strip().lower()
        return True if low in ("true", "1", "yes") else False if low in ("false", "0", "no") else None
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return bool(value)


def _spec_method(value) -> str | None:
    """The speculative-decoding method, lower case ('none' when the publisher says none); None unknown."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip().lower()
    return text or None


def _truth(value) -> bool:
    """A stored `valid` cell: True unless it says otherwise (an absent cell is a published result)."""
    if isinstance(value, str):
        return value.strip().lower() not in ("false", "0", "no", "invalid")
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    return bool(value)


def interactivity_from_tpot(tpot_s) -> float:
    """Tokens/s one user sees from a TPOT in seconds (NaN when there is none)."""
    try:
        tpot = float(tpot_s)
    except (TypeError, ValueError):
        return math.nan
    return 1.0 / tpot if tpot > 0 and math.isfinite(tpot) else math.nan


def as_result_rows(published: pd.DataFrame, files: pd.Series | None = None) -> pd.DataFrame:
    """Published rows in the columns of `load_results` (`source = "published"`): throughput over all
    chips as `output_tokens_per_s`, the framework as the serving stack, the precision as `dtype`."""
    p = published
    chips = p["chips"]
    kind = ["serve" if pd.notna(c) or str(s).lower() in ("server", "interactive") else "generate"
            for c, s in zip(p["concurrency"], p["scenario"])]
    out = pd.DataFrame({
        "file": files if files is not None else "",
        "status": "ok",
        "valid": p["valid"].astype(bool),
        "invalid_reasons": ["" if v else f"{pub} marks it invalid" for v, pub in zip(p["valid"], p["publisher"])],
        "workload": p["model"],
        "scale": "published: " + p["publisher"].astype(str),   # so a table names it as published
        "dtype": p["precision"],
        "input_length": p["input_length"],
        "output_length": p["output_length"],
        "backend": p["framework"],
        "device": None,
        "accelerator": p["accelerator"],
        "chips": chips,
        "started_at": p["date"],
        "scenario_kind": kind,
        "server_name": p["framework"],
        "server_version": p["framework_version"],
        "concurrency": p["concurrency"],
        "output_tokens_per_s": p["output_tokens_per_s_per_chip"] * chips,
        # What a server row is priced on (scenarios/serve/cost.py): seconds of the whole system per
        # token, input and output together; NaN where the publisher gives output tokens only (MLPerf).
        "input_tokens_per_s": (p["total_tokens_per_s_per_chip"] - p["output_tokens_per_s_per_chip"]) * chips,
        "blended_s_per_token": 1.0 / (p["total_tokens_per_s_per_chip"] * chips),
        "interactivity_tokens_per_s": p["interactivity_tokens_per_s"],
        "ttft_p50_s": p["ttft_p50_s"], "ttft_mean_s": p["ttft_mean_s"], "ttft_p99_s": p["ttft_p99_s"],
        "tpot_p50_s": p["tpot_p50_s"], "tpot_mean_s": p["tpot_mean_s"], "tpot_p99_s": p["tpot_p99_s"],
        "e2e_p50_s": p["e2e_p50_s"],
        "older_runs": 0,
        "source": SOURCE_PUBLISHED,
        "publisher": p["publisher"],
        "submitter": p["submitter"],
        "model": p["model"],
        "published_model": p["published_model"],
        "reference": p["reference"],
        # As stored, so match.compare_published reads these rows as it reads read_published's.
        "precision": p["precision"], "framework": p["framework"],
        "output_tokens_per_s_per_chip": p["output_tokens_per_s_per_chip"],
    }, index=p.index)
    return out.reset_index(drop=True)
