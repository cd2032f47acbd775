"""Backends: one for every torch device (cpu, cuda, tpu, neuron, xla, mps) and one for JAX.

A plain registry typed by a Protocol: `get_backend("torch", "cuda")` or `get_backend("jax")`.
Nothing here imports torch or jax at module level; `availability()` imports lazily.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from tpubench.errors import UserError

TORCH_DEVICES = ("cpu", "cuda", "tpu", "neuron", "xla", "mps")
ACCELERATOR_DEVICES = ("cuda", "tpu", "neuron", "xla", "mps")


@dataclass(frozen=True)
class Availability:
    backend: str
    device: str
    available: bool
    detail: str          # device name and count when available, else why not (and how to fix)


class Session(Protocol):
    """A model built for one run point on one device, ready to prefill and decode."""

    device: str

    identical_weights: bool                               # weights equal on every device (from the seed)
    last_logits: Any                                      # logits [B, V] of the latest step

    def reset(self) -> None: ...                          # empty the static KV cache
    def prefill(self) -> Any: ...                         # the prompt; returns next tokens [B] (on device)
    def decode(self, tokens: Any, step: int) -> Any: ...  # one token for each sequence
    def fence(self) -> None: ...                          # wait for all queued device work
    def compile_count(self) -> int: ...                   # graphs compiled so far
    def peak_memory_bytes(self) -> int | None: ...
    def reset_peak_memory(self) -> None: ...
    def tokens_to_host(self, tokens: list) -> list[list[int]]: ...   # [B][steps]
    def logits_to_host(self, logits: Any) -> Any: ...                 # numpy float32
    def on_requested_device(self) -> bool: ...


class Backend(Protocol):
    name: str
    device: str

    def availability(self) -> Availability: ...
    def environment(self) -> dict[str, Any]: ...
    def estimate_memory(self, point) -> tuple[int, int | None]: ...   # (needed, available) bytes
    def build(self, point) -> Any: ...                                  # the model, reused across shapes
    def session(self, built: Any, point, prompt) -> Session: ...


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


def all_availability() -> list[Availability]:
    rows = [get_backend("torch", d).availability() for d in TORCH_DEVICES]
    rows.append(get_backend("jax").availability())
    return rows


def require_available(backend: Backend) -> None:
    """Asking for an absent device is an error, never a silent CPU run."""
    info = backend.availability()
    if not info.available:
        raise UserError(f"{info.backend}:{info.device} is not available here: {info.detail}", field="--device")
