"""One backend for every torch device: cpu, cuda, tpu (TorchTPU), neuron (TorchNeuron), xla, mps.

Device-specific code is kept to what truly differs: how to detect the device, the fence, the
torch.compile backend name, memory reporting and compile counting. Everything else goes through
`torch.accelerator.*`, because TorchTPU makes `torch.tpu.synchronize()` raise on torch >= 2.11.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import re
import resource
import warnings
from typing import Any

from tpubench.backends.base import Availability
from tpubench.errors import UserError
from tpubench.hardware.environment import cpu_model_name, device_chips
from tpubench.hardware.host_accelerators import ec2_instance_type
from tpubench.models.hub_kernels import ARM as HUB_KERNELS_ARM
from tpubench.models.hub_kernels import kernel_record
from tpubench.models.torch_models import generate_decode_note
from tpubench.models.torch_routing import install_routing, model_experts
from tpubench.workload_spec.sections import HF_GENERATE

# Which package provides each out-of-tree device, and how to get it.
_PACKAGES = {
    "tpu": ("torch_tpu", "pip install 'tpubench[tpu]' (torch-tpu, with libtpu, on a TPU VM)"),
    "neuron": ("torch_neuronx", "pip install 'tpubench[neuron]' --extra-index-url https://pip.repos.neuron.amazonaws.com"),
    "xla": ("torch_xla", "in an environment of its own: pip install torch==2.9.0 torch-xla==2.9.0, then "
                         "pip install --no-deps tpubench (docs/measurement.md#accelerator-packages)"),
}
# torch.distributed backends per device (docs/multi-chip.md, with sources and assumptions).
_PROCESS_GROUP_BACKENDS = {"cpu": "gloo", "cuda": "nccl", "mps": "gloo", "xla": "xla", "tpu": "tpu_dist",
                           "neuron": "neuron"}
# How sure we are of each (kept in every multi-chip result's environment).
_PROCESS_GROUP_SOURCES = {
    "cpu": "tested by tpubench (gloo, one process per rank)",
    "cuda": "PyTorch and transformers 5.24 docs (nccl, one GPU per rank); not yet run by tpubench on GPUs",
    "tpu": "assumption from Google's torch_tpu tests and transformers 5.24's backend map (tpu_dist, one chip "
           "per process via TPU_VISIBLE_CHIPS; TorchTPU's launch environment must be set); not run by tpubench",
    "neuron": "assumption from AWS's TorchNeuron torch.distributed guide (backend neuron); not run by tpubench",
    "xla": "pytorch/xla README (xla backend, init_method xla://); not run by tpubench",
    "mps": "assumption (gloo); not run by tpubench",
}
_COMPILE_BACKENDS = {"cpu": "inductor", "cuda": "inductor", "mps": "inductor", "tpu": "tpu",
                     "neuron": "neuron", "xla": "openxla"}
# TorchTPU's eager modes beside its default strict asynchronous eager (execution.mode), read from
# the environment once, when torch loads TorchTPU, so set in a fresh process's environment. The
# names are the ones the released torch-tpu 0.2.0 wheel reads (in every one of its torch 2.11-2.15
# builds): with TORCH_TPU_DEFER_AND_FUSE=1 `torch.tpu.eager_mode` is DEFER_AND_FUSE and with
# TORCH_TPU_LAUNCH_BLOCKING=1 DEFER_NEVER_AND_LAUNCH_BLOCKING, even on a host without a TPU; the
# unprefixed TPU_DEFER_AND_FUSE / TPU_LAUNCH_BLOCKING of older torch_tpu sources and guides change
# nothing there (tests/test_accelerator_packages.py checks this against the installed wheel).
EAGER_MODE_ENVIRONMENT = {
    "eager_fused": {"TORCH_TPU_DEFER_AND_FUSE": "1"},
    "eager_sync": {"TORCH_TPU_LAUNCH_BLOCKING": "1"},
}
# The eager mode TorchTPU must report (`torch.tpu.eager_mode`'s name) in each execution mode that
# runs eagerly: a session checks it, so a renamed variable fails the point instead of silently
# measuring the default mode under another mode's name.
TORCH_TPU_EAGER_MODES = {"eager": "DEFER_NEVER", "eager_fused": "DEFER_AND_FUSE",
                         "eager_sync": "DEFER_NEVER_AND_LAUNCH_BLOCKING"}
# The eager modes, per device, in which ops are deferred until a value is read (the fence must then
# read one back): TorchTPU's DEFER_AND_FUSE ("tensors run only when materialised: .cpu(), .item()",
# torch-tpu 0.2.0, torch_tpu/_internal/sync/__init__.py).
DEFERRED_EAGER_MODES = {"tpu": ("DEFER_AND_FUSE",)}
# Where each device's fence, peak memory, compile backend, process group and profiler come from,
# read from the released packages (docs/measurement.md#device-sources cites each; kept in every
# result's environment as `device_sources`).
DEVICE_SOURCES = {
    "cuda": {"fence": "torch.accelerator.synchronize() (cudaDeviceSynchronize)",
             "memory": "torch.accelerator.memory.max_memory_allocated() (CUDA caching allocator)",
             "profiler": "torch.profiler, ProfilerActivity.CUDA (CUPTI)"},
    "tpu": {"fence": "torch.accelerator.synchronize(); in DEFER_AND_FUSE first a scalar reduced from the latest "
                     "output read back with .item() (torch-tpu 0.2.0: synchronize waits for pending d2h copies)",
            "memory": "torch.accelerator.memory.max_memory_allocated() (torch-tpu 0.2.0 TpuAllocator::getDeviceStats); "
                      "0 is reported as unknown; torch.tpu._hbm_usage_summary() is the compilation cache's HBM",
            "profiler": "torch.profiler with ProfilerActivity.PrivateUse1 and torch.tpu.profiler.TpuProfilerConfig "
                        "(run_dir: an XPlane trace for XProf), torch-tpu 0.2.0"},
    "neuron": {"fence": "torch.accelerator.synchronize() (torch.neuron.synchronize)",
               "memory": "torch.neuron.synchronize(), then torch_neuronx.max_memory_allocated() where present, else "
                         "torch.accelerator.memory.max_memory_allocated(); 0 is reported as unknown",
               "profiler": "torch.profiler with ProfilerActivity.PrivateUse1 and a NeuronConfig (ProfileMode.RUNTIME; "
                           "ProfileMode.DEVICE left out: it reserves about 5 GB of HBM on Trn2)"},
    "xla": {"fence": "torch_xla.sync(wait=True)", "memory": "not read (None)",
            "profiler": "torch.profiler, host view (torch_xla.debug.profiler for XProf traces)"},
    "cpu": {"fence": "none: eager CPU kernels finish before the call returns",
            "memory": "the process's resident peak (getrusage ru_maxrss)", "profiler": "torch.profiler, CPU"},
    "mps": {"fence": "torch.accelerator.synchronize()", "memory": "torch.accelerator.memory.max_memory_allocated()",
            "profiler": "torch.profiler, host view"},
}
# Below this many weight bytes a model is built on the CPU from the seed and then moved, so every
# device gets bit-identical weights and numerics fingerprints are comparable across devices.
_HOST_INIT_LIMIT_BYTES = 2 << 30


class TorchBackend:
    name = "torch"
    runs_torch_modules = True
    multi_chip = True
    profiler_unavailable = None

    def __init__(self, device: str):
        self.device = device

    def on_accelerator(self) -> bool:
        # The legacy XLA path with PJRT_DEVICE=CPU compiles for the host's CPU (XLA:CPU).
        if self.device == "xla":
            return os.environ.get("PJRT_DEVICE", "").upper() not in ("", "CPU")
        return self.device != "cpu"

    def energy_device(self) -> str:
        # The legacy PyTorch/XLA path on a TPU: libtpu's duty cycle applies the same.
        if self.device == "xla" and os.environ.get("PJRT_DEVICE", "").upper() == "TPU":
            return "tpu"
        return self.device

    def uses_host_memory(self) -> bool:
        return self.device == "cpu"

    def placed_on_device(self, device_types) -> bool:
        """On an accelerator, work that ran on the CPU (a torch device type "cpu") did not run on
        the device; on the CPU everything did."""
        return self.device == "cpu" or all(t != "cpu" for t in device_types)

    # ------------------------------------------------------------------ detection
    def availability(self) -> Availability:
        ok, detail = self._detect()
        return Availability("torch", self.device, ok, detail)

    def _detect(self) -> tuple[bool, str]:
        if importlib.util.find_spec("torch") is None:
            return False, "torch is not installed: pip install tpubench"
        pkg = _PACKAGES.get(self.device)
        if pkg and importlib.util.find_spec(pkg[0]) is None:
            return False, f"package {pkg[0]} is missing: {pkg[1]}"
        import torch

        if self.device == "cpu":
            return True, f"{cpu_model_name()}, {torch.get_num_threads()} threads"
        if self.device == "mps":
            ok = torch.backends.mps.is_available()
            return ok, "Apple GPU" if ok else "no Apple GPU (MPS) on this machine"
        if self.device == "xla":
            try:
                import torch_xla
                import torch_xla.runtime as xr

                return True, f"{xr.device_type()} via torch_xla {torch_xla.__version__}"
            except ImportError as exc:
                # Each torch_xla release is built against the torch of its own version, which its
                # wheel does not require: pip puts torch_xla 2.9 beside torch 2.13 without a word.
                return False, (f"torch_xla {_dist_version('torch-xla')} does not load with torch {torch.__version__} "
                               f"({str(exc).splitlines()[0][:120]}): it needs the torch of its own version")
            except Exception as exc:  # torch_xla raises many kinds when no PJRT device is present
                return False, f"torch_xla found no device ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
        acc = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
        if acc is None or acc.type != self.device:
            found = f"; this machine's accelerator is {acc.type}" if acc is not None else ""
            if self.device == "cuda":
                built = torch.version.cuda or "none (a CPU-only torch wheel)"
                return False, f"no CUDA device (torch {torch.__version__}, CUDA build: {built}){found}"
            return False, f"{pkg[0] if pkg else 'torch'} is installed but no {self.device} device is present{found}"
        n = torch.accelerator.device_count()
        return True, f"{self.accelerator_name()} x{n}"

    def accelerator_name(self) -> str:
        import torch

        if self.device == "cpu":
            return cpu_model_name()
        mod = getattr(torch, self.device, None)
        try:
            return str(mod.get_device_name(0))
        except Exception:  # not every out-of-tree device module offers get_device_name
            pass
        # TPU VMs name their slice type (e.g. v6e-8, v5litepod-4): enough to price and roofline it.
        tpu_type = os.environ.get("TPU_ACCELERATOR_TYPE", "") if self.device in ("tpu", "xla") else ""
        if tpu_type:
            return f"TPU {tpu_type.split('-')[0]}"
        if self.device == "xla" and importlib.util.find_spec("torch_xla") is not None:
            # The PJRT client torch_xla runs on (PJRT_DEVICE): XLA:CPU on a host without a chip,
            # which no price row or roofline may take for an accelerator.
            import torch_xla.runtime as xr

            return f"XLA:{xr.device_type()}"
        # An EC2 Nitro instance names its type (trn1.32xlarge, trn2.48xlarge) in DMI: enough to
        # tell Trainium from Trainium2, which hold different numbers of NeuronCores per chip.
        instance = ec2_instance_type() if self.device == "neuron" else ""
        if instance:
            return f"AWS {instance}"
        return self.device.upper()

    def torch_device(self):
        import torch

        if self.device == "xla":
            import torch_xla

            return torch_xla.device()
        return torch.device(self.device)

    # ------------------------------------------------------------------ provenance
    def environment(self) -> dict[str, Any]:
        import torch

        name = self.accelerator_name()
        env: dict[str, Any] = {
            "torch": torch.__version__,
            "accelerator_name": name,
            "accelerator_count": 1 if self.device == "cpu" else torch.accelerator.device_count() if self.device != "xla" else 1,
            # Per-chip figures divide by the chips used: one device's worth (environment.device_chips).
            **device_chips(self.device, 1, name),
            "torch_threads": torch.get_num_threads(),
        }
        if self.device == "cuda":
            env["cuda"] = torch.version.cuda
            props = torch.cuda.get_device_properties(0)
            env["device_memory_bytes"] = int(props.total_memory)
            env["driver"] = _nvidia_driver()
        for dist in ("torch-tpu", "torch-neuronx", "torch-xla", "libtpu"):
            version = _dist_version(dist)
            if version:
                env[dist.replace("-", "_")] = version
        env["device_sources"] = {**DEVICE_SOURCES.get(self.device, {}), "compile_backend": _COMPILE_BACKENDS[self.device],
                                 "process_group": _PROCESS_GROUP_BACKENDS[self.device]}
        return env

    # ------------------------------------------------------------------ execution modes
    def check_execution_mode(self, mode: str) -> None:
        """TorchTPU's eager modes exist on a TPU only: refused anywhere else, before anything runs."""
        if mode in EAGER_MODE_ENVIRONMENT and self.device != "tpu":
            raise UserError(f"execution mode {mode} is a TorchTPU eager mode (--device tpu); this run's device is "
                            f"{self.device}: use eager or compile", field="execution.mode")

    def process_environment(self, point) -> dict[str, str]:
        """Variables a point's process needs set before torch is imported (a fresh process runs it
        when this is not empty)."""
        return dict(EAGER_MODE_ENVIRONMENT.get(point.execution_mode, {}))

    # ------------------------------------------------------------------ memory estimate
    def estimate_memory(self, point) -> tuple[int, int | None]:
        from tpubench.models.torch_models import estimate_bytes

        needed = estimate_bytes(point)
        return needed, self.available_memory()

    def available_memory(self) -> int | None:
        if self.device == "cpu":
            import psutil

            return int(psutil.virtual_memory().available)
        if self.device in ("xla", "mps"):
            return None
        import torch

        try:
            free, _total = torch.accelerator.get_memory_info(0)
            return int(free)
        except Exception:  # not every device reports it; then the estimate is only shown
            return None

    # ------------------------------------------------------------------ session
    def build(self, point) -> "TorchModel":
        """Build (and move) the model once; sweep points that differ only in shapes reuse it."""
        from tpubench.models.torch_models import build_model, weight_bytes

        dev = self.torch_device()
        on_host = self.device == "cpu" or weight_bytes(point) <= _HOST_INIT_LIMIT_BYTES
        model = build_model(point, init_device="cpu" if on_host else dev, device=self.device)
        if on_host and self.device != "cpu":
            model = model.to(dev)
        quality = None
        if point.quantization != "none":   # measure.check refused it where it cannot run here
            from tpubench.models.quantization import quantize_with_gate

            quality = quantize_with_gate(model, point, dev)
        return TorchModel(model, dev, identical_weights=on_host, quality=quality)

    def quantization_refusal(self, point) -> str | None:
        """Why this device cannot measure the point's quantisation (None: it can)."""
        from tpubench.models.quantization import refusal

        if point.quantization != "none" and point.world_size > 1:
            return f"quantization {point.quantization} on a sharded layout is not measured yet (one chip only)"
        return refusal(point.quantization, self.device)

    def session(self, built: "TorchModel", point, prompt) -> "TorchSession":
        import torch

        ids = torch.as_tensor(prompt, dtype=torch.long, device=built.device)
        return TorchSession(self, built, point, ids)

    # ------------------------------------------------------------------ multi-chip (one process per chip)
    def enter_rank(self, threads_per_rank: int) -> None:
        """This process is one rank of a world tpubench started: what must be set before torch
        loads the device's package, and a CPU rank's share of the host's threads."""
        if self.device == "tpu":
            # Before torch loads TorchTPU: one chip per process (the rest of TorchTPU's multi-process
            # environment, TORCH_TPU_TOPOLOGY and friends, comes from its launch wrapper: see docs/multi-chip.md).
            os.environ.setdefault("TPU_VISIBLE_CHIPS", os.environ.get("LOCAL_RANK", "0"))
        if self.device == "cpu":
            import torch

            torch.set_num_threads(threads_per_rank)

    def process_group_backend(self) -> str:
        return _PROCESS_GROUP_BACKENDS[self.device]

    def process_group_source(self) -> str:
        return _PROCESS_GROUP_SOURCES[self.device]

    def bind_rank(self, local_rank: int) -> None:
        """Give this process its own chip (the CPU has one address space: nothing to bind)."""
        if self.device in ("cpu", "xla", "tpu"):
            # torch_xla's PJRT runtime assigns the chip from the launcher's environment; TorchTPU
            # shows each process one chip, always at index 0 (TPU_VISIBLE_CHIPS, set per rank).
            return
        import torch

        torch.accelerator.set_device_index(local_rank)

    def init_process_group(self, timeout_s: float) -> None:
        from datetime import timedelta

        import torch.distributed as dist

        kwargs: dict[str, Any] = {"backend": self.process_group_backend(), "timeout": timedelta(seconds=timeout_s)}
        if self.device == "xla":
            import torch_xla.distributed.xla_backend  # noqa: F401  (registers "xla")

            kwargs["init_method"] = "xla://"
        elif self.device in ("tpu", "neuron"):
            importlib.import_module(_PACKAGES[self.device][0])   # registers the device's backend
        dist.init_process_group(**kwargs)

    def build_sharded(self, point, checkpoint: str) -> "TorchModel":
        from tpubench.models.torch_models import load_sharded

        model = load_sharded(point, checkpoint)
        device = next(model.parameters()).device
        return TorchModel(model, device, identical_weights=point.weights == "random")


