"""Where a point's time goes (`tpubench run --profile`): one profiled pass, after the timed loop.

The timed loop never runs under a profiler: a scenario calls `profile_pass` once its timed loop
(and anything else it measures) is done, with a callable that runs one more iteration (generate:
one batch from prefill to last token; train: one optimizer step; diffuse: one pipeline call). That
pass runs under torch.profiler and is broken down into categories of time (docs/measurement.md#profile):

  expert_matmul_s     matmuls inside an MoE experts module (grouped_mm, bmm, the eager loop's linears)
  expert_dispatch_s   the rest of the experts module: gathers, scatters, activation, weighting
  router_topk_s       the router module (its linear, softmax, top-k, tpubench's routing bias), any topk
  attention_s         scaled_dot_product_attention and what runs inside it; in an attention module,
                      everything but its linear projections (rope, cache writes, eager attention)
  dense_matmul_s      every other matmul (mm, addmm, linear, bmm, ...): projections, MLPs, lm_head
  norm_elementwise_s  norms and elementwise ops (add, mul, silu, rsqrt, ...)
  collectives_s       c10d / NCCL / gloo collectives (all_reduce, all_to_all, all_gather, ...)
  other_s             every other op (copies, indexing, embedding, argmax, ...)
  host_gap_s          the pass's wall time minus the union of the ops' time: Python, launch
                      latency and waits in which no op ran

Ops are told apart by name and by the module they ran in: forward hooks on the experts, router,
attention and norm modules open a `record_function` range named `tpubench::<kind>`, and an op
belongs to the innermost such range above it in the profiler's event tree. That is what works on
every device and in eager mode; `with_modules` only names TorchScript modules, and module names
in the stack (`with_stack`) cost far more. A compiled forward gets no hooks (they would make it
compile again, and the profile would time compilation): its ops are told apart by name only.

Each op counts its self time (time not spent in a child op) so nothing is counted twice: on a CPU
its self CPU time, on an accelerator the self device time of the kernels it launched. The
categories then add up to the pass's wall time (by construction on one CPU thread; within the
overlap of threads or of host and device otherwise); `sums_to` records the ratio.

Frameworks are imported inside functions: the CLI and `validate` never load them.
"""

from __future__ import annotations

import gzip
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

CATEGORIES = ("expert_matmul_s", "expert_dispatch_s", "router_topk_s", "attention_s", "dense_matmul_s",
              "norm_elementwise_s", "collectives_s", "other_s", "host_gap_s")
TOP_OPS = 15
RANGE_PREFIX = "tpubench::"
# A trace this large (bytes, uncompressed) is a warning in the result: chrome://tracing and
# Perfetto slow down on it. It is written anyway (gzip, which both open).
LARGE_TRACE_BYTES = 200 * 1024 * 1024

_MATMUL = re.compile(r"(^|::|_)(mm|addmm|bmm|baddbmm|matmul|linear|einsum|grouped_mm|_grouped_mm|gemm|dot)$|gemm|cutlass|"
                     r"grouped_mm")
_COLLECTIVE = re.compile(r"c10d|nccl|gloo|all_reduce|allreduce|all_to_all|alltoall|all_gather|allgather|"
                         r"reduce_scatter|broadcast_|record_param_comms", re.I)
_ATTENTION = re.compile(r"scaled_dot_product|attention|flash_attn|sdpa", re.I)
_ELEMENTWISE = re.compile(
    r"norm|rsqrt|sqrt|pow|mean|add|sub|mul|div|silu|gelu|relu|sigmoid|tanh|exp|neg|softmax|clamp|where|"
    r"reciprocal|square|erf|cos|sin|fill|zero|masked|maximum|minimum|abs", re.I)


@dataclass(frozen=True)
class OpTime:
    """One profiled op: its name, self time (seconds) and the names above it, innermost first
    (enclosing ops and tpubench's module ranges)."""

    name: str
    self_s: float
    ancestors: tuple[str, ...] = ()


def op_category(name: str, ancestors: Iterable[str] = ()) -> str:
    """The category (one of CATEGORIES but host_gap_s) of an op by its name and the names above it."""
    ancestors = tuple(ancestors)
    if _COLLECTIVE.search(name):
        return "collectives_s"
    scope = next((a[len(RANGE_PREFIX):] for a in ancestors if a.startswith(RANGE_PREFIX)), None)
    matmul = bool(_MATMUL.search(name)) or any(_MATMUL.search(a) for a in ancestors
                                               if not a.startswith(RANGE_PREFIX) and a.startswith("aten::"))
    if scope == "experts" or "grouped_mm" in name:
        return "expert_matmul_s" if matmul else "expert_dispatch_s"
    if scope == "router" or name.endswith("topk"):
        return "router_topk_s"
    if _ATTENTION.search(name) or any(_ATTENTION.search(a) for a in ancestors if not a.startswith(RANGE_PREFIX)):
        return "attention_s"
    if scope == "norm":
        return "norm_elementwise_s"
    if matmul:
        return "dense_matmul_s"
    if scope == "attention":
        return "attention_s"
    if _ELEMENTWISE.search(name.split("::")[-1]):
        return "norm_elementwise_s"
    return "other_s"


