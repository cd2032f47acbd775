"""Scenario `generate`: offline batched prefill + decode with a static KV cache.

Every sequence in the batch gets exactly `output_length` tokens (EOS is ignored, shapes are
static), so every backend does the same work. Per-token timestamps, each read after a fence,
give TTFT, TPOT, ITL and E2E exactly as docs/definitions.md#generate defines them.
"""

from __future__ import annotations

import contextlib
import gc
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from tpubench.errors import Unavailable, UserError
from tpubench.measure.energy import WindowEnergy, energy_metrics, with_energy_ci
from tpubench.measure.fence import check_fence, fence_reason
from tpubench.measure.stats import summarize
from tpubench.measure.timing import done_measuring, fallback_watch, fenced_clock, merge_rank_compiles, planned_iterations
from tpubench.measure.world import (
    Checkpoints,
    WorldSync,
    plain_peaks,
    profile_trace_dir,
    require_world_size,
    run_point_in_world,
    world_environment,
)
from tpubench.models.routing import load_metrics
from tpubench.records.result import RunResult, now_iso
from tpubench.workload_spec.point import RunPoint
from tpubench.workload_spec.precision import precision_of
from tpubench.workload_spec.sections import HF_GENERATE

FINGERPRINT_SAMPLES = 512
FINGERPRINT_TOP = 16


def make_prompt(seed: int, batch: int, length: int, vocab: int) -> np.ndarray:
    """The same token ids on every backend: numpy's generator, not a framework's."""
    return np.random.default_rng(seed).integers(0, vocab, size=(batch, length), dtype=np.int64)


@dataclass
class Iteration:
    stamps_s: list[float]            # time of each output token after submit; stamps_s[0] = TTFT
    tokens: list = field(repr=False)  # device tensors, one [B] per step


def run_iteration(session, output_length: int, *, capture_first_logits: bool = False):
    """One batch from submit to last token. Returns the Iteration and (optionally) step-1 logits.
    A session whose decode loop is not tpubench's (`whole_iteration`: transformers' generate())
    runs the batch itself and stamps each token as that loop hands it over."""
    session.reset()
    now = fenced_clock(session.fence)
    t0 = now()
    whole = getattr(session, "whole_iteration", None)
    if whole is not None:
        stamps, tokens, first_logits = whole(output_length, lambda: now() - t0, capture_first_logits)
        return Iteration(stamps, tokens), first_logits
    token = session.prefill()
    stamps = [now() - t0]
    first_logits = session.last_logits if capture_first_logits else None
    tokens = [token]
    for step in range(output_length - 1):
        token = session.decode(token, step)
        stamps.append(now() - t0)
        tokens.append(token)
    return Iteration(stamps, tokens), first_logits


def iteration_metrics(stamps: list[float], batch: int, input_length: int) -> dict[str, float]:
    """Per-iteration figures from one batch's token timestamps (seconds).

    With a single output token there is no decode phase: TPOT and decode tokens/s are absent.
    """
    ttft, e2e, out = stamps[0], stamps[-1], len(stamps)
    figures = {
        "ttft_s": ttft,
        "e2e_s": e2e,
        "output_tokens_per_s": batch * out / e2e,
        "prefill_tokens_per_s": batch * input_length / ttft,
    }
    if out > 1:
        decode_s = e2e - ttft
        figures["tpot_s"] = decode_s / (out - 1)
        figures["decode_tokens_per_s"] = batch * (out - 1) / decode_s
    return figures


def aggregate_rates(metrics: dict, batch: int, input_length: int, output_length: int) -> dict[str, float]:
    """Headline rates as docs/definitions.md#generate defines them: tokens over the mean time, not the
    mean of per-iteration rates (which runs high). Their 95% CI maps from the time's CI."""
    out: dict[str, float] = {}
    rates = [("output_tokens_per_s", batch * output_length, "e2e"),
             ("prefill_tokens_per_s", batch * input_length, "ttft")]
    for name, tokens, time_name in rates:
        mean, lo, hi = (metrics.get(f"{time_name}_{k}_s") for k in ("mean", "ci95_low", "ci95_high"))
        if mean:
            out[name] = tokens / mean
            out[f"{name}_ci95_low"] = tokens / hi if hi and hi > 0 else float("nan")
            out[f"{name}_ci95_high"] = tokens / lo if lo and lo > 0 else float("nan")
    tpot = metrics.get("tpot_mean_s")
    if output_length > 1 and tpot:
        out["decode_tokens_per_s"] = batch / tpot
        lo, hi = metrics.get("tpot_ci95_low_s"), metrics.get("tpot_ci95_high_s")
        out["decode_tokens_per_s_ci95_low"] = batch / hi if hi and hi > 0 else float("nan")
        out["decode_tokens_per_s_ci95_high"] = batch / lo if lo and lo > 0 else float("nan")
    return out