class TorchModel:
    def __init__(self, model, device, *, identical_weights: bool, quality: dict | None = None):
        self.model = model
        self.device = device
        # A quantised model's gate figures against its unquantised self (models/quality_gate.py).
        self.quality = quality
        # True when weights came from the seed on the host, so they match on every device.
        self.identical_weights = identical_weights


class TorchDevice:
    """What measuring needs of one torch device, whatever runs on it (generate's session, a
    training step): the fence, compile counters, peak memory, the CPU-fallback watch and the
    torch.compile backend. One copy, so every scenario fences and counts alike."""

    def __init__(self, device: str):
        self.device = device
        # In a deferred eager mode (TorchTPU's DEFER_AND_FUSE) work runs only when a value that
        # depends on it is read: the fence then reads back the latest output of the timed work.
        self.deferred = deferred_eager_mode(device) is not None
        self._fence_value = None

    def depends_on(self, value) -> None:
        """The latest output of the work being timed: what the fence reads back in a deferred mode."""
        self._fence_value = value

    def fence(self) -> None:
        """Wait for all queued device work (DEVICE_SOURCES says, per device, what waits)."""
        if self.device == "cpu":
            # Eager CPU kernels (intra-op threads, DDP's and FSDP's waits included) finish before
            # the call returns.
            return
        if self.device == "xla":
            import torch_xla

            torch_xla.sync(wait=True)   # cuts the lazy graph, runs it and waits: a materialising fence
            return
        if self.deferred and self._fence_value is not None:
            # torch-tpu 0.2.0: synchronize "waits for all pending d2h copies"; deferred ops run
            # when a value is read (.item(), .cpu()): read one that depends on the timed work.
            materialise(self._fence_value)
        _synchronize()

    def read_back(self) -> bool:
        """Read the latest output of the timed work to the host (a scalar reduced from it); False
        where there is nothing to read or nothing to check (the CPU computes before returning).
        measure/fence.py times this right after a fence: a fence that waited leaves nothing to run.
        Not on xla either: its fence cuts and runs the lazy graph itself, and a reduction read after
        it would be a new graph, compiled then (counted as a recompile, timed as a late fence)."""
        if self.device in ("cpu", "xla") or self._fence_value is None:
            return False
        materialise(self._fence_value)
        return True

    def compile_count(self) -> int:
        """Graphs compiled in this process so far: dynamo's, plus torch_xla's own compilations of
        its lazy graphs (which dynamo never sees) on an XLA device."""
        import torch._dynamo.utils as dynamo_utils

        count = int(dynamo_utils.counters["stats"].get("unique_graphs", 0))
        if self.device == "xla":
            import torch_xla.debug.metrics as met

            data = met.metric_data("CompileTime")
            count += int(data[0]) if data else 0
        return count

    def compile_fallbacks(self) -> dict[str, int | float]:
        """Graph breaks and recompile-limit hits in this process so far (dynamo's counters), and on
        xla torch_xla's lazy-graph counters: a measurement reports how much they grew while it ran."""
        import torch._dynamo.utils as dynamo_utils

        counters = dynamo_utils.counters
        limit_hits = sum(n for msg, n in counters["unimplemented"].items() if "recompile limit" in msg.lower())
        out: dict[str, int | float] = {"graph_breaks": int(sum(counters["graph_break"].values())),
                                       "recompile_limit_hits": int(limit_hits)}
        if self.device == "xla":
            out.update(_xla_graph_counters())
        return out

    def inference_context(self):
        """No autograd while measuring: torch.inference_mode, except on xla, where torch_xla 2.9
        fails the first view of a weight made outside it ("Cannot set version_counter for
        inference tensor", seen in tpubench's XLA-on-CPU run), so torch.no_grad there."""
        import torch

        return torch.no_grad() if self.device == "xla" else torch.inference_mode()

    def reset_peak_memory(self) -> None:
        if self.device not in ("cpu", "xla"):
            import torch

            torch.accelerator.memory.reset_peak_memory_stats()

    def peak_memory_bytes(self) -> int | None:
        """Peak bytes since reset_peak_memory (DEVICE_SOURCES[device]["memory"] says how it is read),
        or None where the device cannot say: a reading of 0 is never reported as a measurement."""
        if self.device == "cpu":
            # Linux reports ru_maxrss in KiB: the process's resident peak since it started.
            return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
        if self.device == "xla":
            return None
        import torch

        if self.device == "neuron":
            # TorchNeuron's allocator is asynchronous: its statistics count only completed work
            # until torch.neuron.synchronize() (AWS docs, "How to profile memory usage in torch-neuronx").
            _synchronize()
            own = getattr(importlib.import_module("torch_neuronx"), "max_memory_allocated", None)
            if own is not None:
                return int(own()) or None
        return int(torch.accelerator.memory.max_memory_allocated()) or None

    def watch_fallbacks(self) -> FallbackWatch:
        """A context manager collecting the ops that ran on the CPU instead of this device."""
        return FallbackWatch(self.device)

    def compile_backend(self, options: dict) -> tuple[str, dict]:
        """(torch.compile backend, the other options) for a point's compile options: this
        device's own backend unless the workload names one."""
        options = dict(options)
        return options.pop("backend", _COMPILE_BACKENDS[self.device]), options

    def release_cached_memory(self) -> None:
        """Hand memory the allocator keeps cached back to the device (after an out-of-memory error
        or a released model), where the device has such a cache."""
        if self.device not in ("cpu", "xla"):
            import torch

            with contextlib.suppress(Exception):
                torch.accelerator.memory.empty_cache()


