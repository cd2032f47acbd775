"""One command that produces tpubench's first accelerator numbers, and checks its clock.

On a machine with an accelerator (CUDA, TPU, Trainium, ... nothing here assumes CUDA) it, within
`--budget-s` seconds (default 480) of wall time, model builds included:

1. runs `tpubench backends` and prints what it says;
2. measures the full-scale `workloads/qwen3_moe.yaml` (Qwen3-30B-A3B architecture, random
   weights, ~61 GB in bfloat16) at batch 1 and 64, eager then torch.compile, through tpubench's
   own runner (`run_sweep`) on a derived workload file, with short measurement settings and
   output_length 128 instead of 256 (printed, and visible in every result's point);
3. runs the JAX backend where JAX sees an accelerator (the same workload; when tpubench refuses
   the full scale because the host cannot hold the torch model and its JAX copy, the small
   scale on the same accelerator instead), and says why not otherwise;
4. cross-checks tpubench's TTFT and TPOT against an independent timer read at the very fences
   tpubench's measurement loop calls: the session tpubench measures is wrapped so that its
   `fence()` also records a CUDA event (on CUDA, just before the synchronize) or reads a second
   host clock, CLOCK_MONOTONIC_RAW (elsewhere, just after it). tpubench's own
   `measure_generate`/`run_iteration` do the timing; the wrapper only observes. A ratio
   tpubench/independent outside 0.9-1.1 is flagged;
5. leaves one tpubench result file per point in `--out` (default: this checkout's results/),
   and beside them `accelerator_check_<UTC time>.summary` (JSON: cross-check ratios, what was
   skipped and why, versions, wall time; written atomically) and the derived workload files
   the results name in `workload_file` (`accelerator_check_<UTC time>.<phase>.qwen3_moe.yaml`,
   whose description says what was changed). Neither name ends in .json: every *.json under a
   results folder is read as a result file.

Without an accelerator it runs the small scale on the CPU (`--scale small` forces it anywhere);
`--quick` uses tiny settings, eager mode only and one JAX CPU point (for CI: well under a
minute). Each phase runs in its own process group under a time budget: a point that would not
fit is skipped with the reason, a phase that overruns is stopped by its process group (never by
name) and the next phase goes on. Exit code 0 when at least one point was measured, 1 when none
could be, 130 when interrupted.

    python benchmarks/accelerator_check.py                 # on the accelerator machine
    python benchmarks/accelerator_check.py --quick --out /tmp/check   # CPU smoke test
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tpubench.processes import kill_group, start_in_new_group, stop_group  # noqa: E402  (needs ROOT on the path)
from tpubench.scenarios.registry import point_label  # noqa: E402

DEFAULT_WORKLOAD = "workloads/qwen3_moe.yaml"
FULL_BATCHES = [1, 64]
FULL_OUTPUT_LENGTH = 128          # the workload's 256 halved: decode time halves, TPOT barely moves
QUICK_INPUT_LENGTH, QUICK_OUTPUT_LENGTH = 32, 8
RATIO_BAND = (0.9, 1.1)
JAX_SHARE = 0.25                  # of the time left after `backends`, kept for the JAX phase
JAX_SMALL_RESERVE_S = 60.0        # enough for the small scale (build, AOT compile, measure)
JAX_FULL_MIN_S = 240.0            # below this the JAX phase does not try the full scale
GRACE_S = 15.0                    # between a phase's own deadline and its hard stop
FINAL_RESERVE_S = 10.0            # kept for stopping an overrunning phase and the summary
MIN_PHASE_S = {"full": 45.0, "small": 8.0}

# Measurement settings per kind of run: a few iterations, a bounded time (docs/measurement.md#repetition
# still applies: first call apart, warm-up, then timed iterations, each clock read after a fence).
MEASUREMENT = {
    "full": dict(warmup=1, min_iterations=3, min_seconds=1.0, max_seconds=30.0),
    "small": dict(warmup=1, min_iterations=3, min_seconds=0.5, max_seconds=10.0),
    "quick": dict(warmup=0, min_iterations=2, min_seconds=0.0, max_seconds=2.0),
}
# What a point is expected to take before one of its mode has run (then: the last one's time).
FIRST_POINT_GUESS_S = {("full", "eager"): 60.0, ("full", "compile"): 120.0,
                       ("small", "eager"): 1.0, ("small", "compile"): 30.0}


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def atomic_write_json(path: Path, data) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(_finite(data), fh, indent=1, default=_json_default, allow_nan=False)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _finite(obj):
    """Strict JSON: a NaN or infinity (a metric that could not be computed) becomes null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _json_default(obj):
    if hasattr(obj, "item"):
        return obj.item()
    return str(obj)


def fmt_ms(seconds) -> str:
    if seconds is None or not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return "-"
    return f"{seconds * 1e3:.2f} ms"


def fmt_ratio(ratio) -> str:
    if ratio is None or not isinstance(ratio, (int, float)) or not math.isfinite(ratio):
        return "-"
    return f"{ratio:.3f}"


def ratio_flagged(ratio) -> bool:
    return not (isinstance(ratio, (int, float)) and math.isfinite(ratio) and RATIO_BAND[0] <= ratio <= RATIO_BAND[1])


# =============================================================================== the cross-check
# Runs inside the phase process, around tpubench's own session: nothing here times anything by
# itself; it records an independent reading at each fence that tpubench's loop calls.