@dataclass
class GenerateMeasurement:
    samples: dict[str, list[float]]
    warmup_samples: dict[str, list[float]]
    timing: dict[str, float]
    compile: dict
    numerics: dict
    generated_tokens: int
    expected_tokens: int
    peak_memory_bytes: int | None
    measure_iterations: int
    # Ops that ran on the CPU instead of the device: while timed (the point is invalid), and in the
    # first call or warm-up (a warning: stacks often report an op once, the first time it falls back).
    fallback_ops_timed: list[str] = field(default_factory=list)
    fallback_ops_untimed: list[str] = field(default_factory=list)
    energy: WindowEnergy | None = None   # over the timed loop, where the sweep has an energy source
    fence: dict | None = None            # the read-back after the timed loop's last fence (measure/fence.py)


def measure_generate(session, point, *, on_phase: Callable[[str, int, int], None] = lambda *a: None,
                     world=None, energy=None) -> GenerateMeasurement:
    """First call (compile) apart, then warm-up, then the timed loop; raw samples kept.

    In a multi-process world (`world`: measure.world.WorldSync) every rank must run the same number of
    iterations without talking inside the timed loop, so the count is agreed before it, from the
    warm-up's pace; afterwards each iteration's stamps become its slowest rank's. With an `energy`
    meter (measure.energy.EnergyMeter) the timed loop is its window.
    """
    m = point.measurement
    b, i, o = point.batch_size, point.input_length, point.output_length

    untimed_watch = fallback_watch(session)
    with untimed_watch:
        on_phase("compile", 0, 1)
        compiled_before = session.compile_count()
        session.reset_peak_memory()
        first, first_logits = run_iteration(session, o, capture_first_logits=True)
        numerics = fingerprint(session, first, first_logits)
        generated = sum(int(np.prod(np.shape(t))) for t in first.tokens) if first.tokens else 0
        graphs_first = session.compile_count() - compiled_before
        on_phase("compile", 1, 1)

        warm = []
        compiled_warm_before = session.compile_count()
        t_warm = time.perf_counter()
        for k in range(m["warmup"]):
            on_phase("warm-up", k, m["warmup"])
            warm.append(run_iteration(session, o)[0].stamps_s)
        warmup_s = time.perf_counter() - t_warm

    fixed = None
    if world is not None:
        pace = float(np.median([s[-1] for s in warm])) if warm else first.stamps_s[-1]
        fixed = world.agree_iterations(planned_iterations(pace, m))
    compiled_timed_before = session.compile_count()
    timed_watch = fallback_watch(session)
    stamps, n, measure_s = _timed_loop(session, point, fixed, timed_watch, energy, on_phase)
    recompiles = session.compile_count() - compiled_timed_before   # before the check: its read is not timed work
    fence = check_fence(session)   # right after the loop's last fence: did it wait for the work?
    if world is not None:
        stamps = world.slowest(stamps)
    per_iter: dict[str, list[float]] = {}
    itl: list[float] = []
    for iteration in stamps:
        for k, v in iteration_metrics(iteration, b, i).items():
            per_iter.setdefault(k, []).append(v)
        itl.extend(np.diff(iteration).tolist())
    graphs_warm = compiled_timed_before - compiled_warm_before

    compile_info = _compile_info(session, point, per_iter, first, warm, warmup_s, graphs_first=graphs_first,
                                 graphs_warm=graphs_warm, recompiles=recompiles)
    timing = {
        "compile_s": sum(v for k, v in compile_info.items() if k.endswith("compile_s")),
        "first_iteration_s": first.stamps_s[-1],
        "warmup_s": warmup_s,
        "measure_s": measure_s,
    }
    samples = {**per_iter, "itl_s": itl}
    warmup_samples = {"e2e_s": [s[-1] for s in warm], "ttft_s": [s[0] for s in warm]}
    return GenerateMeasurement(samples, warmup_samples, timing, compile_info, numerics, generated, b * o,
                               session.peak_memory_bytes(), n, list(timed_watch.ops),
                               [op for op in untimed_watch.ops if op not in timed_watch.ops],
                               energy.result if energy is not None else None, fence)