def experts_in_use(model) -> dict[str, str | None]:
    """The experts implementation of every (sub)config of the model (transformers' own view)."""
    getter = getattr(model, "get_experts_implementation", None)
    try:
        return dict(getter()) if getter is not None and model_experts(model) else {}
    except Exception:  # noqa: BLE001 - a model without switchable experts has nothing to report
        return {}


class TorchSession(TorchDevice):
    """The model, a static KV cache and pre-built position tensors for one run point, on its
    device (TorchDevice: fence, counters, memory)."""

    def __init__(self, backend: TorchBackend, built: TorchModel, point, prompt_ids):
        import torch
        from transformers import StaticCache

        super().__init__(backend.device)
        model = built.model
        self.model = model
        self.identical_weights = built.identical_weights
        self.prompt_ids = prompt_ids
        dev = prompt_ids.device
        length = point.input_length + point.output_length
        self.cache = StaticCache(config=model.config, max_cache_len=length)
        # Positions are made before timing so no host-to-device copy sits inside a timed step.
        # transformers 5.24's static cache tracks its own write position and ignores
        # cache_position; earlier 5.x releases need it, so it is passed to both.
        self.prefill_positions = torch.arange(point.input_length, device=dev)
        self.decode_positions = [torch.tensor([point.input_length + s], device=dev) for s in range(point.output_length)]
        self.forward = model.forward
        missing = {k: v for k, v in EAGER_MODE_ENVIRONMENT.get(point.execution_mode, {}).items()
                   if os.environ.get(k) != v}
        if missing:   # the mode is set at torch's import: a process started without it cannot switch
            raise RuntimeError(f"execution mode {point.execution_mode} needs {missing} set before torch is imported")
        self.torch_tpu_eager_mode = torch_tpu_eager_mode() if self.device == "tpu" else None
        wanted = TORCH_TPU_EAGER_MODES.get(point.execution_mode) if self.device == "tpu" else None
        # A TorchTPU that cannot say its mode (None) still runs plain eager; the other modes must be seen.
        unseen = self.torch_tpu_eager_mode is None and point.execution_mode not in EAGER_MODE_ENVIRONMENT
        if wanted and not unseen and self.torch_tpu_eager_mode != wanted:
            raise RuntimeError(f"TorchTPU runs in eager mode {self.torch_tpu_eager_mode}; execution mode "
                               f"{point.execution_mode} needs {wanted} (torch-tpu {_dist_version('torch-tpu')} did not "
                               f"take it from {EAGER_MODE_ENVIRONMENT.get(point.execution_mode, {})})")
        # transformers' generate() as the decode loop (scenario.decode_loop hf_generate): the
        # baseline a generate() user gets, with whatever generate() itself switches for decode.
        hf_loop = point.params.get("decode_loop") == HF_GENERATE
        experts = experts_in_use(model)
        self.whole_iteration = self._generate_iteration if hf_loop else None
        self.generate_note = None if hf_loop else generate_decode_note(self.device, experts)
        self.experts_kernel = kernel_record(experts.get("")) if point.experts_implementation == HUB_KERNELS_ARM else None
        # The point's routing (models/routing.py) as hooks on the routers, before any compile;
        # removed when the session closes (the next point may reuse the model).
        self.routing = install_routing(model, getattr(point, "routing", "natural"), point.family,
                                       point.measurement.get("seed", 0))
        # Before torch.compile: inductor reads the precision when it compiles.
        self.matmul_precision = set_matmul_precision(self.device, getattr(point, "matmul_precision", None))
        if point.execution_mode == "compile":
            # Start from empty dynamo caches: otherwise graphs (and dynamic-shape decisions) made
            # for an earlier point of the sweep would change what this point measures.
            torch._dynamo.reset()
            backend_name, options = self.compile_backend(point.compile_options)
            self.forward = torch.compile(model.forward, backend=backend_name, **options)
        self._dynamo_start = self.compile_fallbacks()
        self.last_logits = None
        self._inference = self.inference_context()

    def __enter__(self):
        self._inference.__enter__()
        return self

    def __exit__(self, *exc):
        if self.routing is not None:
            self.routing.remove()   # the model is reused by the next point, with its own routing
        return self._inference.__exit__(*exc)

    def reset(self) -> None:
        self.cache.reset()
        if self.routing is not None:
            self.routing.reset()   # schedules restart with the stream, as the cache does

    def expert_routes(self, run) -> tuple[list, int] | None:
        """(the experts every router chose during `run()`, one iteration; the experts per layer),
        or None for a dense model. Run on the eager forward: recording hooks on a compiled one
        would recompile it; the routing (hooks, schedule) is the same."""
        from tpubench.models.torch_routing import model_experts, recorded_routes

        shape = model_experts(self.model)
        if shape is None:
            return None
        forward, self.forward = self.forward, self.model.forward
        try:
            with recorded_routes(self.model) as steps:
                run()
        finally:
            self.forward = forward
        return steps, shape[1]

    def prefill(self):
        out = self.forward(input_ids=self.prompt_ids, cache=self.cache, cache_position=self.prefill_positions,
                           logits_to_keep=1, use_cache=True)
        self.last_logits = out.logits[:, -1]
        self.depends_on(self.last_logits)   # every layer and cache write of the step feeds it
        return self.last_logits.argmax(-1)

    def decode(self, tokens, step: int):
        out = self.forward(input_ids=tokens[:, None], cache=self.cache, cache_position=self.decode_positions[step],
                           logits_to_keep=1, use_cache=True)
        self.last_logits = out.logits[:, -1]
        self.depends_on(self.last_logits)
        return self.last_logits.argmax(-1)

    def _generate_iteration(self, output_length: int, elapsed, capture_first_logits: bool):
        """One batch through `model.generate()` as its users call it: greedy, its own cache and
        loop, exactly `output_length` tokens. Each token is stamped when generate() hands it to
        a streamer, which it does after copying the token to the host, so the stamp follows the
        device's work (the prompt, handed over first, is not a token). -> (stamps, tokens,
        step-1 logits or None)."""
        import torch
        from transformers.generation.streamers import BaseStreamer

        stamps: list[float] = []

        class Stamps(BaseStreamer):
            prompt_seen = False

            def put(self, value):
                if self.prompt_seen:
                    stamps.append(elapsed())
                self.prompt_seen = True

            def end(self):
                pass

        ids = self.prompt_ids
        out = self.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=output_length,
                                  min_new_tokens=output_length, do_sample=False, streamer=Stamps(),
                                  pad_token_id=0, return_dict_in_generate=True, output_logits=capture_first_logits)
        new = out.sequences[:, ids.shape[1]:]
        tokens = [new[:, s] for s in range(new.shape[1])]
        first_logits = out.logits[0] if capture_first_logits else None
        if capture_first_logits:
            self.last_logits = first_logits
        return stamps, tokens, first_logits

    def tokens_to_host(self, tokens) -> list[list[int]]:
        import torch

        return torch.stack(tokens, dim=1).cpu().tolist()

    def logits_to_host(self, logits):
        return logits.float().cpu().numpy()

    def compile_diagnostics(self) -> dict:
        """Graph breaks and recompile-limit hits since this session began: both leave part of the
        model running eager under torch.compile, which a 'compile' result must not hide."""
        now = self.compile_fallbacks()
        out: dict[str, Any] = {k: now[k] - self._dynamo_start[k] for k in now}
        if self.torch_tpu_eager_mode is not None:
            out["torch_tpu_eager_mode"] = self.torch_tpu_eager_mode
            # torch-tpu 0.2.0: "the total HBM usage of the compilation cache" (not peak memory).
            import torch

            with contextlib.suppress(Exception):
                out["torch_tpu_compilation_cache_hbm"] = str(torch.tpu._hbm_usage_summary())
        return out

    def on_requested_device(self) -> bool:
        """False when parameters silently stayed on the CPU (a whole-model CPU fallback)."""
        param = next(self.model.parameters())
        return self.device == "cpu" or param.device.type != "cpu"