def union_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """The length of the union of [start, end) intervals (seconds): time in which something ran."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def breakdown(ops: list[OpTime], wall_s: float, busy_s: float, top: int = TOP_OPS) -> dict:
    """The profile of one pass: seconds per category (host_gap_s = wall - busy, never below 0), the
    `top` ops by self time, and how the categories' sum compares with the wall time."""
    categories = dict.fromkeys(CATEGORIES, 0.0)
    by_name: dict[str, list] = {}
    for op in ops:
        categories[op_category(op.name, op.ancestors)] += op.self_s
        entry = by_name.setdefault(op.name, [0.0, 0, op_category(op.name, op.ancestors)])
        entry[0] += op.self_s
        entry[1] += 1
    categories["host_gap_s"] = max(0.0, wall_s - busy_s)
    summed = sum(categories.values())
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]
    return {
        "total_s": wall_s,
        "busy_s": busy_s,
        "categories": categories,
        "sums_to": summed / wall_s if wall_s > 0 else float("nan"),
        "top_ops": [{"name": name, "self_s": s, "calls": n, "category": cat} for name, (s, n, cat) in ranked],
    }


def profile_pass(backend, run: Callable[[], object], out_dir: str | Path | None, stem: str, *,
                 model=None, fence: Callable[[], None] | None = None, device: str = "cpu",
                 compiled: bool = False, timed_s: float | None = None) -> dict:
    """Run `run()` once under the framework's profiler and return the point's `profile` record;
    the trace (chrome trace JSON, gzip) is written to out_dir as `<stem>.trace.json.gz`.

    `model`: the torch module whose experts, router, attention and norm modules get ranges (none
    when `compiled`); `fence`: waits for the device; `timed_s`: the timed loop's median seconds
    per iteration, to state how much slower the profiled pass ran (the profiler's own cost);
    `backend`: the Backend that ran the point (its `profiler_unavailable` says why it takes no pass)."""
    if backend.profiler_unavailable:
        return {"available": False, "why": backend.profiler_unavailable}
    try:
        record = _torch_profile(run, model if not compiled else None, fence or (lambda: None), device, out_dir, stem)
    except Exception as exc:  # noqa: BLE001 - the timed figures are already measured: keep them, say why
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return {"available": False, "why": f"the profiled pass failed: {first}"[:500]}
    record["method"] = ("torch.profiler, one pass after the timed loop; ops told apart by name"
                        + ("" if compiled else " and by the module they ran in (record_function ranges)"))
    if timed_s:
        record["timed_s"] = timed_s
        record["profiled_vs_timed"] = record["total_s"] / timed_s
    return record


def trace_stem(base: dict) -> str:
    """The trace's file name without its suffix: the point's result file name (point, then time),
    so the trace sorts beside its result. `base` is the runner's RunResult fields of the point."""
    from tpubench.records.result import RunResult, result_filename

    return result_filename(RunResult(point=base["point"], point_key=base["point_key"], backend=base["backend"],
                                     device=base["device"]))[:-len(".json")]


# ----------------------------------------------------------------------------- torch


def _module_kind(module) -> str | None:
    """Which range a module's forward gets: its class name decides (transformers' naming)."""
    name = type(module).__name__
    if name.endswith("Experts"):
        return "experts"
    if name.endswith("Router") or name.endswith("TopKRouter") or name.endswith("Gate"):
        return "router"
    if name.endswith("Attention"):
        return "attention"
    if name.endswith("Norm"):
        return "norm"
    return None


def _module_ranges(model) -> list:
    """Forward hooks that open `tpubench::<kind>` around the model's experts, router, attention and
    norm modules; returns their handles (removed after the pass)."""
    from torch.autograd.profiler import record_function

    from tpubench.models.torch_routing import routers

    router_ids = {id(r) for r in routers(model)}
    handles = []
    for module in model.modules():
        kind = "router" if id(module) in router_ids else _module_kind(module)
        if kind is None:
            continue
        stack: list = []

        def enter(mod, args, _kind=kind, _stack=stack):
            rf = record_function(RANGE_PREFIX + _kind)
            rf.__enter__()
            _stack.append(rf)

        def leave(mod, args, output, _stack=stack):
            if _stack:
                _stack.pop().__exit__(None, None, None)

        # prepend: the range opens before any other pre-hook and, with always_call, closes even
        # when the forward raises; it closes after the routing hooks (registered earlier), so
        # tpubench's routing bias counts as router time.
        handles.append(module.register_forward_pre_hook(enter, prepend=True))
        handles.append(module.register_forward_hook(leave, always_call=True))
    return handles


