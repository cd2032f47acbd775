"""Result files: the RunResult schema, atomic never-overwriting writes, and loading to a DataFrame.

A result file is self-describing: the resolved run point, the environment, raw samples, metrics
(names carry units: `_s`, `_bytes`, `_per_s`), the numerics fingerprint and validity. That alone
is enough to price it later, on any machine.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import re
import tempfile
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tpubench.errors import UserError

SCHEMA_VERSION = 1


class Validity(BaseModel):
    valid: bool = True
    reasons: list[str] = Field(default_factory=list)


class RunResult(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    status: Literal["ok", "failed"] = "ok"
    error: str | None = None
    workload_file: str = ""
    point: dict[str, Any]                  # RunPoint.to_dict()
    point_key: str                          # RunPoint.key(): what --resume matches on
    environment_key: str = ""               # hash of backend + device + versions (for --resume)
    backend: str                            # "torch" | "jax"
    device: str                             # "cpu" | "cuda" | "tpu" | "neuron" | "xla" | "mps" | jax platform
    environment: dict[str, Any] = Field(default_factory=dict)
    started_at: str = ""
    finished_at: str = ""
    timing: dict[str, float] = Field(default_factory=dict)     # load_s, compile_s, warmup_s, measure_s
    # True when the point ran on the model the previous point built (its load_s is then 0).
    model_reused: bool = False
    compile: dict[str, Any] = Field(default_factory=dict)      # per-shape compile seconds, recompiles
    samples: dict[str, list[float]] = Field(default_factory=dict)
    metrics: dict[str, float | int | None] = Field(default_factory=dict)
    numerics: dict[str, Any] = Field(default_factory=dict)
    validity: Validity = Field(default_factory=Validity)
    warnings: list[str] = Field(default_factory=list)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:80] or "run"


def result_filename(result: RunResult) -> str:
    p = result.point
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    layout = "".join(f"{kind}{p[key]}" for kind, key in (("tp", "tensor_parallel"), ("ep", "expert_parallel"),
                                                          ("dp", "data_parallel")) if (p.get(key) or 1) > 1)
    parts = [p.get("workload", "run"), p.get("scale", ""), result.device, layout,
             "-".join(f"{k}{p[key]}" for k, key in (("b", "batch_size"), ("i", "input_length"), ("o", "output_length"))
                      if p.get(key) is not None), stamp]
    return _slug("_".join(str(x) for x in parts if x)) + ".json"


def write_result(result: RunResult, out_dir: str | Path) -> Path:
    """Write atomically (temp file + fsync + rename) under a name that is never reused."""
    return store_result(result, out_dir)[1]


def store_result(result: RunResult, out_dir: str | Path) -> tuple[RunResult, Path]:
    """Write `result` as write_result does, always: what was written and where. A result holding
    a text that UTF-8 cannot encode is written with such texts escaped; one that still cannot be
    serialized is written as a failed result with the reason, so a point that ran is never lost."""
    stored, data = storable(result)
    return stored, write_new_file(out_dir, result_filename(stored), data)


def storable(result: RunResult) -> tuple[RunResult, bytes]:
    """(the result as it is stored, its JSON bytes): see store_result."""
    try:
        return result, result.model_dump_json(indent=1).encode()
    except ValueError:      # pydantic's serialization error: a lone surrogate, an unknown type
        pass
    try:
        escaped = RunResult.model_validate(safe_tree(result.model_dump()))
        return escaped, escaped.model_dump_json(indent=1).encode()
    except ValueError as exc:
        failed = _unserializable(result, exc)
        try:
            return failed, failed.model_dump_json(indent=1).encode()
        except ValueError:
            failed.environment = {}         # the environment itself cannot be serialized
            return failed, failed.model_dump_json(indent=1).encode()


def _unserializable(result: RunResult, exc: Exception) -> RunResult:
    """A failed result with the identity of `result` (enough for --resume and a report)."""
    identity = {name: getattr(result, name) for name in ("workload_file", "point", "point_key", "environment_key",
                                                         "backend", "device", "environment", "started_at",
                                                         "finished_at")}
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    failed = RunResult(**safe_tree(identity), status="failed",
                       error=safe_text(f"the result cannot be serialized: {reason}")[:500])
    failed.validity = Validity(valid=False, reasons=["run failed", "the result cannot be serialized"])
    return failed


def safe_text(text: str) -> str:
    """`text` as UTF-8 can store it: a lone surrogate (valid in JSON as \\ud800, which a server or a
    YAML file may send, yet not encodable in UTF-8) becomes the six characters `\\ud800`."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def safe_tree(value: Any) -> Any:
    """`value` (JSON-like: dicts, lists, tuples, strings...) with every string made safe_text."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        return {safe_tree(k): safe_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [safe_tree(v) for v in value]
    return value


def write_new_file(out_dir: str | Path, name: str, data: bytes) -> Path:
    """`data` as out_dir/name, or name-1, name-2... when taken: atomic, never overwriting."""
    out = Path(out_dir)
    target = out / name
    stem, suffix = target.stem, target.suffix
    with _temp_copy(out, suffix, data) as tmp:
        n = 1
        while target.exists():
            target = out / f"{stem}-{n}{suffix}"
            n += 1
        try:
            # os.link fails if the target appeared meanwhile: a concurrent writer never clobbers it.
            os.link(tmp, target)
        except OSError as exc:
            # FUSE bucket mounts (gcsfuse, goofys) answer ENOSYS on older kernels.
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            # No hard links on this filesystem (some network mounts): rename still never leaves a
            # half-written file, and the name was checked as unused just above.
            os.replace(tmp, target)
    return target


def replace_file(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` atomically, replacing what was there: a reader sees the old file or
    the new one, never half of one."""
    path = Path(path)
    with _temp_copy(path.parent, path.suffix, data) as tmp:
        os.replace(tmp, path)
    return path