# tpubench's precision level -> torch_xla's (torch_xla.backends.set_mat_mul_precision, 2.8+:
# "default" is one bfloat16 pass, "high" three, "highest" six, as torch's "medium"/"high"/"highest").
_XLA_MATMUL_PRECISION = {"highest": "highest", "high": "high", "medium": "default"}


def set_matmul_precision(device: str, precision: str | None) -> dict:
    """Set how float32 matmuls compute for one point (before anything is compiled for it) and
    return what the frameworks report back, for the result's environment."""
    import torch

    precision = precision or "highest"
    torch.set_float32_matmul_precision(precision)
    applied: dict[str, Any] = {"torch.get_float32_matmul_precision": torch.get_float32_matmul_precision()}
    if device == "xla":
        try:
            import torch_xla.backends as xla_backends

            xla_backends.set_mat_mul_precision(_XLA_MATMUL_PRECISION[precision])
            applied["torch_xla.backends.get_mat_mul_precision"] = xla_backends.get_mat_mul_precision()
        except (ImportError, AttributeError):   # torch_xla < 2.8 has no switch: XLA's own default runs
            applied["torch_xla.backends.get_mat_mul_precision"] = None
    return {"matmul_precision": precision, "matmul_precision_applied": applied}


# What the stacks say when an op runs on the host instead of the device: TorchTPU warns "Falling
# back to CPU for op aten::...", TorchNeuron warns or logs its CPU fallbacks, and torch_xla counts
# each op it runs on the CPU under an "aten::" counter of torch_xla.debug.metrics.
_FALLBACK_TEXT = re.compile(r"fall(?:s|ing|en)?\s*back\s+to\s+(?:the\s+)?(?:cpu|host)|cpu[\s_-]*fallback",
                            re.IGNORECASE)
