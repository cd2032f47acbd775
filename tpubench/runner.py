"""Running a workload: pick device and scale, expand the sweep, measure each point, write results.

A point that fails is recorded as a failed result and the sweep goes on; every finished point is
on disk before the next one starts, so Ctrl-C or a kill loses nothing that was measured, and
`resume=True` skips points already present for this environment.
"""

from __future__ import annotations

import gc
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tpubench.backends import ACCELERATOR_DEVICES, get_backend, require_available
from tpubench.efficiency import peaks_for
from tpubench.environment import environment_key, host_environment
from tpubench.errors import UserError
from tpubench.results import RunResult, now_iso, read_results, write_result
from tpubench.workload import (FULL_SCALE, MAX_POINTS, RunPoint, check_sweep_size, expand, load_workload,
                               scale_names)

SMALL_SCALE = "small"
GiB = 1 << 30


class Reporter(Protocol):
    def note(self, message: str) -> None: ...
    def sweep_started(self, points: list[RunPoint]) -> None: ...
    def point_started(self, index: int, point: RunPoint) -> None: ...
    def phase(self, name: str, done: int, total: int) -> None: ...
    def point_finished(self, index: int, outcome: "PointOutcome") -> None: ...


class SilentReporter:
    def note(self, message): pass
    def sweep_started(self, points): pass
    def point_started(self, index, point): pass
    def phase(self, name, done, total): pass
    def point_finished(self, index, outcome): pass


@dataclass
class PointOutcome:
    point: RunPoint
    result: RunResult | None = None
    path: Path | None = None
    skipped: bool = False          # already measured (resume)


def default_device(backend: str) -> str | None:
    """The first accelerator torch can see, else cpu. JAX chooses its own default."""
    if backend != "torch":
        return None
    for device in ACCELERATOR_DEVICES:
        if device in ("xla", "mps"):
            continue  # never picked implicitly: the legacy path and laptops are opt-in
        if get_backend("torch", device).availability().available:
            return device
    return "cpu"


def choose_scale(workload, requested: str | None, on_accelerator: bool) -> tuple[str, str | None]:
    """(scale, note): the small scale when no accelerator is present, unless asked otherwise."""
    if requested:
        return requested, None
    if not on_accelerator and SMALL_SCALE in workload.scales:
        return SMALL_SCALE, (f"No accelerator present: running the '{SMALL_SCALE}' scale of {workload.name} "
                             "on the CPU (use --scale full for the full architecture).")
    return FULL_SCALE, None


def run_sweep(workload_path: str | Path, *, backend: str = "torch", device: str | None = None,
              scale: str | None = None, out_dir: str | Path = "results", resume: bool = False,
              retry_failed: bool = False, reporter: Reporter | None = None,
              max_points: int = MAX_POINTS) -> list[PointOutcome]:
    reporter = reporter or SilentReporter()
    workload = load_workload(workload_path)
    for name in scale_names(workload):   # an absurd sweep is refused before touching any device
        check_sweep_size(workload, name, source=str(workload_path), max_points=max_points)
    device = device or default_device(backend)
    be = get_backend(backend, device)
    require_available(be)
    scale, note = choose_scale(workload, scale, on_accelerator=_on_accelerator(be))
    if note:
        reporter.note(note)
    points = expand(workload, scale, source=str(workload_path), max_points=max_points)

    env, peaks = _environment(be, points)
    env_key = environment_key(be.name, be.device, env)
    too_big = _check_memory(be, points, str(workload_path))
    done = _already_measured(out_dir, env_key, retry_failed) if resume else set()

    reporter.sweep_started(points)
    outcomes: list[PointOutcome] = []
    built_key, built = None, None
    for index, point in enumerate(points):
        if point.key() in done:
            outcome = PointOutcome(point, skipped=True)
            outcomes.append(outcome)
            reporter.point_finished(index, outcome)
            continue
        reporter.point_started(index, point)
        started = now_iso()
        base = dict(workload_file=str(workload_path), point=point.to_dict(), point_key=point.key(),
                    environment_key=env_key, backend=be.name, device=be.device, environment=env,
                    started_at=started)
        try:
            if point.key() in too_big:
                raise MemoryError(too_big[point.key()])
            model_key = _model_identity(point)
            load_s, reused = 0.0, model_key == built_key
            if not reused:
                built, built_key = None, None   # a failed build must not be "reused" by the next point
                gc.collect()
                reporter.phase("load", 0, 1)
                t = time.perf_counter()
                built = be.build(point)
                load_s = time.perf_counter() - t
                built_key = model_key
            result = _measure_point(be, built, point, base, load_s, reporter, peaks.get(point.dtype))
            result.model_reused = reused
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # a failed point is data, not a crash: record it and go on
            result = RunResult(**base, status="failed", error=_describe(exc), finished_at=now_iso())
            result.validity.valid = False
            result.validity.reasons.append("run failed")
            if not isinstance(exc, (UserError, MemoryError)):
                result.warnings.append(traceback.format_exc(limit=3)[-1500:])
        path = write_result(result, out_dir)
        outcome = PointOutcome(point, result, path)
        outcomes.append(outcome)
        reporter.point_finished(index, outcome)
    return outcomes


