"""What every backend is and gives: its Availability, the Backend and the Session it opens.

Apart from the registry (backends/__init__.py) so the backends can use these without importing
the registry that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


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
    def on_accelerator(self) -> bool: ...   # False where the work runs on the host's CPU (the small scale is then the default)
    def environment(self) -> dict[str, Any]: ...
    def estimate_memory(self, point) -> tuple[int, int | None]: ...   # (needed, available) bytes
    def build(self, point) -> Any: ...                                  # the model, reused across shapes
    def session(self, built: Any, point, prompt) -> Session: ...