def _timed_loop(session, point, fixed: int | None, watch, energy, on_phase) -> tuple[list[list[float]], int, float]:
    """Timed iterations (in the energy window) until the stopping rule, or `fixed` of them in a
    world: (each iteration's stamps, how many, seconds)."""
    m = point.measurement
    b, o = point.batch_size, point.output_length
    stamps: list[list[float]] = []
    headline: list[float] = []
    start = time.perf_counter()
    n = 0
    with watch, (energy.window() if energy is not None else contextlib.nullcontext()):
        while True:
            it, _ = run_iteration(session, o)
            n += 1
            if len(it.tokens) != o or int(np.prod(np.shape(it.tokens[-1]))) != b:
                raise AssertionError(f"generated {len(it.tokens)} steps of {np.shape(it.tokens[-1])}, "
                                     f"expected {o} x {b}")
            stamps.append(it.stamps_s)
            headline.append(b * o / it.stamps_s[-1])
            elapsed = time.perf_counter() - start
            on_phase("measure", min(n, fixed or m["min_iterations"]), fixed or m["min_iterations"])
            if done_measuring(n, elapsed, headline, m, fixed):
                break
    return stamps, n, time.perf_counter() - start


def _compile_info(session, point, per_iter: dict, first: Iteration, warm: list, warmup_s: float, *,
                  graphs_first: int, graphs_warm: int, recompiles: int) -> dict:
    """The point's compile record: graphs compiled and the seconds charged to compiling."""
    steady_ttft = float(np.median(per_iter["ttft_s"]))
    steady_decode = float(np.median(per_iter["e2e_s"])) - steady_ttft
    first_prefill = first.stamps_s[0]
    first_decode = first.stamps_s[-1] - first.stamps_s[0]
    # The first iteration pays for compilation (or lazy initialisation in eager mode), on the
    # first call of each shape and on any step that recompiles; what its prefill and its whole
    # decode took beyond a steady iteration is charged to compile time.
    compile_info = {
        "mode": getattr(session, "compile_mode", point.execution_mode),
        "graphs_compiled_first_call": graphs_first,
        "recompiles_timed": recompiles,
        "prefill_first_call_s": first_prefill,
        "decode_first_iteration_s": first_decode,
        "prefill_compile_s": max(0.0, first_prefill - steady_ttft),
        "decode_compile_s": max(0.0, first_decode - steady_decode),
        # A shape can compile again on its second call (dynamic-shape recompiles): warm-up absorbs
        # it, and then its excess over steady state is compile time (otherwise it is only noise).
        "graphs_compiled_warmup": graphs_warm,
        "warmup_compile_s": max(0.0, warmup_s - len(warm) * (steady_ttft + steady_decode)) if graphs_warm else 0.0,
        **getattr(session, "compile_diagnostics", dict)(),
    }
    # Ahead-of-time compilation (JAX) happens before the first call and is timed by the session.
    for key, seconds in getattr(session, "aot_compile", {}).items():
        compile_info[f"aot_{key}"] = seconds
    return compile_info


def fingerprint(session, first: Iteration, first_logits) -> dict:
    """Sequence 0 of the fixed prompt: greedy tokens and a summary of the first-step logits."""
    logits = np.asarray(session.logits_to_host(first_logits), dtype=np.float32)[0]
    vocab = logits.shape[-1]
    idx = np.unique(np.linspace(0, vocab - 1, num=min(FINGERPRINT_SAMPLES, vocab)).astype(int))
    top = np.argsort(-logits, kind="stable")[:FINGERPRINT_TOP]
    tokens = session.tokens_to_host(first.tokens)
    return {
        "greedy_tokens": [int(t) for t in tokens[0]],
        "logits_sample_ids": idx.tolist(),
        "logits_sample": [float(x) for x in logits[idx]],
        "top_ids": [int(t) for t in top],
        "top_values": [float(x) for x in logits[top]],
        "logits_mean": float(logits.mean()),
        "logits_std": float(logits.std()),
        "weights_identical_across_devices": bool(session.identical_weights),
    }


