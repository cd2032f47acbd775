"""Running a workload: pick device and scale, expand the sweep, measure each point, write results.

A point that fails is recorded as a failed result and the sweep goes on; every finished point is
on disk before the next one starts, so Ctrl-C or a kill loses nothing that was measured, and
`resume=True` skips points already present for this environment. A scenario may steer its sweep
(`Measurement.steering`): add points after what earlier ones measured, skip pending ones with a
reason (recorded as a `skipped` result).
"""

from __future__ import annotations

import os
import traceback
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tpubench.backends import default_device, get_backend, require_available
from tpubench.errors import Unavailable, UserError
from tpubench.hardware import contention
from tpubench.hardware.energy_sources import find_source
from tpubench.hardware.environment import environment_key, host_environment
from tpubench.measure.efficiency import peaks_for
from tpubench.measure.energy import EnergyPlan
from tpubench.measure.world import WorldFailed, in_user_world, join_world
from tpubench.records.energy_verdict import with_verdict
from tpubench.records.result import RunResult, now_iso, read_results, store_result
from tpubench.run.overrides import with_layout, with_server_url
from tpubench.run.sweep import MAX_POINTS, check_sweep_size, expand, scale_names
from tpubench.run.workload import load_workload
from tpubench.scenarios import SweepContext
from tpubench.scenarios.registry import measurement_of, scenario_of
from tpubench.workload_spec.point import RunPoint
from tpubench.workload_spec.precision import precision_of
from tpubench.workload_spec.sections import FULL_SCALE

SMALL_SCALE = "small"


class Reporter(Protocol):
    def note(self, message: str) -> None: ...
    def sweep_started(self, points: list[RunPoint]) -> None: ...
    def point_started(self, index: int, point: RunPoint) -> None: ...
    def phase(self, name: str, done: int, total: int) -> None: ...
    def point_finished(self, index: int, outcome: "PointOutcome") -> None: ...
    def points_added(self, count: int) -> None: ...   # a steered sweep grew (Measurement.steering)


class SilentReporter:
    def note(self, message): pass
    def sweep_started(self, points): pass
    def point_started(self, index, point): pass
    def phase(self, name, done, total): pass
    def point_finished(self, index, outcome): pass
    def points_added(self, count): pass


