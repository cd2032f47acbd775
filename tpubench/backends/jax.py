"""The JAX backend: the workload's compact JAX twin on JAX's default platform (cpu, gpu or tpu).

It loads exactly the weights of the torch model built from the same workload and seed, compiles
prefill and decode ahead of time (`jit(...).lower(...).compile()`) so compile time is measured
apart, and fences with `block_until_ready()`.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import resource
import time
from typing import Any

from tpubench.backends.base import Availability
from tpubench.errors import UserError
from tpubench.hardware.environment import cpu_model_name, device_chips

_JAX_PLATFORMS = ("cpu", "gpu", "tpu")
# tpubench's precision level (torch's names) -> jax_default_matmul_precision: full float32, the
# intermediate level (TF32 on GPU, three bfloat16 passes on TPU) and one bfloat16 pass, as torch's
# "highest", "high" and "medium" (JAX docs: jax.default_matmul_precision).
MATMUL_PRECISION = {"highest": "float32", "high": "tensorfloat32", "medium": "bfloat16"}
_compiles = {"count": 0}
_listening = {"on": False}


def set_matmul_precision(precision: str | None) -> dict:
    """Set how float32 matmuls compute (traced from now on: before a point lowers its functions)
    and return what JAX's config reports back, for the result's environment."""
    import jax

    precision = precision or "highest"
    jax.config.update("jax_default_matmul_precision", MATMUL_PRECISION[precision])
    return {"matmul_precision": precision,
            "matmul_precision_applied": {"jax_default_matmul_precision": jax.config.jax_default_matmul_precision}}


def _count_compiles() -> None:
    """Count every XLA compilation in this process (recompiles in the timed phase make it invalid)."""
    if _listening["on"]:
        return
    import jax

    def listener(event: str, duration: float, **kwargs) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            _compiles["count"] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    _listening["on"] = True


# Why run --profile takes no profiled pass on JAX (the point's `profile` record says so).
PROFILER_UNAVAILABLE = ("not available for jax in this version: jax.profiler's trace (an XPlane file) names "
                        "XLA fusions, not the model's operators; open it with TensorBoard or XProf")


class JaxBackend:
    name = "jax"
    runs_torch_modules = False   # it runs the JAX twin: scenarios that build torch modules need --backend torch
    multi_chip = False           # one chip: parallel layouts need --backend torch
    profiler_unavailable = PROFILER_UNAVAILABLE

    def __init__(self, device: str | None = None):
        if device is not None and device not in _JAX_PLATFORMS:
            raise UserError(f"unknown JAX platform '{device}' (choose from {', '.join(_JAX_PLATFORMS)})",
                            field="--device")
        self.requested = device
        self.device = device or "default"

    def platform(self) -> str:
        import jax

        return jax.default_backend()

    def on_accelerator(self) -> bool:
        return self.platform() != "cpu"

    def energy_device(self) -> str:
        # JAX calls NVIDIA's and AMD's GPUs "gpu"; the energy sources know them as torch's "cuda".
        return {"gpu": "cuda"}.get(self.platform(), self.platform())

    def uses_host_memory(self) -> bool:
        return self.platform() == "cpu"

    def placed_on_device(self, device_types) -> bool:
        return self.platform() == "cpu" or all(t != "cpu" for t in device_types)

    def available_memory(self) -> int | None:
        """The host's free memory: the torch model is built there before it is converted."""
        import psutil

        return int(psutil.virtual_memory().available)

    def torch_device(self):
        raise _torch_only("a torch module on a device")

    def build_sharded(self, point, checkpoint: str):
        raise _torch_only("a model sharded over a world of chips")

    # One chip only (multi_chip is False): the runner refuses a world before any of these is asked.
    def enter_rank(self, threads_per_rank: int) -> None:
        raise _torch_only("a world of chips")

    def bind_rank(self, local_rank: int) -> None:
        raise _torch_only("a world of chips")

    def init_process_group(self, timeout_s: float) -> None:
        raise _torch_only("a world of chips")

    def process_group_backend(self) -> str:
        raise _torch_only("a world of chips")

    def process_group_source(self) -> str:
        raise _torch_only("a world of chips")

    def availability(self) -> Availability:
        if importlib.util.find_spec("jax") is None:
            return Availability("jax", self.device, False, "package jax is missing: pip install 'tpubench[jax]'")
        import jax

        platform = jax.default_backend()
        if self.requested and self.requested != platform:
            return Availability("jax", self.requested, False,
                                f"JAX's default platform here is {platform}, not {self.requested}")
        self.device = platform
        dev = jax.devices()[0]
        return Availability("jax", platform, True, f"{dev.device_kind} x{len(jax.devices())} (jax {jax.__version__})")

    def environment(self) -> dict[str, Any]:
        import jax

        dev = jax.devices()[0]
        on_cpu = jax.default_backend() == "cpu"
        name = cpu_model_name() if on_cpu else dev.device_kind
        return {
            "jax": jax.__version__,
            "jax_platform": jax.default_backend(),
            "accelerator_name": name,
            "accelerator_count": len(jax.devices()),
            # The same rule as the torch backend's (environment.device_chips): one device's worth.
            **device_chips("cpu" if on_cpu else jax.default_backend(), 1, name),
        }

    def check_execution_mode(self, mode: str) -> None:
        """JAX compiles every point ahead of time; TorchTPU's eager modes are torch's."""
        if mode in ("eager_fused", "eager_sync"):
            raise UserError(f"execution mode {mode} is a TorchTPU eager mode (--backend torch --device tpu); "
                            "the JAX backend always compiles", field="execution.mode")

    def process_environment(self, point) -> dict[str, str]:
        return {}

    def estimate_memory(self, point) -> tuple[int, int | None]:
        from tpubench.models.torch_models import estimate_bytes, weight_bytes

        # The torch model is built on the host first, then converted: host memory holds both.
        return estimate_bytes(point) + weight_bytes(point), self.available_memory()

    def quantization_refusal(self, point) -> str | None:
        """The JAX twin runs the model dtype only: a quantised point is measured with --backend torch."""
        if point.quantization == "none":
            return None
        return f"quantization {point.quantization}: the JAX twin has no quantised path (measured with --backend torch)"

    def build(self, point):
        import jax

        from tpubench.models import jax_twin
        from tpubench.models.torch_models import build_model

        _count_compiles()
        # The weights only: which experts implementation torch would run is no concern of the twin.
        torch_model = build_model(dataclasses.replace(point, experts_implementation=None), init_device="cpu")
        try:
            config = jax_twin.TwinConfig.from_hf(torch_model.config)
        except NotImplementedError as exc:
            raise UserError(f"the JAX twin cannot run this model: {exc}", field="model.family") from None
        params = jax.device_put(jax_twin.params_from_torch(torch_model, config=config))
        del torch_model
        jax.block_until_ready(params)
        return config, params

    def session(self, built, point, prompt) -> "JaxSession":
        return JaxSession(self, built, point, prompt)