def summarize_samples(samples: dict[str, list[float]]) -> dict[str, float]:
    """Flat metrics: ttft_p50_s, tpot_ci95_low_s, output_tokens_per_s (mean), ..._cv, ..."""
    out: dict[str, float] = {}
    for name, values in samples.items():
        s = summarize(values)
        base, unit = (name[:-2], "_s") if name.endswith("_s") and not name.endswith("_per_s") else (name, "")
        for stat, v in s.items():
            if stat == "n":
                continue
            if stat == "mean" and unit == "":
                out[base] = v                       # output_tokens_per_s is the mean rate
            elif stat == "cv":
                out[f"{base}_cv"] = v               # unitless
            else:
                out[f"{base}_{stat}{unit}"] = v
    return out


# ----------------------------------------------------------------------------- the scenario


class GenerateRun:
    """Offline generation on a model tpubench builds: on one chip, or on a world of chips for a
    sharded layout (measure/world.py)."""


    def in_world(self, be, point, base, checkpoint, peaks, reporter, world_start_s=None, energy=None,
                 profile_dir=None):
        """One rank's part of a point in a world of chips (measure.world.worker_main calls it on every
        rank): its shard of the saved weights, measured; returns the RunResult on every rank
        (rank 0's is written). `world_start_s`: how long this rank took from the launch to
        joining the process group; `energy`: rank 0's meter of the world's chips, or None;
        `profile_dir`: run --profile's folder (every rank runs the profiled pass, rank 0 writes)."""
        world = WorldSync()
        reporter.phase("load", 0, 1)
        t = time.perf_counter()
        built = be.build_sharded(point, checkpoint) if point.world_size > 1 else be.build(point)
        load_s = max(world.gather(time.perf_counter() - t))
        base = {**base, "environment": {**base["environment"], "ranks": world.ranks(built.device)}}
        result = measure_point(be, built, point, base, load_s, reporter, peaks, world=world, energy=energy,
                               profile_dir=profile_dir)
        return world.finish(result, world_start_s)

    def check(self, ctx, points):
        from tpubench.scenarios.generate.arms import arms_elsewhere
        from tpubench.scenarios.generate.fit import check_fit

        check_execution_modes(ctx, points)
        try:
            elsewhere = arms_elsewhere(ctx.backend.name, points)
        except UserError as exc:
            exc.where = exc.where or ctx.source
            raise
        refused = {p.key(): Unavailable(why) for p in points if p.key() not in elsewhere
                   for why in [ctx.backend.quantization_refusal(p)] if why}
        here = [p for p in points if p.key() not in elsewhere and p.key() not in refused]
        cannot_fit, notes = check_fit(ctx.backend, here, ctx.source)
        return {**elsewhere, **refused, **cannot_fit}, notes

    @contextlib.contextmanager
    def open(self, ctx, points):
        with contextlib.ExitStack() as cleanup:
            single = _SingleChipModel(ctx.backend, ctx.reporter)
            checkpoints = Checkpoints(cleanup, shared=ctx.user_world)

            def measure(point, base):
                peaks = plain_peaks(ctx.peaks.get(precision_of(point.dtype, point.quantization).activation_dtype))
                if point.world_size > 1 or ctx.user_world or ctx.backend.process_environment(point):
                    # (a mode set in the environment before torch loads runs in a fresh process: a world of one)
                    single.release()   # one model in memory at a time
                    return self._sharded(ctx, point, base, peaks, checkpoints)
                built, load_s, reused = single.get(point)
                result = measure_point(ctx.backend, built, point, base, load_s, ctx.reporter, peaks,
                                       energy=ctx.energy.meter() if ctx.energy is not None else None,
                                       profile_dir=ctx.profile_dir)
                result.model_reused = reused
                return result

            yield measure

    def _sharded(self, ctx, point, base: dict, peaks: dict | None, checkpoints: Checkpoints) -> RunResult:
        """One point on a world of chips (tensor / expert parallel), from weights saved once."""
        require_world_size(ctx, point, f"{point.world_size} rank(s) (tensor {point.tensor_parallel} x expert "
                                       f"{point.expert_parallel})")
        base = {**base, "environment": {**world_environment(ctx.backend, point, base["environment"]),
                                        **_mode_environment(ctx.backend, point)}}
        checkpoint = checkpoints.folder_for(point, ctx.reporter) if point.world_size > 1 or ctx.user_world else None
        return run_point_in_world(ctx, point, base, peaks, self.in_world, checkpoint)


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
        key = point.model_identity()
        if key == self.key:
            return self.built, 0.0, True
        self.release()   # a failed build must not be "reused" by the next point
        self.reporter.phase("load", 0, 1)
        t = time.perf_counter()
        self.built = self.be.build(point)
        self.key = key
        return self.built, time.perf_counter() - t, False


