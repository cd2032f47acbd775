"""Scenario `diffuse`: images from a Diffusers pipeline on one chip, measured per stage
(docs/scenarios/diffuse.md).

The pipeline is built once per model identity (family, component configs, weights, dtype, seed)
and kept while later points share it; a point sets its scheduler and, in compile mode, compiles the
denoiser's forward (dynamo reset first, so graphs of an earlier point never serve this one). Each
call makes `batch_size` images of the seed's prompt from the seed's starting noise (a CPU
generator: the same latents on every device) and is cut into fenced stages (stages.py). The first
call is the cold one (compile, caches), then `measurement.warmup - 1` more untimed calls, then timed
calls until the stopping rule of measure/timing.py. With the sweep's energy source, the timed calls
are its window (docs/measurement.md#energy): joules per image = window joules / images made in it.
With `run --profile`, one more call runs under the profiler after everything else is measured
(measure/profile.py), its trace beside the result.
"""

from __future__ import annotations

import contextlib
import gc
import math
import time
from dataclasses import dataclass, field

from tpubench.errors import UserError
from tpubench.measure.energy import energy_metrics, with_energy_ci
from tpubench.measure.timing import done_measuring, fallback_watch, fenced_clock
from tpubench.records.result import RunResult, now_iso
from tpubench.scenarios.diffuse import families
from tpubench.scenarios.diffuse.metrics import call_metrics, placement_warnings, stage_samples
from tpubench.scenarios.diffuse.prompts import prompt_for


class DiffuseRun:
    """Images from a Diffusers pipeline on one chip."""

    def check(self, ctx, points):
        be = ctx.backend
        if not be.runs_torch_modules:
            raise UserError(f"scenario diffuse runs on the torch backend, not {be.name}", where=ctx.source,
                            field="--backend")
        if any(p.world_size > 1 for p in points):
            raise UserError("scenario diffuse runs on one chip", where=ctx.source, field="parallel")
        try:
            import diffusers  # noqa: F401
        except ImportError:
            raise UserError("scenario diffuse needs Diffusers: pip install 'tpubench[diffusion]'",
                            where=ctx.source, field="scenario.kind") from None
        return {}, {}

    @contextlib.contextmanager
    def open(self, ctx, points):
        cache = _PipelineCache(ctx.backend, ctx.reporter)
        try:
            def measure(point, base):
                energy = ctx.energy.meter() if ctx.energy is not None else None
                return measure_point(ctx.backend, cache, point, base, ctx.reporter, energy=energy,
                                     profile_dir=ctx.profile_dir)

            yield measure
        finally:
            cache.release()


class _PipelineCache:
    """The pipeline of the last point, kept while the next point has the same model identity."""

    def __init__(self, be, reporter):
        self.be, self.reporter = be, reporter
        self.key, self.pipe = None, None

    def release(self) -> None:
        self.key, self.pipe = None, None
        gc.collect()
        from tpubench.backends.torch import TorchDevice

        TorchDevice(self.be.device).release_cached_memory()

    def get(self, point) -> tuple:
        """(pipeline, load seconds, reused?)"""
        key = point.model_identity()
        if key == self.key:
            return self.pipe, 0.0, True
        self.release()
        self.reporter.phase("load", 0, 1)
        from tpubench.scenarios.diffuse.build import build_pipeline, quiet_diffusers

        fence = _device(self.be).fence
        t = time.perf_counter()
        with quiet_diffusers():
            pipe = build_pipeline(point, self.be.torch_device())
        fence()
        load_s = time.perf_counter() - t
        pipe.set_progress_bar_config(disable=True)
        self.key, self.pipe = key, pipe
        return pipe, load_s, False


def _device(be):
    from tpubench.backends.torch import TorchDevice

    return TorchDevice(be.device)


def call_kwargs(point) -> dict:
    """The pipeline call of a point (the generator is added per call)."""
    p = point.params
    kwargs = dict(prompt=prompt_for(int(point.measurement.get("seed", 0)), int(p["prompt_words"])),
                  height=int(p["resolution"]), width=int(p["resolution"]), num_inference_steps=int(p["steps"]),
                  guidance_scale=float(p["guidance"]), num_images_per_prompt=int(point.batch_size))
    lengths = p.get("tokenizer_lengths") or {}
    if point.family in ("flux", "sd3") and lengths:
        kwargs["max_sequence_length"] = max(lengths.values())
    return kwargs


def generator(point):
    import torch

    return torch.Generator(device="cpu").manual_seed(int(point.measurement.get("seed", 0)))


@dataclass
class _Calls:
    """What the calls of one point gave (measure_point): the cold first call, the warm-up and timed
    calls, and the device's counters around them."""

    first: object = None
    warm: list = field(default_factory=list)
    timed: list = field(default_factory=list)
    measure_s: float = 0.0
    compiles_0: int = 0            # graphs compiled before the first call
    recompiles: int = 0            # graphs compiled while timed
    fallbacks_0: dict = field(default_factory=dict)
    fallbacks: dict = field(default_factory=dict)
    untimed_ops: list = field(default_factory=list)
    timed_ops: list = field(default_factory=list)
    peak_memory_bytes: int | None = None