def _torch_only(what: str) -> UserError:
    return UserError(f"the jax backend runs the JAX twin on one chip: {what} needs --backend torch", field="--backend")


def _with_experts(config, point, platform: str):
    """The twin's decode formulation for the point: the one it names (gather, ragged_dot, tokamax),
    else the default: ragged_dot on an accelerator (grouped matmuls read each routed expert once),
    gather on the CPU, where XLA lowers ragged_dot to a dense dot over every expert. A torch
    implementation name (eager, grouped_mm, batched_mm, kernels) is transformers' and leaves the
    default. The prefill uses ragged_dot (gather would copy expert weights per prompt token), or
    tokamax for a tokamax point, with the Tokamax implementation chosen for the platform
    (models/jax_experts.py)."""
    from tpubench.models.jax_experts import TOKAMAX, tokamax_implementation
    from tpubench.workload_spec.sections import JAX_EXPERTS

    if not any(config.moe_layers):
        return config
    impl = point.experts_implementation if point.experts_implementation in JAX_EXPERTS else (
        "gather" if platform == "cpu" else "ragged_dot")
    if impl == TOKAMAX:
        return dataclasses.replace(config, moe_decode=TOKAMAX, moe_prefill=TOKAMAX,
                                   tokamax_implementation=tokamax_implementation(platform))
    return dataclasses.replace(config, moe_decode=impl, moe_prefill="ragged_dot")


def _experts_kernel(config) -> dict | None:
    """The record of the kernel the decode's experts run (None for a dense model); for tokamax it
    imports the package, so a missing one skips the point here, before anything is compiled or timed."""
    from tpubench.models.jax_experts import kernel_record

    if not any(config.moe_layers):
        return None
    return kernel_record(config.moe_decode, config.tokamax_implementation)


def _routed(config, params, point):
    """The twin's (config, params) with the point's routing schedule (models/routing.py)."""
    from tpubench.models import jax_twin
    from tpubench.models.routing import kind, schedule

    routing = getattr(point, "routing", "natural")
    if kind(routing) == "natural":
        return config, params
    layers = sum(config.moe_layers)
    if not layers:
        raise UserError(f"routing {kind(routing)} needs a mixture-of-experts model; {point.family} has no router",
                        field="model.routing")
    tables = schedule(routing, layers, config.num_experts, config.top_k, point.measurement.get("seed", 0))
    params, config = jax_twin.with_routing(params, config, tables)
    return config, params


