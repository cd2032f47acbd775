"""Per target: which points run, on how many nodes, by which commands, and what that should cost.

Pure functions over the workload and a Target (no SkyPilot, no torch), so the plan, the node count
and the estimate are tested on hand-computed cases and printed before anything is launched.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field

from tpubench.hardware.accelerators import chip_memory_bytes
from tpubench.errors import UserError
from tpubench.scenarios.registry import point_label, scenario_of
from tpubench.launch.targets import Target
from tpubench.workload_spec.sections import FULL_SCALE
from tpubench.workload_spec.point import RunPoint
from tpubench.run.workload import Workload
from tpubench.run.sweep import expand

# The estimate's allowances (seconds), beside each point's own measurement.max_seconds: building
# or loading the model, and compiling it; plus, once per target, provisioning and installing.
LOAD_ALLOWANCE_S = 120.0
COMPILE_ALLOWANCE_S = 300.0
DEFAULT_SETUP_S = 900.0
RESULTS_MOUNT = "/tpubench-results"
WORKLOAD_DIR = "tpubench-launch"     # under the home folder
RDZV_PORT = 29500
# The layout flag of `tpubench run` for each point field that sets a world size.
_LAYOUT_FLAGS = (("tensor_parallel", "--tensor-parallel"), ("expert_parallel", "--expert-parallel"),
                 ("data_parallel", "--data-parallel"))
GiB = 1 << 30
_BARE_WORD = re.compile(r"^[\w@%+=:,./$-]+$")


def shell_join(words: list[str]) -> str:
    """shlex.join, except that words made of safe characters and $VARS stay bare, so the shell
    expands $HOME and SkyPilot's $SKYPILOT_* variables in them."""
    return " ".join(w if _BARE_WORD.match(w) else shlex.quote(w) for w in words)


@dataclass
class TargetPlan:
    target: Target
    points: list[RunPoint]
    num_nodes: int
    run_lines: list[str]           # the task's run section, one shell line each
    hours: float
    hours_basis: str
    usd: float | None              # None when the target has no price under the plan
    warnings: list[str] = field(default_factory=list)


def default_scale(workload: Workload, target: Target, requested: str | None) -> str:
    """As `tpubench run` chooses on that machine: the full architecture on an accelerator."""
    if requested:
        return requested
    return "small" if target.device == "cpu" and "small" in workload.scales else FULL_SCALE


def plan_target(workload: Workload, source: str, target: Target, *, remote_workload: str, scale: str | None,
                out_dir: str, run_args: list[str], setup_s: float = DEFAULT_SETUP_S,
                hours: float | None = None, history_s: dict[str, float] | None = None) -> TargetPlan:
    """`source` names the local workload file in errors, `remote_workload` is its path on the
    target; `run_args` are extra `tpubench run` flags (layout overrides); `history_s` maps point
    keys to seconds the same point took before on this accelerator (used before the bound)."""
    scale = default_scale(workload, target, scale)
    points = expand(workload, scale, source=source)
    scenario_of(workload.scenario.kind).check_launch(points, source)
    warnings = _fit_warnings(points, target, source)
    num_nodes = nodes_needed(points, target, source)
    base = ["tpubench", "run", remote_workload, "--device", target.device, "--scale", scale,
            "--out", out_dir, "--resume", "--no-price"]
    run_lines = _run_lines(points, target, base, run_args, num_nodes)
    if hours is not None:
        expected, basis = hours, "--hours"
    else:
        expected, basis = expected_hours(points, setup_s, history_s or {})
    usd = target.priced_as["usd_per_hour"]
    return TargetPlan(target, points, num_nodes, run_lines, expected, basis,
                      None if usd is None else usd * num_nodes * expected, warnings)


def nodes_needed(points: list[RunPoint], target: Target, source: str) -> int:
    """Nodes for the widest layout; a layout wider than one node must fill whole nodes."""
    widest = max(p.world_size for p in points)
    chips = target.chips_per_node
    if widest <= chips:
        return 1
    if target.is_tpu_slice or target.device == "cpu":
        raise UserError(f"a point needs {widest} chips and {target.spec} has {chips}: choose a bigger "
                        f"{'slice' if target.is_tpu_slice else 'machine'} (tpubench runs one TPU VM host per target)",
                        where=source, field="parallel")
    for size in sorted({p.world_size for p in points if p.world_size > chips}):
        if size % chips:
            raise UserError(f"a layout of {size} chips spans nodes of {chips} ({target.spec}) unevenly: use a "
                            f"multiple of {chips}", where=source, field="parallel")
    return widest // chips