@contextlib.contextmanager
def _temp_copy(folder: Path, suffix: str, data: bytes):
    """`data` in a synced temporary file in `folder` (readable as results are), removed on leaving
    unless it was renamed; a folder that cannot be written is one line naming it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=folder)
    except OSError as exc:
        raise UserError(f"cannot write here: {exc.strerror or exc}", where=str(folder)) from None
    try:
        readable_by_all(fd)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        yield tmp
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def readable_by_all(fd: int) -> None:
    """mkstemp creates files 0600; results are shared data, so give them the umask's mode."""
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)


def iter_result_files(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    if isinstance(paths, (str, Path)):
        paths = [paths]
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(f for f in p.rglob("*.json") if not f.name.startswith(".tmp-")))
        elif p.is_file():
            files.append(p)
        else:
            raise UserError("no such file or folder", where=str(p))
    return files


def read_result(path: str | Path) -> RunResult:
    # Parsing bytes in pydantic-core is ~3x faster than json.load + model_validate (the stdlib
    # parser is slow on the float-heavy sample lists); validation is the same.
    return RunResult.model_validate_json(Path(path).read_bytes())


def read_results(paths, *, warn: Callable[[str], None] | None = None) -> list[tuple[Path, RunResult]]:
    """Every readable result under `paths`; a corrupt or foreign file is skipped with a warning naming it."""
    warn = warn or (lambda msg: warnings.warn(msg, stacklevel=3))
    out = []
    for f in iter_result_files(paths):
        try:
            out.append((f, read_result(f)))
        except (OSError, ValueError, ValidationError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if isinstance(exc, ValidationError) and exc.errors():
                # Name the first problem ("Invalid JSON: ..." for a truncated file), not just the count.
                err = exc.errors()[0]
                loc = ".".join(str(p) for p in err.get("loc", ()))
                first = f"{first}: {loc + ': ' if loc else ''}{err.get('msg', '')}"
            warn(f"skipping {f}: not a readable tpubench result ({first})")
    return out


# Columns every row has, in this order; metric columns follow, sorted.
BASE_COLUMNS = [
    "file", "schema_version", "status", "valid", "invalid_reasons", "error", "workload", "scale",
    "family", "dtype", "experts_implementation", "execution_mode", "batch_size", "input_length",
    "output_length", "backend", "device", "accelerator", "chips", "host", "torch_version",
    "transformers_version", "jax_version", "tpubench_version", "git_revision", "started_at",
    "point_key", "warnings",
]


def flatten(result: RunResult, file: str = "") -> dict[str, Any]:
    """One tidy row: identifying columns, then every metric as its own column."""
    p, env = result.point, result.environment
    row: dict[str, Any] = {
        "file": file,
        "schema_version": result.schema_version,
        "status": result.status,
        "valid": bool(result.validity.valid) and result.status == "ok",
        "invalid_reasons": "; ".join(result.validity.reasons),
        "error": result.error,
        "workload": p.get("workload"),
        "scale": p.get("scale"),
        "family": p.get("family"),
        "dtype": p.get("dtype"),
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
    for key, value in result.timing.items():
        row[key] = value
    row["model_reused"] = result.model_reused
    # The parallel layout (section 16): chips above is the world size (vCPUs over all ranks on a CPU).
    row["tensor_parallel"] = p.get("tensor_parallel", 1)
    row["expert_parallel"] = p.get("expert_parallel", 1)
    row["data_parallel"] = p.get("data_parallel") or 1
    row["world_size"] = env.get("world_size", 1)
    row["scenario_kind"] = p.get("scenario_kind", "generate")
    # Serving: the stack measured and the load point.
    load = (p.get("params") or {}).get("load") or {}
    row["server_name"] = env.get("server_name")
    row["server_version"] = env.get("server_version")
    row["concurrency"] = load.get("concurrency")
    row["request_rate"] = load.get("request_rate")
    row["instance"] = env.get("instance")
    row["process_group_backend"] = env.get("process_group_backend")
    for key, value in result.metrics.items():
        row[key] = math.nan if value is None else value
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
    "scenario_kind", "server_name", "server_version", "concurrency", "request_rate", "instance", "data_parallel"]


# What `load_results(keep=...)` accepts, and what makes two result files the same measurement: the
# run point, the environment (hash of backend, device and versions), the backend and the device.
KEEP_CHOICES = ("latest", "all")
SAME_POINT_KEYS = ("point_key", "environment_key", "backend", "device")


def check_keep(keep: str) -> None:
    if keep not in KEEP_CHOICES:
        raise UserError(f"must be one of {', '.join(map(repr, KEEP_CHOICES))}, got {keep!r}", field="keep")


def load_results(paths, *, warn: Callable[[str], None] | None = None, keep: str = "latest"):
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
    """
    import pandas as pd

    check_keep(keep)
    loaded = read_results(paths, warn=warn)
    rows = [flatten(r, str(f)) for f, r in loaded]
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame(columns=BASE_COLUMNS).assign(older_runs=pd.Series(dtype="int64"))
        df.attrs["older_runs_left_out"] = 0
        return df
    older, newer = _run_order(df, [r.environment_key for _, r in loaded], [f.name for f, _ in loaded])
    df["older_runs"] = older
    left_out = 0
    if keep == "latest":
        latest = newer == 0
        left_out = int(len(df) - latest.sum())
        if left_out:
            df = df[latest].reset_index(drop=True)
    extra = sorted(c for c in df.columns if c not in BASE_COLUMNS)
    df = df[[c for c in BASE_COLUMNS if c in df.columns] + extra]
    df.attrs["older_runs_left_out"] = left_out
    return df


def _run_order(df, environment_keys: list[str], names: list[str]):
    """Per row, (results of the same point older than it, results newer than it), as int
    arrays aligned with `df`: one stable sort by time and a groupby, no per-group Python."""
    import numpy as np
    import pandas as pd

    started = pd.to_datetime(df["started_at"], utc=True, errors="coerce", format="ISO8601")
    order = pd.DataFrame({"point_key": df["point_key"].to_numpy(), "environment_key": environment_keys,
                          "backend": df["backend"].to_numpy(), "device": df["device"].to_numpy(),
                          "started": started.dt.tz_convert(None).to_numpy(), "name": names,
                          "file": df["file"].to_numpy()})
    order = order.sort_values(["started", "name", "file"], na_position="first", kind="stable")
    groups = order.groupby(list(SAME_POINT_KEYS), sort=False, dropna=False)
    older = np.empty(len(df), dtype=np.int64)
    newer = np.empty(len(df), dtype=np.int64)
    positions = order.index.to_numpy()
    older[positions] = groups.cumcount().to_numpy()
    newer[positions] = groups.cumcount(ascending=False).to_numpy()
    return older, newer


def load_requests(paths, *, warn: Callable[[str], None] | None = None, keep: str = "latest"):
    """Every request of serve results as a pandas DataFrame: one row per request (its timings in
    seconds, tokens, status and error), with the identity of the point it belongs to."""
    import pandas as pd

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
