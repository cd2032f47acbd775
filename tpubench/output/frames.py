"""Result files as pandas DataFrames: one tidy row per result (or per request of a serve result),
identifying columns first, every metric its own column; a point measured again counts once."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import warnings
from typing import TYPE_CHECKING, Any, Callable

from tpubench.errors import UserError
from tpubench.output.collection import paused_collection
from tpubench.output.python_strings import python_strings_here
from tpubench.output.results_cache import read_table
from tpubench.records import energy_verdict, usable
from tpubench.workload_spec.point import DEFAULT_KIND, RunPoint, key_of_point_dict, routing_label

if TYPE_CHECKING:   # the schema is imported where results are parsed, not to read the results cache
    from tpubench.records.result import RunResult

# Columns every row has, in this order; metric columns follow, sorted.
BASE_COLUMNS = [
    "file", "schema_version", "status", "valid", "invalid_reasons", "error", "workload", "scale",
    "family", "dtype", "experts_implementation", "execution_mode", "batch_size", "input_length",
    "output_length", "backend", "device", "accelerator", "chips", "host", "torch_version",
    "transformers_version", "jax_version", "tpubench_version", "git_revision", "started_at",
    "point_key", "warnings",
]

# What makes a MoE kernel A/B's arms differ: the experts implementation, and the decode loop in params.
_ARM_FIELDS, _ARM_PARAMS = ("experts_implementation",), ("decode_loop",)


def arm_free_key(point: dict) -> str:
    """The point's key (RunPoint.key) with its arm taken out: results that differ only in their
    experts implementation or decode loop share it; any other field of the point (lengths, routing,
    layout, model config, matmul precision, seed, ...) tells them apart."""
    params = {k: v for k, v in (point.get("params") or {}).items() if k not in _ARM_PARAMS}
    known = _point_fields()
    data = {k: v for k, v in point.items() if k in known and k not in _ARM_FIELDS}
    try:
        return key_of_point_dict({**data, "params": params, **dict.fromkeys(_ARM_FIELDS)})
    except TypeError:   # a point lacking a field this version requires: its own fields, hashed alike
        blob = json.dumps({**point, "params": params, **dict.fromkeys(_ARM_FIELDS)}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _point_fields() -> frozenset[str]:
    """RunPoint's field names (asked once: 10,000 results asked dataclasses 10,000 times)."""
    return frozenset(f.name for f in dataclasses.fields(RunPoint))


def _precision_columns(result: RunResult) -> dict[str, Any]:
    """weight_dtype, activation_dtype, kv_cache_dtype: as the result records them, else its model dtype."""
    recorded = result.precision or {}
    dtype = result.point.get("dtype")
    return {name: recorded.get(name, dtype) for name in ("weight_dtype", "activation_dtype", "kv_cache_dtype")}


