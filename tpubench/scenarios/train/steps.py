"""Training steps (docs/scenarios/train.md): precision, memory estimate, the step itself, and its
timed measurement. The scenario (scenarios/train/measure.py) puts these together for one chip or a world.

A step is forward + backward + optimizer step on a seeded random batch [B, S] (labels = inputs;
transformers shifts them), with `gradient_accumulation` micro-steps inside it and the gradient
sync inside it as in real training (DDP: `no_sync` on all but the last micro-step; FSDP2:
`set_requires_gradient_sync`). Every step ends with the device's fence; the first step is
compile, then warm-up, then the timed steps with generate's stopping rules.

Precision. A train point's dtype (model.dtype, or a scale's dtype) is the compute dtype, and
`precision` says how it is reached:

    dtype      precision       parameters, gradients, optimizer states   compute
    float32    (any)           float32                                   float32   ("fp32")
    bfloat16   bf16_autocast   float32 (master weights)                  bfloat16 autocast
    bfloat16   bf16            bfloat16                                  bfloat16
    bfloat16   fp32            refused: set the dtype to float32
    float16    (any)           refused: float16 training needs loss scaling

so the shipped workloads' small scales (dtype float32) train in float32 on the CPU whatever the
full scale's precision; the result records the precision that ran (`training.precision`).
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from tpubench.backends.torch import TorchDevice
from tpubench.measure.timing import done_measuring, fenced_clock, planned_iterations

GiB = 1 << 30

# Where the hint for a point that cannot fit or ran out of memory looks for a layout that fits.
_FSDP_SIZES = (2, 4, 8, 16, 32, 64, 128, 256)
# Fraction of the free memory a point may plan to use (as scenarios/generate/fit.py).
FIT_FRACTION = 0.9


# ----------------------------------------------------------------------------- precision


@dataclass(frozen=True)
class Precision:
    name: str               # what runs: fp32 | bf16_autocast | bf16
    param_dtype: str        # parameters, gradients and optimizer states
    compute_dtype: str
    autocast: bool
    requested: str          # the workload's `precision`
    note: str | None = None  # why `name` differs from `requested`


class PrecisionError(ValueError):
    """A dtype and precision that cannot go together (the point cannot run)."""


def resolve_precision(point) -> Precision:
    """The precision a train point runs with (module notes)."""
    asked = point.params.get("precision", "bf16_autocast")
    if point.dtype == "float32":
        note = None if asked == "fp32" else (f"precision {asked} applies to bfloat16 models; this point's dtype is "
                                             "float32, so it trains in float32")
        return Precision("fp32", "float32", "float32", False, asked, note)
    if point.dtype == "float16":
        raise PrecisionError("float16 training needs loss scaling, which tpubench does not do: use dtype bfloat16 "
                             "(precision bf16_autocast or bf16) or float32")
    if asked == "fp32":
        raise PrecisionError(f"precision fp32 with dtype {point.dtype}: set model.dtype (or the scale's dtype) to "
                             "float32")
    if asked == "bf16":
        return Precision("bf16", "bfloat16", "bfloat16", False, asked)
    return Precision("bf16_autocast", "float32", "bfloat16", True, asked)


def tokens_per_step(point) -> int:
    """Training tokens of one optimizer step over the whole world: B * S * accumulation * ranks."""
    return point.batch_size * point.input_length * point.params.get("gradient_accumulation", 1) * point.data_parallel


# ----------------------------------------------------------------------------- memory


def estimate_train_bytes(point, precision: Precision | None = None, *, host_copy: bool = False) -> dict[str, int]:
    """A rough per-chip estimate of what training one point holds at its peak, by part (bytes).

    weights, gradients: parameters in the parameter dtype (1/N of them each under FSDP over N);
    optimizer: AdamW's two moments in the parameter dtype (SGD: none); autocast: the bfloat16
    copies of the weights autocast keeps for the forward; fsdp_buffers: two layers gathered whole
    (the one computing and the next, prefetched); activations: per micro-batch token and layer
    about 16 hidden-sized tensors plus 4 of the MLP width a token uses (the experts it routes to),
    in the compute dtype (SDPA attention keeps no T x T scores), or only each layer's input and one
    layer's worth when activation checkpointing recomputes the rest; logits: the micro-batch's
    logits in the compute dtype, their float32 upcast for the loss and its gradient; host_copy:
    the untouched initial weights a single-chip sweep keeps to restore between points (CPU only).
    """
    from tpubench.hardware.model_shape import ModelShape, bytes_per_element
    from tpubench.models.torch_models import full_config, parameter_count

    precision = precision or resolve_precision(point)
    params = parameter_count(point)
    shape = ModelShape.from_config(point.family, full_config(point))
    pb, cb = bytes_per_element(precision.param_dtype), bytes_per_element(precision.compute_dtype)
    fsdp = bool(point.params.get("fsdp")) and point.data_parallel > 1
    shard = point.data_parallel if fsdp else 1
    optimizer = (point.params.get("optimizer") or {}).get("name", "adamw")
    largest_layer = max((layer.total_params for layer in shape.layers), default=0)
    tokens = point.batch_size * point.input_length
    h = shape.hidden_size
    mlp = max((layer.mlp_matmul_params + layer.top_k * layer.params_per_expert for layer in shape.layers),
              default=0) // max(3 * h, 1)
    per_layer = tokens * (16 * h + 4 * mlp + 2 * shape.n_experts) * cb
    if point.params.get("activation_checkpointing"):
        activations = shape.n_layers * tokens * h * cb + per_layer
    else:
        activations = shape.n_layers * per_layer
    return {
        "weights": params * pb // shard,
        "gradients": params * pb // shard,
        "optimizer": (2 * params * pb // shard) if optimizer == "adamw" else 0,
        "autocast": (params * 2 // shard + (2 * largest_layer * 2 if fsdp else 0)) if precision.autocast else 0,
        "fsdp_buffers": 2 * largest_layer * pb if fsdp else 0,
        "activations": int(activations),
        "logits": tokens * shape.vocab_size * (cb + 4 + 4),
        "host_copy": params * pb if host_copy else 0,
    }


def describe_bytes(parts: dict[str, int]) -> str:
    shown = ", ".join(f"{name.replace('_', ' ')} {value / GiB:.1f}" for name, value in parts.items() if value)
    return f"about {sum(parts.values()) / GiB:.1f} GiB per chip ({shown} GiB)"


def fit_hint(point, available: int | None, precision: Precision | None = None) -> str:
    """What would fit instead, as workload settings: a smaller batch, activation checkpointing,
    FSDP over more chips (each with its estimate when the free memory is known)."""
    precision = precision or resolve_precision(point)
    options: list[str] = []

    def fits(candidate) -> tuple[bool, float]:
        total = sum(estimate_train_bytes(candidate, precision).values())
        return available is None or total <= FIT_FRACTION * available, total / GiB

    b = point.batch_size // 2
    while b >= 1:
        ok, gib = fits(replace(point, batch_size=b))
        if ok or b == 1:
            options.append(f"scenario.batch_size {b}" + (f" (about {gib:.1f} GiB)" if available else ""))
            break
        b //= 2
    if not point.params.get("activation_checkpointing"):
        ok, gib = fits(replace(point, params={**point.params, "activation_checkpointing": True}))
        options.append("scenario.activation_checkpointing: true" + (f" (about {gib:.1f} GiB)" if available else ""))
    for n in _FSDP_SIZES:
        if n <= point.data_parallel and point.params.get("fsdp"):
            continue
        ok, gib = fits(replace(point, data_parallel=n, params={**point.params, "fsdp": True}))
        if ok or n == _FSDP_SIZES[-1]:
            options.append(f"more chips: parallel: {{data: {n}, fsdp: true}}"
                           + (f" (about {gib:.1f} GiB per chip)" if available else ""))
            break
    return "try " + ", or ".join(options)


def oom_message(point, exc: BaseException, available: int | None = None) -> str:
    """The error of a point that ran out of memory, with what to try instead."""
    first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    try:
        hint = fit_hint(point, available)
    except Exception:  # noqa: BLE001 - the hint must never hide the out-of-memory error itself
        hint = ("try a smaller scenario.batch_size, scenario.activation_checkpointing: true, or more chips "
                "(parallel: {data: N, fsdp: true})")
    return f"out of memory while training ({type(exc).__name__}{': ' + first if first else ''}); {hint}"


def is_out_of_memory(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    try:
        import torch

        return isinstance(exc, torch.OutOfMemoryError)
    except (ImportError, AttributeError):
        return False


# ----------------------------------------------------------------------------- the model and its data


def make_batch(seed: int, point, vocab: int) -> np.ndarray:
    """The global batch every rank draws alike: [accumulation, B * ranks, S] token ids from
    numpy's generator (the same on every backend and world size); rank r trains on rows
    r*B .. (r+1)*B - 1 of each micro-step, so any world size sees the same global batch."""
    accum = point.params.get("gradient_accumulation", 1)
    rows = point.batch_size * point.data_parallel
    return np.random.default_rng(seed).integers(0, vocab, size=(accum, rows, point.input_length), dtype=np.int64)


def rank_slice(batch: np.ndarray, rank: int, per_rank: int) -> np.ndarray:
    return batch[:, rank * per_rank:(rank + 1) * per_rank]


def torch_device_name(device) -> str:
    """"cuda" of torch.device("cuda:0") or "cuda:0": the name the experts arms are chosen for."""
    return str(device).split(":")[0]


def build_train_model(point, precision: Precision, device):
    """The point's model from its seed on the host (identical on every rank and device) in the
    parameter dtype, moved to `device`, in training mode without a KV cache."""
    from tpubench.models.torch_models import build_model

    model = build_model(replace(point, dtype=precision.param_dtype), "cpu", device=torch_device_name(device))
    if str(device) != "cpu":
        model = model.to(device)
    model.config.use_cache = False
    return model.train()


def set_activation_checkpointing(model, enabled: bool) -> None:
    if enabled:
        enable = getattr(model, "activation_checkpointing_enable", None)
        if enable is not None:
            enable({"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return
    on = getattr(model, "is_activation_checkpointing", None)
    if on is None:
        on = getattr(model, "is_gradient_checkpointing", False)
    if on:
        disable = getattr(model, "activation_checkpointing_disable", None) or model.gradient_checkpointing_disable
        disable()


def make_optimizer(parameters, settings: dict):
    import torch

    name = settings.get("name", "adamw")
    if name == "sgd":
        return torch.optim.SGD(parameters, lr=settings.get("lr", 1e-4), weight_decay=settings.get("weight_decay", 0.0))
    return torch.optim.AdamW(parameters, lr=settings.get("lr", 1e-4), betas=tuple(settings.get("betas", (0.9, 0.95))),
                             weight_decay=settings.get("weight_decay", 0.1), eps=settings.get("eps", 1e-8))


def wrap_data_parallel(model, point, device, compile_fn=None):
    """(module, what a step calls, how gradient sync is switched) for a world of data-parallel
    ranks: DDP, or FSDP2 (`fully_shard` on every decoder layer, then the whole model).
    `compile_fn` (torch.compile with the point's options) compiles the model inside DDP (DDP's
    own forward is not traceable: compiling around it breaks the graph at its bucket rebuild)
    and the sharded model as a whole under FSDP2."""
    import torch

    if point.params.get("fsdp"):
        from torch.distributed.fsdp import fully_shard

        for layer in _decoder_layers(model):
            fully_shard(layer)
        fully_shard(model)
        return model, compile_fn(model) if compile_fn else model, "fsdp"
    from torch.nn.parallel import DistributedDataParallel

    ids = None
    if getattr(device, "type", str(device)) == "cuda":
        ids = [device.index if device.index is not None else torch.cuda.current_device()]
    inner = compile_fn(model) if compile_fn else model
    # Gradients as views of DDP's buckets: no second copy of them (what real training sets).
    ddp = DistributedDataParallel(inner, device_ids=ids, gradient_as_bucket_view=True)
    return ddp, ddp, "ddp"


def _decoder_layers(model) -> list:
    inner = getattr(model, "model", model)
    inner = getattr(inner, "language_model", inner)
    layers = getattr(inner, "layers", None)
    return list(layers) if layers is not None else []


# ----------------------------------------------------------------------------- one step


class TrainStep:
    """Forward, backward and optimizer step of one point on one rank; `step()` queues one
    optimizer step and returns its loss (a device tensor: reading it would fence)."""

    def __init__(self, model, call, optimizer, batch, precision: Precision, device_type: str,
                 sync: str = "none"):
        self.model, self.call, self.optimizer = model, call, optimizer
        self.batch = batch             # [accumulation, B, S] on the device
        self.accum = int(batch.shape[0])
        self.precision = precision
        self.device_type = device_type
        self.sync = sync               # none | ddp | fsdp

    def _autocast(self):
        import torch

        if not self.precision.autocast:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=torch.bfloat16)

    def _sync_context(self, last: bool):
        if self.sync == "ddp" and not last:
            return self.model.no_sync()
        if self.sync == "fsdp":
            self.model.set_requires_gradient_sync(last)
        return contextlib.nullcontext()

    def step(self):
        self.optimizer.zero_grad(set_to_none=True)
        total = None
        for i in range(self.accum):
            ids = self.batch[i]
            with self._sync_context(i == self.accum - 1):
                with self._autocast():
                    loss = self.call(input_ids=ids, labels=ids, use_cache=False).loss
                (loss / self.accum if self.accum > 1 else loss).backward()
            total = loss.detach() if total is None else total + loss.detach()
        self.optimizer.step()
        return total / self.accum if self.accum > 1 else total


def run_step(step: TrainStep, now: Callable[[], float], dev: TorchDevice | None = None) -> tuple[float, object]:
    """One fenced, timed optimizer step: (seconds, loss tensor). In a deferred eager mode the fence
    reads the loss back (`dev.depends_on`); the optimizer's update then runs with the next step's
    forward, which reads the updated weights, so it is timed one step late."""
    t0 = now()
    loss = step.step()
    if dev is not None:
        dev.depends_on(loss)
    return now() - t0, loss


# ----------------------------------------------------------------------------- measurement


@dataclass
class TrainMeasurement:
    step_s: list[float]                  # timed steps (in a world: the slowest rank's)
    warmup_step_s: list[float]
    losses: list[float]                  # every step in order: first (compile), warm-up, timed
    first_step_s: float
    warmup_s: float
    measure_s: float
    compile: dict
    peak_memory_bytes: int | None
    iterations: int = field(default=0)
    # Ops that ran on the CPU instead of the device, as generate's (scenarios/generate/measure.py).
    fallback_ops_timed: list[str] = field(default_factory=list)
    fallback_ops_untimed: list[str] = field(default_factory=list)
    energy: object = None   # measure.energy.WindowEnergy over the timed steps, where measured


def measure_training(step: TrainStep, point, device: str, *, mode: str = "eager",
                     on_phase: Callable[[str, int, int], None] = lambda *a: None, world=None,
                     energy=None) -> TrainMeasurement:
    """First step (compile) apart, then warm-up, then the timed steps; raw samples kept.

    In a world (measure.world.WorldSync) every rank runs the same number of steps without talking
    inside the timed loop (beyond the step's own gradient sync): the count is agreed before it,
    from the warm-up's pace, and afterwards each step's time is the slowest rank's. `device` is the
    torch device's name: its fence, compile counters, memory and fallback watch are the backend's
    (backends.torch.TorchDevice), the same as generate's session uses. With an `energy` meter
    (measure.energy.EnergyMeter) the timed steps are its window.
    """
    m = point.measurement
    tokens = tokens_per_step(point)
    dev = TorchDevice(device)
    now = fenced_clock(dev.fence)
    fallbacks_before = dev.compile_fallbacks()

    untimed_watch = dev.watch_fallbacks()
    with untimed_watch:
        on_phase("compile", 0, 1)
        dev.reset_peak_memory()
        compiled_before = dev.compile_count()
        first_s, first_loss = run_step(step, now, dev)
        losses = [first_loss]
        graphs_first = dev.compile_count() - compiled_before
        on_phase("compile", 1, 1)

        warm: list[float] = []
        compiled_warm_before = dev.compile_count()
        t_warm = time.perf_counter()
        for k in range(m["warmup"]):
            on_phase("warm-up", k, m["warmup"])
            seconds, loss = run_step(step, now, dev)
            warm.append(seconds)
            losses.append(loss)
        warmup_s = time.perf_counter() - t_warm

    fixed = None
    if world is not None:
        pace = float(np.median(warm)) if warm else first_s
        fixed = world.agree_iterations(planned_iterations(pace, m))
    compiled_timed_before = dev.compile_count()
    times: list[float] = []
    rates: list[float] = []
    start = time.perf_counter()
    n = 0
    timed_watch = dev.watch_fallbacks()
    with timed_watch, (energy.window() if energy is not None else contextlib.nullcontext()):
        while True:
            seconds, loss = run_step(step, now, dev)
            n += 1
            times.append(seconds)
            losses.append(loss)
            rates.append(tokens / seconds)
            elapsed = time.perf_counter() - start
            on_phase("measure", min(n, fixed or m["min_iterations"]), fixed or m["min_iterations"])
            if done_measuring(n, elapsed, rates, m, fixed):
                break
    measure_s = time.perf_counter() - start
    recompiles = dev.compile_count() - compiled_timed_before
    graphs_warm = compiled_timed_before - compiled_warm_before
    host_losses = [float(x) for x in _losses_to_host(losses)]
    if world is not None:
        per_rank = world.gather({"times": times, "losses": host_losses})
        times = [max(r["times"][i] for r in per_rank) for i in range(len(times))]
        # Every rank's loss is the mean over its equal share of tokens: their mean is the global batch's.
        host_losses = [float(np.mean([r["losses"][i] for r in per_rank])) for i in range(len(host_losses))]
    steady = float(np.median(times))
    now_fallbacks = dev.compile_fallbacks()
    compile_info = {
        "mode": mode,
        "graphs_compiled_first_call": graphs_first,
        "recompiles_timed": recompiles,
        "first_step_s": first_s,
        "first_step_compile_s": max(0.0, first_s - steady),
        "graphs_compiled_warmup": graphs_warm,
        "warmup_compile_s": max(0.0, warmup_s - len(warm) * steady) if graphs_warm else 0.0,
        **{k: now_fallbacks[k] - fallbacks_before[k] for k in now_fallbacks},
    }
    return TrainMeasurement(step_s=times, warmup_step_s=warm, losses=host_losses, first_step_s=first_s,
                            warmup_s=warmup_s, measure_s=measure_s, compile=compile_info,
                            peak_memory_bytes=dev.peak_memory_bytes(), iterations=n,
                            fallback_ops_timed=list(timed_watch.ops),
                            fallback_ops_untimed=[op for op in untimed_watch.ops if op not in timed_watch.ops],
                            energy=energy.result if energy is not None else None)


def _losses_to_host(losses: list) -> list[float]:
    import torch

    if not losses:
        return []
    return torch.stack([x.float().reshape(()) for x in losses]).cpu().tolist()


# ----------------------------------------------------------------------------- MoE routing


def routing_counts(model, input_ids, autocast: Callable[[], contextlib.AbstractContextManager]) -> list[np.ndarray]:
    """Tokens routed to each expert, per MoE layer, in one forward of `input_ids` (no gradients):
    a forward hook on every router module (transformers' `...Router`, which returns the top-k
    expert indices last). Empty for a dense model."""
    import torch

    routers = [m for m in model.modules() if type(m).__name__.endswith("Router")]
    if not routers:
        return []
    counts: dict[int, np.ndarray] = {}

    def hook(module, _args, output):
        outputs = output if isinstance(output, tuple) else (output,)
        indices = next((t for t in reversed(outputs) if torch.is_tensor(t) and not t.is_floating_point()), None)
        if indices is None:
            return
        experts = int(outputs[0].shape[-1])
        counts[id(module)] = torch.bincount(indices.reshape(-1).long(), minlength=experts).cpu().numpy()

    handles = [r.register_forward_hook(hook) for r in routers]
    try:
        with torch.no_grad(), autocast():
            model(input_ids=input_ids, use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    return [counts[id(r)] for r in routers if id(r) in counts]


def routing_summary(per_layer: list) -> dict[str, float]:
    """How balanced routing was, from tokens per expert per MoE layer: the worst layer's busiest
    expert over the mean load (`moe_load_max_over_mean`; 1.0 is perfect balance), the worst
    layer's idlest expert over the mean (`moe_load_min_over_mean`), the mean over layers of the
    coefficient of variation of the loads (`moe_load_cv`), the mean share of experts that got no
    token (`moe_experts_unused_fraction`), MoE layers and routed (token, expert) pairs per layer."""
    layers = [np.asarray(c, dtype=float) for c in per_layer if np.asarray(c).size and np.sum(c) > 0]
    if not layers:
        return {}
    means = [c.mean() for c in layers]
    return {
        "moe_load_max_over_mean": float(max(c.max() / m for c, m in zip(layers, means))),
        "moe_load_min_over_mean": float(min(c.min() / m for c, m in zip(layers, means))),
        "moe_load_cv": float(np.mean([c.std() / m for c, m in zip(layers, means)])),
        "moe_experts_unused_fraction": float(np.mean([(c == 0).mean() for c in layers])),
        "moe_layers": len(layers),
        "moe_routes_per_layer": float(np.mean([c.sum() for c in layers])),
    }


# ----------------------------------------------------------------------------- metrics


def step_stats(step_s: list[float]) -> dict[str, float]:
    """step_mean_s, step_p50_s, step_ci95_low_s, step_cv, ... over the timed steps."""
    from tpubench.measure.stats import summarize

    out: dict[str, float] = {}
    for stat, value in summarize(step_s).items():
        if stat == "n":
            continue
        out["step_cv" if stat == "cv" else f"step_{stat}_s"] = value
    return out


def train_rates(metrics: dict, tokens: int, world_size: int) -> dict[str, float]:
    """Training tokens/s = tokens per step / mean step time (docs/definitions.md#training), its 95% CI from the step
    time's, per chip (/ world size), and seconds of the whole world per training token (the cost
    basis) with its CI."""
    mean, lo, hi = (metrics.get(f"step_{k}_s") for k in ("mean", "ci95_low", "ci95_high"))
    nan = float("nan")

    def inv(x):
        return tokens / x if x and x > 0 and math.isfinite(x) else nan

    rate = inv(mean)
    out = {
        "train_tokens_per_step": tokens,
        "train_tokens_per_s": rate,
        "train_tokens_per_s_ci95_low": inv(hi),
        "train_tokens_per_s_ci95_high": inv(lo),
        "train_s_per_token": mean / tokens if mean else nan,
        "train_s_per_token_ci95_low": lo / tokens if lo is not None and math.isfinite(lo) else nan,
        "train_s_per_token_ci95_high": hi / tokens if hi is not None and math.isfinite(hi) else nan,
    }
    out["train_tokens_per_s_ci95_rel"] = ((out["train_tokens_per_s_ci95_high"] - rate) / rate
                                          if rate and math.isfinite(out["train_tokens_per_s_ci95_high"]) else nan)
    for name in ("train_tokens_per_s", "train_tokens_per_s_ci95_low", "train_tokens_per_s_ci95_high"):
        out[name.replace("train_tokens_per_s", "train_tokens_per_s_per_chip")] = out[name] / world_size
    return out


def loss_metrics(losses: list[float]) -> tuple[dict[str, float], list[str]]:
    """(loss_first, loss_last, loss_nonfinite_steps; validity reasons): a NaN or inf loss at any
    step makes the run invalid."""
    bad = [i for i, x in enumerate(losses) if not math.isfinite(x)]
    metrics = {"loss_first": losses[0] if losses else float("nan"),
               "loss_last": losses[-1] if losses else float("nan"), "loss_nonfinite_steps": len(bad)}
    reasons = []
    if bad:
        reasons.append(f"loss is NaN or inf at {len(bad)} of {len(losses)} steps (first at step {bad[0] + 1}): "
                       "training diverged; lower optimizer.lr or check the precision")
    return metrics, reasons