def measure_point(be, built, point: RunPoint, base: dict, load_s: float, reporter,
                  peaks: dict | None, world=None, energy=None, profile_dir=None) -> RunResult:
    """Measure one point on a built model into a RunResult; in a world (measure.world.WorldSync), on
    every rank. With `profile_dir` (run --profile), one profiled iteration after everything else
    (measure/profile.py), its trace written there."""
    from tpubench.measure.efficiency import roofline_metrics
    from tpubench.measure.validity import assess, verdict_record, warnings_for

    vocab = _vocab_size(point)  # also where an unknown family or bad config surfaces
    prompt = make_prompt(point.measurement["seed"], point.batch_size, point.input_length, vocab)
    session = be.session(built, point, prompt)
    # The precision this point's session set, as the frameworks report it back.
    base = {**base, "environment": {**base["environment"], **getattr(session, "matmul_precision", {})}}
    with session:
        m = measure_generate(session, point, on_phase=reporter.phase, world=world, energy=energy)
        on_device = session.on_requested_device()
        moe = expert_load_after(session, point, m.measure_iterations)
        if getattr(session, "experts_kernel", None):   # which kernel an arm named for a package ran
            moe["kernel"] = session.experts_kernel
        profile = (profile_after(be, session, point, m, profile_trace_dir(profile_dir, world), base)
                   if profile_dir is not None else {})
    m.compile["cpu_fallback_ops_timed"] = m.fallback_ops_timed
    m.compile["cpu_fallback_ops_untimed"] = m.fallback_ops_untimed
    if world is not None:
        on_device = _merge_ranks(m, on_device, world)
    metrics = summarize_samples(m.samples)
    metrics.update(aggregate_rates(metrics, point.batch_size, point.input_length, point.output_length))
    metrics.update({
        "iterations": m.measure_iterations,
        "generated_tokens": m.generated_tokens,
        "peak_memory_bytes": m.peak_memory_bytes,
        "output_tokens_per_s_ci95_rel": _rel_half(metrics),
        # Every token the timed loop processed: each iteration's prompts and generated tokens.
        **energy_metrics(m.energy, m.measure_iterations * point.batch_size * (point.input_length + point.output_length)),
    })
    metrics.update(with_energy_ci(metrics, "joules_per_token", "e2e"))
    metrics.update(load_metrics(moe))
    measured = moe.get("distinct_experts_per_decode_step_per_layer")
    roofline, exceeds_peak = roofline_metrics(point, metrics, peaks, distinct_experts=measured)
    if measured:   # the decode bytes counted the experts the batch really touched
        roofline["roofline_distinct_experts"] = moe["distinct_experts_per_decode_step"]
    metrics.update(roofline)
    _, reasons = assess(recompiles=m.compile["recompiles_timed"], generated_tokens=m.generated_tokens,
                        expected_tokens=m.expected_tokens, on_device=on_device, exceeds_peak=exceeds_peak,
                        recompile_limit_hits=m.compile.get("recompile_limit_hits", 0),
                        fallback_ops=m.compile["cpu_fallback_ops_timed"])
    early_fence = fence_reason(m.fence, float(np.median(m.samples["e2e_s"])))
    if early_fence:        # a fence that returned before the work ran: the timings are wrong, not noisy
        reasons = reasons + [early_fence]
    quality = getattr(built, "quality", None)
    if quality:   # a quantised point: its gate against the unquantised model decides too
        reasons = reasons + quality["reasons"]
    validity = verdict_record(reasons, m.samples["output_tokens_per_s"], iterations=m.measure_iterations,
                              measure_s=m.timing["measure_s"], measurement=point.measurement)
    warns = warnings_for(m.samples["output_tokens_per_s"], m.warmup_samples["e2e_s"], m.samples["e2e_s"],
                         point.measurement["max_cv"], graph_breaks=m.compile.get("graph_breaks", 0),
                         untimed_fallback_ops=m.compile["cpu_fallback_ops_untimed"])
    warns += [base["environment"]["chips_warning"]] if base["environment"].get("chips_warning") else []
    note = getattr(session, "generate_note", None)
    if note:
        moe["generate_decode_experts_implementation"] = "batched_mm"
        warns.append(note)
    fence_timing = {"fence_read_back_s": m.fence["read_back_after_fence_s"]} if m.fence else {}
    return RunResult(**base, finished_at=now_iso(), timing={"load_s": load_s, **m.timing, **fence_timing},
                     compile=m.compile, moe=moe,
                     samples={**m.samples, **{f"warmup_{k}": v for k, v in m.warmup_samples.items()}},
                     metrics=metrics, numerics={**m.numerics, **({"quality": quality} if quality else {})},
                     validity=validity, warnings=warns, energy=m.energy.as_dict() if m.energy is not None else {},
                     profile=profile, precision=precision_of(point.dtype, point.quantization).as_dict())