def flatten(result: RunResult, file: str = "") -> dict[str, Any]:
    """One tidy row: identifying columns, then every metric as its own column."""
    p, env = result.point, result.environment
    row: dict[str, Any] = {
        "file": file,
        "schema_version": result.schema_version,
        "status": result.status,
        # The one definition of a usable point (records/usable.py); noise marks it, never drops it.
        "valid": usable.result_is_usable(result),
        "invalid_reasons": "; ".join(result.validity.reasons),
        "noisy": bool(result.validity.noise),
        "noise": "; ".join(result.validity.noise),
        "headline_cv": result.validity.cv,
        "error": result.error,
        "workload": p.get("workload"),
        "scale": p.get("scale"),
        "family": p.get("family"),
        "dtype": p.get("dtype"),
        "quantization": p.get("quantization") or "none",
        **_precision_columns(result),
        "experts_implementation": p.get("experts_implementation"),
        "execution_mode": p.get("execution_mode"),
        "batch_size": p.get("batch_size"),
        "input_length": p.get("input_length"),
        "output_length": p.get("output_length"),
        "backend": result.backend,
        "device": result.device,
        "accelerator": env.get("accelerator_name"),
        "chips": env.get("chips", 1),
        "host": env.get("hostname"),
        "torch_version": env.get("torch"),
        "transformers_version": env.get("transformers"),
        "jax_version": env.get("jax"),
        "tpubench_version": env.get("tpubench"),
        "git_revision": env.get("git_revision"),
        "started_at": result.started_at,
        "point_key": result.point_key,
        "warnings": "; ".join(result.warnings),
    }
    row.update(result.timing)
    row["model_reused"] = result.model_reused
    # The parallel layout (section 16): chips above is the world size (vCPUs over all ranks on a CPU).
    row["tensor_parallel"] = p.get("tensor_parallel", 1)
    row["expert_parallel"] = p.get("expert_parallel", 1)
    row["data_parallel"] = p.get("data_parallel") or 1
    row["world_size"] = env.get("world_size", 1)
    row["scenario_kind"] = p.get("scenario_kind", DEFAULT_KIND)
    # What the model is (to match published results), and that this row was measured here.
    row["hub_id"] = p.get("hub_id")
    row["source"] = "measured"
    # Serving: the stack measured and the load point.
    load = (p.get("params") or {}).get("load") or {}
    row["server_name"] = env.get("server_name")
    row["server_version"] = env.get("server_version")
    row["concurrency"] = load.get("concurrency")
    row["request_rate"] = load.get("request_rate")
    row["instance"] = env.get("instance")
    row["process_group_backend"] = env.get("process_group_backend")
    # At once, then the few null metrics made NaN in place (a hundred metrics a row, 10,000 rows).
    row.update(result.metrics)
    if None in result.metrics.values():
        row.update({key: math.nan for key, value in result.metrics.items() if value is None})
    # MoE: the routing asked for, and the per-layer expert load (JSON text: a list in a cell would
    # break pandas' hashing) for the report's heat map (models/routing.py).
    row["routing"] = routing_label(p.get("routing"))
    # The decode loop when not tpubench's own ("hf_generate": transformers' generate()), and the
    # kernel an experts arm named for a package ran (moe.kernel: kernels -> sonicmoe, tokamax -> xla).
    row["decode_loop"] = (p.get("params") or {}).get("decode_loop")
    kernel = result.moe.get("kernel") or {}
    row["experts_kernel"] = kernel.get("implementation")
    row["arm_free_key"] = arm_free_key(p)   # shared by the arms of one kernel A/B (report/kernel_speedups.py)
    # What generate() would have run for decode instead, where it differs (docs/measurement.md#generate-difference).
    row["generate_decode_experts"] = result.moe.get("generate_decode_experts_implementation")
    if result.moe.get("expert_load"):
        row["expert_load_json"] = json.dumps(result.moe["expert_load"])
    if (result.profile or {}).get("categories"):   # run --profile: time by category (measure/profile.py)
        row["profile_json"] = json.dumps({k: result.profile.get(k) for k in ("total_s", "categories", "top_ops")})
    # Whether energy was measured, modelled, invalid or unavailable and why (records/energy_verdict.py).
    row["energy_verdict"] = energy_verdict.verdict_of(result.energy)
    row["energy_why_not"] = energy_verdict.reason_of(result.energy) or None
    if result.energy.get("method"):   # how the energy metrics above were made (docs/measurement.md#energy)
        row["energy_method"] = result.energy.get("method")
        row["energy_source"] = result.energy.get("detail")
        row["energy_valid"] = bool(result.energy.get("valid"))
        row["energy_reasons"] = "; ".join(map(str, result.energy.get("reasons") or []))
        idle = result.energy.get("idle_power_w")
        if isinstance(idle, list) and idle and all(isinstance(w, (int, float)) for w in idle):
            row["idle_power_w"] = float(sum(idle))   # all the point's devices doing nothing (a budget's idle floor)
    return row


_SAMPLE_NAMES = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "output_tokens_per_s", "prefill_tokens_per_s",
                 "decode_tokens_per_s")
_STATS = ("mean", "stdev", "cv", "min", "max", "p50", "p90", "p95", "p99", "ci95_low", "ci95_high")


def _metric_columns() -> list[str]:
    cols = []
    for name in _SAMPLE_NAMES:
        timed = not name.endswith("_per_s")
        base = name[:-2] if timed else name
        for stat in _STATS:
            if stat == "mean" and not timed:
                cols.append(base)
            elif stat == "cv":
                cols.append(f"{base}_cv")
            else:
                cols.append(f"{base}_{stat}{'_s' if timed else ''}")
    return cols