def measure_point(be, cache, point, base: dict, reporter, energy=None, profile_dir=None) -> RunResult:
    """One point into a RunResult; `energy` (measure.energy.EnergyMeter, or None) meters the timed
    calls; with `profile_dir` (run --profile), one more call is profiled after them (module docstring)."""
    import torch

    from tpubench.scenarios.diffuse.build import swap_scheduler
    from tpubench.scenarios.diffuse.flops import denoiser_flops
    from tpubench.scenarios.diffuse.numerics import fingerprint
    from tpubench.scenarios.diffuse.stages import StagedPipeline

    dev = _device(be)
    now = fenced_clock(dev.fence)
    pipe, load_s, reused = cache.get(point)
    denoiser_name = families.denoiser(point.family)
    denoiser = getattr(pipe, denoiser_name)
    original_scheduler, original_forward = pipe.scheduler, denoiser.forward   # the bound, uncompiled forward
    pipe.scheduler = swap_scheduler(pipe, point.family, point.params["scheduler"], original_scheduler)
    compiled = point.execution_mode == "compile"
    if compiled:
        torch._dynamo.reset()
        backend, options = dev.compile_backend(point.compile_options)
        denoiser.forward = torch.compile(original_forward, backend=backend, **options)
    staged = StagedPipeline(pipe, denoiser_name, now, capture=True)
    kwargs = call_kwargs(point)
    try:
        run = _run_calls(dev, staged, point, kwargs, reporter, energy)
        with torch.inference_mode():
            flops = denoiser_flops(original_forward, staged.captured.get("denoiser_inputs"))
        numerics = fingerprint(staged.captured, point)
        profile = (_profile_call(be, staged, point, kwargs, denoiser, run.timed, profile_dir, base)
                   if profile_dir else {})
    finally:
        staged.close()
        denoiser.__dict__.pop("forward", None)   # the class's forward again
        pipe.scheduler = original_scheduler
        if compiled:
            torch._dynamo.reset()

    placement = component_placement(pipe)
    env = base["environment"]
    peaks = _peaks(be, env, point.dtype)
    metrics, exceeds = _image_metrics(point, run, flops, peaks, env, energy)
    compile_info = {"graphs_compiled": dev.compile_count() - run.compiles_0,
                    "recompiles_timed": run.recompiles,
                    "graph_breaks": run.fallbacks["graph_breaks"] - run.fallbacks_0["graph_breaks"],
                    "recompile_limit_hits": run.fallbacks["recompile_limit_hits"]
                    - run.fallbacks_0["recompile_limit_hits"],
                    "cpu_fallback_ops_untimed": run.untimed_ops,
                    "cpu_fallback_ops_timed": run.timed_ops,
                    "first_step_s": run.first.step_s[0]}
    steady = metrics.get("denoise_step_p50_s")
    compile_s = max(0.0, run.first.step_s[0] - steady) if compiled and steady and math.isfinite(steady) else 0.0
    timing = {"load_s": load_s, "compile_s": compile_s, "first_iteration_s": run.first.whole_s,
              "cold_start_s": load_s + run.first.whole_s, "warm_start_s": metrics.get("call_p50_s", math.nan),
              "warmup_s": sum(c.whole_s for c in run.warm), "measure_s": run.measure_s}
    validity, warns = _image_validity(be, point, run, placement, compile_info, exceeds, env)
    diffusion = {"pipeline": type(pipe).__name__, "denoiser": denoiser_name, "placement": placement,
                 "scheduler": type(pipe.scheduler).__name__ if point.params["scheduler"] == "default"
                 else point.params["scheduler"], "prompt": kwargs["prompt"], "output": "numpy images on the host",
                 "flops_method": "torch.utils.flop_counter over one denoiser forward at the point's shapes",
                 "peak_flops_per_chip_source": (peaks or {}).get("source"),
                 "first_call": {"whole_s": run.first.whole_s, "text_encode_s": run.first.text_encode_s,
                                "step_s": run.first.step_s, "vae_decode_s": run.first.vae_decode_s}}
    window_energy = energy.result if energy is not None else None
    result = RunResult(**base, finished_at=now_iso(), timing=timing, compile=compile_info,
                       samples=stage_samples(run.timed, point.batch_size), metrics=metrics, numerics=numerics,
                       validity=validity, warnings=warns, diffusion=diffusion,
                       energy=window_energy.as_dict() if window_energy is not None else {}, profile=profile)
    result.model_reused = reused
    return result