class JaxSession:
    identical_weights = True   # converted from the torch model built from the same seed
    compile_mode = "jit-aot"   # JAX always compiles, ahead of time, whatever execution.mode says

    def __init__(self, backend: JaxBackend, built, point, prompt):
        import jax
        import jax.numpy as jnp

        from tpubench.models import jax_twin
        from tpubench.models.jax_experts import TOKAMAX, cannot_run

        self.device = backend.device
        self.config, self.params = built
        self.matmul_precision = set_matmul_precision(getattr(point, "matmul_precision", None))
        self.config, self.params = _routed(self.config, self.params, point)
        self.config = _with_experts(self.config, point, backend.platform())
        config = self.config
        self.experts_kernel = _experts_kernel(config)   # the result's moe.kernel (Unavailable: skipped)
        b, i, o = point.batch_size, point.input_length, point.output_length
        self._prompt, self._steps = prompt, o
        dtype = jnp.dtype(point.dtype)
        self.ids = jax.device_put(jnp.asarray(prompt, jnp.int32))
        self.positions = [jax.device_put(jnp.int32(i + s)) for s in range(o)]
        self._new_cache = jax.jit(lambda: jax_twin.init_cache(config, b, i + o, dtype))

        def prefill(params, ids, cache):
            logits, cache = jax_twin.prefill(params, config, ids, cache)
            return jnp.argmax(logits, -1).astype(jnp.int32), logits, cache

        def decode(params, token, position, cache):
            logits, cache = jax_twin.decode_step(params, config, token, position, cache)
            return jnp.argmax(logits, -1).astype(jnp.int32), logits, cache

        self.cache = self._new_cache()
        token = jnp.zeros((b,), jnp.int32)
        # Ahead-of-time: compile time is measured here, apart from every timed call.
        t = time.perf_counter()
        try:
            self._prefill = jax.jit(prefill, donate_argnums=(2,)).lower(self.params, self.ids, self.cache).compile()
            t_mid = time.perf_counter()
            self._decode = jax.jit(decode, donate_argnums=(3,)).lower(self.params, token, self.positions[0],
                                                                      self.cache).compile()
        except NotImplementedError as exc:   # Tokamax refusing its kernel here: a skip, never a fallback
            if config.moe_decode != TOKAMAX:
                raise
            raise cannot_run(config.tokamax_implementation, backend.platform(), exc) from None
        self.aot_compile = {"prefill_compile_s": t_mid - t, "decode_compile_s": time.perf_counter() - t_mid}
        self.compile_diagnostics = lambda: ({"jax_moe_decode": config.moe_decode, "jax_moe_prefill": config.moe_prefill}
                                            if any(config.moe_layers) else {})
        self.last_logits = None
        self._last = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def reset(self) -> None:
        import jax

        # The cache is donated to each step, so a fresh zeroed one is made, and waited for: the
        # clock starts right after reset, and zeroing still queued would be charged to prefill.
        self.cache = jax.block_until_ready(self._new_cache())

    def prefill(self):
        token, self.last_logits, self.cache = self._prefill(self.params, self.ids, self.cache)
        self._last = token
        return token

    def decode(self, tokens, step: int):
        token, self.last_logits, self.cache = self._decode(self.params, tokens, self.positions[step], self.cache)
        self._last = token
        return token

    def expert_routes(self, run) -> tuple[list, int] | None:
        """(the experts chosen at every step of one iteration, the experts per layer), or None for a
        dense model: from a separately compiled pass that also returns them (`run` is not needed)."""
        from tpubench.models import jax_twin

        if not any(self.config.moe_layers):
            return None
        return jax_twin.route_trace(self.params, self.config, self._prompt, self._steps), self.config.num_experts

    def fence(self) -> None:
        import jax

        # The token and the updated cache come out of the same executable: waiting for one suffices.
        jax.block_until_ready(self._last)

    def compile_count(self) -> int:
        return _compiles["count"]

    def reset_peak_memory(self) -> None:
        pass  # XLA offers no reset; peak_bytes_in_use is the process's peak

    def peak_memory_bytes(self) -> int | None:
        import jax

        stats = jax.devices()[0].memory_stats() or {}
        if "peak_bytes_in_use" in stats:
            return int(stats["peak_bytes_in_use"])
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024

    def tokens_to_host(self, tokens) -> list[list[int]]:
        import numpy as np

        return np.stack([np.asarray(t) for t in tokens], axis=1).tolist()

    def logits_to_host(self, logits):
        import numpy as np

        return np.asarray(logits, dtype=np.float32)

    def on_requested_device(self) -> bool:
        return True