_OP_NAME = re.compile(r"aten::[A-Za-z0-9_.]+")


def fallback_op(message: str) -> str | None:
    """The op a CPU-fallback message names ('aten::foo'), the whole message (shortened) when it
    names none, or None when the message is not about a CPU fallback."""
    if not _FALLBACK_TEXT.search(message):
        return None
    op = _OP_NAME.search(message)
    return op.group(0) if op else " ".join(message.split())[:120]


class FallbackWatch(logging.Handler):
    """Ops that fell back to the CPU while watched (a context manager): from the stack's warnings
    (Python warnings, where torch routes its C++ TORCH_WARN too), its log records, and torch_xla's
    `aten::` counters. Other warnings are passed on unchanged when the watch ends."""

    def __init__(self, device: str):
        super().__init__(level=logging.WARNING)
        self.device = device
        self.ops: list[str] = []
        self._warnings = warnings.catch_warnings(record=True)
        self._caught: list = []
        self._xla_before: dict[str, int] = {}

    def __enter__(self) -> "FallbackWatch":
        self._caught = self._warnings.__enter__()
        # Many stacks warn once per op and process; "always" keeps repeats from being swallowed here.
        warnings.simplefilter("always")
        logging.getLogger().addHandler(self)
        self._xla_before = _xla_fallback_counters() if self.device == "xla" else {}
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger().removeHandler(self)
        self._warnings.__exit__(*exc)
        passed_on = set()
        for caught in self._caught:
            op = fallback_op(str(caught.message))
            if op:
                self._add(op)
                continue
            where = (str(caught.message), caught.category, caught.filename, caught.lineno)
            if where not in passed_on:   # a warning repeated every step is passed on once
                passed_on.add(where)
                warnings.warn_explicit(caught.message, caught.category, caught.filename, caught.lineno)
        if self.device == "xla":
            after = _xla_fallback_counters()
            for name in sorted(after):
                if after[name] > self._xla_before.get(name, 0):
                    self._add(name)

    def emit(self, record: logging.LogRecord) -> None:
        op = fallback_op(record.getMessage())
        if op:
            self._add(op)

    def _add(self, op: str) -> None:
        if op not in self.ops:
            self.ops.append(op)


