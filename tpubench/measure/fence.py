"""Is the fence real? One check after the timed loop, and its verdict (a pure function).

A fence that returns before the device work has run (a deferred eager mode whose synchronize only
waits for copies already launched, TorchTPU's DEFER_AND_FUSE) makes every timed iteration measure
the queuing of work, not the work: the point reads fast, and nothing else looks wrong. So after the
timed loop (whose last clock read followed a fence) the session reads back a scalar reduced from
the loop's latest output (`session.read_back()`, backends.torch.TorchDevice). After a fence that waited,
that read has nothing left to run: a small copy. If it takes a sizeable share of an iteration, the
work ran only when the value was read, and the timed loop did not time it.
"""

from __future__ import annotations

import time

# The read-back may take this share of the median iteration before the fence is called early...
READ_BACK_SHARE = 0.5
# ...and at least this long (a device-to-host copy of one scalar, its launch and a busy host's
# scheduling fit in it many times over).
READ_BACK_FLOOR_S = 0.005


def check_fence(session) -> dict | None:
    """Seconds a read-back of the latest output took right after the timed loop's last fence, or
    None where the session has nothing to read back (the CPU; sessions without read_back)."""
    read_back = getattr(session, "read_back", None)
    if read_back is None:
        return None
    t0 = time.perf_counter()
    if not read_back():
        return None
    return {"read_back_after_fence_s": time.perf_counter() - t0}


def fence_reason(check: dict | None, iteration_s: float) -> str | None:
    """Why the point is invalid when its fence returned before the work ran, else None."""
    if not check:
        return None
    late = check["read_back_after_fence_s"]
    limit = max(READ_BACK_SHARE * iteration_s, READ_BACK_FLOOR_S)
    if late <= limit:
        return None
    return (f"the fence returned before the device work ran: reading back the last output after it took "
            f"{late * 1e3:.1f} ms, {late / iteration_s if iteration_s > 0 else float('inf'):.1f}x the median timed iteration "
            f"({iteration_s * 1e3:.1f} ms): the timed loop measured queuing, not the work")
