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
`*_intvty` = 1 / TPOT.

What its per-GPU figures divide by (InferenceX `utils/process_result.py`, checked at 843c6254,
2026-08-21, and its history since 450d834a, 2025-11-05):

    tput_per_gpu         = (input + output tokens/s) / all GPUs
    input_tput_per_gpu   = input tokens/s  / prefill GPUs      (all GPUs on a single node)
    output_tput_per_gpu  = output tokens/s / DECODE GPUs       (all GPUs on a single node, or a
                                                                multi-node run without decode GPUs)

tpubench's per-chip throughput is output tokens/s over ALL chips the system holds (that is what
the chips cost), so for a disaggregated row:

    chips = P + D        decode_chips = D
    output_tokens_per_s_per_chip = output_tput_per_gpu * D / (P + D)

Taking `output_tput_per_gpu` as per-chip output would overstate a disaggregated system by
(P + D) / D (up to 3x on InferenceX's own rows). Where the row gives the GPUs:

- multi-node rows (`is_multinode`): P = num_prefill_gpu, D = num_decode_gpu, written by the
  harness itself;
- disaggregated rows of the older schema (`disagg` true, `is_multinode` false, before 2025-12):
  the API repeats the total N in both num_*_gpu fields, so the split is solved from the row's own
  three figures, tput x N = input x P + output x (N - P), i.e. P = N (tput - output) / (input -
  output), kept only when it comes out a whole number between 1 and N - 1 (else the row is left
  out, counted: its per-chip output cannot be known);
- single-node rows: chips = tp (decode_tp): the API's num_*_gpu there is the app's tp x ep, 64
  for one 8-GPU node at ep 8, which is not how many GPUs ran.

Each row also says how it was run, kept apart when fronts are drawn (match.py):
`spec_decoding` (InferenceX's spec_method: "none", "mtp", ...), `disaggregated`, `multinode`
(None, unknown, for an older-schema disaggregated row).
The framework version is the image tag. Rows without lengths or concurrency (agentic trace
replays) and rows without an output throughput are left out and counted; a file that is not such
an array, or a number that is not finite, is one line naming the file and the field. A row the
physics gate refuses (estimate/gate.py: a figure not positive, or faster than its chip's roofline allows) is
left out with a note naming the file and its place in the array (`dsr1.json [17]`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from tpubench.errors import UserError
from tpubench.estimate.gate import gate
from tpubench.output.published.rows import interactivity_from_tpot, published_frame

PUBLISHER = "InferenceX"


class _Row:
    """One API row and where it sits, so every number read can name its field in an error."""

    def __init__(self, row: dict, where: str, index: int):
        self.row, self.where, self.index = row, where, index

    def num(self, key: str, *, metric: bool = False) -> float:
        """The field as a float; NaN when absent, null, text or a bool; an error when it is a
        number no float holds (a 400-digit integer, 1e400, Infinity)."""
        source = self.row.get("metrics") if metric else self.row
        value = source.get(key) if isinstance(source, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:
                x = float(value) if isinstance(value, str) else math.nan
            except ValueError:
                return math.nan
            return x if math.isfinite(x) else math.nan
        field = f"[{self.index}]." + (f"metrics.{key}" if metric else key)
        try:
            x = float(value)
        except OverflowError:
            raise UserError("number too large", where=self.where, field=field) from None
        if not math.isfinite(x):
            raise UserError(f"not a finite number: {value!r}", where=self.where, field=field)
        return x


def _flag(value) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _gpus(r: _Row) -> tuple[float, float]:
    """(chips, decode_chips) of a row, decode_chips NaN where output is already over all chips;
    NaN chips when a disaggregated row's split cannot be known (module docstring)."""
    prefill, decode = r.num("num_prefill_gpu"), r.num("num_decode_gpu")
    if _flag(r.row.get("is_multinode")):
        if prefill > 0 and decode > 0:
            return prefill + decode, decode
        total = (prefill if prefill > 0 else 0) + (decode if decode > 0 else 0)
        return (total if total > 0 else math.nan), math.nan
    if _flag(r.row.get("disagg")):
        if prefill > 0 and decode > 0 and prefill != decode:
            return prefill + decode, decode
        total = decode if decode > 0 else r.num("decode_tp")
        return total, _decode_share(r, total)
    tp = r.num("decode_tp")
    if not tp > 0:
        tp = r.num("tp")
    if not tp > 0:
        tp = decode if decode > 0 else prefill
    return (tp if tp > 0 else math.nan), math.nan


def _decode_share(r: _Row, total: float) -> float:
    """Decode GPUs of an older-schema disaggregated row: solved from tput x N = in x P + out x (N - P)."""
    t, i, o = (r.num(k, metric=True) for k in ("tput_per_gpu", "input_tput_per_gpu", "output_tput_per_gpu"))
    if not (total > 1 and t > 0 and i > 0 and o > 0) or i == o:
        return math.nan
    prefill = total * (t - o) / (i - o)
    whole = round(prefill)
    if abs(prefill - whole) > 1e-6 * total or not 1 <= whole <= total - 1:
        return math.nan
    return total - whole


def _multinode(row: dict) -> bool | None:
    """is_multinode; unknown (None) for a disaggregated row of the older schema, which did not
    record it (the API's false there is a default: InferenceX's harness has since required
    multi-node for every disaggregated run)."""
    if _flag(row.get("is_multinode")):
        return True
    return None if _flag(row.get("disagg")) else False


def _image_tag(image) -> str | None:
    text = str(image or "")
    tail = text.rsplit("/", 1)[-1]
    return tail.split(":", 1)[1] if ":" in tail else None


def _spec_method(row: dict) -> str:
    value = row.get("spec_method", row.get("spec_decoding"))
    return str(value).strip().lower() if value not in (None, "", False) else "none"


def parse_rows(data, where: str, model: str | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Rows of an InferenceX API answer as published rows, and notes on what was left out.
    `model` names the model as your workloads do (e.g. its Hugging Face id), for matching."""
    if not isinstance(data, list):
        raise UserError("expected the JSON array /api/v1/benchmarks returns, got "
                        f"{type(data).__name__}", where=where)
    rows, at, no_lengths, no_throughput, no_split = [], [], 0, 0, 0
    for i, row in enumerate(data):
        if not isinstance(row, dict):
            raise UserError(f"expected an object, got {type(row).__name__}", where=where, field=f"[{i}]")
        for key in ("hardware", "model"):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise UserError("missing or not text", where=where, field=f"[{i}].{key}")
        metrics = row.get("metrics")
        if not isinstance(metrics, dict):
            raise UserError("missing or not an object", where=where, field=f"[{i}].metrics")
        r = _Row(row, where, i)
        isl, osl, conc = r.num("isl"), r.num("osl"), r.num("conc")
        if row.get("benchmark_type", "single_turn") != "single_turn" or not (isl > 0 and osl > 0 and conc > 0):
            no_lengths += 1
            continue
        output_per_gpu = r.num("output_tput_per_gpu", metric=True)
        if not output_per_gpu > 0:
            no_throughput += 1
            continue
        chips, decode_chips = _gpus(r)
        disaggregated = _flag(row.get("disagg"))
        if not chips > 0 or (disaggregated and not _flag(row.get("is_multinode")) and not decode_chips > 0):
            no_split += 1
            continue
        output_per_chip = output_per_gpu * decode_chips / chips if decode_chips > 0 else output_per_gpu
        interactivity = r.num("median_intvty", metric=True)
        if not interactivity > 0:
            interactivity = interactivity_from_tpot(r.num("median_tpot", metric=True))
        at.append(i)
        rows.append({
            "publisher": PUBLISHER, "submitter": PUBLISHER,
            "model": model or row["model"], "published_model": row["model"],
            "input_length": isl, "output_length": osl, "concurrency": conc, "scenario": "serving",
            "accelerator": row["hardware"], "chips": chips, "decode_chips": decode_chips,
            "spec_decoding": _spec_method(row), "disaggregated": disaggregated, "multinode": _multinode(row),
            "framework": row.get("framework"), "framework_version": _image_tag(row.get("image")),
            "precision": row.get("precision"),
            "output_tokens_per_s_per_chip": output_per_chip,
            "total_tokens_per_s_per_chip": r.num("tput_per_gpu", metric=True),
            "interactivity_tokens_per_s": interactivity,
            "ttft_p50_s": r.num("median_ttft", metric=True), "ttft_mean_s": r.num("mean_ttft", metric=True),
            "ttft_p99_s": r.num("p99_ttft", metric=True),
            "tpot_p50_s": r.num("median_tpot", metric=True), "tpot_mean_s": r.num("mean_tpot", metric=True),
            "tpot_p99_s": r.num("p99_tpot", metric=True), "e2e_p50_s": r.num("median_e2el", metric=True),
            "valid": True, "date": row.get("date"), "reference": row.get("run_url") or row.get("image"),
        })
    notes = []
    if no_lengths:
        notes.append(f"{no_lengths} row(s) without fixed lengths and concurrency (agentic traces) left out")
    if no_throughput:
        notes.append(f"{no_throughput} row(s) without metrics.output_tput_per_gpu left out")
    if no_split:
        notes.append(f"{no_split} disaggregated row(s) whose prefill/decode GPU split cannot be told from the row "
                     "left out (their output per chip is unknown)")
    return gate(published_frame(rows), notes.append, names=[f"{where} [{i}]" for i in at]), notes


def import_inferencex(path: str | Path, model: str | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Read a saved `/api/v1/benchmarks?model=...` answer (see the module docstring)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read: {exc.strerror or exc}", where=str(path)) from None
    except RecursionError:
        raise UserError("not an InferenceX answer: JSON nested too deeply", where=str(path)) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"not JSON: {exc}", where=str(path)) from None
    return parse_rows(data, str(path), model)