# The stable column set of `tpubench export` (schema_version 1): new columns are only ever added.
EXPORT_COLUMNS = BASE_COLUMNS + ["load_s", "compile_s", "first_iteration_s", "warmup_s", "measure_s",
                                 "iterations", "generated_tokens", "peak_memory_bytes",
                                 "output_tokens_per_s_ci95_rel"] + _metric_columns() + [
    "model_reused", "older_runs", "tensor_parallel", "expert_parallel", "world_size", "process_group_backend",
    "scenario_kind", "server_name", "server_version", "concurrency", "request_rate", "instance", "data_parallel",
    "noisy", "noise", "headline_cv"]


# What `load_results(keep=...)` accepts, and what makes two result files the same measurement: the
# run point, the environment (hash of backend, device and versions), the backend and the device.
KEEP_CHOICES = ("latest", "all")
SAME_POINT_KEYS = ("point_key", "environment_key", "backend", "device")


def check_keep(keep: str) -> None:
    if keep not in KEEP_CHOICES:
        raise UserError(f"must be one of {', '.join(map(repr, KEEP_CHOICES))}, got {keep!r}", field="keep")


@paused_collection
def load_results(paths, *, warn: Callable[[str], None] | None = None, keep: str = "latest",
                 include_published: bool = False, shipped: bool = False,
                 meanwhile: Callable[[], object] | None = None):
    """A tidy pandas DataFrame, one row per run point (failed points included, status='failed').

    A point measured more than once (several files with the same `point_key`, `environment_key`,
    backend and device) is counted once by default:

    - `keep="latest"` keeps only its most recent result: the latest `started_at` (a missing or
      unreadable time counts as oldest), ties broken by file name, then by full path.
    - `keep="all"` keeps every file.

    Every row has an int column `older_runs`: how many results of the same point and environment
    are older than this one (in the order above). With keep="latest" that is the number of runs
    left out for the row (0 for a point measured once; runs per point = older_runs + 1); with
    keep="all" it numbers a point's runs from 0 (the oldest) to n - 1 (the latest, which has the
    same value as under keep="latest"). `df.attrs["older_runs_left_out"]` is the total number of rows left out (0 for
    keep="all"). Any other `keep` raises UserError.

    Every measured row has `source` "measured". `include_published=True` appends the published
    results imported beside them (`tpubench import`, stored in a `published/` folder under
    `paths`) as rows with `source` "published" and their publisher (output/published/rows.py);
    by default they are left out, so nothing priced or budgeted mixes them in unasked. With
    `include_published` and `shipped=True`, the reference rows shipped with tpubench
    (data/published/, output/published/store.shipped_published) join them too.

    Text columns hold Python strings (output/python_strings.py). `meanwhile()` runs while the
    files are parsed (a report imports and reads what it needs then: output/parse_pool.py), and
    the frames it builds hold Python strings too.
    """
    check_keep(keep)

    def prepare() -> None:
        import pandas  # noqa: F401 - the frame below needs it: imported while forked workers parse

        if meanwhile is not None:
            with python_strings_here():     # the frames it reads (a report's prices) as the report's are
                meanwhile()

    # Rows come from the results cache where a file is unchanged (output/results_cache.py).
    table = read_table(paths, flatten, warn=warn or (lambda msg: warnings.warn(msg, stacklevel=4)),
                       meanwhile=prepare)
    with python_strings_here():
        return _frame(table, paths, warn, keep, include_published, shipped)


def _frame(table, paths, warn, keep: str, include_published: bool, shipped: bool):
    """load_results' frame of the rows read (`table`)."""
    import pandas as pd

    if not table.files:
        df = pd.DataFrame(columns=BASE_COLUMNS).assign(older_runs=pd.Series(dtype="int64"))
        df.attrs["older_runs_left_out"] = 0
        return _with_published(df, paths, warn, shipped) if include_published else df
    # Built in its final column order (not reordered after: a copy of every column, 10,000 rows).
    extra = sorted({*table.columns, "older_runs"}.difference(BASE_COLUMNS))
    order = [c for c in BASE_COLUMNS if c in table.columns] + extra
    df = pd.DataFrame({c: table.columns[c] for c in order if c != "older_runs"})
    older, newer = _run_order(df, table.environment_keys, [f.rpartition(os.sep)[2] for f in table.files])
    df.insert(order.index("older_runs"), "older_runs", older)
    left_out = 0
    if keep == "latest":
        latest = newer == 0
        left_out = int(len(df) - latest.sum())
        if left_out:
            df = df[latest].reset_index(drop=True)
    df.attrs["older_runs_left_out"] = left_out
    return _with_published(df, paths, warn, shipped) if include_published else df


