"""Multi-chip points of any scenario: a world of one process per chip, started by torch.distributed's
own launcher. Generic: a scenario hands in its part of a rank (`in_world`); nothing here knows one.

A point whose layout needs N > 1 chips runs in a fresh world: `run_point_in_world` (the parent,
i.e. `tpubench run`; a generate point's random weights were saved once on the host) starts
`python -m torch.distributed.run --standalone --nproc-per-node N -m tpubench.scenarios.world_rank SPEC`
(torchrun: the elastic agent, rendezvous and failure handling are torch's) in its own session,
waits with a deadline and always stops every process it started, by process group and by the
PIDs the ranks record (tpubench.processes). Each rank runs `worker_main`: it binds its chip,
joins the process group (with a collective timeout, so a dead or hung peer ends the world
instead of hanging it) and runs its scenario's `in_world` (the same fenced loop as a single
chip); only rank 0's result comes back.

`tpubench run` started under a user's own torchrun (multi-node through its rendezvous) runs the
same `in_world` on every rank, with the world the user made (see runner.run_sweep).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from tpubench.errors import UserError
from tpubench.hardware.environment import device_chips
from tpubench.processes import signal_group, start_in_new_group, stop_group
from tpubench.records.result import RunResult, storable

# The module each rank of tpubench's own worlds runs (`python -m RANK_MODULE SPEC`): it looks the
# point's scenario up in the registry and calls worker_main. Not this module: the scenarios use
# this one, so it names none of them.
RANK_MODULE = "tpubench.scenarios.world_rank"
# A scenario's part of one rank of a world:
# (backend, point, base, checkpoint, peaks, reporter, world_start_s=None) -> RunResult.
InWorld = Callable[..., RunResult]

# Set by a test to make one rank fail at one phase: "RANK:PHASE:kill|hang|raise" (PHASE is a
# reporter phase such as "load", "compile" or "measure").
FAULT_ENV = "TPUBENCH_FAULT_INJECT"


class WorldFailed(Exception):
    """A world that did not produce a result; the message names the failing rank and why, and
    `log_tail` keeps the end of the launcher's log (every rank's output)."""

    def __init__(self, message: str, log_tail: str = ""):
        super().__init__(message)
        self.log_tail = log_tail


# ----------------------------------------------------------------------------- inside the world


class WorldSync:
    """The few collectives a multi-chip measurement needs, all outside its timed loop."""

    def __init__(self):
        import torch.distributed as dist

        self._dist = dist
        self.rank = dist.get_rank()
        self.size = dist.get_world_size()

    def gather(self, obj) -> list:
        out = [None] * self.size
        self._dist.all_gather_object(out, obj)
        return out

    def agree_iterations(self, planned: int) -> int:
        """Every rank runs the largest count any rank planned (each planned from its own pace)."""
        return max(self.gather(int(planned)))

    def slowest(self, stamps: list[list[float]]) -> list[list[float]]:
        """Per iteration, the token stamps of the rank whose iteration ended last: a sharded step
        is only done when every chip is done."""
        per_rank = self.gather(stamps)
        return [max((rank[i] for rank in per_rank), key=lambda s: s[-1]) for i in range(len(stamps))]

    def ranks(self, device) -> list[dict]:
        """Every rank's number, device, host and PID, for the result's environment."""
        return self.gather({"rank": self.rank, "device": str(device), "host": socket.gethostname(),
                            "pid": os.getpid()})

    def finish(self, result, world_start_s: float | None):
        """The end of every rank's part of a point: the slowest rank's start-up time (from the
        launch to joining the process group) on the result, then every rank waits for the others."""
        if world_start_s is not None:
            result.timing["world_start_s"] = max(self.gather(world_start_s))
        self._dist.barrier()
        return result


def in_user_world() -> bool:
    """True under a torchrun the user started (not one of tpubench's own worlds)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1 and "TPUBENCH_OWN_WORLD" not in os.environ


def join_world(be, collective_timeout_s: float) -> None:
    import torch.distributed as dist

    be.bind_rank(int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        be.init_process_group(collective_timeout_s)


class _FaultReporter:
    """Passes phases on and injects the fault a test asked for (FAULT_ENV) on its rank."""

    def __init__(self, rank: int, fault: str | None):
        self.rank = rank
        parts = (fault or "").split(":")
        self.fault = parts if len(parts) == 3 and parts[0] == str(rank) else None

    def phase(self, name: str, done: int, total: int) -> None:
        if self.fault and self.fault[1] == name:
            action, self.fault = self.fault[2], None
            if action == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif action == "hang":
                time.sleep(1e6)
            raise RuntimeError(f"fault injected on rank {self.rank} at {name}")

    def note(self, message): pass
    def sweep_started(self, points): pass
    def point_started(self, index, point): pass
    def point_finished(self, index, outcome): pass
    def points_added(self, count): pass


def worker_main(spec_path: str, in_world_of: Callable[[str], InWorld]) -> None:
    """One rank of a world tpubench started (RANK_MODULE calls it): join the world and run the
    point's scenario's part of a rank (`in_world_of(kind)`); rank 0 writes the result."""
    from tpubench.backends import get_backend
    from tpubench.workload_spec.point import RunPoint

    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    folder = Path(spec_path).parent
    rank = int(os.environ["RANK"])
    (folder / f"pid-rank{rank}").write_text(str(os.getpid()))
    try:
        be = get_backend(spec["backend"], spec["device"])   # imports no framework
        be.enter_rank(spec["threads_per_rank"])   # before torch loads the device's package
        join_world(be, spec["collective_timeout_s"])
        joined_s = time.time() - spec["launched_at"]
        reporter = _FaultReporter(rank, spec.get("fault"))
        point = RunPoint.from_dict(spec["point"])
        with _rank_energy(rank, spec) as meter:
            result: RunResult = in_world_of(point.scenario_kind)(
                be, point, spec["base"], spec["checkpoint"], spec["peaks"], reporter, world_start_s=joined_s,
                energy=meter, profile_dir=spec.get("profile_dir"))
        if rank == 0:
            tmp = folder / "result.json.tmp"
            tmp.write_bytes(storable(result)[1])   # texts UTF-8 cannot store escaped, as every result
            os.replace(tmp, folder / "result.json")
    except BaseException as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        (folder / f"error-rank{rank}.txt").write_text(f"{type(exc).__name__}: {text}"[:500])
        raise
    finally:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


@contextlib.contextmanager
def _rank_energy(rank: int, spec: dict):
    """Rank 0 meters the whole world's chips over its own timed loop (every rank runs the same
    agreed number of iterations, so the loops coincide to within a step); other ranks meter nothing.
    Yields the meter or None; the source is closed on every exit."""
    if rank != 0 or not spec.get("energy"):
        yield None
        return
    from tpubench.measure.energy import world_meter

    plan, meter = world_meter(spec["energy"], chips=spec["base"]["environment"].get("chips") or spec["world_size"])
    try:
        yield meter
    finally:
        plan.close()


# ----------------------------------------------------------------------------- the parent


class Checkpoints:
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
        key = point.model_identity()
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


def require_world_size(ctx, point, ranks: str) -> None:
    """Under the user's torchrun the world is theirs: refuse a point whose layout needs another
    size (`ranks` says what it needs). tpubench's own worlds are made to size."""
    if not ctx.user_world:
        return
    import torch.distributed as dist

    if point.world_size != dist.get_world_size():
        raise UserError(f"this point needs {ranks}; the torchrun world has {dist.get_world_size()}")


def run_point_in_world(ctx, point, base: dict, peaks: dict | None, in_world: InWorld,
                       checkpoint: str | None = None) -> RunResult:
    """One point of any scenario on a world of chips, returning rank 0's RunResult. Under the
    user's torchrun this process is a rank: it runs `in_world` (the scenario's part of a rank)
    itself; otherwise a fresh world of tpubench's own runs it on every rank (run_in_world).
    `ctx` is the sweep's scenarios.SweepContext."""
    if ctx.user_world:
        return in_world(ctx.backend, point, base, checkpoint, peaks, ctx.reporter, profile_dir=ctx.profile_dir)
    ctx.reporter.phase("world", 0, 1)
    timeout = ctx.collective_timeout_s
    # Load and compile wait at collectives too, so the deadline allows a few collective timeouts
    # on top of the measurement's own limit.
    return run_in_world(ctx.backend, point, base, checkpoint=checkpoint, peaks=peaks, collective_timeout_s=timeout,
                        deadline_s=3 * timeout + 2 * point.measurement["max_seconds"],
                        energy=ctx.energy.for_world() if ctx.energy is not None else None,
                        profile_dir=ctx.profile_dir)


def profile_trace_dir(profile_dir, world):
    """Where this process writes a profiled pass's trace: `profile_dir` on one chip and on a world's
    rank 0, nowhere on the other ranks (they run the pass for its collectives; rank 0's result,
    with its own rank's breakdown, is the one written)."""
    return profile_dir if world is None or world.rank == 0 else None


def plain_peaks(peaks: dict | None) -> dict | None:
    """The peaks a result needs, without the host probe's raw data (JSON for a world's ranks)."""
    return {k: v for k, v in peaks.items() if k != "probe"} if peaks else None



def threads_per_rank(world_size: int) -> int:
    """CPU worlds split this process's threads between the ranks (at least one each)."""
    import torch

    return max(1, torch.get_num_threads() // world_size)


def world_environment(be, point, env: dict) -> dict:
    """The environment of a multi-chip result: one device per rank, counted as chips by the one rule
    (environment.device_chips: the host's vCPU mask on a CPU, logical NeuronCores per chip on Neuron)."""
    n = point.world_size
    chips = device_chips(be.device, n, env.get("accelerator_name"))
    return {**env, **chips, "world_size": n, "process_group_backend": be.process_group_backend(),
            "process_group_backend_source": be.process_group_source(),
            "parallel_layout": {"tensor": point.tensor_parallel, "expert": point.expert_parallel},
            "launcher": "torch.distributed.run (elastic launch, --standalone)"}


def run_in_world(be, point, base: dict, *, checkpoint: str, peaks: dict | None, collective_timeout_s: float,
                 deadline_s: float, log_tail_chars: int = 4000, energy: dict | None = None, profile_dir=None):
    """Start a world of `point.world_size` ranks for one point and return rank 0's RunResult.

    Raises WorldFailed with the failing rank and its error (or the deadline) otherwise; every
    process started for the point is gone when this returns.
    """
    n = point.world_size
    with tempfile.TemporaryDirectory(prefix="tpubench-world-") as tmp:
        folder = Path(tmp)
        spec = {"backend": be.name, "device": be.device, "point": point.to_dict(), "base": base,
                "checkpoint": checkpoint, "peaks": peaks, "collective_timeout_s": collective_timeout_s,
                "threads_per_rank": threads_per_rank(n), "world_size": n,
                # Rank 0 meters the world's chips (measure.energy.EnergyPlan.for_world).
                "energy": energy,
                # run --profile: every rank runs the profiled pass (its collectives need all of
                # them), rank 0 writes its trace there (profile_trace_dir).
                "profile_dir": str(profile_dir) if profile_dir is not None else None,
                # A fault is injected once: the next world starts clean, as after a real failure.
                "fault": os.environ.pop(FAULT_ENV, None)}
        spec_path = folder / "spec.json"
        spec["launched_at"] = time.time()   # wall clock: compared across processes
        spec_path.write_text(json.dumps(spec, default=str), encoding="utf-8")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
               f"--nproc-per-node={n}", "--max-restarts=0", "--monitor-interval=0.2",
               "-m", RANK_MODULE, str(spec_path)]
        env = {**os.environ, "TPUBENCH_OWN_WORLD": "1", "OMP_NUM_THREADS": str(spec["threads_per_rank"]),
               # What must be set before torch is imported (TorchTPU's eager modes): fresh processes only.
               **getattr(be, "process_environment", lambda p: {})(point)}
        log_path = folder / "launcher.log"
        with open(log_path, "wb") as log:
            proc = start_in_new_group(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
            timed_out = False
            try:
                proc.wait(timeout=deadline_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                stop_world(proc, folder)
        result_path = folder / "result.json"
        if proc.returncode == 0 and result_path.is_file():
            return RunResult.model_validate_json(result_path.read_bytes())
        log_text = log_path.read_text(encoding="utf-8", errors="replace")
        raise WorldFailed(_failure_reason(folder, log_text, timed_out, deadline_s, n), log_tail=log_text[-log_tail_chars:])


def stop_world(proc: subprocess.Popen, folder: Path, grace_s: float = 10.0) -> None:
    """Stop the launcher (it stops its ranks on SIGTERM), then anything left of the world, each
    by its own process group: the launcher's and each rank's (torchrun starts every rank in a
    session of its own). Never by name."""
    stop_group(proc, grace_s, reap_s=None)
    for pid_file in folder.glob("pid-rank*"):
        try:
            pid = int(pid_file.read_text())
        except (OSError, ValueError):
            continue
        if _is_our_rank(pid, folder):
            signal_group(pid, signal.SIGKILL)


def _is_our_rank(pid: int, folder: Path) -> bool:
    """The PID still belongs to a rank of this world (not a recycled PID): its command line names
    this world's spec file."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return not Path("/proc").is_dir() and _alive(pid)
    return str(folder) in cmdline


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def _failure_reason(folder: Path, log: str, timed_out: bool, deadline_s: float, n: int) -> str:
    if timed_out:
        return (f"the {n}-rank world did not finish within {deadline_s:.0f} s (a rank hung?); "
                "every process of the point was stopped")
    # torchrun names the first rank that failed ("Root Cause"); the others failed because of it.
    root = log.split("Root Cause", 1)[-1]
    found = re.search(r"rank\s*:\s*(\d+).*?\n\s*exitcode\s*:\s*(-?\d+)", root)
    if found:
        rank, code = int(found.group(1)), int(found.group(2))
        error = folder / f"error-rank{rank}.txt"
        if error.is_file():
            return f"rank {rank}: {error.read_text(errors='replace')}"
        if code < 0:
            name = signal.Signals(-code).name if -code in {s.value for s in signal.Signals} else f"signal {-code}"
            return f"rank {rank} died ({name})"
        return f"rank {rank} exited with code {code}"
    errors = sorted(folder.glob("error-rank*.txt"))
    if errors:
        return f"rank {errors[0].stem.removeprefix('error-rank')}: {errors[0].read_text(errors='replace')}"
    tail = " | ".join(line.strip() for line in log.strip().splitlines()[-3:])
    return f"the {n}-rank world failed: {tail[:400]}"