def profile_after(be, session, point: RunPoint, m: GenerateMeasurement, out_dir, base: dict) -> dict:
    """Where one iteration's time goes (measure/profile.py): one more iteration, under the
    framework's profiler, after the timed loop and the expert-load pass, so neither carries it.
    Its trace is named as a result file is (point, then time), so it sorts beside the result."""
    from tpubench.measure.profile import profile_pass, trace_stem

    return profile_pass(be, lambda: run_iteration(session, point.output_length), out_dir, trace_stem(base),
                        model=getattr(session, "model", None), fence=session.fence, device=be.device or "cpu",
                        compiled=point.execution_mode == "compile",
                        timed_s=float(np.median(m.samples["e2e_s"])))


def _mode_environment(be, point) -> dict:
    """The variables the point's fresh process had set for its execution mode, for the result."""
    env = be.process_environment(point)
    return {"execution_mode_environment": env} if env else {}


def check_execution_modes(ctx, points) -> None:
    """Refuse an execution mode this backend and device do not have (TorchTPU's eager modes off a
    TPU), and transformers' generate() loop with a mode or layout generate() does not take from
    tpubench, naming the workload, before anything runs."""
    for mode in sorted({p.execution_mode for p in points}):
        try:
            ctx.backend.check_execution_mode(mode)
        except UserError as exc:
            exc.where = exc.where or ctx.source
            raise
    loops = [p for p in points if p.params.get("decode_loop") == HF_GENERATE]
    if any(p.execution_mode == "compile" or p.world_size > 1 for p in loops):
        # generate() compiles (or not) by its own rules and runs on one model copy: what a
        # generate() user gets is measured with tpubench's eager model on one chip.
        raise UserError(f"decode loop {HF_GENERATE} measures generate() as its users call it: execution.mode eager "
                        "on one chip (generate() makes its own compile decisions)", where=ctx.source,
                        field="scenario.decode_loop")


def expert_load_after(session, point: RunPoint, iterations: int) -> dict:
    """Per-expert load over the timed loop (models/routing.py expert_load), from one more iteration
    after it with the routers' choices recorded: every timed iteration ran the same prompt greedily
    under the same routing, so one recorded iteration times the count is the timed loop's load,
    and the timed loop itself carried no recording. Empty for a dense model."""
    from tpubench.models.routing import expert_load

    record = getattr(session, "expert_routes", None)
    recorded = record(lambda: run_iteration(session, point.output_length)) if record else None
    if not recorded:
        return {}
    steps, n_experts = recorded
    load = expert_load(steps, n_experts, iterations)
    load["recorded"] = "one untimed iteration after the timed loop, times its iterations"
    return load


def _merge_ranks(m, on_device: bool, world) -> bool:
    """Compile accounting and memory from every rank: a recompile or a CPU fallback on any rank
    counts, compile time is the slowest rank's, peak memory the fullest chip's."""
    ranks = world.gather({"compile": m.compile, "compile_s": m.timing["compile_s"], "on_device": on_device,
                          "peak_memory_bytes": m.peak_memory_bytes})
    m.compile.update(merge_rank_compiles([r["compile"] for r in ranks]))
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


def _vocab_size(point: RunPoint) -> int:
    from tpubench.models.torch_models import hf_config

    config = hf_config(point)
    return (getattr(config, "text_config", None) or config).vocab_size