def independent_host_clock():
    """A second host clock, not the one tpubench reads (perf_counter, CLOCK_MONOTONIC on Linux)."""
    raw = getattr(time, "CLOCK_MONOTONIC_RAW", None)
    if raw is not None:
        try:
            time.clock_gettime_ns(raw)
            return functools.partial(time.clock_gettime_ns, raw), "host CLOCK_MONOTONIC_RAW read after the same fence"
        except OSError:
            pass
    return time.time_ns, "host wall clock (time.time_ns) read after the same fence"


class HostClockTimer:
    """Reads a second host clock right after the session's fence returns."""

    def __init__(self):
        self._read, self.name = independent_host_clock()
        self.kind = "host-clock"

    def before_fence(self, marks: list) -> None:
        pass

    def after_fence(self, marks: list) -> None:
        marks.append(self._read())

    def finish(self, marks: list) -> list[float]:
        t0 = marks[0]
        return [(m - t0) * 1e-9 for m in marks]


class CudaEventTimer:
    """Records a CUDA event on the current stream just before the session's fence (synchronize):
    the GPU timestamps the point where all work queued before the clock read has finished."""

    kind = "cuda-events"
    name = "CUDA events (torch.cuda.Event, enable_timing) recorded at the same fences"

    def __init__(self):
        import torch

        self._torch = torch
        self._free: list = []

    def before_fence(self, marks: list) -> None:
        event = self._free.pop() if self._free else self._torch.cuda.Event(enable_timing=True)
        event.record()
        marks.append(event)

    def after_fence(self, marks: list) -> None:
        pass

    def finish(self, marks: list) -> list[float]:
        # Called outside tpubench's timed span (at the next reset). Waiting on the last event
        # means a fence that did not wait for the GPU shows up as a ratio far below 1.
        marks[-1].synchronize()
        first = marks[0]
        stamps = [first.elapsed_time(e) * 1e-3 for e in marks]
        self._free.extend(marks)
        return stamps


def make_timer(backend):
    if getattr(backend, "name", None) == "torch" and getattr(backend, "device", None) == "cuda":
        try:
            timer = CudaEventTimer()
            probe = []
            timer.before_fence(probe)
            timer.before_fence(probe)
            timer.finish(probe)
            return timer
        except Exception as exc:  # the check must never break the measurement it observes
            print(f"CUDA events unusable ({type(exc).__name__}: {exc}); cross-checking with a host clock", flush=True)
    return HostClockTimer()


