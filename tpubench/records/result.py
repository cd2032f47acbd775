"""Result records: the RunResult schema and its files, written atomically and never overwritten.

A result file is self-describing: the resolved run point, the environment, raw samples, metrics
(names carry units: `_s`, `_bytes`, `_per_s`), the numerics fingerprint and validity. That alone
is enough to price it later, on any machine.
"""

from __future__ import annotations

import errno
import os
import re
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tpubench.records import sanity, usable

# Re-exported: these lived here, and callers still import them from here.
from tpubench.records.files import (  # noqa: F401
    iter_result_files,
    readable_by_all,
    replace_file,
    temp_copy,
)

SCHEMA_VERSION = 1


class Validity(BaseModel):
    """Whether a point is usable, and how noisy it is (records/usable.py says what each means)."""

    valid: bool = True
    reasons: list[str] = Field(default_factory=list)     # what is wrong with it: never used
    noise: list[str] = Field(default_factory=list)       # why its figures are noisy: used, marked
    cv: float | None = None                              # its headline's coefficient of variation

    @model_validator(mode="before")
    @classmethod
    def _noise_was_invalid(cls, data: Any) -> Any:
        """A file from before `noise` existed listed high variation among its invalidity reasons:
        moved to noise, and the point is valid again when nothing else was wrong."""
        if not isinstance(data, dict) or "noise" in data or not isinstance(data.get("reasons"), list):
            return data
        if not all(isinstance(r, str) for r in data["reasons"]):
            return data
        wrong, noise, cv = usable.split_older_reasons(data["reasons"])
        if not noise:
            return data
        return {**data, "valid": data.get("valid", True) if wrong else True, "reasons": wrong, "noise": noise,
                "cv": data.get("cv", cv)}


class RunResult(BaseModel):
    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    status: Literal["ok", "failed", "skipped"] = "ok"   # skipped: not measured, `error` says why
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
    # Energy over the timed window (measure/energy.py) and its `verdict`: measured, modelled, invalid
    # or unavailable with the `reason` (records/energy_verdict.py); {} in results from before that.
    energy: dict[str, Any] = Field(default_factory=dict)
    # MoE points: per-expert load per layer over the timed loop and its imbalance (models/routing.py).
    moe: dict[str, Any] = Field(default_factory=dict)
    # run --profile: one profiled pass after the timed loop, time by category (measure/profile.py).
    profile: dict[str, Any] = Field(default_factory=dict)
    # The weights', activations' and KV cache's dtypes (workload_spec/precision.py); {} in results
    # from before them, whose model dtype was all three.
    precision: dict[str, str] = Field(default_factory=dict)


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
    with temp_copy(out, suffix, data) as tmp:
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


def read_result(path: str | Path) -> RunResult:
    # Parsing bytes in pydantic-core is ~3x faster than json.load + model_validate (the stdlib
    # parser is slow on the float-heavy sample lists); validation is the same.
    return RunResult.model_validate_json(_file_bytes(path))


def _file_bytes(path: str | Path) -> bytes:
    """The bytes of the file at `path`, read with the os module: open()'s buffered file object
    cost half the read of a result (10,000 files: 0.05 s). The path as given, not a Path:
    building a Path cost ~13 us a file (0.13 s)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):     # one read for a result file, one more that says it ended
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_results(paths, *, warn: Callable[[str], None] | None = None) -> list[tuple[Path, RunResult]]:
    """Every readable result under `paths`; a corrupt or foreign file is skipped with a warning naming it."""
    warn = warn or (lambda msg: warnings.warn(msg, stacklevel=3))
    out = []
    for f in iter_result_files(paths):
        result = read_usable_result(f, warn)
        if result is not None:
            out.append((f, result))
    return out


def read_usable_result(f: str | Path, warn: Callable[[str], None]) -> RunResult | None:
    """The result in `f`, or None with a warning naming the file when it is corrupt, foreign or unusable."""
    try:
        result = read_result(f)
    except (OSError, ValueError, ValidationError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, ValidationError) and exc.errors():
            # Name the first problem ("Invalid JSON: ..." for a truncated file), not just the count.
            err = exc.errors()[0]
            loc = ".".join(str(p) for p in err.get("loc", ()))
            first = f"{first}: {loc + ': ' if loc else ''}{err.get('msg', '')}"
        warn(f"skipping {f}: not a readable tpubench result ({first})")
        return None
    why = sanity.problem(result)
    if why:   # parses, but would crash or mislead what computes with it (records/sanity.py)
        warn(f"skipping {f}: not a usable tpubench result ({why})")
        return None
    return result