def _run_lines(points: list[RunPoint], target: Target, base: list[str], run_args: list[str],
               num_nodes: int) -> list[str]:
    if num_nodes == 1:
        return [shell_join(base + run_args)]   # tpubench starts its own worlds for multi-chip points
    # Across nodes, each layout runs as its own `tpubench run` with that layout given explicitly
    # (so no line runs another line's points), widest first: every node starts with the layout
    # that spans all of them, so their torchrun c10d rendezvous meet at once, and each later layout
    # is met by nodes that just left the same earlier one. Layouts within one node run on the
    # first node alone (tpubench's own world); every rank runs tpubench, rank 0 writes.
    # The job fails if any layout failed (SkyPilot reads the script's exit code).
    flag = next(f for name, f in _LAYOUT_FLAGS if any(getattr(p, name) > 1 for p in points))
    keep = [a for a in run_args if a in ("--fsdp", "--no-fsdp")]
    lines = ['MASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)', "rc=0"]
    for size in sorted({p.world_size for p in points}, reverse=True):
        cmd = base + [flag, str(size)] + keep
        if size <= target.chips_per_node:
            lines.append(f'if [ "$SKYPILOT_NODE_RANK" = 0 ]; then {shell_join(cmd)} || rc=$?; fi')
            continue
        nodes = size // target.chips_per_node
        torchrun = ["python", "-m", "torch.distributed.run", f"--nnodes={nodes}",
                    f"--nproc-per-node={target.chips_per_node}", "--rdzv-backend=c10d",
                    f"--rdzv-endpoint=$MASTER_ADDR:{RDZV_PORT}", f"--rdzv-id=tpubench-$SKYPILOT_TASK_ID-{size}",
                    "-m", "tpubench.cli", *cmd[1:]]
        lines.append(f'if [ "$SKYPILOT_NODE_RANK" -lt {nodes} ]; then {shell_join(torchrun)} || rc=$?; fi')
    lines.append("exit $rc")
    return lines


def expected_hours(points: list[RunPoint], setup_s: float, history_s: dict[str, float]) -> tuple[float, str]:
    """(hours, basis): setup once, then per point its earlier wall time on this accelerator when
    known, else a bound: measurement.max_seconds plus load (and compile) allowances."""
    total, measured = setup_s, 0
    for p in points:
        if p.key() in history_s:
            total += history_s[p.key()]
            measured += 1
        else:
            total += (p.measurement.get("max_seconds", 300.0) + LOAD_ALLOWANCE_S
                      + (COMPILE_ALLOWANCE_S if p.execution_mode != "eager" else 0.0))
    basis = (f"{measured} of {len(points)} point(s) from earlier runs, the rest bounded by max_seconds"
             if measured else "bounded by max_seconds + load/compile allowances")
    return total / 3600.0, basis


def _fit_warnings(points: list[RunPoint], target: Target, source: str) -> list[str]:
    """The weights alone against a chip's memory: a point that cannot fit fails there after
    provisioning, so say it here (and refuse a target where no point fits)."""
    from tpubench.hardware.model_shape import ModelShape, bytes_per_element

    memory = chip_memory_bytes(target.accelerator)
    if memory is None or target.device == "cpu":
        return []
    too_big = []
    held = [(p, scenario_of(p.scenario_kind).weight_shards(p)) for p in points]
    held = [(p, shards) for p, shards in held if shards is not None]   # not a server's model
    for p, shards in held:
        try:
            weights = ModelShape.from_config(p.family, p.model_config).total_params * bytes_per_element(p.dtype)
        except (UserError, KeyError, TypeError, ValueError):
            return []
        per_chip = weights / shards
        if per_chip > 0.9 * memory:
            too_big.append((p, per_chip))
    if not too_big:
        return []
    p, per_chip = too_big[0]
    message = (f"{point_label(p)}: the {p.dtype} weights alone need {per_chip / GiB:.1f} GiB per chip, a "
               f"{target.accelerator} chip has {memory / GiB:.1f} GiB")
    if len(too_big) == len(held):
        chips = math.ceil(per_chip * p.world_size / (0.9 * memory))
        raise UserError(f"{target.spec}: no point fits: {message}; shard it over at least {chips} chips "
                        "(--tensor-parallel or --expert-parallel N; training: --data-parallel N --fsdp)",
                        where=source, field="--on")
    return [f"{len(too_big)} point(s) will not fit on {target.spec} ({message})"]