def _with_published(df, paths, warn, shipped: bool = False):
    """`df` with the published rows stored under `paths` appended (output/published/), and with
    `shipped` the reference rows shipped with tpubench; every one through the physics gate
    (estimate/gate.py), as they may be priced and budgeted."""
    import pandas as pd

    from tpubench.output.published.rows import as_result_rows
    from tpubench.output.published.store import all_published

    published = all_published(paths, warn=warn, shipped=shipped, checked=True)
    if published.empty:
        return df
    left_out = df.attrs.get("older_runs_left_out", 0)
    rows = as_result_rows(published, files=published["file"])
    out = pd.concat([df, rows], ignore_index=True) if len(df) else rows
    out.attrs["older_runs_left_out"] = left_out
    return out


def _run_order(df, environment_keys: list[str], names: list[str]):
    """Per row, (results of the same point older than it, results newer than it), as int
    arrays aligned with `df`: one stable sort by time, then each row's place among its point's
    rows, in numpy (half the time a sorted DataFrame and a groupby took over 10,000 rows)."""
    import numpy as np
    import pandas as pd

    started = pd.to_datetime(df["started_at"], utc=True, errors="coerce", format="ISO8601")
    # NaT is the smallest int64: a missing or unreadable time counts as oldest. np.lexsort is
    # stable and sorts by its last key first: time, then file name, then path.
    when = started.dt.tz_convert(None).to_numpy().view("i8")
    by_time = np.lexsort((_ranks(df["file"]), _ranks(np.array(names, dtype=object)), when))
    point = _group_ids([df["point_key"], np.array(environment_keys, dtype=object), df["backend"], df["device"]])
    older = np.empty(len(df), dtype=np.int64)
    older[by_time] = _cumcount(point[by_time])
    newer = np.bincount(point)[point] - 1 - older
    return older, newer


def _ranks(values):
    """Each value's rank among the distinct values, in Python's order of texts."""
    import pandas as pd

    return pd.factorize(values, sort=True)[0]


def _group_ids(keys: list):
    """One int per row, the same for rows equal in every key (a missing value a value of its own,
    as groupby(dropna=False) has it)."""
    import numpy as np
    import pandas as pd

    ids = np.zeros(len(keys[0]), dtype=np.int64)
    for key in keys:
        codes, uniques = pd.factorize(key, use_na_sentinel=False)
        # Renumbered after each key, so the products stay below rows squared.
        ids = pd.factorize(ids * len(uniques) + codes)[0]
    return ids


def _cumcount(groups):
    """Per position, how many earlier positions have its group (groupby().cumcount())."""
    import numpy as np

    by_group = np.argsort(groups, kind="stable")
    sorted_groups = groups[by_group]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    first_of_run = np.repeat(starts, np.diff(np.r_[starts, len(groups)]))
    out = np.empty(len(groups), dtype=np.int64)
    out[by_group] = np.arange(len(groups)) - first_of_run
    return out


def load_requests(paths, *, warn: Callable[[str], None] | None = None, keep: str = "latest"):
    """Every request of serve results as a pandas DataFrame: one row per request (its timings in
    seconds, tokens, status and error), with the identity of the point it belongs to."""
    import pandas as pd

    from tpubench.records.result import read_results

    points = load_results(paths, warn=warn, keep=keep)
    wanted = set(points["file"]) if len(points) else set()
    frames = []
    for f, result in read_results(paths, warn=lambda m: None):
        requests = getattr(result, "requests", None)
        if str(f) not in wanted or not requests:
            continue
        frame = pd.DataFrame(requests)
        frame.insert(0, "file", str(f))
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=["file"])
    ids = points[["file", "workload", "scale", "backend", "device", "accelerator", "chips", "server_name",
                  "concurrency", "request_rate", "point_key"]]
    return pd.concat(frames, ignore_index=True).merge(ids, on="file", how="left")