# torch_xla counts `.item()` (aten::_local_scalar_dense) among its 'aten::' fallbacks, but it computes
# nothing on the host: it reads a value there, as `.item()` does on any device (transformers' causal
# mask reads the cache position once per prefill). It is not a CPU fallback here, as on cuda or
# tpu; xla_scalar_reads counts it, since on XLA each one also cuts the lazy graph and runs it.
_XLA_HOST_READS = "aten::_local_scalar_dense"


def _xla_fallback_counters() -> dict[str, int]:
    """torch_xla's per-op CPU fallback counters (names 'aten::...'), host reads left out."""
    import torch_xla.debug.metrics as met

    return {name: int(met.counter_value(name) or 0) for name in met.counter_names()
            if name.startswith("aten::") and name != _XLA_HOST_READS}


def _xla_graph_counters() -> dict[str, int | float]:
    """torch_xla's lazy-tensor graph accounting so far (torch_xla.debug.metrics): graphs compiled
    (UncachedCompile), graphs found already compiled (CachedCompile), seconds spent compiling
    (the CompileTime metric's total), graphs run, and host reads of a device value."""
    import torch_xla.debug.metrics as met

    compile_time = met.metric_data("CompileTime")
    return {"xla_graphs_compiled": int(met.counter_value("UncachedCompile") or 0),
            "xla_graphs_cached": int(met.counter_value("CachedCompile") or 0),
            "xla_compile_time_total_s": float(compile_time[1]) / 1e9 if compile_time else 0.0,
            "xla_graph_executions": int(met.counter_value("ExecuteComputation") or 0),
            "xla_scalar_reads": int(met.counter_value(_XLA_HOST_READS) or 0)}