def _run_calls(dev, staged, point, kwargs: dict, reporter, energy) -> _Calls:
    """The cold first call, `warmup - 1` more untimed calls, then timed calls (in the energy window)
    until the stopping rule; the device's compile, fallback and peak memory counters around them."""
    import torch

    m = point.measurement
    run = _Calls()
    dev.reset_peak_memory()
    run.compiles_0, run.fallbacks_0 = dev.compile_count(), dev.compile_fallbacks()
    with torch.inference_mode(), fallback_watch(dev) as untimed_watch:
        reporter.phase("first call", 0, 1)
        run.first, _ = staged.call(generator=generator(point), **kwargs)
        staged.capture = False
        for i in range(max(0, int(m.get("warmup", 0)) - 1)):
            reporter.phase("warmup", i, int(m["warmup"]) - 1)
            run.warm.append(staged.call(generator=generator(point), **kwargs)[0])
    compiles_timed_0 = dev.compile_count()
    window = energy.window() if energy is not None else contextlib.nullcontext()
    with torch.inference_mode(), fallback_watch(dev) as timed_watch, window:
        t0 = time.perf_counter()
        image_s: list[float] = []
        while not done_measuring(len(run.timed), time.perf_counter() - t0, image_s, m):
            reporter.phase("measure", len(run.timed), m["min_iterations"])
            ct, _ = staged.call(generator=generator(point), **kwargs)
            run.timed.append(ct)
            image_s.append(ct.whole_s / point.batch_size)
        run.measure_s = time.perf_counter() - t0
    run.recompiles = dev.compile_count() - compiles_timed_0
    run.fallbacks = dev.compile_fallbacks()
    run.peak_memory_bytes = dev.peak_memory_bytes()
    run.untimed_ops, run.timed_ops = list(untimed_watch.ops), list(timed_watch.ops)
    return run


def _image_metrics(point, run: _Calls, flops, peaks: dict | None, env: dict, energy) -> tuple[dict, bool]:
    """(the point's metrics: seconds per call and image per stage, images/s, MFU, energy per image;
    whether a figure exceeds the chip's peak)."""
    metrics, exceeds = call_metrics(run.timed, point.batch_size, chips=env.get("chips") or 1, flops_per_step=flops,
                                    peak_flops=(peaks or {}).get("peak_flops"),
                                    peak_tolerance=(peaks or {}).get("tolerance", math.inf))
    metrics.update({"peak_memory_bytes": run.peak_memory_bytes, "resolution_px": int(point.params["resolution"]),
                    "denoise_steps": int(point.params["steps"]), "guidance": float(point.params["guidance"])})
    window_energy = energy.result if energy is not None else None
    # Every image the timed calls made; the CI is the seconds per image's (with_energy_ci).
    metrics.update(energy_metrics(window_energy, len(run.timed) * point.batch_size, token_name="image"))
    metrics.update(with_energy_ci(metrics, "joules_per_image", "image"))
    return metrics, exceeds


def _image_validity(be, point, run: _Calls, placement: dict, compile_info: dict, exceeds: bool,
                    env: dict) -> tuple[dict, list[str]]:
    """(validity, warnings) of the measurement (measure/validity.py), with the warnings of
    components that ran on the host."""
    from tpubench.measure.validity import assess, verdict_record, warnings_for

    rates = [point.batch_size / c.whole_s for c in run.timed]
    on_device = be.placed_on_device(placement.values())
    _, reasons = assess(recompiles=run.recompiles, generated_tokens=0, expected_tokens=0,
                        on_device=on_device, exceeds_peak=exceeds,
                        recompile_limit_hits=compile_info["recompile_limit_hits"],
                        fallback_ops=compile_info["cpu_fallback_ops_timed"])
    # The first call is the cold one (accounted as first_iteration_s and compile_s), not a warm-up.
    warns = warnings_for(rates, [c.whole_s for c in run.warm], [c.whole_s for c in run.timed],
                         point.measurement["max_cv"], graph_breaks=compile_info["graph_breaks"],
                         untimed_fallback_ops=compile_info["cpu_fallback_ops_untimed"])
    warns += placement_warnings(placement, be.device)
    warns += [env["chips_warning"]] if env.get("chips_warning") else []
    return verdict_record(reasons, rates, iterations=len(run.timed), measure_s=run.measure_s,
                          measurement=point.measurement), warns


def _profile_call(be, staged, point, kwargs: dict, denoiser, calls: list, out_dir, base: dict) -> dict:
    """Where one call's time goes (measure/profile.py): one more call under the profiler, after the
    timed calls, the FLOP count and the numerics, so none of them carries it; module ranges on the
    denoiser's attention and norm modules."""
    import statistics

    import torch

    from tpubench.measure.profile import profile_pass, trace_stem

    def one_call():
        with torch.inference_mode():
            staged.call(generator=generator(point), **kwargs)

    return profile_pass(be, one_call, out_dir, trace_stem(base), model=denoiser, fence=_device(be).fence,
                        device=be.device or "cpu", compiled=point.execution_mode == "compile",
                        timed_s=statistics.median(c.whole_s for c in calls) if calls else None)


def component_placement(pipe) -> dict[str, str]:
    """{component: device of its parameters} of every module of the pipeline ("a, b" when spread)."""
    import torch

    out = {}
    for name, comp in pipe.components.items():
        if isinstance(comp, torch.nn.Module):
            devices = sorted({str(p.device) for p in comp.parameters()})
            if devices:
                out[name] = ", ".join(devices)
    return out


def _peaks(be, env: dict, dtype: str):
    from tpubench.measure.efficiency import peaks_for

    try:
        return peaks_for(be.device, env.get("accelerator_name"), dtype)
    except Exception:   # a peak is a nicety: no table entry, no probe, no MFU
        return None