class TimedSession:
    """tpubench's session, unchanged, with its fence observed: one group of readings per
    iteration (run_iteration resets the cache first), one reading per fence."""

    def __init__(self, inner, timer, point):
        self._inner = inner
        self._timer = timer
        self.point = point
        self.groups: list[list[float]] = []
        self.errors: list[str] = []
        self._marks: list = []

    def __getattr__(self, name):
        inner = self.__dict__.get("_inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)

    def __enter__(self):
        self._inner.__enter__()
        return self

    def __exit__(self, *exc):
        return self._inner.__exit__(*exc)

    def reset(self) -> None:
        self._close_group()
        self._inner.reset()

    def fence(self) -> None:
        self._timer.before_fence(self._marks)
        self._inner.fence()
        self._timer.after_fence(self._marks)

    def _close_group(self) -> None:
        if self._marks:
            try:
                self.groups.append(self._timer.finish(self._marks))
            except Exception as exc:  # never let the observer break tpubench's measurement
                self.groups.append([math.nan] * len(self._marks))
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self._marks = []

    def finish(self) -> list[list[float]]:
        """All groups; drops the wrapped session so its KV cache can be freed."""
        self._close_group()
        self._inner = None
        return self.groups


class TimedBackend:
    """A tpubench backend whose sessions are TimedSessions; everything else is the backend's."""

    def __init__(self, inner, recorder: "Recorder"):
        self._inner = inner
        self._recorder = recorder

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def session(self, built, point, prompt):
        session = TimedSession(self._inner.session(built, point, prompt), make_timer(self._inner), point)
        self._recorder.current = session
        self._recorder.timer_name = session._timer.name
        self._recorder.timer_kind = session._timer.kind
        return session


class Recorder:
    def __init__(self):
        self.current: TimedSession | None = None
        self.timer_name = ""
        self.timer_kind = ""

    def take(self, point) -> tuple[list[list[float]] | None, list[str]]:
        """The readings of this point's session (None if it had none), and any timer errors."""
        session, self.current = self.current, None
        if session is None or session.point.key() != point.key():
            return None, []
        return session.finish(), session.errors


def crosscheck(point, result, groups, timer_name: str, timer_kind: str, errors: list[str] = ()) -> dict:
    """tpubench's TTFT/TPOT (its result file) next to the same figures from the independent
    readings of the same measured iterations, and their ratios tpubench / independent."""
    from tpubench.measure.stats import summarize

    out: dict = {"timer": timer_name, "timer_kind": timer_kind}
    if result is None or result.status != "ok":
        out["problem"] = "the point failed: nothing to compare"
        return out
    if groups is None:
        out["problem"] = "no readings were recorded for this point (the session was not wrapped)"
        return out
    n = int(result.metrics.get("iterations") or 0)
    warm = int(point.measurement.get("warmup", 0))
    steps = point.output_length
    # Untimed iterations may follow the timed loop through the same session: an MoE point's
    # expert-load pass (torch; JAX records routes in a pass of its own), a --profile pass.
    after = int(bool((getattr(result, "moe", None) or {}).get("recorded"))) \
        + int(bool((getattr(result, "profile", None) or {}).get("available")))
    expected = 1 + warm + n
    out["fenced_iterations_recorded"] = len(groups)
    out["fenced_iterations_expected"] = expected
    out["untimed_iterations_after"] = max(0, len(groups) - expected)
    problems = [f"the independent timer failed: {errors[0]}"] if errors else []
    if not expected <= len(groups) <= expected + after:
        problems.append(f"recorded {len(groups)} fenced iterations, tpubench ran {expected}"
                        + (f" (+ up to {after} untimed after the timed loop)" if after else ""))
    measured = groups[1 + warm:1 + warm + n]
    if any(len(g) != steps + 1 for g in measured):
        problems.append(f"an iteration had {sorted({len(g) for g in measured})} fences, expected {steps + 1}")
        measured = [g for g in measured if len(g) == steps + 1]
    if problems:
        out["problem"] = "; ".join(problems)
    if not measured:
        return out
    independent = {"ttft_s": [g[1] - g[0] for g in measured], "e2e_s": [g[-1] - g[0] for g in measured]}
    if steps > 1:
        independent["tpot_s"] = [(g[-1] - g[1]) / (steps - 1) for g in measured]
    for name, values in independent.items():
        base = name[:-2]
        ours = result.metrics.get(f"{base}_p50_s")
        theirs = summarize(values)["p50"]
        out[f"tpubench_{base}_p50_s"] = ours
        out[f"independent_{base}_p50_s"] = theirs
        out[f"{base}_ratio"] = (ours / theirs) if ours is not None and theirs and theirs > 0 else math.nan
        samples = result.samples.get(name, [])
        if len(samples) == len(values):
            paired = [a / b for a, b in zip(samples, values) if b > 0]
            if paired:
                out[f"{base}_paired_ratio_min"] = min(paired)
                out[f"{base}_paired_ratio_max"] = max(paired)
    out["flagged"] = [k for k in ("ttft_ratio", "tpot_ratio") if k in out and ratio_flagged(out[k])]
    return out


# =============================================================================== phase process


class BudgetExhausted(Exception):
    def __init__(self, index: int, reason: str):
        super().__init__(reason)
        self.index = index
        self.reason = reason


class PhaseReporter:
    """tpubench's Reporter protocol: prints plain progress lines, keeps the phase report on disk
    after every point, and declines to start a point that would not fit the phase's budget."""

    def __init__(self, spec: dict, report: dict, recorder: Recorder, deadline: float, save, scale: str):
        self.spec, self.report, self.recorder, self.deadline, self.save = spec, report, recorder, deadline, save
        self.scale = scale
        self.points: list = []
        self.last_wall: dict[str, float] = {}
        self._t_point = 0.0
        self._phase = None
        self.tag = f"[{spec['backend']}]"

    def note(self, message: str) -> None:
        print(f"{self.tag} note: {message}", flush=True)

    def sweep_started(self, points) -> None:
        self.points = list(points)
        print(f"{self.tag} {len(points)} point(s), {self.scale} scale: "
              + ", ".join(point_label(p) for p in points), flush=True)

    def estimate(self, point) -> float:
        mode = point.execution_mode
        if mode in self.last_wall:
            return 1.2 * self.last_wall[mode]
        key = ("full" if self.scale == "full" else "small", mode if mode == "compile" else "eager")
        return FIRST_POINT_GUESS_S[key]

    def point_started(self, index: int, point) -> None:
        left = self.deadline - time.monotonic()
        need = self.estimate(point)
        if need > left:
            raise BudgetExhausted(index, f"needs about {need:.0f} s, {max(left, 0):.0f} s left in this phase's budget")
        self._t_point = time.monotonic()
        self._phase = None
        self.report["in_flight"] = {"label": point_label(point), "started_s": round(time.monotonic() - START, 1)}
        self.save()
        print(f"{self.tag} point {index + 1}/{len(self.points)}: {point_label(point)}", flush=True)

    def phase(self, name: str, done: int, total: int) -> None:
        if name != self._phase:
            self._phase = name
            print(f"{self.tag}   {name} ...", flush=True)

    def point_finished(self, index: int, outcome) -> None:
        if outcome.skipped or outcome.result is None:
            return
        wall = time.monotonic() - self._t_point
        result, point = outcome.result, outcome.point
        self.last_wall[point.execution_mode] = max(wall - result.timing.get("load_s", 0.0), 0.0)
        groups, errors = self.recorder.take(point)
        check = crosscheck(point, result, groups, self.recorder.timer_name, self.recorder.timer_kind, errors)
        entry = point_entry(self.spec, point, result, outcome.path, wall, check)
        self.report["points"].append(entry)
        self.report.pop("in_flight", None)
        self.save()
        print(f"{self.tag}   {describe_entry(entry)}", flush=True)
        if result.status == "ok":
            print(f"{self.tag}   cross-check ({check.get('timer_kind')}): TTFT {fmt_ms(check.get('tpubench_ttft_p50_s'))}"
                  f" vs {fmt_ms(check.get('independent_ttft_p50_s'))} (ratio {fmt_ratio(check.get('ttft_ratio'))}),"
                  f" TPOT {fmt_ms(check.get('tpubench_tpot_p50_s'))} vs {fmt_ms(check.get('independent_tpot_p50_s'))}"
                  f" (ratio {fmt_ratio(check.get('tpot_ratio'))})"
                  + (f"  FLAGGED: {', '.join(check['flagged'])} outside {RATIO_BAND[0]}-{RATIO_BAND[1]}"
                     if check.get("flagged") else "")
                  + (f"  problem: {check['problem']}" if check.get("problem") else ""), flush=True)


def point_entry(spec: dict, point, result, path, wall: float, check: dict) -> dict:
    m = result.metrics
    env = result.environment
    return {
        "phase": spec["label"],
        "backend": result.backend,
        "device": result.device,
        "accelerator_name": env.get("accelerator_name"),
        "scale": point.scale,
        "label": point_label(point),
        "batch_size": point.batch_size,
        "input_length": point.input_length,
        "output_length": point.output_length,
        "execution_mode": point.execution_mode,
        "status": result.status,
        "error": result.error,
        "valid": bool(result.validity.valid) and result.status == "ok",
        "invalid_reasons": list(result.validity.reasons),
        "result_file": str(path) if path else None,
        "point_wall_s": round(wall, 3),
        "load_s": result.timing.get("load_s"),
        "compile_s": result.timing.get("compile_s"),
        "model_reused": getattr(result, "model_reused", None),
        "iterations": m.get("iterations"),
        "ttft_p50_s": m.get("ttft_p50_s"),
        "tpot_p50_s": m.get("tpot_p50_s"),
        "output_tokens_per_s": m.get("output_tokens_per_s"),
        "decode_tokens_per_s": m.get("decode_tokens_per_s"),
        "peak_memory_bytes": m.get("peak_memory_bytes"),
        "crosscheck": check,
    }


def describe_entry(e: dict) -> str:
    if e["status"] != "ok":
        return f"failed: {e.get('error')}"
    valid = "yes" if e["valid"] else "no (" + "; ".join(e["invalid_reasons"]) + ")"
    tput = e.get("output_tokens_per_s")
    return (f"ok in {e['point_wall_s']:.1f} s (load {e.get('load_s') or 0:.1f} s, compile {e.get('compile_s') or 0:.1f} s): "
            f"TTFT p50 {fmt_ms(e.get('ttft_p50_s'))}, TPOT p50 {fmt_ms(e.get('tpot_p50_s'))}, "
            f"{tput:,.1f} output tok/s, valid {valid}" if tput is not None else "ok")


START = time.monotonic()


def phase_main(spec_path: str) -> int:
    """One phase (a backend's sweep) in this process: tpubench's runner with timed sessions."""
    spec = json.loads(Path(spec_path).read_text())
    deadline = START + spec["budget_s"]
    report = {"label": spec["label"], "points": [], "skipped": [], "errors": [], "notes": [], "scales_tried": []}
    report_path = Path(spec["report"])

    def save():
        atomic_write_json(report_path, report)

    save()
    import tpubench.run.runner as runner
    from tpubench.errors import UserError

    # The two hooks: sessions come wrapped (the cross-check), and eager points run before
    # compile points so one model build serves the whole sweep (the runner reuses a built model
    # for consecutive points of the same model) and a slow compile cannot starve eager numbers.
    real_get_backend, real_expand = runner.get_backend, runner.expand   # AttributeError: the hooks moved
    recorder = Recorder()
    runner.get_backend = lambda backend, device=None: TimedBackend(real_get_backend(backend, device), recorder)
    runner.expand = lambda *a, **k: sorted(real_expand(*a, **k), key=lambda p: p.execution_mode != "eager")

    for scale in spec["scales"]:
        report["scales_tried"].append(scale)
        reporter = PhaseReporter(spec, report, recorder, deadline, save, scale)
        try:
            outcomes = runner.run_sweep(spec["workload"], backend=spec["backend"], device=spec.get("device"),
                                        scale=scale, out_dir=spec["out"], reporter=reporter)
        except BudgetExhausted as exc:
            for point in reporter.points[exc.index:]:
                report["skipped"].append({"what": f"{spec['backend']} {point_label(point)}", "reason": exc.reason})
                print(f"[{spec['backend']}] skipped {point_label(point)}: {exc.reason}", flush=True)
            report.pop("in_flight", None)
            save()
            break
        except UserError as exc:
            message = exc.one_line()
            report["errors"].append({"scale": scale, "error": message})
            report.pop("in_flight", None)
            save()
            print(f"[{spec['backend']}] tpubench stopped before measuring the {scale} scale: {message}", flush=True)
            if scale != spec["scales"][-1]:
                # e.g. the full scale does not fit in host memory for the JAX conversion
                note = f"tpubench refused the {scale} scale here ({message}); running the {spec['scales'][-1]} scale instead"
                report["notes"].append(note)
                print(f"[{spec['backend']}] {note}", flush=True)
                continue
            break
        _print_run_table(outcomes)
        break
    save()
    return 0 if any(p["status"] == "ok" for p in report["points"]) else 1


def _print_run_table(outcomes) -> None:
    try:
        from rich.console import Console

        from tpubench.console import render_run_table

        render_run_table(Console(highlight=False, soft_wrap=True, width=160, force_terminal=False), outcomes)
    except Exception as exc:  # the table is a courtesy; the result files are what counts
        print(f"(tpubench's run table could not be printed: {type(exc).__name__}: {exc})", flush=True)


def probe_main() -> int:
    """What this machine offers, as one JSON line: torch's default device and JAX's platform."""
    from dataclasses import asdict

    from tpubench.backends import all_availability
    from tpubench.run.runner import default_device

    rows = [asdict(a) for a in all_availability()]
    jax_row = next((r for r in rows if r["backend"] == "jax"), None)
    info = {
        "torch_device": default_device("torch"),
        "torch_rows": [r for r in rows if r["backend"] == "torch"],
        "jax_available": bool(jax_row and jax_row["available"]),
        "jax_platform": jax_row["device"] if jax_row and jax_row["available"] else None,
        "jax_detail": jax_row["detail"] if jax_row else "not probed",
    }
    print("PROBE " + json.dumps(info), flush=True)
    return 0


# =============================================================================== orchestration


class Child:
    """A subprocess in its own process group (session): stopped by that group, never by name."""

    def __init__(self, cmd: list[str], env: dict, *, prefix: str = "  ", echo: bool = True):
        self.lines: list[str] = []
        self.proc = start_in_new_group(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=env, cwd=str(ROOT), text=True, errors="replace", bufsize=1)
        self._reader = threading.Thread(target=self._read, args=(prefix, echo), daemon=True)
        self._reader.start()

    def _read(self, prefix: str, echo: bool) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)
            if echo:
                print(prefix + line, end="" if line.endswith("\n") else "\n", flush=True)

    def wait(self, timeout: float) -> tuple[int | None, bool]:
        """(exit code, timed out); on time-out the whole group is stopped."""
        try:
            rc = self.proc.wait(timeout=max(timeout, 0.1))
            kill_group(self.proc)   # stragglers, e.g. torch.compile's workers, if the phase left any
            self._reader.join(timeout=5)
            return rc, False
        except subprocess.TimeoutExpired:
            self.stop()
            return self.proc.returncode, True

    def stop(self) -> None:
        """SIGTERM to its group, 3 s to go, then SIGKILL to whatever is left of it."""
        stop_group(self.proc, 3.0, reap_s=5.0)
        self._reader.join(timeout=5)

    @property
    def output(self) -> str:
        return "".join(self.lines)


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    # No network: random weights only, and never a call to the Hub.
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