def deferred_eager_mode(device: str) -> str | None:
    """The deferred eager mode this process's device runs in (DEFERRED_EAGER_MODES), or None."""
    if device not in DEFERRED_EAGER_MODES:
        return None
    mode = torch_tpu_eager_mode() if device == "tpu" else None
    return mode if mode in DEFERRED_EAGER_MODES[device] else None


def materialise(value) -> float:
    """Read a scalar reduced from `value` to the host: whatever `value` depends on must run first.
    A sum, not one element: a deferring compiler may compute only the part of a graph that is read."""
    return float(value.sum().item())


def _synchronize() -> None:
    import torch

    torch.accelerator.synchronize()


def profiler_setup(device: str, run_dir) -> tuple[list, dict, str]:
    """(extra torch.profiler activities, extra profile() arguments, a note) for a device's own
    profiler (DEVICE_SOURCES[device]["profiler"]); the device trace, where one is written, goes to
    `run_dir`. Nothing extra where the device registers no profiler here."""
    import torch
    from torch.profiler import ProfilerActivity, supported_activities

    supported = supported_activities()
    if device == "cuda":
        return ([ProfilerActivity.CUDA] if torch.cuda.is_available() and ProfilerActivity.CUDA in supported else []), {}, ""
    if device not in ("tpu", "neuron") or ProfilerActivity.PrivateUse1 not in supported \
            or torch._C._get_privateuse1_backend_name() != device:
        return [], {}, ""
    if device == "tpu":
        config = getattr(getattr(getattr(torch, "tpu", None), "profiler", None), "TpuProfilerConfig", None)
        if config is None:
            return [ProfilerActivity.PrivateUse1], {}, "torch.tpu.profiler.TpuProfilerConfig not found: no XPlane trace"
        return ([ProfilerActivity.PrivateUse1], {"experimental_config": config(run_dir=str(run_dir))},
                f"TorchTPU's XPlane trace (open in XProf) in {run_dir}")
    try:   # TorchNeuron: torch.profiler with a NeuronConfig (AWS docs, "Capture PyTorch profiles with Neuron Explorer")
        neuron = importlib.import_module("torch_neuronx.profiler")
        config = neuron.NeuronConfig(modes=[neuron.ProfileMode.RUNTIME], output_dir=str(run_dir))
    except (ImportError, AttributeError, TypeError) as exc:
        return [ProfilerActivity.PrivateUse1], {}, f"no NeuronConfig ({type(exc).__name__}): the runtime's own view only"
    return ([ProfilerActivity.PrivateUse1], {"experimental_config": config},
            f"Neuron runtime trace in {run_dir}; ProfileMode.DEVICE left out (it reserves about 5 GB of HBM on Trn2)")


def torch_tpu_eager_mode() -> str | None:
    """The eager mode TorchTPU runs in (`torch.tpu.eager_mode`'s name: DEFER_NEVER,
    DEFER_AND_FUSE or DEFER_NEVER_AND_LAUNCH_BLOCKING), or None where torch_tpu is not loaded.
    It answers without a TPU, which lets a host without one check the variables tpubench sets."""
    import torch

    mode = getattr(getattr(torch, "tpu", None), "eager_mode", None)
    return getattr(mode, "name", None) if mode is not None else None


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _nvidia_driver() -> str | None:
    import shutil
    import subprocess

    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None