def _torch_profile(run, model, fence, device: str, out_dir, stem: str) -> dict:
    from torch.profiler import ProfilerActivity, profile

    from tpubench.backends.torch import profiler_setup

    on_device = device != "cpu"
    # The device's own profiler (CUPTI; TorchTPU's and TorchNeuron's PrivateUse1 activity with their
    # configs); anywhere else the host's view is all there is (time_basis says so).
    extra, options, device_note = profiler_setup(device, Path(out_dir or tempfile.gettempdir()) / f"{stem}.device-trace")
    activities = [ProfilerActivity.CPU, *extra]
    handles = _module_ranges(model) if model is not None else []
    try:
        fence()
        with profile(activities=activities, **options) as prof:
            t0 = time.perf_counter()
            run()
            fence()
            wall_s = time.perf_counter() - t0
    finally:
        for handle in handles:
            handle.remove()
    ops, busy_s = _torch_ops(prof.events(), on_device)
    if on_device and not busy_s:   # no device activity recorded: fall back to the host's view
        ops, busy_s = _torch_ops(prof.events(), False)
        on_device = False
    record = breakdown(ops, wall_s, busy_s)
    record["available"] = True
    record["time_basis"] = "self device time" if on_device else "self CPU time"
    if device != "cpu" and not on_device:
        record["time_basis"] += " (the profiler recorded no device activity on this device)"
    record["module_ranges"] = model is not None
    if device_note:
        record["device_profiler"] = device_note
    record.update(_write_trace(prof, out_dir, stem))
    return record


def _torch_ops(events, on_device: bool) -> tuple[list[OpTime], float]:
    """(every op with its self time, the union of op time in seconds) from torch.profiler events.

    Host view: CPU ops, minus tpubench's ranges and the profiler's own markers (their self time
    is time between ops, a host gap). Device view: the self device time each CPU op's kernels
    took, and the union of the kernels' intervals."""
    from torch.autograd import DeviceType

    ops: list[OpTime] = []
    intervals: list[tuple[float, float]] = []
    side: list[tuple[float, float]] = []   # collectives' own threads (host view)
    side_name = None
    for e in events:
        span = (e.time_range.start / 1e6, e.time_range.end / 1e6)
        if e.device_type != DeviceType.CPU:
            if on_device:
                intervals.append(span)
            continue
        if e.name.startswith(RANGE_PREFIX) or e.name.startswith("ProfilerStep") or e.name.startswith("["):
            continue
        seconds = (e.self_device_time_total if on_device else e.self_cpu_time_total) / 1e6
        if not on_device and seconds <= 0 and _COLLECTIVE.search(e.name):
            # gloo runs a collective on a thread of its own (`gloo:all_reduce`, no self time) while
            # the caller waits outside any op: counted below as the collective's wait.
            side.append(span)
            side_name = side_name or e.name
            continue
        ancestors = []
        parent = e.cpu_parent
        while parent is not None:
            ancestors.append(parent.name)
            parent = parent.cpu_parent
        if seconds > 0:
            ops.append(OpTime(e.name, seconds, tuple(ancestors)))
        if not on_device:
            intervals.append(span)
    busy = union_seconds(intervals)
    if side:
        # The time the collectives' threads worked while no op of the caller ran.
        waited = union_seconds(intervals + side) - busy
        if waited > 0:
            ops.append(OpTime(f"{side_name} (its own thread, while the caller waited)", waited, ()))
            busy += waited
    return ops, busy


def _write_trace(prof, out_dir, stem: str) -> dict:
    """The chrome trace, gzipped (Perfetto and chrome://tracing open .json.gz; `.json` would be read
    as a result file), written atomically beside the results; {} without out_dir."""
    if out_dir is None:
        return {}
    from tpubench.records.result import write_new_file

    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(tmp)
        raw = Path(tmp).read_bytes()
    finally:
        os.unlink(tmp)
    path = write_new_file(out_dir, f"{stem}.trace.json.gz", gzip.compress(raw, compresslevel=6))
    out = {"trace_file": path.name, "trace_bytes": len(raw)}
    if len(raw) > LARGE_TRACE_BYTES:
        out["trace_warning"] = "large trace: Perfetto (ui.perfetto.dev) opens it faster than chrome://tracing"
    return out