@dataclass
class PointOutcome:
    point: RunPoint
    result: RunResult | None = None
    path: Path | None = None
    skipped: bool = False          # already measured (resume)


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
              expert_parallel: int | None = None, server_url: str | None = None,
              data_parallel: int | None = None, fsdp: bool | None = None, energy: bool = True,
              chip_power_w: float | None = None, profile: bool = False) -> list[PointOutcome]:
    reporter = reporter or SilentReporter()
    # Over the run's start-up: what else is using this host's CPUs (hardware/contention.py).
    user_world = in_user_world()
    host = contention.SweepReading(exclude=contention.siblings() if user_world else set()).start()
    workload = load_workload(workload_path)
    for name in scale_names(workload):   # an absurd sweep is refused before touching any device
        check_sweep_size(workload, name, source=str(workload_path), max_points=max_points)
    device = device or default_device(backend)
    be = get_backend(backend, device)
    require_available(be)
    scale, note = choose_scale(workload, scale, on_accelerator=be.on_accelerator())
    if note:
        reporter.note(note)
    workload = with_server_url(with_layout(workload, tensor_parallel, expert_parallel, data_parallel, fsdp),
                               server_url)
    points = expand(workload, scale, source=str(workload_path), max_points=max_points)
    if not be.multi_chip and any(p.world_size > 1 for p in points):
        raise UserError(f"the {be.name} backend runs on one chip; parallel layouts need --backend torch",
                        where=str(workload_path), field="parallel")
    if user_world:
        join_world(be, workload.parallel.collective_timeout_s)
        if int(os.environ.get("RANK", "0")) != 0:
            reporter = SilentReporter()   # rank 0 speaks and writes for the world

    scenario = measurement_of(workload.scenario.kind)
    ctx = SweepContext(backend=be, source=str(workload_path), peaks={}, reporter=reporter,
                       collective_timeout_s=workload.parallel.collective_timeout_s, user_world=user_world,
                       profile_dir=Path(out_dir) if profile else None)
    # Before the host is probed for its peaks (seconds on a CPU): a sweep no point of which runs is refused at once.
    cannot_run, notes = scenario.check(ctx, points)
    env, ctx.peaks = _environment(be, points)
    _note_contention(host, be.device, env, reporter)
    ctx.energy = plan = _energy_plan(be, energy, chip_power_w, env.get("chips"), _not_metered_here(workload))
    try:   # whatever stops the sweep, the energy source (NVML) is closed
        if energy and plan.source is None:
            reporter.note(f"energy: not measured ({plan.why_not})")
        source = plan.source
        env["energy_source"] = ({"name": source.name, "method": source.method, "detail": source.detail}
                                if source is not None else {"name": None, "why_not": plan.why_not})
        env_key = environment_key(be.name, be.device, env)
        done = _already_measured(out_dir, env_key, retry_failed) if resume else {}
        # Under a user's torchrun every rank measures, rank 0 writes.
        writes = not user_world or int(os.environ.get("RANK", "0")) == 0

        reporter.sweep_started(points)
        outcomes: list[PointOutcome] = []
        # A scenario may steer its sweep (Measurement.steering): points added after what earlier
        # ones measured (run next), pending ones skipped with a reason (recorded as skipped).
        steering = scenario.steering(points) if hasattr(scenario, "steering") else None
        pending, skip = deque(points), {}
        index = -1
        with scenario.open(ctx, points) as measure:
            while pending:
                point = pending.popleft()
                index += 1
                if point.key() in done:
                    outcome = PointOutcome(point, skipped=True)
                    outcomes.append(outcome)
                    reporter.point_finished(index, outcome)
                    _steer(steering, point, done[point.key()], pending, skip, reporter)
                    continue
                reporter.point_started(index, point)
                base = dict(workload_file=str(workload_path), point=point.to_dict(), point_key=point.key(),
                            environment_key=env_key, backend=be.name, device=be.device, environment=env,
                            started_at=now_iso())
                result = _result_of(point, base, measure, skip=skip, cannot_run=cannot_run, notes=notes, host=host)
                _steer(steering, point, result, pending, skip, reporter)   # may add its conclusions to the result
                # Every result says whether its energy was measured, modelled, invalid or unavailable, and why.
                result.energy = with_verdict(result.energy, status=result.status,
                                             why_not=plan.why_not if plan.source is None else None)
                path = None
                if writes:
                    # Always written: texts a result cannot store are escaped, and a result that still
                    # cannot be serialized is written failed with the reason (records.result.store_result).
                    result, path = store_result(result, out_dir)
                outcome = PointOutcome(point, result, path)
                outcomes.append(outcome)
                reporter.point_finished(index, outcome)
        return outcomes
    finally:
        plan.close()


def _result_of(point: RunPoint, base: dict, measure, *, skip: dict, cannot_run: dict, notes: dict,
               host: contention.SweepReading) -> RunResult:
    """One point's result: skipped by the steering, refused, measured (with the contention while it
    ran in its environment), or failed; a failed point is data, not a crash."""
    try:
        if point.key() in skip:
            return _skipped(base, skip[point.key()])
        if point.key() in cannot_run:   # a reason (it cannot fit) or an Unavailable (skipped)
            why = cannot_run[point.key()]
            raise why if isinstance(why, Unavailable) else MemoryError(why)
        with contention.PointWindow(host.exclude) as window:
            result = measure(point, base)
        result.environment = {**result.environment, "contention": {**base["environment"].get("contention", {}),
                                                                   "point": window.figures()}}
        if point.key() in notes:
            result.warnings.append(notes[point.key()])
        return result
    except Unavailable as exc:   # not runnable here on purpose (errors.Unavailable): say why
        return _skipped(base, str(exc))
    except Exception as exc:  # noqa: BLE001 - recorded as a failed point and the sweep goes on
        return _failed(base, exc)


def _note_contention(host: contention.SweepReading, device: str, env: dict, reporter) -> None:
    """Say in one line whether the host is busy, and record it in every result's environment."""
    reading = host.finish(device)
    if reading is None:
        return
    reporter.note(contention.line(reading))
    env["contention"] = reading.as_dict()


