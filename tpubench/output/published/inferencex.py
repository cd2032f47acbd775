"""InferenceX published results: the JSON its API returns for `/api/v1/benchmarks?model=...`.

Schema checked (2026-12-03) in SemiAnalysisAI/InferenceX, its page `results-and-ingestion.md` (in its docs folder)
("Published results API", "Throughput row schema") and in the app it points to,
SemiAnalysisAI/InferenceX-app `packages/db/src/queries/benchmarks.ts` (`BenchmarkRow`, what the
route returns) and `packages/db/src/etl/benchmark-mapper.ts`. The answer is a JSON array of rows:

    {"hardware": "h200", "framework": "vllm", "model": "dsr1", "precision": "fp8",
     "spec_method": "none", "disagg": false, "is_multinode": false,
     "prefill_tp": 8, ..., "decode_tp": 8, "decode_num_workers": 1,
     "num_prefill_gpu": 8, "num_decode_gpu": 8, "isl": 1024, "osl": 1024, "conc": 64,
     "image": "vllm/vllm-openai:v0.11.0", "date": "2026-11-20",
     "benchmark_type": "single_turn",            # newer answers; agentic rows: "agentic_traces"
     "metrics": {"tput_per_gpu": ..., "output_tput_per_gpu": ..., "input_tput_per_gpu": ...,
                 "median_ttft": s, "mean_ttft": s, "p99_ttft": s, "median_tpot": s, ...,
                 "median_intvty": tokens/s/user, "median_e2el": s, ...}}

InferenceX converts every `*_ms` figure of its harness to seconds (the `_ms` dropped) and derives
`*_intvty` = 1 / TPOT; `tput_per_gpu` counts input and output tokens, `output_tput_per_gpu` output
only (the figure tpubench compares, as its own per-chip throughput is output tokens/s).

Mapping: chips = num_prefill_gpu + num_decode_gpu for a disaggregated row (separate GPUs), else
the larger of the two (the same GPUs do both), else decode_tp x decode_num_workers. The framework
version is the image tag. Rows without lengths or concurrency (agentic trace replays) and rows
without an output throughput are left out and counted; a file that is not such an array is one
line naming the file and the field.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from tpubench.errors import UserError
from tpubench.output.published.rows import interactivity_from_tpot, published_frame

PUBLISHER = "InferenceX"


def _num(value) -> float:
    if isinstance(value, bool):
        return math.nan
    try:
        x = float(value)
    except (TypeError, ValueError):
        return math.nan
    return x if math.isfinite(x) else math.nan


def _chips(row: dict) -> float:
    prefill, decode = _num(row.get("num_prefill_gpu")), _num(row.get("num_decode_gpu"))
    if row.get("disagg") is True and prefill > 0 and decode > 0:
        return prefill + decode
    counts = [c for c in (prefill, decode) if c > 0]
    if counts:
        return max(counts)
    tp, workers = _num(row.get("decode_tp") or row.get("tp")), _num(row.get("decode_num_workers") or 1)
    return tp * workers if tp > 0 else math.nan


def _image_tag(image) -> str | None:
    text = str(image or "")
    tail = text.rsplit("/", 1)[-1]
    return tail.split(":", 1)[1] if ":" in tail else None


def parse_rows(data, where: str, model: str | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Rows of an InferenceX API answer as published rows, and notes on what was left out.
    `model` names the model as your workloads do (e.g. its Hugging Face id), for matching."""
    if not isinstance(data, list):
        raise UserError("expected the JSON array /api/v1/benchmarks returns, got "
                        f"{type(data).__name__}", where=where)
    rows, no_lengths, no_throughput = [], 0, 0
    for i, row in enumerate(data):
        if not isinstance(row, dict):
            raise UserError(f"expected an object, got {type(row).__name__}", where=where, field=f"[{i}]")
        for key in ("hardware", "model"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise UserError("missing or not text", where=where, field=f"[{i}].{key}")
        metrics = row.get("metrics")
        if not isinstance(metrics, dict):
            raise UserError("missing or not an object", where=where, field=f"[{i}].metrics")
        isl, osl, conc = _num(row.get("isl")), _num(row.get("osl")), _num(row.get("conc"))
        if row.get("benchmark_type", "single_turn") != "single_turn" or not (isl > 0 and osl > 0 and conc > 0):
            no_lengths += 1
            continue
        output_per_chip = _num(metrics.get("output_tput_per_gpu"))
        if not output_per_chip > 0:
            no_throughput += 1
            continue
        interactivity = _num(metrics.get("median_intvty"))
        if not interactivity > 0:
            interactivity = interactivity_from_tpot(metrics.get("median_tpot"))
        rows.append({
            "publisher": PUBLISHER, "submitter": PUBLISHER,
            "model": model or row["model"], "published_model": row["model"],
            "input_length": isl, "output_length": osl, "concurrency": conc, "scenario": "serving",
            "accelerator": row["hardware"], "chips": _chips(row),
            "framework": row.get("framework"), "framework_version": _image_tag(row.get("image")),
            "precision": row.get("precision"),
            "output_tokens_per_s_per_chip": output_per_chip,
            "total_tokens_per_s_per_chip": _num(metrics.get("tput_per_gpu")),
            "interactivity_tokens_per_s": interactivity,
            "ttft_p50_s": _num(metrics.get("median_ttft")), "ttft_mean_s": _num(metrics.get("mean_ttft")),
            "ttft_p99_s": _num(metrics.get("p99_ttft")),
            "tpot_p50_s": _num(metrics.get("median_tpot")), "tpot_mean_s": _num(metrics.get("mean_tpot")),
            "tpot_p99_s": _num(metrics.get("p99_tpot")), "e2e_p50_s": _num(metrics.get("median_e2el")),
            "valid": True, "date": row.get("date"), "reference": row.get("run_url") or row.get("image"),
        })
    notes = []
    if no_lengths:
        notes.append(f"{no_lengths} row(s) without fixed lengths and concurrency (agentic traces) left out")
    if no_throughput:
        notes.append(f"{no_throughput} row(s) without metrics.output_tput_per_gpu left out")
    return published_frame(rows), notes


def import_inferencex(path: str | Path, model: str | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Read a saved `/api/v1/benchmarks?model=...` answer (see the module docstring)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror or exc}", where=str(path)) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"not JSON: {exc}", where=str(path)) from None
    return parse_rows(data, str(path), model)
