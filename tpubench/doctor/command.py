"""`tpubench doctor`: the stack, the device checks, the smallest workload and the full model at
batch 1, and a readiness summary with what to install where something is missing."""

from __future__ import annotations

import json
import socket
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from tpubench.doctor import stack
from tpubench.doctor.probe import PREFIX
from tpubench.doctor.verdicts import Check, readiness
from tpubench.processes import start_in_new_group, stop_group
from tpubench.records.files import replace_file

_CLI = "import sys; sys.argv[0] = 'tpubench'; from tpubench.cli import main; main()"
PROBE_TIMEOUT_S = 900.0        # first use of a TPU or Trainium compiles for minutes
COLLECTIVE_TIMEOUT_S = 300.0
# Short measurement settings: the doctor shows the path works, the workload's own run measures.
MEASUREMENT = {"small": dict(warmup=1, min_iterations=3, min_seconds=0.5, max_seconds=20.0),
               "full": dict(warmup=1, min_iterations=3, min_seconds=1.0, max_seconds=60.0),
               "quick": dict(warmup=0, min_iterations=2, min_seconds=0.0, max_seconds=5.0)}


@dataclass
class DoctorOptions:
    out: Path
    workload: Path
    device: str | None = None
    quick: bool = False              # CI on a CPU: tiny shapes, no compile, a loose variation limit
    run_timeout_s: float = 1800.0    # per workload run (the full model builds and compiles first)
    expert_parallel: int | None = None   # the full model over N chips, where one chip cannot hold it


def run_doctor(options: DoctorOptions, say: Callable[[str], None] = print) -> tuple[bool, Path]:
    """Every check in order (a failed one never stops the rest); (ready, the summary's path)."""
    t0 = time.monotonic()
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    options.out.mkdir(parents=True, exist_ok=True)
    installed, found = stack.versions(), stack.host()
    device = options.device or stack.default_device(found)
    say(f"tpubench doctor: device {device}; host: {found.count} x {found.name or found.kind} ({found.source})")
    checks = stack.stack_checks(found, device, installed)
    checks += _probe(device, options.quick)
    checks.append(_collective(device, found.count))
    usable = any(c.name == "device" and c.status == "ok" for c in checks)
    for scale in ("small", "full"):
        checks.append(_workload(options, device, scale, stamp, usable, say))
    ready, fixes = readiness(checks)
    summary = {"tool": "tpubench doctor", "ready": ready, "device": device, "host": found.__dict__, "versions": installed,
               "checks": [c.as_dict() for c in checks], "to_do": fixes, "wall_s": time.monotonic() - t0,
               "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    path = options.out / f"doctor_{stamp}.summary"   # not .json: every *.json under a results folder is a result
    replace_file(path, json.dumps(summary, indent=1, default=str).encode())
    for line in render(checks, ready, fixes, path):
        say(line)
    return ready, path


def render(checks: list[Check], ready: bool, fixes: list[str], path: Path) -> list[str]:
    width = max(len(c.name) for c in checks)
    lines = [f"  {c.status:4}  {c.name:{width}}  {c.detail}" for c in checks]
    lines.append(("READY" if ready else "NOT READY") + f": {sum(c.status == 'ok' for c in checks)} ok, "
                 f"{sum(c.status == 'fail' for c in checks)} failed, {sum(c.status == 'skip' for c in checks)} skipped; "
                 f"summary in {path}")
    lines += [f"  to do: {fix}" for fix in fixes]
    return lines


def _probe(device: str, quick: bool) -> list[Check]:
    argv = [sys.executable, "-m", "tpubench.doctor.probe", "--device", device] + (["--skip-compile"] if quick else [])
    out, code = _child(argv, PROBE_TIMEOUT_S)
    checks = [Check(**json.loads(line[len(PREFIX):])) for line in out.splitlines() if line.startswith(PREFIX)]
    if not checks:
        tail = " ".join(out.strip().splitlines()[-3:])[-400:]
        checks = [Check("device", "fail", f"the device probe exited with {code} and said nothing: {tail}",
                        fix=f"run `python -m tpubench.doctor.probe --device {device}` to see the whole error")]
    return checks


def _collective(device: str, chips: int) -> Check:
    if device == "cpu" or chips < 2:
        return Check("collective", "skip", f"{'the CPU' if device == 'cpu' else f'{chips} chip'}: the 2-chip all-reduce "
                     "runs where there are 2 chips")
    return two_rank_all_reduce(device)


def two_rank_all_reduce(device: str) -> Check:
    """Two ranks of the device's process group (one chip each, as tpubench's worlds bind them)."""
    port = _free_port()
    procs = []
    for rank in (0, 1):
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "2", "RANK": str(rank),
               "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2"}
        procs.append(_start([sys.executable, "-m", "tpubench.doctor.probe", "--device", device,
                             "--collective-rank", str(rank)], env))
    outs = [_finish(p, COLLECTIVE_TIMEOUT_S) for p in procs]
    lines = [line for out, _ in outs for line in out.splitlines() if line.startswith(PREFIX)]
    ranks = [Check(**json.loads(line[len(PREFIX):])) for line in lines]
    if len(ranks) == 2 and all(c.status == "ok" for c in ranks):
        return ranks[0]
    why = "; ".join(c.detail for c in ranks if c.status != "ok") or f"exit codes {[code for _, code in outs]}"
    return Check("collective", "fail", f"2-rank all-reduce failed: {why}"[:500],
                 fix="multi-chip points will fail here: see docs/multi-chip.md for the device's launch environment")