def _not_metered_here(workload) -> str | None:
    """Why the sweep's work is not on this host's chips, or None when it is (Scenario.meters_energy;
    a scenario whose answer depends on the workload says so in its `energy_here(workload)`: a
    server tpubench launches runs here, one at a URL may be anywhere)."""
    described = scenario_of(workload.scenario.kind)
    if not described.meters_energy:
        return f"a {workload.scenario.kind} point's work does not run on this host's chips"
    energy_here = getattr(described, "energy_here", None)
    return energy_here(workload) if energy_here is not None else None


def _energy_plan(be, wanted: bool, chip_power_w: float | None, chips, not_here: str | None) -> EnergyPlan:
    """The sweep's energy source (docs/measurement.md#energy): the device's sensor, else the user's
    per-chip figure for the point's `chips` (modelled), else none and why. Only work on this host's
    chips is metered (`not_here`: why the sweep's is not)."""
    if chip_power_w is not None and not chip_power_w > 0:
        raise UserError(f"a chip's power is a positive number of watts, got {chip_power_w:g}", field="--chip-power-w")
    if not wanted:
        return EnergyPlan(None, "--no-energy")
    if not_here:
        return EnergyPlan(None, not_here)
    device = be.energy_device()
    source, why = find_source(device, chips=chips or 1, chip_power_w=chip_power_w)
    return EnergyPlan(source, why, settings={"device": device, "chip_power_w": chip_power_w})


def _steer(steering, point: RunPoint, result: RunResult, pending: deque, skip: dict[str, str], reporter) -> None:
    """Tell the scenario's steering what a point gave: the points it adds run next, in its order."""
    if steering is None:
        return
    try:
        added, skipped = steering.after(point, result)
    except Exception as exc:  # noqa: BLE001 - the point's measurement is still written; the sweep goes on as listed
        result.warnings.append(f"the sweep's steering failed after this point ({_describe(exc)}): "
                               "no point was added or skipped because of it")
        return
    pending.extendleft(reversed(added))
    skip.update(skipped)
    if added:
        reporter.points_added(len(added))


def _skipped(base: dict, reason: str) -> RunResult:
    result = RunResult(**base, status="skipped", error=reason, finished_at=now_iso())
    result.validity.valid = False
    result.validity.reasons.append(f"not measured: {reason}")
    return result


def _failed(base: dict, exc: Exception) -> RunResult:
    result = RunResult(**base, status="failed", error=_describe(exc), finished_at=now_iso())
    result.validity.valid = False
    result.validity.reasons.append("run failed")
    if isinstance(exc, WorldFailed) and exc.log_tail:
        result.warnings.append(f"launcher log tail: {exc.log_tail}")
    elif not isinstance(exc, (UserError, MemoryError, WorldFailed)):
        result.warnings.append(traceback.format_exc(limit=3)[-1500:])
    return result


def _environment(be, points: list[RunPoint]) -> tuple[dict, dict]:
    """Provenance for every result of the sweep, and the roofline peaks per dtype."""
    env = {**host_environment(), **be.environment()}
    platform = be.device if be.on_accelerator() else "cpu"
    # Only models tpubench runs itself have a roofline (a server's are its own business).
    # Keyed by the dtype the matmuls take (a quantised point's activations: int8, fp8), which picks the peak.
    dtypes = {precision_of(p.dtype, p.quantization).activation_dtype for p in points
              if scenario_of(p.scenario_kind).builds_model}
    peaks = {dtype: peaks_for(platform, env.get("accelerator_name"), dtype) for dtype in dtypes}
    env["roofline_peaks"] = {dtype: {k: v for k, v in p.items() if k != "probe"} if p else None
                             for dtype, p in peaks.items()}
    probe = next((p["probe"] for p in peaks.values() if p and "probe" in p), None)
    if probe:
        env["host_probe"] = probe
    return env, peaks


def _already_measured(out_dir, env_key: str, retry_failed: bool) -> dict[str, RunResult]:
    """Points with a result for this environment, by key (the latest file of each); failed and
    skipped ones too unless they are to be retried."""
    if not Path(out_dir).is_dir():
        return {}
    found = sorted(((r.started_at or "", str(f), r) for f, r in read_results(out_dir, warn=lambda m: None)
                    if r.environment_key == env_key and (r.status == "ok" or not retry_failed)),
                   key=lambda x: x[:2])
    return {r.point_key: r for _, _, r in found}


def _describe(exc: BaseException) -> str:
    if isinstance(exc, UserError):
        return exc.one_line()
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:500]
