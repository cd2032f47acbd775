"""Running a workload: pick device and scale, expand the sweep, measure each point, write results.

A point that fails is recorded as a failed result and the sweep goes on; every finished point is
on disk before the next one starts, so Ctrl-C or a kill loses nothing that was measured, and
`resume=True` skips points already present for this environment.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from tpubench.backends import ACCELERATOR_DEVICES, get_backend, require_available
from tpubench.efficiency import peaks_for
from tpubench.environment import environment_key, host_environment
from tpubench.errors import UserError
from tpubench.results import RunResult, now_iso, read_results, write_result
from tpubench.parallel import (WorldFailed, in_user_world, join_world, measure_in_world, run_in_world,
                               world_environment)
from tpubench.workload import (FULL_SCALE, MAX_POINTS, RunPoint, check_sweep_size, expand, load_workload,
                               scale_names, with_layout)

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
              max_points: int = MAX_POINTS, tensor_parallel: int | None = None,
              expert_parallel: int | None = None) -> list[PointOutcome]:
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
    workload = with_layout(workload, tensor_parallel, expert_parallel)
    points = expand(workload, scale, source=str(workload_path), max_points=max_points)
    if be.name != "torch" and any(p.world_size > 1 for p in points):
        raise UserError(f"the {be.name} backend runs on one chip; parallel layouts need --backend torch",
                        where=str(workload_path), field="parallel")
    user_world = in_user_world()
    if user_world:
        join_world(be, workload.parallel.collective_timeout_s)
        if int(os.environ.get("RANK", "0")) != 0:
            reporter = SilentReporter()   # rank 0 speaks and writes for the world

    env, peaks = _environment(be, points)
    env_key = environment_key(be.name, be.device, env)
    too_big, notes = _check_memory(be, points, str(workload_path))
    done = _already_measured(out_dir, env_key, retry_failed) if resume else set()

    reporter.sweep_started(points)
    with contextlib.ExitStack() as cleanup:
        checkpoints = _Checkpoints(cleanup, shared=user_world)
        return _measure_all(be, points, done, too_big, notes, checkpoints, dict(
            workload_path=workload_path, env=env, env_key=env_key, peaks=peaks, out_dir=out_dir,
            reporter=reporter, collective_timeout_s=workload.parallel.collective_timeout_s, user_world=user_world))


def _measure_all(be, points, done, too_big, notes, checkpoints, ctx) -> list[PointOutcome]:
    reporter = ctx["reporter"]
    writes = not ctx["user_world"] or int(os.environ.get("RANK", "0")) == 0
    outcomes: list[PointOutcome] = []
    single = _SingleChipModel(be, reporter)
    for index, point in enumerate(points):
        if point.key() in done:
            outcome = PointOutcome(point, skipped=True)
            outcomes.append(outcome)
            reporter.point_finished(index, outcome)
            continue
        reporter.point_started(index, point)
        base = dict(workload_file=str(ctx["workload_path"]), point=point.to_dict(), point_key=point.key(),
                    environment_key=ctx["env_key"], backend=be.name, device=be.device, environment=ctx["env"],
                    started_at=now_iso())
        peaks = _plain_peaks(ctx["peaks"].get(point.dtype))
        try:
            if point.key() in too_big:
                raise MemoryError(too_big[point.key()])
            if point.world_size > 1 or ctx["user_world"]:
                single.release()   # one model in memory at a time
                result = _measure_sharded(be, point, base, peaks, checkpoints, reporter, ctx)
            else:
                built, load_s, reused = single.get(point)
                result = measure_point(be, built, point, base, load_s, reporter, peaks)
                result.model_reused = reused
            if point.key() in notes:
                result.warnings.append(notes[point.key()])
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # a failed point is data, not a crash: record it and go on
            result = RunResult(**base, status="failed", error=_describe(exc), finished_at=now_iso())
            result.validity.valid = False
            result.validity.reasons.append("run failed")
            if not isinstance(exc, (UserError, MemoryError, WorldFailed)):
                result.warnings.append(traceback.format_exc(limit=3)[-1500:])
        path = write_result(result, ctx["out_dir"]) if writes else None
        outcome = PointOutcome(point, result, path)
        outcomes.append(outcome)
        reporter.point_finished(index, outcome)
    return outcomes


class _SingleChipModel:
    """The model of the last single-chip point, kept while the next points share it."""

    def __init__(self, be, reporter):
        self.be, self.reporter = be, reporter
        self.key, self.built = None, None

    def release(self) -> None:
        self.key, self.built = None, None
        gc.collect()

    def get(self, point) -> tuple:
        """(built model, load seconds, reused?)"""
        key = _model_identity(point)
        if key == self.key:
            return self.built, 0.0, True
        self.release()   # a failed build must not be "reused" by the next point
        self.reporter.phase("load", 0, 1)
        t = time.perf_counter()
        self.built = self.be.build(point)
        self.key = key
        return self.built, time.perf_counter() - t, False


class _Checkpoints:
    """Random weights saved once per model on the host, for the ranks of a world to load sharded.

    tpubench's own worlds read them from a temporary folder that goes with the sweep; under a
    user's torchrun each node's local rank 0 writes a folder named after the model, which the
    node's ranks share."""

    def __init__(self, cleanup: contextlib.ExitStack, *, shared: bool):
        self.shared = shared
        self.folders: dict[tuple, Path] = {}
        if shared:
            cleanup.callback(self._remove_shared)
        else:
            self.root = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="tpubench-ckpt-")))

    def folder_for(self, point, reporter) -> str:
        if point.weights == "pretrained":
            return point.hub_id or ""
        key = _model_identity(point)
        if key not in self.folders:
            name = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
            folder = (Path(tempfile.gettempdir()) / f"tpubench-ckpt-{name}") if self.shared else self.root / name
            if not self.shared or int(os.environ.get("LOCAL_RANK", "0")) == 0:
                reporter.phase("weights", 0, 1)
                _save_checkpoint(point, folder)
            if self.shared:
                import torch.distributed as dist

                dist.barrier()
            self.folders[key] = folder
        return str(self.folders[key])

    def _remove_shared(self) -> None:
        import torch.distributed as dist

        dist.barrier()
        if int(os.environ.get("LOCAL_RANK", "0")) == 0:
            for folder in self.folders.values():
                shutil.rmtree(folder, ignore_errors=True)