class Check:
    def __init__(self, args):
        self.args = args
        self.t0 = time.monotonic()
        self.deadline = self.t0 + args.budget_s
        self.out = Path(args.out).resolve()
        self.tmp = Path(tempfile.mkdtemp(prefix="tpubench-accelerator-check-"))   # phase specs and reports
        self.stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        self.derivations: dict[str, list[str]] = {}
        self.child: Child | None = None     # the phase running now
        self.live: list[Child] = []           # every child started, stopped at the end if still running
        self.points: list[dict] = []
        self.skipped: list[dict] = []
        self.phases: list[dict] = []
        self.notes: list[str] = []
        self.workloads: dict[str, str] = {}
        self.summary: dict = {"tool": "benchmarks/accelerator_check.py", "summary_version": 1,
                              "started_at": utc_now(), "budget_s": args.budget_s,
                              "args": {k: v for k, v in vars(args).items() if not k.startswith("_")}}

    # ------------------------------------------------------------------ helpers
    def left(self) -> float:
        return self.deadline - time.monotonic()

    def skip(self, what: str, reason: str) -> None:
        self.skipped.append({"what": what, "reason": reason})
        print(f"skipped {what}: {reason}", flush=True)

    def python(self, *extra: str) -> list[str]:
        return [sys.executable, str(Path(__file__).resolve()), *extra]

    def start(self, cmd: list[str], env: dict, **kwargs) -> Child:
        child = Child(cmd, env, **kwargs)
        self.live.append(child)
        return child

    # ------------------------------------------------------------------ the run
    def run(self) -> int:
        interrupted = False
        try:
            probe = self.backends_and_probe()
            if probe is not None:
                self.measure(probe)
        except KeyboardInterrupt:
            interrupted = True
            print("\ninterrupted: stopping the running phase (its finished points are kept)", flush=True)
            self.notes.append("interrupted by the user (Ctrl-C or SIGTERM)")
        finally:
            for child in self.live:
                if child.proc.poll() is None:
                    child.stop()
        try:
            path = self.write_summary(interrupted)
        except OSError as exc:
            path = None
            print(f"could not write the summary: {exc}", flush=True)
        self.print_summary(path)
        import shutil

        shutil.rmtree(self.tmp, ignore_errors=True)
        if interrupted:
            return 130
        return 0 if any(p["status"] == "ok" for p in self.points) else 1

    def backends_and_probe(self) -> dict | None:
        """`tpubench backends` and a JSON probe, side by side (each imports torch and JAX)."""
        t = time.monotonic()
        env = child_env()
        backends_cmd = [sys.executable, "-c", "import sys; sys.argv[0] = 'tpubench'; from tpubench.cli import main; main()",
                        "backends"]
        # The probe must not take the GPU's memory that JAX preallocates while `backends` runs.
        probe_env = {**env, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
        backends = self.start(backends_cmd, {**env, "COLUMNS": "160"}, echo=False)
        probe = self.start(self.python("--_probe"), probe_env, echo=False)
        limit = min(120.0, max(self.left() - FINAL_RESERVE_S, 1.0))
        rc_b, to_b = backends.wait(limit - (time.monotonic() - t))
        rc_p, to_p = probe.wait(limit - (time.monotonic() - t))
        print("$ tpubench backends", flush=True)
        print(backends.output.rstrip() or "(no output)", flush=True)
        if to_b or rc_b != 0:
            print(f"(tpubench backends {'timed out' if to_b else f'exited with {rc_b}'})", flush=True)
        self.summary["backends_output"] = backends.output[-8000:]
        self.phases.append({"name": "backends", "status": "timed out" if to_b else f"exit {rc_b}",
                            "wall_s": round(time.monotonic() - t, 2)})
        info = None
        for line in probe.lines:
            if line.startswith("PROBE "):
                info = json.loads(line[6:])
        if info is None:
            reason = "timed out" if to_p else f"exited with {rc_p}: {probe.output.strip()[-800:]}"
            print(f"could not probe this machine's devices ({reason}); nothing measured", flush=True)
            self.notes.append(f"device probe failed: {reason}")
            return None
        self.summary["probe"] = info
        return info

    def measure(self, probe: dict) -> None:
        args = self.args
        torch_device = args.device or probe["torch_device"] or "cpu"
        jax_platform = probe.get("jax_platform")
        torch_scale = args.scale or ("full" if torch_device != "cpu" and not args.quick else "small")
        print(f"torch device: {torch_device} ({torch_scale} scale); "
              f"JAX: {jax_platform or 'unavailable'} ({probe.get('jax_detail')})", flush=True)

        # ---- what JAX will do, decided first: it sets how much time the torch phase may take
        # When torch has only the CPU (e.g. a TPU VM with JAX but no torch-tpu), JAX is the
        # accelerator run and gets most of the time.
        jax_on_accelerator = jax_platform not in (None, "cpu")
        self.jax_share = 1 - JAX_SHARE if torch_device == "cpu" and jax_on_accelerator else JAX_SHARE
        jax_plan = self.plan_jax(probe, torch_device)
        # ---- torch: eager then compile, one process, one model build
        modes = args.modes or (["eager"] if args.quick else ["eager", "compile"])
        if args.quick and not args.modes:
            self.skip("torch compile mode", "--quick measures eager mode only (torch.compile of the model takes "
                      "about 30 s per shape on a CPU); run without --quick to include it")
        avail = self.left() - FINAL_RESERVE_S
        jax_reserve = 0.0
        if jax_plan:
            share = avail * self.jax_share
            jax_reserve = share if jax_plan["scales"][0] == "full" else min(JAX_SMALL_RESERVE_S, share)
        self.guarded("torch", lambda: self.run_phase("torch", "torch", torch_device, [torch_scale], modes,
                                                     avail - jax_reserve))
        # ---- JAX: whatever time is left
        if jax_plan:
            self.guarded("jax", lambda: self.run_phase("jax", "jax", None, jax_plan["scales"], ["eager"],
                                                       self.left() - FINAL_RESERVE_S,
                                                       batches=jax_plan.get("batches"), platform=jax_platform))

    def guarded(self, label: str, phase) -> None:
        """A phase that breaks in this script is reported, and the next phase still runs."""
        try:
            phase()
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}"
            self.skip(f"{label} phase", f"failed before measuring: {message}")
            self.phases.append({"name": label, "status": f"failed: {message}"})

    def plan_jax(self, probe: dict, torch_device: str) -> dict | None:
        args = self.args
        if args.no_jax:
            self.skip("JAX backend", "--no-jax")
            return None
        if not probe.get("jax_available"):
            self.skip("JAX backend", f"JAX is not usable here: {probe.get('jax_detail')}")
            return None
        platform = probe["jax_platform"]
        if platform == "cpu":
            if torch_device != "cpu":
                self.skip("JAX backend", f"JAX sees only the CPU here, not the {torch_device} accelerator "
                          "(install the JAX build for it, e.g. jax[cuda13] or jax[tpu])")
                return None
            # A CPU-only machine: one small point is cheap (seconds) and exercises the JAX path.
            scale = args.scale or "small"
            self.notes.append(f"JAX sees only the CPU: one {scale}-scale JAX point at batch 1 instead of the sweep")
            return {"scales": [scale], "batches": [1]}
        scale = args.scale or ("small" if args.quick else "full")
        if scale == "full" and not args.scale:
            # The JAX backend builds the torch model on the host and converts it (for 30B
            # parameters: minutes and twice the weights in host memory). Try it only when the
            # JAX phase can have that long; the small scale still puts JAX on this accelerator.
            jax_time = (self.left() - FINAL_RESERVE_S) * self.jax_share
            if jax_time < JAX_FULL_MIN_S:
                self.skip("JAX backend at full scale",
                          f"about {jax_time:.0f} s of the budget is left for JAX, and the full scale needs the torch "
                          f"model built on the host and converted first (give --budget-s so that at least "
                          f"{JAX_FULL_MIN_S:.0f} s remain for it); the small scale runs on {platform} instead")
                return {"scales": ["small"], "batches": None}
        # When tpubench refuses the full scale (the host must hold the torch model and its JAX
        # copy at once), the small scale still puts JAX on this accelerator.
        return {"scales": [scale] + (["small"] if scale == "full" else []), "batches": None}

    def run_phase(self, label: str, backend: str, device: str | None, scales: list[str], modes: list[str],
                  budget: float, batches: list[int] | None = None, platform: str | None = None) -> None:
        first = scales[0]
        minimum = MIN_PHASE_S["full" if first == "full" else "small"]
        if budget < minimum:
            self.skip(f"{label} phase", f"only {max(budget, 0):.0f} s of the {self.args.budget_s:.0f} s budget left "
                      f"(needs at least {minimum:.0f} s)")
            self.phases.append({"name": label, "status": "skipped: no time left", "wall_s": 0.0})
            return
        workload = self.write_workload(label, scales, modes, batches)
        report = self.tmp / f"{label}-report.json"
        spec = {"label": label, "backend": backend, "device": device, "scales": scales, "workload": str(workload),
                "out": str(self.out), "report": str(report),
                "budget_s": max(budget - min(GRACE_S, max(2.0, 0.15 * budget)), 1.0)}
        spec_path = self.tmp / f"{label}-spec.json"
        spec_path.write_text(json.dumps(spec))
        print(f"\n== {label}: {backend} on {device or platform or 'its default platform'}, "
              f"scale {' then '.join(scales)}, modes {', '.join(modes)}, budget {budget:.0f} s ==", flush=True)
        t = time.monotonic()
        self.child = self.start(self.python("--_phase", str(spec_path)), child_env(), prefix="  ")
        rc, timed_out, interrupted = None, False, False
        try:
            rc, timed_out = self.child.wait(budget)
        except KeyboardInterrupt:
            interrupted = True
            self.child.stop()
            rc = self.child.proc.returncode
        finally:
            self.child = None
            # What the phase finished is on disk (its report is rewritten after every point).
            self.collect_phase(label, backend, device, scales, modes, budget, time.monotonic() - t, report,
                               rc, timed_out, interrupted)
        if interrupted:
            raise KeyboardInterrupt

    def collect_phase(self, label, backend, device, scales, modes, budget, wall, report, rc, timed_out,
                      interrupted) -> None:
        phase = {"name": label, "backend": backend, "device": device, "scales": scales, "modes": modes,
                 "budget_s": round(budget, 1), "wall_s": round(wall, 2), "exit_code": rc, "timed_out": timed_out}
        data = {}
        try:
            data = json.loads(report.read_text())
        except (OSError, ValueError) as exc:
            phase["report_error"] = f"{type(exc).__name__}: {exc}"
        self.points.extend(data.get("points", []))
        self.skipped.extend(data.get("skipped", []))
        self.notes.extend(data.get("notes", []))
        phase["errors"] = data.get("errors", [])
        phase["scales_tried"] = data.get("scales_tried", [])
        flight = data.get("in_flight")
        what = f"{backend} {flight['label']}" if flight else f"{label} phase"
        if interrupted:
            self.skip(what, "interrupted while it was running")
            phase["status"] = "interrupted"
        elif timed_out:
            self.skip(what, f"stopped: the phase's budget of {budget:.0f} s ran out while it was running")
            phase["status"] = "stopped at its budget"
        elif rc != 0 and not data.get("points"):
            phase["status"] = f"failed (exit {rc})"
            reason = "; ".join(e["error"] for e in data.get("errors", [])) or f"exit code {rc} (see its output above)"
            self.skip(f"{label} phase", f"nothing measured: {reason}")
        else:
            phase["status"] = "ok" if any(p["status"] == "ok" for p in data.get("points", [])) else "no point measured"
        self.phases.append(phase)

    def write_workload(self, label: str, scales: list[str], modes: list[str], batches: list[int] | None) -> Path:
        """The shipped workload with this check's shapes and measurement settings, same name."""
        import yaml

        from tpubench.run.workload import load_workload

        args = self.args
        src = (ROOT / args.workload) if not Path(args.workload).is_absolute() else Path(args.workload)
        data = yaml.safe_load(src.read_text(encoding="utf-8"))
        changes = []
        scen = data["scenario"]
        if "full" in scales:
            want_o = args.output_length or FULL_OUTPUT_LENGTH
            if want_o != scen.get("output_length"):
                changes.append(f"full scale: output_length {scen.get('output_length')} -> {want_o} (time budget)")
            scen["output_length"] = want_o
            scen["batch_size"] = batches or args.batches or FULL_BATCHES
            changes.append(f"full scale: batch_size {scen['batch_size']}")
        for scale in scales:
            if scale == "full":
                continue
            if scale not in (data.get("scales") or {}):
                raise ValueError(f"{src} has no scale '{scale}'")
            sc = data["scales"][scale].setdefault("scenario", {}) or {}
            data["scales"][scale]["scenario"] = sc
            if args.quick:
                sc["input_length"], sc["output_length"] = QUICK_INPUT_LENGTH, QUICK_OUTPUT_LENGTH
                changes.append(f"{scale} scale: input_length {QUICK_INPUT_LENGTH}, output_length {QUICK_OUTPUT_LENGTH} (--quick)")
            elif args.output_length:
                sc["output_length"] = args.output_length
                changes.append(f"{scale} scale: output_length {args.output_length}")
            if batches or args.batches:
                sc["batch_size"] = batches or args.batches
                changes.append(f"{scale} scale: batch_size {sc['batch_size']}")
        execution = data.setdefault("execution", {}) or {}
        data["execution"] = execution
        execution["mode"] = modes
        if "compile" in modes and not execution.get("compile_options"):
            execution["compile_options"] = {"dynamic": False}
            changes.append("compile_options {dynamic: false} (static shapes: prefill and decode compile once each)")
        kind = "quick" if args.quick else ("full" if "full" in scales else "small")
        old = data.get("measurement") or {}
        data["measurement"] = {**MEASUREMENT[kind], "seed": old.get("seed", 0), "max_cv": old.get("max_cv", 0.1)}
        changes.append(f"measurement {data['measurement']}")
        data["description"] = (str(data.get("description", "")) + " [derived by benchmarks/accelerator_check.py: "
                               + "; ".join(changes) + "]").strip()
        # Kept beside the results (not *.json, so no result reader trips on it): each result's
        # workload_file names it, and its description says what was changed and why.
        path = self.out / f"accelerator_check_{self.stamp}.{label}.{src.name}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        self.derivations[label] = changes
        load_workload(path)   # a bad derivation is this script's bug: fail here, not in the phase
        self.workloads[label] = path.read_text(encoding="utf-8")
        print(f"workload for {label}: {src.relative_to(ROOT) if src.is_relative_to(ROOT) else src}, name "
              f"'{data['name']}', derived: " + "; ".join(changes), flush=True)
        return path

    # ------------------------------------------------------------------ summary
    def write_summary(self, interrupted: bool) -> Path:
        from tpubench.hardware.environment import host_environment

        wall = time.monotonic() - self.t0
        checked = [p for p in self.points if p["status"] == "ok"]
        flagged = [f"{p['backend']}:{p['device']} {p['label']}: {', '.join(p['crosscheck'].get('flagged', []))}"
                   for p in checked if p["crosscheck"].get("flagged") or p["crosscheck"].get("problem")]
        try:
            env = host_environment()
        except Exception as exc:  # provenance is best effort; the result files carry their own
            env = {"error": f"{type(exc).__name__}: {exc}"}
        accelerators = sorted({f"{p['backend']}:{p['device']} {p.get('accelerator_name')}" for p in self.points})
        self.summary.update({
            "finished_at": utc_now(),
            "wall_s": round(wall, 2),
            "within_budget": wall <= self.args.budget_s,
            "interrupted": interrupted,
            "versions": {k: env.get(k) for k in ("tpubench", "python", "torch", "transformers", "jax", "jaxlib",
                                                  "numpy", "git_revision")},
            "host": {k: env.get(k) for k in ("hostname", "os", "machine", "cpu_model", "cpu_count")},
            "accelerators": accelerators,
            "ratio_band": list(RATIO_BAND),
            "results_dir": str(self.out),
            "measured_points": len(checked),
            "flagged": flagged,
            "phases": self.phases,
            "points": self.points,
            "skipped": self.skipped,
            "notes": self.notes,
            "derived_workloads": self.workloads,
            "derivations": self.derivations,
        })
        path = self.out / f"accelerator_check_{self.stamp}.summary"
        n = 1
        while path.exists():
            path = self.out / f"accelerator_check_{self.stamp}-{n}.summary"
            n += 1
        atomic_write_json(path, self.summary)
        return path

    def print_summary(self, path: Path) -> None:
        print("\n== accelerator check: tpubench's timings vs an independent timer at the same fences ==")
        header = (f"{'backend:device':16} {'point':50} {'status':7} {'valid':5} {'TTFT p50':>11} {'indep.':>11} "
                  f"{'ratio':>6} {'TPOT p50':>11} {'indep.':>11} {'ratio':>6}  {'out tok/s':>10}  timer")
        print(header)
        for p in self.points:
            c = p["crosscheck"]
            where = f"{p['backend']}:{p['device']}"
            if p["status"] != "ok":
                print(f"{where:16} {p['label'][:50]:50} failed  -     {p.get('error')}")
                continue
            flag = ""
            if c.get("flagged"):
                flag = "  <-- FLAG: ratio outside " + f"{RATIO_BAND[0]}-{RATIO_BAND[1]}"
            if c.get("problem"):
                flag += f"  <-- {c['problem']}"
            tput = p.get("output_tokens_per_s")
            print(f"{where:16} {p['label'][:50]:50} {'ok':7} {'yes' if p['valid'] else 'no':5} "
                  f"{fmt_ms(c.get('tpubench_ttft_p50_s')):>11} {fmt_ms(c.get('independent_ttft_p50_s')):>11} "
                  f"{fmt_ratio(c.get('ttft_ratio')):>6} {fmt_ms(c.get('tpubench_tpot_p50_s')):>11} "
                  f"{fmt_ms(c.get('independent_tpot_p50_s')):>11} {fmt_ratio(c.get('tpot_ratio')):>6}  "
                  f"{(f'{tput:,.1f}' if tput is not None else '-'):>10}  {c.get('timer_kind', '-')}{flag}")
        if not self.points:
            print("(no point was measured)")
        if self.skipped:
            print("skipped:")
            for s in self.skipped:
                print(f"  - {s['what']}: {s['reason']}")
        for note in self.notes:
            print(f"note: {note}")
        s = self.summary
        print(f"results: {len(self.points)} file(s) in {self.out}; summary: {path}")
        print(f"wall time: {s['wall_s']:.1f} s (budget {self.args.budget_s:.0f} s); "
              f"{s['measured_points']} point(s) measured, {len(s['flagged'])} flagged", flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget-s", type=float, default=480.0, help="wall-time budget, model builds included (default 480)")
    p.add_argument("--out", default=str(ROOT / "results"), help="folder for result files and the summary")
    p.add_argument("--scale", choices=["small", "full"], default=None,
                   help="default: full on an accelerator, small on the CPU")
    p.add_argument("--quick", action="store_true",
                   help="tiny measurement settings and shapes, eager mode only (CI on a CPU)")
    p.add_argument("--device", default=None, help="torch device (default: the accelerator present, else cpu)")
    p.add_argument("--workload", default=DEFAULT_WORKLOAD, help=f"default {DEFAULT_WORKLOAD}")
    p.add_argument("--batches", type=lambda s: [int(x) for x in s.split(",")], default=None,
                   help="comma-separated batch sizes (default: 1,64 at full scale, the scale's own otherwise)")
    p.add_argument("--output-length", type=int, default=None,
                   help=f"output tokens per sequence (default at full scale: {FULL_OUTPUT_LENGTH}, the workload says 256)")
    p.add_argument("--modes", type=lambda s: s.split(","), default=None, help="torch execution modes (default eager,compile)")
    p.add_argument("--no-jax", action="store_true", help="skip the JAX backend")
    p.add_argument("--_phase", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_probe", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.budget_s <= 0:
        p.error("--budget-s must be positive")
    if args.modes and not set(args.modes) <= {"eager", "compile"}:
        p.error("--modes takes eager and/or compile")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args._probe:
        return probe_main()
    if args._phase:
        return phase_main(args._phase)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    return Check(args).run()


if __name__ == "__main__":
    sys.exit(main())
