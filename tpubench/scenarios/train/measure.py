"""Scenario `train`: training steps on a model tpubench builds (docs/scenarios/train.md).

One chip: the model is built once per model identity (from the seed, on the host) and its
initial weights are put back before each later point that shares it, so every point trains from
the same start. Several chips (`parallel: {data: N}`, optionally `fsdp: true`): a world of N
ranks started by the same launcher as multi-chip generate (measure.world.run_point_in_world); each rank
builds the same model from the seed on the host, moves it to its chip, wraps it in DDP or FSDP2
(`fully_shard` per decoder layer, then the whole model) and trains on its slice of the same
global batch; rank 0's result is kept. steps.py has the step, the measurement and the memory
estimate.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from collections import Counter

from tpubench.backends.torch import TorchDevice, set_matmul_precision
from tpubench.errors import UserError
from tpubench.hardware.roofline import TRAIN_MFU_FORMULA
from tpubench.measure.energy import energy_metrics, with_energy_ci
from tpubench.measure.timing import merge_rank_compiles
from tpubench.measure.validity import verdict_record
from tpubench.measure.world import (
    WorldSync,
    plain_peaks,
    profile_trace_dir,
    require_world_size,
    run_point_in_world,
    world_environment,
)
from tpubench.records.result import RunResult, now_iso
from tpubench.scenarios.train import steps as train_steps  # looked up at call time: tests replace its builder
from tpubench.scenarios.train.steps import (
    FIT_FRACTION,
    GiB,
    PrecisionError,
    describe_bytes,
    estimate_train_bytes,
    fit_hint,
    is_out_of_memory,
    oom_message,
    resolve_precision,
)
from tpubench.scenarios.train.sweep import label


class TrainRun:
    """Training steps on one chip, or data-parallel (DDP / FSDP2) on a world of chips."""

    # ------------------------------------------------------------------ before anything runs
    def check(self, ctx, points):
        """Points whose dtype and precision cannot go together (the whole run is refused: they
        are the workload's), and points whose estimated memory does not fit, with what would."""
        be = ctx.backend
        if not be.runs_torch_modules:
            raise UserError(f"scenario train runs on the torch backend, not {be.name}", where=ctx.source,
                            field="--backend")
        for mode in sorted({p.execution_mode for p in points}):
            try:
                be.check_execution_mode(mode)   # TorchTPU's eager modes: on a TPU only
            except UserError as exc:
                exc.where = exc.where or ctx.source
                raise
        shared = _shared_identities(points, be.device, ctx.user_world)
        cannot: dict[str, str] = {}
        for point in points:
            try:
                precision = resolve_precision(point)
            except PrecisionError as exc:
                raise UserError(str(exc), where=ctx.source, field="scenario.precision") from None
            try:
                # The initial weights kept between points live in host memory: the chip's on a CPU.
                host_copy = be.uses_host_memory() and _identity(point, precision) in shared
                parts = estimate_train_bytes(point, precision, host_copy=host_copy)
            except UserError as exc:   # an unknown family or a config transformers rejects
                exc.where = exc.where or ctx.source
                raise
            available = _available(be, point)
            if available is not None and sum(parts.values()) > FIT_FRACTION * available:
                cannot[point.key()] = (f"{label(point)} does not fit: needs {describe_bytes(parts)}, "
                                       f"{available / GiB:.1f} GiB free on {be.device}; "
                                       f"{fit_hint(point, available, precision)}")
        if cannot and len(cannot) == len(points):
            raise UserError(f"no point fits: {next(iter(cannot.values()))}", where=ctx.source,
                            field="scenario")
        return cannot, {}

    # ------------------------------------------------------------------ the sweep
    @contextlib.contextmanager
    def open(self, ctx, points):
        for note in sorted({n for n in (_note(p) for p in points) if n}):
            ctx.reporter.note(note)
        single = _SingleChipTrainModel(ctx.backend, ctx.reporter,
                                       _shared_identities(points, ctx.backend.device, ctx.user_world))
        try:
            def measure(point, base):
                peaks = plain_peaks(ctx.peaks.get(point.dtype))
                # A mode set in the environment before torch loads (TorchTPU's eager modes) needs a
                # fresh process: a world of one.
                if point.world_size > 1 or ctx.user_world or ctx.backend.process_environment(point):
                    single.release()   # one model in memory at a time
                    return self._in_a_world(ctx, point, base, peaks)
                return single.measure(point, base, peaks, ctx.energy.meter() if ctx.energy is not None else None,
                                      profile_dir=ctx.profile_dir)

            yield measure
        finally:
            single.release()

    def _in_a_world(self, ctx, point, base, peaks):
        require_world_size(ctx, point, f"{point.world_size} data-parallel rank(s)")
        base = {**base, "environment": train_world_environment(ctx.backend, point, base["environment"])}
        return run_point_in_world(ctx, point, base, peaks, self.in_world)

    # ------------------------------------------------------------------ one rank of a world
    def in_world(self, be, point, base, checkpoint, peaks, reporter, world_start_s=None, energy=None,
                 profile_dir=None):
        """This rank's part of a point (measure.world.worker_main calls it on every rank): the same
        model from the seed, on this rank's chip, wrapped for data parallelism, measured."""
        world = WorldSync()
        precision = resolve_precision(point)
        reporter.phase("load", 0, 1)
        t = time.perf_counter()
        try:
            model = train_steps.build_train_model(point, precision, be.torch_device())
            load_s = max(world.gather(time.perf_counter() - t))
            device = next(model.parameters()).device
            base = {**base, "environment": {**base["environment"], "ranks": world.ranks(device)}}
            result = measure_train_point(be, model, point, base, load_s, reporter, peaks, world=world,
                                         energy=energy, profile_dir=profile_dir)
        except Exception as exc:
            if is_out_of_memory(exc):
                model = None
                _free_device_memory(be.device)
                raise MemoryError(oom_message(point, exc, _available(be, point))) from None
            raise
        return world.finish(result, world_start_s)


# ----------------------------------------------------------------------------- helpers


def _identity(point, precision) -> tuple:
    return (point.model_identity(), precision.param_dtype)


def _shared_identities(points, device: str, user_world: bool) -> set:
    """Model identities that more than one single-chip point trains (their initial weights are
    kept to put back between them)."""
    counts: Counter = Counter()
    for p in points:
        if p.world_size == 1 and not user_world:
            try:
                counts[_identity(p, resolve_precision(p))] += 1
            except PrecisionError:
                continue
    return {key for key, n in counts.items() if n > 1}


def _note(point) -> str | None:
    try:
        note = resolve_precision(point).note
    except PrecisionError:
        return None
    return f"{point.workload} ({point.scale} scale): {note}." if note else None


def _available(be, point) -> int | None:
    available = be.available_memory()
    if available is not None and be.uses_host_memory():
        available //= point.world_size   # the ranks of a CPU world share the host's memory
    return available


def _free_device_memory(device: str) -> None:
    gc.collect()
    TorchDevice(device).release_cached_memory()


def train_world_environment(be, point, env: dict) -> dict:
    """A multi-chip environment (measure.world.world_environment) with the data-parallel layout."""
    out = world_environment(be, point, env)
    fsdp = bool(point.params.get("fsdp"))
    out["parallel_layout"] = {"tensor": 1, "expert": 1, "data": point.data_parallel, "fsdp": fsdp}
    out["data_parallel_wrapper"] = "FSDP2 (torch.distributed.fsdp.fully_shard)" if fsdp else \
        "DDP (torch.nn.parallel.DistributedDataParallel)"
    return out


class _SingleChipTrainModel:
    """The model of the last single-chip point and, when later points share it, its initial
    weights on the host, put back before each of them (training changes the weights)."""

    def __init__(self, be, reporter, shared: set):
        self.be, self.reporter, self.shared = be, reporter, shared
        self.key, self.model, self.initial = None, None, None

    def release(self) -> None:
        self.key, self.model, self.initial = None, None, None
        _free_device_memory(self.be.device)

    def get(self, point, precision) -> tuple:
        """(model, load seconds, reused?, seconds to put the initial weights back)"""
        import torch

        key = _identity(point, precision)
        if key == self.key:
            t = time.perf_counter()
            with torch.no_grad():
                for param, initial in zip(self.model.parameters(), self.initial):
                    param.copy_(initial)
            return self.model, 0.0, True, time.perf_counter() - t
        self.release()   # a failed build must not be "reused" by the next point
        self.reporter.phase("load", 0, 1)
        t = time.perf_counter()
        self.model = train_steps.build_train_model(point, precision, self.be.torch_device())
        if key in self.shared:
            self.initial = [p.detach().to("cpu", copy=True) for p in self.model.parameters()]
        self.key = key
        return self.model, time.perf_counter() - t, False, 0.0

    def measure(self, point, base: dict, peaks, energy=None, profile_dir=None) -> RunResult:
        precision = resolve_precision(point)
        try:
            model, load_s, reused, restore_s = self.get(point, precision)
            result = measure_train_point(self.be, model, point, base, load_s, self.reporter, peaks, energy=energy,
                                         profile_dir=profile_dir)
        except Exception as exc:
            if is_out_of_memory(exc):
                if self.initial is None:
                    self.release()   # half-trained weights must not start the next point
                else:
                    self.model.zero_grad(set_to_none=True)
                _free_device_memory(self.be.device)
                raise MemoryError(oom_message(point, exc, _available(self.be, point))) from None
            if self.initial is None:
                self.release()
            raise
        result.model_reused = reused
        if reused:
            result.timing["weights_restore_s"] = restore_s
        return result


# ----------------------------------------------------------------------------- one point


def measure_train_point(be, model, point, base: dict, load_s: float, reporter, peaks: dict | None,
                        world=None, energy=None, profile_dir=None) -> RunResult:
    """Train one point on a built model (in a world: on every rank, wrapped for data parallelism)
    and turn the measurement into a RunResult. With `profile_dir` (run --profile), one more
    optimizer step, profiled, after everything else (measure/profile.py); its loss is not recorded."""
    from tpubench.models.routing import load_from_counts
    from tpubench.scenarios.train.steps import tokens_per_step

    precision = resolve_precision(point)
    device = next(model.parameters()).device
    batch = _rank_batch(model, point, device, world)
    # Before torch.compile (inductor reads it when it compiles); recorded as the frameworks report it.
    base = {**base, "environment": {**base["environment"],
                                    **set_matmul_precision(be.device, getattr(point, "matmul_precision", None))}}
    m, counts, profile, sync = _train(be, model, point, precision, batch, reporter, world, energy, profile_dir, base)
    on_device = be.placed_on_device([device.type])
    m.compile["cpu_fallback_ops_timed"] = m.fallback_ops_timed
    m.compile["cpu_fallback_ops_untimed"] = m.fallback_ops_untimed
    if world is not None:
        on_device, counts = _merge_ranks(world, m, on_device, counts)

    tokens = tokens_per_step(point)
    rates = [tokens / s for s in m.step_s]
    metrics, loss_reasons, exceeds_peak = _train_metrics(point, m, counts, peaks, tokens)
    reasons, warns = _train_validity(point, m, rates, tokens, on_device, exceeds_peak, base["environment"])
    validity = verdict_record(reasons + loss_reasons, rates, iterations=m.iterations, measure_s=m.measure_s,
                              measurement=point.measurement)
    compile_s = m.compile["first_step_compile_s"] + m.compile["warmup_compile_s"]
    timing = {"load_s": load_s, "compile_s": compile_s, "first_iteration_s": m.compile["first_step_s"],
              "warmup_s": m.warmup_s, "measure_s": m.measure_s}
    training = _training_record(point, precision, m, counts, peaks, sync)
    # Per-expert load over the timed steps (as generate results carry it): the recorded micro-batch
    # stands for each of the step's micro-batches on every step.
    moe = load_from_counts(counts, len(batch) * m.iterations, m.iterations) if counts else {}
    if moe:
        moe["recorded"] = training["routing_measured"] + ", times micro-batches per step x timed steps"
    return RunResult(**base, finished_at=now_iso(), timing=timing, compile=m.compile, moe=moe,
                     samples={"step_s": m.step_s, "train_tokens_per_s": rates, "loss": _finite_prefix(m.losses),
                              "warmup_step_s": m.warmup_step_s},
                     metrics=metrics, numerics={}, validity=validity,
                     warnings=warns, training=training, energy=m.energy.as_dict() if m.energy is not None else {},
                     profile=profile)


def _rank_batch(model, point, device, world):
    """This rank's rows of the point's seeded global batch, on the model's device (activation
    checkpointing set as the point asks, before anything runs)."""
    import torch

    from tpubench.scenarios.train.steps import make_batch, rank_slice, set_activation_checkpointing

    set_activation_checkpointing(model, bool(point.params.get("activation_checkpointing")))
    vocab = model.config.get_text_config().vocab_size
    rank = world.rank if world is not None else 0
    rows = rank_slice(make_batch(point.measurement.get("seed", 0), point, vocab), rank, point.batch_size)
    return torch.as_tensor(rows, device=device)


def _train(be, model, point, precision, batch, reporter, world, energy, profile_dir, base: dict) -> tuple:
    """The training measurement (steps.measure_training), the routing counts after it and the
    profiled step: (measurement, counts, profile record, data-parallel wrapper: none, ddp or fsdp).
    Routing hooks, the optimizer's state and dynamo's caches never outlive the point."""
    import torch

    from tpubench.models.torch_routing import install_routing
    from tpubench.scenarios.train.steps import TrainStep, make_optimizer, measure_training, routing_counts, wrap_data_parallel

    device = batch.device
    # The point's routing (models/routing.py) as hooks on the routers, before any compile; removed
    # after the point (the model may be reused by the next).
    routing = install_routing(model, getattr(point, "routing", "natural"), point.family,
                              point.measurement.get("seed", 0))
    compile_fn = None
    if point.execution_mode == "compile":
        # Empty dynamo caches: graphs made for an earlier point must not change this one.
        torch._dynamo.reset()
        backend, options = TorchDevice(be.device).compile_backend(point.compile_options)

        def compile_fn(module):
            return torch.compile(module, backend=backend, **options)

    if world is None:
        module, call, sync = model, (compile_fn(model) if compile_fn else model), "none"
    else:
        module, call, sync = wrap_data_parallel(model, point, device, compile_fn)
    optimizer = make_optimizer(model.parameters(), point.params.get("optimizer") or {})
    step = TrainStep(module, call, optimizer, batch, precision, device.type, sync)
    try:
        m = measure_training(step, point, be.device, mode=point.execution_mode, on_phase=reporter.phase, world=world,
                             energy=energy)
        # How balanced routing was: one forward of this rank's first micro-batch with the weights
        # the timed steps left, on the model itself (eager, no DDP: hooks on the routers).
        counts = routing_counts(model, batch[0], step._autocast)
        # In a world every rank takes the profiled step (its gradient all-reduce needs them all).
        profile = (_profile_step(be, step, model, point, m, profile_trace_dir(profile_dir, world), base)
                   if profile_dir is not None else {})
    finally:
        if routing is not None:
            routing.remove()
        optimizer.zero_grad(set_to_none=True)
        del optimizer, step, call
        if point.execution_mode == "compile":
            torch._dynamo.reset()
    return m, counts, profile, sync


def _merge_ranks(world, m, on_device: bool, counts: list) -> tuple[bool, list]:
    """A world's figures from every rank's (into `m`: compile counters, the slowest first step and
    compile, the highest peak memory): (every rank on its device?, routing counts summed over ranks)."""
    ranks = world.gather({"compile": m.compile, "peak": m.peak_memory_bytes, "on_device": on_device,
                          "counts": [c.tolist() for c in counts]})
    m.compile.update(merge_rank_compiles([r["compile"] for r in ranks]))
    for key in ("first_step_s", "first_step_compile_s", "warmup_compile_s"):
        m.compile[key] = max(r["compile"][key] for r in ranks)
    m.compile["per_rank"] = [r["compile"] for r in ranks]
    peaks_mem = [r["peak"] for r in ranks if r["peak"] is not None]
    m.peak_memory_bytes = max(peaks_mem) if peaks_mem else None
    on_device = all(r["on_device"] for r in ranks)
    if counts:
        import numpy as np

        counts = [np.sum([np.asarray(r["counts"][i]) for r in ranks], axis=0) for i in range(len(counts))]
    return on_device, counts


def _train_metrics(point, m, counts: list, peaks: dict | None, tokens: int) -> tuple[dict, list[str], bool]:
    """(the point's metrics: step time, training tokens/s, loss, MFU, routing balance, energy per
    training token; the loss's invalidity reasons; whether a figure exceeds the chip's peak)."""
    from tpubench.measure.efficiency import train_roofline_metrics
    from tpubench.scenarios.train.steps import loss_metrics, routing_summary, step_stats, train_rates

    metrics = step_stats(m.step_s)
    metrics.update(train_rates(metrics, tokens, point.world_size))
    losses, loss_reasons = loss_metrics(m.losses)
    metrics.update(losses)
    metrics.update({"iterations": m.iterations, "peak_memory_bytes": m.peak_memory_bytes})
    roofline, exceeds_peak = train_roofline_metrics(point, metrics, peaks)
    metrics.update(roofline)
    metrics.update(routing_summary(counts))
    metrics.update(energy_metrics(m.energy, tokens * m.iterations, "train_token"))
    metrics.update(with_energy_ci(metrics, "joules_per_train_token", "step"))
    return metrics, loss_reasons, exceeds_peak


def _train_validity(point, m, rates: list[float], tokens: int, on_device: bool, exceeds_peak: bool,
                    env: dict) -> tuple[list[str], list[str]]:
    """(invalidity reasons, warnings) of the measurement (measure/validity.py)."""
    from tpubench.measure.validity import assess, warnings_for

    done = tokens * m.iterations
    _, reasons = assess(recompiles=m.compile["recompiles_timed"], generated_tokens=done, expected_tokens=done,
                        on_device=on_device, exceeds_peak=exceeds_peak,
                        recompile_limit_hits=m.compile.get("recompile_limit_hits", 0),
                        fallback_ops=m.compile["cpu_fallback_ops_timed"])
    warns = warnings_for(rates, m.warmup_step_s, m.step_s, point.measurement["max_cv"],
                         graph_breaks=m.compile.get("graph_breaks", 0),
                         untimed_fallback_ops=m.compile["cpu_fallback_ops_untimed"])
    warns += [env["chips_warning"]] if env.get("chips_warning") else []
    return reasons, warns


def _training_record(point, precision, m, counts: list, peaks: dict | None, sync: str) -> dict:
    """The result's `training` section: how the point trained and what its samples are."""
    return {
        "precision": precision.name, "precision_requested": precision.requested, "precision_note": precision.note,
        "param_dtype": precision.param_dtype, "compute_dtype": precision.compute_dtype,
        "optimizer": point.params.get("optimizer"),
        "gradient_accumulation": point.params.get("gradient_accumulation", 1),
        "activation_checkpointing": bool(point.params.get("activation_checkpointing")),
        "data_parallel": {"none": "one chip", "ddp": "DDP", "fsdp": "FSDP2"}[sync],
        "mfu_formula": TRAIN_MFU_FORMULA,
        "peak_flops_per_chip_source": (peaks or {}).get("source"),
        "batch": "seeded random token ids (numpy), labels = inputs (transformers shifts them); the same "
                 "global batch every step, rank r taking rows r*B..(r+1)*B-1",
        "loss_samples": "every optimizer step in order: the first (compile) step, warm-up, then the timed steps "
                        "(up to the first NaN or inf)",
        # A result file holds no NaN sample: the loss samples stop before the first non-finite step.
        "loss_nonfinite_at_steps": [i + 1 for i, x in enumerate(m.losses) if not math.isfinite(x)] or None,
        "tokens_per_expert": [[int(x) for x in c] for c in counts] if counts else None,
        "routing_measured": ("one forward of each rank's first micro-batch after the timed steps, summed over "
                             "ranks") if counts else None,
    }


def _profile_step(be, step, model, point, m, out_dir, base: dict) -> dict:
    """Where one optimizer step's time goes (measure/profile.py): one more step, profiled, after
    the timed steps and the routing count; its loss is not recorded, and a reused model gets its
    initial weights back before the next point anyway."""
    import numpy as np

    from tpubench.measure.profile import profile_pass, trace_stem

    return profile_pass(be, step.step, out_dir, trace_stem(base), model=model, fence=TorchDevice(be.device).fence,
                        device=be.device or "cpu", compiled=point.execution_mode == "compile",
                        timed_s=float(np.median(m.step_s)) if m.step_s else None)


def _finite_prefix(values: list[float]) -> list[float]:
    for i, x in enumerate(values):
        if not math.isfinite(x):
            return values[:i]
    return values