def _save_checkpoint(point, folder: Path) -> None:
    from tpubench.models.torch_models import save_host_checkpoint

    if (folder / "config.json").is_file():
        return
    partial = folder.with_name(folder.name + f".partial-{os.getpid()}")
    save_host_checkpoint(point, partial)
    os.replace(partial, folder)
    gc.collect()


def _measure_sharded(be, point, base, peaks, checkpoints, reporter, ctx) -> RunResult:
    """One point on a world of chips: a fresh world of tpubench's own, or the user's torchrun."""
    if ctx["user_world"]:
        import torch.distributed as dist

        if point.world_size != dist.get_world_size():
            raise UserError(f"this point needs {point.world_size} rank(s) (tensor {point.tensor_parallel} x expert "
                            f"{point.expert_parallel}); the torchrun world has {dist.get_world_size()}")
    base = {**base, "environment": world_environment(be, point, base["environment"])}
    checkpoint = checkpoints.folder_for(point, reporter)
    if ctx["user_world"]:
        return measure_in_world(be, point, base, checkpoint, peaks, reporter)
    reporter.phase("world", 0, 1)
    timeout = ctx["collective_timeout_s"]
    m = point.measurement
    # Load and compile wait at collectives too, so the deadline allows a few collective timeouts
    # on top of the measurement's own limit.
    return run_in_world(be, point, base, checkpoint=checkpoint, peaks=peaks, collective_timeout_s=timeout,
                        deadline_s=3 * timeout + 2 * m["max_seconds"])


def _plain_peaks(peaks: dict | None) -> dict | None:
    """The peaks a result needs, without the host probe's raw data (JSON for a world's ranks)."""
    return {k: v for k, v in peaks.items() if k != "probe"} if peaks else None


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