def _environment(be, points: list[RunPoint]) -> tuple[dict, dict]:
    """Provenance for every result of the sweep, and the roofline peaks per dtype."""
    env = {**host_environment(), **be.environment()}
    platform = be.device if _on_accelerator(be) else "cpu"
    peaks = {dtype: peaks_for(platform, env.get("accelerator_name"), dtype) for dtype in {p.dtype for p in points}}
    env["roofline_peaks"] = {dtype: {k: v for k, v in p.items() if k != "probe"} if p else None
                             for dtype, p in peaks.items()}
    probe = next((p["probe"] for p in peaks.values() if p and "probe" in p), None)
    if probe:
        env["host_probe"] = probe
    return env, peaks


def _measure_point(be, built, point: RunPoint, base: dict, load_s: float, reporter: Reporter,
                   peaks: dict | None) -> RunResult:
    from tpubench.efficiency import roofline_metrics
    from tpubench.scenarios.generate import aggregate_rates, make_prompt, measure_generate, summarize_samples
    from tpubench.validity import assess, warnings_for

    vocab = _vocab_size(point)  # also where an unknown family or bad config surfaces
    prompt = make_prompt(point.measurement["seed"], point.batch_size, point.input_length, vocab)
    session = be.session(built, point, prompt)
    with session:
        m = measure_generate(session, point, on_phase=reporter.phase)
        on_device = session.on_requested_device()
    metrics = summarize_samples(m.samples)
    metrics.update(aggregate_rates(metrics, point.batch_size, point.input_length, point.output_length))
    metrics.update({
        "iterations": m.measure_iterations,
        "generated_tokens": m.generated_tokens,
        "peak_memory_bytes": m.peak_memory_bytes,
        "output_tokens_per_s_ci95_rel": _rel_half(metrics),
    })
    roofline, exceeds_peak = roofline_metrics(point, metrics, peaks)
    metrics.update(roofline)
    valid, reasons = assess(iterations=m.measure_iterations, measure_s=m.timing["measure_s"],
                            measurement=point.measurement, recompiles=m.compile["recompiles_timed"],
                            generated_tokens=m.generated_tokens, expected_tokens=m.expected_tokens,
                            throughput=m.samples["output_tokens_per_s"], on_device=on_device,
                            exceeds_peak=exceeds_peak,
                            recompile_limit_hits=m.compile.get("recompile_limit_hits", 0))
    warns = warnings_for(m.samples["output_tokens_per_s"], m.warmup_samples["e2e_s"], m.samples["e2e_s"],
                         point.measurement["max_cv"], graph_breaks=m.compile.get("graph_breaks", 0))
    return RunResult(**base, finished_at=now_iso(), timing={"load_s": load_s, **m.timing}, compile=m.compile,
                     samples={**m.samples, **{f"warmup_{k}": v for k, v in m.warmup_samples.items()}},
                     metrics=metrics, numerics=m.numerics, validity={"valid": valid, "reasons": reasons},
                     warnings=warns)


def _rel_half(metrics: dict) -> float:
    mean, hi = metrics.get("output_tokens_per_s"), metrics.get("output_tokens_per_s_ci95_high")
    if not mean or hi is None or hi != hi:
        return float("nan")
    return (hi - mean) / mean


def _on_accelerator(be) -> bool:
    if be.name == "jax":
        return be.platform() != "cpu"
    return be.device != "cpu"


def _model_identity(point: RunPoint) -> tuple:
    return (point.family, point.hub_id, point.weights, point.dtype, point.experts_implementation,
            repr(sorted(point.model_config.items())), point.measurement.get("seed"))


def _vocab_size(point: RunPoint) -> int:
    from tpubench.models.torch_models import hf_config

    config = hf_config(point)
    return (getattr(config, "text_config", None) or config).vocab_size


def _check_memory(be, points: list[RunPoint], source: str) -> dict[str, str]:
    """Points that cannot fit, with the reason; refuse the whole run when none can."""
    too_big: dict[str, str] = {}
    for point in points:
        try:
            needed, available = be.estimate_memory(point)
        except UserError as exc:  # an unknown family or a config transformers rejects
            exc.where = exc.where or source
            raise
        if available is not None and needed > 0.9 * available:
            too_big[point.key()] = (f"does not fit: needs about {needed / GiB:.1f} GiB "
                                    f"({point.dtype} weights, KV cache, activations), {available / GiB:.1f} GiB free "
                                    f"on {be.device}")
    if too_big and len(too_big) == len(points):
        first = next(iter(too_big.values()))
        raise UserError(f"the model {first}; try a smaller --scale or a bigger device", where=source, field="model")
    return too_big


def _already_measured(out_dir, env_key: str, retry_failed: bool) -> set[str]:
    """Points with a result for this environment; failed ones too unless they are to be retried."""
    if not Path(out_dir).is_dir():
        return set()
    return {r.point_key for _, r in read_results(out_dir, warn=lambda m: None)
            if r.environment_key == env_key and (r.status == "ok" or not retry_failed)}


def _describe(exc: BaseException) -> str:
    if isinstance(exc, UserError):
        return exc.one_line()
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:500]
