"""Backends: one for every torch device (cpu, cuda, tpu, neuron, xla, mps) and one for JAX.

A plain registry typed by a Protocol: `get_backend("torch", "cuda")` or `get_backend("jax")`.
Nothing here imports torch or jax at module level; `availability()` imports lazily.
"""

from __future__ import annotations

from tpubench.backends.base import Availability, Backend, Session  # noqa: F401  (the registry's types)
from tpubench.errors import UserError

TORCH_DEVICES = ("cpu", "cuda", "tpu", "neuron", "xla", "mps")
ACCELERATOR_DEVICES = ("cuda", "tpu", "neuron", "xla", "mps")
# Never picked implicitly: the legacy XLA path and laptops are opt-in (--device).
_OPT_IN_DEVICES = ("xla", "mps")


def get_backend(backend: str, device: str | None = None) -> Backend:
    if backend == "torch":
        from tpubench.backends.torch import TorchBackend

        device = device or "cpu"
        if device not in TORCH_DEVICES:
            raise UserError(f"unknown device '{device}' (choose from {', '.join(TORCH_DEVICES)})", field="--device")
        return TorchBackend(device)
    if backend == "jax":
        from tpubench.backends.jax import JaxBackend

        return JaxBackend(device)
    raise UserError(f"unknown backend '{backend}' (choose from torch, jax)", field="--backend")


def default_device(backend: str) -> str | None:
    """The first accelerator torch can see, else cpu. JAX chooses its own default (None)."""
    if backend != "torch":
        return None
    for device in ACCELERATOR_DEVICES:
        if device not in _OPT_IN_DEVICES and get_backend("torch", device).availability().available:
            return device
    return "cpu"


def all_availability() -> list[Availability]:
    rows = [get_backend("torch", d).availability() for d in TORCH_DEVICES]
    rows.append(get_backend("jax").availability())
    return rows


def require_available(backend: Backend) -> None:
    """Asking for an absent device is an error, never a silent CPU run."""
    info = backend.availability()
    if not info.available:
        raise UserError(f"{info.backend}:{info.device} is not available here: {info.detail}", field="--device")