def measure_point(be, built, point: RunPoint, base: dict, load_s: float, reporter: Reporter,
                  peaks: dict | None, world=None) -> RunResult:
    """Measure one point on a built model; in a world (parallel.WorldSync) on every rank."""
    from tpubench.efficiency import roofline_metrics
    from tpubench.scenarios.generate import aggregate_rates, make_prompt, measure_generate, summarize_samples
    from tpubench.validity import assess, warnings_for

    vocab = _vocab_size(point)  # also where an unknown family or bad config surfaces
    prompt = make_prompt(point.measurement["seed"], point.batch_size, point.input_length, vocab)
    session = be.session(built, point, prompt)
    with session:
        m = measure_generate(session, point, on_phase=reporter.phase, world=world)
        on_device = session.on_requested_device()
    if world is not None:
        on_device = _merge_ranks(m, on_device, world)
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


def _merge_ranks(m, on_device: bool, world) -> bool:
    """Compile accounting and memory from every rank: a recompile or a CPU fallback on any rank
    counts, compile time is the slowest rank's, peak memory the fullest chip's."""
    ranks = world.gather({"compile": m.compile, "compile_s": m.timing["compile_s"], "on_device": on_device,
                          "peak_memory_bytes": m.peak_memory_bytes})
    for key in ("recompiles_timed", "recompile_limit_hits", "graph_breaks"):
        m.compile[key] = max(r["compile"].get(key, 0) for r in ranks)
    m.compile["per_rank"] = [r["compile"] for r in ranks]
    m.timing["compile_s"] = max(r["compile_s"] for r in ranks)
    peaks = [r["peak_memory_bytes"] for r in ranks if r["peak_memory_bytes"] is not None]
    m.peak_memory_bytes = max(peaks) if peaks else None
    return all(r["on_device"] for r in ranks)


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


def _check_memory(be, points: list[RunPoint], source: str) -> tuple[dict[str, str], dict[str, str]]:
    """(points that cannot fit, with the reason; points that fit only sharded, with a note), per
    chip of each point's layout. The whole run is refused when no point can fit."""
    too_big: dict[str, str] = {}
    notes: dict[str, str] = {}
    for point in points:
        needed, available = _per_chip(be, point, source)
        if available is None:
            continue
        if needed > 0.9 * available:
            layout = _smallest_layout(be, point, source)
            hint = f"; the smallest layout that fits is {layout}" if layout else ""
            too_big[point.key()] = (f"does not fit: needs about {needed / GiB:.1f} GiB per chip "
                                    f"({point.dtype} weights, KV cache, activations), {available / GiB:.1f} GiB free "
                                    f"on {be.device}{hint}")
        elif point.world_size > 1:
            one, free = _per_chip(be, replace(point, tensor_parallel=1, expert_parallel=1), source)
            if free is not None and one > 0.9 * free:
                notes[point.key()] = (f"fits on {point.world_size} chips (about {needed / GiB:.1f} GiB per chip) but not "
                                      f"on one (about {one / GiB:.1f} GiB, {free / GiB:.1f} GiB free)")
    if too_big and len(too_big) == len(points):
        first = next(iter(too_big.values()))
        raise UserError(f"the model {first}; try a smaller --scale or a bigger device", where=source, field="model")
    return too_big, notes


def _per_chip(be, point: RunPoint, source: str) -> tuple[int, int | None]:
    try:
        needed, available = be.estimate_memory(point)
    except UserError as exc:  # an unknown family or a config transformers rejects
        exc.where = exc.where or source
        raise
    if available is not None and be.device == "cpu":
        available //= point.world_size   # the ranks of a CPU world share the host's memory
    return needed, available


def _smallest_layout(be, point: RunPoint, source: str) -> str | None:
    """The layout with the fewest chips (tensor parallel first) that fits, as CLI flags."""
    from tpubench.models.config_check import ConfigProblem, check_model_config

    for n in (2, 4, 8, 16, 32, 64, 128):
        for flag, layout in (("--tensor-parallel", {"tensor_parallel": n, "expert_parallel": 1}),
                             ("--expert-parallel", {"tensor_parallel": 1, "expert_parallel": n})):
            try:
                check_model_config(point.family, point.model_config, tensor=(layout["tensor_parallel"],),
                                   expert=(layout["expert_parallel"],))
            except ConfigProblem:
                continue
            needed, available = _per_chip(be, replace(point, **layout), source)
            if available is not None and needed <= 0.9 * available:
                return f"{flag} {n} (about {needed / GiB:.1f} GiB per chip)"
    return None


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