def _workload(options: DoctorOptions, device: str, scale: str, stamp: str, usable: bool, say) -> Check:
    name = f"{scale} workload" if scale == "small" else "full model, batch 1"
    if not usable:
        return Check(name, "skip", "the device is not usable (see the device check)")
    if scale == "full" and device == "cpu":
        return Check(name, "skip", "the full architecture is for an accelerator (a CPU runs the small scale)")
    derived = _derived_workload(options, scale, stamp)
    before = set(options.out.glob("*.json"))
    args = ["run", str(derived), "--device", device, "--scale", scale, "--out", str(options.out), "--no-price"]
    if scale == "full" and options.expert_parallel:
        args += ["--expert-parallel", str(options.expert_parallel)]
    argv = [sys.executable, "-c", _CLI, *args]
    say("$ tpubench " + " ".join(args))
    out, code = _child(argv, options.run_timeout_s)
    results = [json.loads(p.read_text()) for p in sorted(set(options.out.glob("*.json")) - before)]
    if not results:
        tail = " ".join(out.strip().splitlines()[-3:])[-400:]
        return Check(name, "fail", f"no result (exit {code}): {tail}", fix="run the command above to see the error")
    r = results[0]
    metrics = r.get("metrics", {})
    detail = (f"{Path(derived).name}: {r['status']}, valid {r.get('validity', {}).get('valid')}, "
              f"{metrics.get('output_tokens_per_s', float('nan')):.1f} output tok/s, "
              f"peak memory {metrics.get('peak_memory_bytes')}")
    bad = r["status"] != "ok" or not r.get("validity", {}).get("valid")
    why = r.get("error") or "; ".join(r.get("validity", {}).get("reasons", []))
    return Check(name, "fail" if bad else "ok", detail + (f": {why}"[:400] if bad else ""),
                 fix=why[:300] if bad else "", figures={"results": [r.get("point_key", "") for r in results]})


def _derived_workload(options: DoctorOptions, scale: str, stamp: str) -> Path:
    """The workload at batch 1 with short measurement settings, beside the results (not *.json)."""
    import yaml

    data = yaml.safe_load(options.workload.read_text(encoding="utf-8"))
    kind = "quick" if options.quick else scale
    target = data["scenario"] if scale == "full" else data["scales"][scale].setdefault("scenario", {})
    target["batch_size"] = 1
    if options.quick:
        target.update(input_length=32, output_length=8)
    data["measurement"] = {**(data.get("measurement") or {}), **MEASUREMENT[kind]}
    if options.quick:
        data["measurement"]["max_cv"] = 1.0   # a shared CI host's noise is not what --quick checks
    data["description"] = f"{data.get('description', '')} [tpubench doctor: batch 1, measurement {MEASUREMENT[kind]}]"
    path = options.out / f"doctor_{stamp}.{scale}.{options.workload.stem}.yaml"
    replace_file(path, yaml.safe_dump(data, sort_keys=False).encode())
    return path


def _start(argv: list[str], env: dict | None = None):
    import os
    import subprocess

    return start_in_new_group(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})


def _finish(proc, timeout_s: float) -> tuple[str, int | None]:
    """(its output, exit code); past the timeout its whole process group is stopped."""
    import subprocess

    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop_group(proc, grace_s=5.0)
        out, _ = proc.communicate()
        out += f"\n(stopped after {timeout_s:.0f} s)"
    return out, proc.returncode


def _child(argv: list[str], timeout_s: float) -> tuple[str, int | None]:
    proc = _start(argv)
    try:
        return _finish(proc, timeout_s)
    except BaseException:
        stop_group(proc, grace_s=2.0)
        raise


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
