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
    # Optional (measure/fence.py reads it where present): read the latest output of the timed work
    # back to the host right after a fence; False where there is nothing to check (the CPU).
    # def read_back(self) -> bool: ...
    def compile_count(self) -> int: ...                   # graphs compiled so far
    def peak_memory_bytes(self) -> int | None: ...
    def reset_peak_memory(self) -> None: ...
    def tokens_to_host(self, tokens: list) -> list[list[int]]: ...   # [B][steps]
    def logits_to_host(self, logits: Any) -> Any: ...                 # numpy float32
    def on_requested_device(self) -> bool: ...


class Backend(Protocol):
    """Everything shared code asks of a backend (tests/test_backend_members.py checks that each
    backend has every member and that callers use no other): code outside backends/ asks these
    instead of branching on a backend's or device's name."""

    name: str
    device: str
    runs_torch_modules: bool      # builds torch modules on its device (scenarios train and diffuse need it)
    multi_chip: bool              # runs a point over a world of chips (one process per chip)
    profiler_unavailable: str | None   # why run --profile takes no profiled pass here; None: it does

    def availability(self) -> Availability: ...
    def on_accelerator(self) -> bool: ...   # False where the work runs on the host's CPU (the small scale is then the default)
    def environment(self) -> dict[str, Any]: ...
    def energy_device(self) -> str: ...     # the device name energy sources know (hardware.energy_sources.find_source)
    def uses_host_memory(self) -> bool: ...  # the device's memory is the host's: a CPU world's ranks share it
    def placed_on_device(self, device_types) -> bool: ...  # whether work on these torch device types ran on this device
    def check_execution_mode(self, mode: str) -> None: ...   # UserError for a mode this backend cannot run
    def process_environment(self, point) -> dict[str, str]: ...   # variables set before the framework loads
    def estimate_memory(self, point) -> tuple[int, int | None]: ...   # (needed, available) bytes
    def available_memory(self) -> int | None: ...                       # free bytes, None where unknown
    def build(self, point) -> Any: ...                                  # the model, reused across shapes
    def quantization_refusal(self, point) -> str | None: ...            # why the point's quantisation cannot run here
    def build_sharded(self, point, checkpoint: str) -> Any: ...         # one rank's part of a world's model
    def session(self, built: Any, point, prompt) -> Session: ...
    def torch_device(self) -> Any: ...                                  # where torch modules go (runs_torch_modules)

    # One rank of a world of chips (multi_chip; measure/world.py).
    def enter_rank(self, threads_per_rank: int) -> None: ...   # before the framework loads in a rank's process
    def bind_rank(self, local_rank: int) -> None: ...
    def init_process_group(self, timeout_s: float) -> None: ...
    def process_group_backend(self) -> str: ...
    def process_group_source(self) -> str: ...
