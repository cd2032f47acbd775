"""The load generator: closed loop (a fixed concurrency) or open loop (arrivals at a rate), with
warm-up, a request count or a duration, and the client's own health measured alongside.

Closed loop: N workers each send their next request when the previous one ends; a request's
`scheduled_s` is the moment its worker was free, so its queue time is the client's own delay.

Open loop: request i is scheduled at t_i = g_1 + ... + g_i after the window's origin (t_0 = 0)
with gaps g ~ Gamma(shape=k, scale=1/(rate*k)) drawn from `numpy.random.default_rng(seed)` (k =
burstiness; k = 1 is a Poisson process, k < 1 burstier); rate `inf` schedules every request at 0.
Sends follow the absolute schedule, so a late wake-up never shifts the requests after it (sleeping
gap by gap accumulates every delay), and the last 1.2 ms before each send is spent yielding to the
loop rather than in a timer that may fire a millisecond late. With `max_concurrency`, a request due while the cap is full
waits for a slot; that wait is `slot_wait_s`, part of its queue time. `offered_request_rate` is
the rate of the drawn schedule ((n-1) / (t_last - t_0)), the one the client could have achieved,
so comparing it with the achieved send rate measures the client and not the luck of the draw;
the nominal rate stays in `request_rate`.

The client's health over the measured window: a monitor task sleeps `lag_interval_s` (1 ms) in
a loop and records how late each wake-up was (event-loop lag: anything that blocks the loop delays
sends and chunk timestamps alike); the process CPU time; each request's send lateness (queue time
less slot wait). The garbage collector's existing objects are frozen for the window (gc.freeze) so
a full collection over them cannot pause the loop mid-run.

Two more shapes of traffic (serving/traffic/): a replay (`timed`: (offset, request) pairs read as
they go out, so a trace is streamed; sends follow the trace's own clock as the open loop follows
its schedule, capped by max_concurrency if given) and sessions (`sessions`: multi-turn
conversations, `concurrency` of them in flight; each turn is sent when the previous answer has
come back and the think time has passed, and resends the history with the server's answers; that
moment is the turn's `scheduled_s`, so its queue time is the client's own lateness).
"""

from __future__ import annotations

import asyncio
import collections
import csv
import gc
import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tpubench.errors import UserError
from tpubench.serving.client import (
    Endpoint,
    RequestRecord,
    RequestSpec,
    StreamingClient,
)
from tpubench.serving.metrics import send_rate
from tpubench.serving.traffic.common import Session
from tpubench.serving.traffic.multi_turn import turn_messages

_now = time.perf_counter
# The event loop's timers wake up to 1 ms late (epoll_wait counts whole milliseconds, rounded up),
# so an open-loop send sleeps until this long before it is due and yields to the loop in a tight
# cycle for the rest: sends within tens of microseconds of the schedule, at the cost of up to this
# much CPU per request.
_SPIN_S = 0.0012
# Replayed requests made ahead of their send time (a bound on the memory a streamed trace takes).
_REPLAY_AHEAD = 256


# ----------------------------------------------------------------------------- schedules


def _offsets(rate: float, burstiness: float, rng: np.random.Generator) -> Iterator[float]:
    t = 0.0
    yield t
    if math.isinf(rate):
        while True:
            yield 0.0
    scale = 1.0 / (rate * burstiness)
    gamma = rng.gamma
    while True:
        t += float(gamma(burstiness, scale))
        yield t


def arrival_schedule(n: int, rate: float, burstiness: float = 1.0, seed: int = 0) -> np.ndarray:
    """The open loop's send offsets (seconds after the origin) for n requests: the same draws the
    load makes from the same seed."""
    _check_rate(rate, burstiness)
    return np.fromiter(_offsets(rate, burstiness, np.random.default_rng(seed)), dtype=float, count=n)


def _check_rate(rate: float, burstiness: float) -> None:
    if not rate > 0:
        raise ValueError(f"request_rate must be positive or inf (got {rate})")
    if not (burstiness > 0 and math.isfinite(burstiness)):
        raise ValueError(f"burstiness must be a positive number (got {burstiness})")


# ----------------------------------------------------------------------------- lengths


def draw_lengths(input_length: Any, output_length: Any, n: int, seed: int = 0,
                 base_dir: str | Path | None = None) -> list[tuple[int, int]]:
    """n (input_length, output_length) pairs. Each side is an int (fixed), a (low, high) tuple or
    {"uniform": [low, high]} (integers, both ends included) or {"csv": path} (a file of
    input_length,output_length rows, header optional; relative to base_dir). Rows of a CSV are
    taken in a seeded shuffled order, every row once before any repeats; when both sides name the
    same file they take the same rows. Input and output draw from separate streams of the seed,
    so changing one side leaves the other's draws alone."""
    if n < 0:
        raise ValueError(f"n must be >= 0 (got {n})")
    ins, outs = _kind(input_length), _kind(output_length)
    rows_cache: dict[Path, list[tuple[int, int]]] = {}

    def csv_rows(path: str) -> list[tuple[int, int]]:
        p = Path(path)
        if base_dir is not None and not p.is_absolute():
            p = Path(base_dir) / p
        if p not in rows_cache:
            rows_cache[p] = read_lengths_csv(p)
        return rows_cache[p]

    def side(kind: str, value: Any, column: int, stream: int) -> np.ndarray:
        if kind == "fixed":
            return np.full(n, value, dtype=int)
        if kind == "uniform":
            lo, hi = value
            return np.random.default_rng([seed, stream]).integers(lo, hi + 1, size=n)
        # Both sides shuffle rows with the same stream, so one file on both sides pairs them.
        rows = csv_rows(value)
        order = _cycled_permutation(len(rows), n, np.random.default_rng([seed, 2]))
        return np.array([rows[i][column] for i in order], dtype=int)

    a = side(*ins, 0, 0)
    b = side(*outs, 1, 1)
    return [(int(x), int(y)) for x, y in zip(a, b)]


def _cycled_permutation(rows: int, n: int, rng: np.random.Generator) -> list[int]:
    out: list[int] = []
    while len(out) < n:
        out.extend(int(i) for i in rng.permutation(rows))
    return out[:n]


def _kind(spec: Any) -> tuple[str, Any]:
    if isinstance(spec, bool):
        raise ValueError(f"a length must be a positive integer, a range or a CSV (got {spec!r})")
    if isinstance(spec, (int, np.integer)):
        if spec < 1:
            raise ValueError(f"a length must be positive (got {spec})")
        return "fixed", int(spec)
    uniform = spec.get("uniform") if isinstance(spec, Mapping) else getattr(spec, "uniform", None)
    if isinstance(spec, tuple) and len(spec) == 2:
        uniform = spec
    if uniform is not None:
        lo, hi = (int(v) for v in uniform)
        if not 1 <= lo <= hi:
            raise ValueError(f"a uniform length range needs 1 <= low <= high (got [{lo}, {hi}])")
        return "uniform", (lo, hi)
    path = spec.get("csv") if isinstance(spec, Mapping) else getattr(spec, "csv", None)
    if path is not None:
        return "csv", str(path)
    raise ValueError(f"a length must be an int, (low, high), {{'uniform': [low, high]}} or {{'csv': path}} "
                     f"(got {spec!r})")


def read_lengths_csv(path: str | Path) -> list[tuple[int, int]]:
    """(input_length, output_length) rows; a header line naming input_length and output_length
    picks those columns, otherwise the first two columns are used."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise UserError(f"cannot read the lengths file: {exc.strerror or exc}", where=str(p)) from None
    rows = [r for r in csv.reader(text.splitlines()) if r and any(c.strip() for c in r)]
    if not rows:
        raise UserError("the lengths file has no rows", where=str(p))
    cols, start = (0, 1), 0
    head = [c.strip().lower() for c in rows[0]]
    if not head[0].lstrip("-").isdigit():
        start = 1
        if "input_length" in head and "output_length" in head:
            cols = (head.index("input_length"), head.index("output_length"))
    out = []
    for line_no, row in enumerate(rows[start:], start=start + 1):
        try:
            a, b = int(row[cols[0]]), int(row[cols[1]])
        except (IndexError, ValueError):
            raise UserError(f"expected two integers input_length,output_length (got {','.join(row)!r})",
                            where=f"{p}:{line_no}") from None
        if a < 1 or b < 1:
            raise UserError(f"lengths must be positive (got {a},{b})", where=f"{p}:{line_no}")
        out.append((a, b))
    if not out:
        raise UserError("the lengths file has a header but no rows", where=str(p))
    return out


# ----------------------------------------------------------------------------- outcome


def _strict_json(obj: Any) -> Any:
    """Strict JSON has no NaN or Infinity: NaN becomes None, infinities the strings "inf"/"-inf"."""
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        return obj if math.isfinite(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: _strict_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_strict_json(v) for v in obj]
    return obj


def _quantiles(x: Sequence[float], prefix: str) -> dict[str, float]:
    a = np.asarray(x, dtype=float)
    if a.size == 0:
        return {f"{prefix}_{k}_s": math.nan for k in ("p50", "p99", "max", "mean")}
    p50, p99 = np.percentile(a, [50, 99])
    return {f"{prefix}_p50_s": float(p50), f"{prefix}_p99_s": float(p99),
            f"{prefix}_max_s": float(a.max()), f"{prefix}_mean_s": float(a.mean())}


@dataclass
class LoadOutcome:
    """What one load point produced: measured and warm-up records, the load as configured, and
    the client's health over the measured window."""

    mode: Literal["closed", "open", "replay", "sessions"]
    records: list[RequestRecord]
    warmup_records: list[RequestRecord]
    concurrency: int | None
    request_rate: float | None          # nominal (open loop)
    burstiness: float | None
    max_concurrency: int | None
    seed: int
    num_requests: int | None
    duration_s: float | None
    offered_request_rate: float | None  # of the drawn schedule; inf for rate inf; None closed loop
    achieved_send_rate: float | None    # (n-1) / (last send - first send)
    window_s: float                     # first send -> last reply finished
    wall_s: float                       # origin -> last reply finished
    client_cpu_s: float                 # process CPU time over the measured phase
    loop_lag_s: list[float] = field(default_factory=list)
    loop_lag_interval_s: float = 0.001
    origin_perf_counter_s: float = 0.0  # the origin of record times (to line up server-side logs)

    def client_figures(self) -> dict[str, float]:
        """The client's health in flat figures (seconds), for metrics and validity."""
        late = [r.queue_s - r.slot_wait_s for r in self.records if math.isfinite(r.sent_s)]
        return {
            **_quantiles(self.loop_lag_s, "client_loop_lag"),
            "client_loop_lag_samples": len(self.loop_lag_s),
            "client_cpu_s": self.client_cpu_s,
            "client_cpu_share": self.client_cpu_s / self.wall_s if self.wall_s > 0 else math.nan,
            **_quantiles(late, "client_send_late"),
        }

    def to_dict(self, include_lag_samples: bool = False) -> dict:
        d = asdict(self)
        d["records"] = [r.to_dict() for r in self.records]
        d["warmup_records"] = [r.to_dict() for r in self.warmup_records]
        if not include_lag_samples:
            d.pop("loop_lag_s")
        d["client"] = self.client_figures()
        return _strict_json(d)


# ----------------------------------------------------------------------------- running


async def _lag_monitor(interval: float, samples: list[float]) -> None:
    sleep = asyncio.sleep
    while True:
        t = _now()
        await sleep(interval)
        samples.append(_now() - t - interval)


async def _closed_loop(client: StreamingClient, prepared: list[tuple[RequestSpec, bytes]], concurrency: int,
                       limit: int | None, duration_s: float | None, origin: float,
                       on_record: Callable[[RequestRecord], None] | None) -> list[RequestRecord]:
    counter = itertools.count()
    out: list[RequestRecord] = []
    n = len(prepared)

    async def worker() -> None:
        while True:
            scheduled = _now() - origin
            if duration_s is not None and scheduled >= duration_s:
                return
            i = next(counter)
            if limit is not None and i >= limit:
                return
            spec, body = prepared[i % n]
            rec = await client.request(spec, index=i, origin=origin, scheduled_s=scheduled, body=body)
            out.append(rec)
            if on_record is not None:
                on_record(rec)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    out.sort(key=lambda r: r.index)
    return out


async def _open_loop(client: StreamingClient, prepared: list[tuple[RequestSpec, bytes]], rate: float,
                     burstiness: float, max_concurrency: int | None, limit: int | None,
                     duration_s: float | None, seed: int, origin: float,
                     on_record: Callable[[RequestRecord], None] | None) -> list[RequestRecord]:
    slots = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    n = len(prepared)

    def one(i: int, scheduled: float):
        spec, body = prepared[i % n]
        return _send_in_slot(client, slots, spec, body, i, origin, scheduled, on_record)

    tasks = []
    offsets = _offsets(rate, burstiness, np.random.default_rng(seed))
    for i in itertools.count():
        if limit is not None and i >= limit:
            break
        scheduled = next(offsets)
        if duration_s is not None and scheduled >= duration_s:
            break
        await _wait_until(origin + scheduled)
        tasks.append(asyncio.create_task(one(i, scheduled)))
    return list(await asyncio.gather(*tasks))


async def _send_in_slot(client: StreamingClient, slots: asyncio.Semaphore | None, spec: RequestSpec, body: bytes,
                        i: int, origin: float, scheduled: float,
                        on_record: Callable[[RequestRecord], None] | None) -> RequestRecord:
    """Send one scheduled request (open loop, replay), first waiting for a slot under max_concurrency:
    the wait is the request's slot_wait_s, so its queue time less that is the client's own lateness."""
    if slots is None:
        rec = await client.request(spec, index=i, origin=origin, scheduled_s=scheduled, body=body)
    else:
        t = _now()
        async with slots:
            rec = await client.request(spec, index=i, origin=origin, scheduled_s=scheduled, body=body,
                                       slot_wait_s=_now() - t)
    if on_record is not None:
        on_record(rec)
    return rec


async def _wait_until(due: float) -> None:
    delay = due - _now()
    if delay > _SPIN_S:
        await asyncio.sleep(delay - _SPIN_S)
    while _now() < due:
        await asyncio.sleep(0)      # yields to the loop: streams keep being read meanwhile


async def _replay_loop(client: StreamingClient, timed: Iterator[tuple[float, RequestSpec]], time_scale: float,
                       max_concurrency: int | None, limit: int | None, duration_s: float | None, origin: float,
                       on_record: Callable[[RequestRecord], None] | None) -> list[RequestRecord]:
    slots = asyncio.Semaphore(max_concurrency) if max_concurrency else None

    # Requests are made (prompt and body) ahead of their send time, in the slack before the next
    # one is due, up to _REPLAY_AHEAD of them: a burst of a trace (many rows at one timestamp) then
    # goes out from the buffer instead of waiting for its prompts to be made one by one.
    rows = enumerate(timed)
    ahead: collections.deque = collections.deque()

    def make_one() -> bool:
        for i, (offset, spec) in rows:
            scheduled = offset * time_scale
            if (limit is not None and i >= limit) or (duration_s is not None and scheduled >= duration_s):
                return False
            ahead.append((i, spec, client.prepare(spec), scheduled))
            return True
        return False

    tasks = []
    more = make_one()
    cost = 0.0      # how long making a request took lately: never start one that would make a send late
    while ahead:
        i, spec, body, scheduled = ahead.popleft()
        due = origin + scheduled
        while more and len(ahead) < _REPLAY_AHEAD and due - _now() > _SPIN_S + 2 * cost:
            t = _now()
            more = make_one()
            cost = max(0.9 * cost, _now() - t)
            await asyncio.sleep(0)      # the streams in flight are read between two requests made
        await _wait_until(due)
        tasks.append(asyncio.create_task(_send_in_slot(client, slots, spec, body, i, origin, scheduled,
                                                       on_record)))
        if not ahead and more:
            more = make_one()
    return list(await asyncio.gather(*tasks))


async def _session_loop(client: StreamingClient, sessions: Sequence[Session], concurrency: int,
                        duration_s: float | None, origin: float,
                        on_record: Callable[[RequestRecord], None] | None) -> list[RequestRecord]:
    queue = iter(sessions)
    counter = itertools.count()
    out: list[RequestRecord] = []

    async def run(session: Session) -> bool:
        """Send the session's turns; False when its next turn falls after the duration (the worker stops)."""
        history: list[dict] = []
        scheduled = _now() - origin
        for turn, max_tokens in enumerate(session.max_tokens):
            if turn:
                if duration_s is not None and scheduled >= duration_s:
                    return False    # no request is scheduled after the duration, a next turn neither
                await _wait_until(origin + scheduled)
            spec = RequestSpec("", 0, max_tokens, messages=turn_messages(session, history, turn))
            text: list[str] = []
            rec = await client.request(spec, index=next(counter), origin=origin, scheduled_s=scheduled, text=text)
            rec.session, rec.turn = session.index, turn
            out.append(rec)
            if on_record is not None:
                on_record(rec)
            if not rec.ok:
                return True     # the history is broken: the rest of this conversation cannot be sent
            history += [spec.messages[-1], {"role": "assistant", "content": "".join(text)}]
            scheduled = rec.end_s + session.think_time_s
        return True

    async def worker() -> None:
        for session in queue:
            if duration_s is not None and _now() - origin >= duration_s:
                return
            if not await run(session):
                return

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    out.sort(key=lambda r: r.index)
    return out


async def run_load_async(endpoint: Endpoint, specs: Sequence[RequestSpec], *,
                         concurrency: int | None = None, request_rate: float | None = None,
                         burstiness: float = 1.0, max_concurrency: int | None = None,
                         num_requests: int | None = None, duration_s: float | None = None,
                         warmup_requests: int = 0, warmup_specs: Sequence[RequestSpec] | None = None,
                         seed: int = 0, lag_interval_s: float = 0.001,
                         on_record: Callable[[RequestRecord], None] | None = None,
                         timed: Iterable[tuple[float, RequestSpec]] | None = None, time_scale: float = 1.0,
                         sessions: Sequence[Session] | None = None,
                         on_window_start: Callable[[], None] | None = None) -> LoadOutcome:
    """Run one load point. Give `concurrency` (closed loop) or `request_rate` (open loop, req/s,
    `math.inf` for all at once). Requests use `specs` in order, cycling when more are sent than
    given; without num_requests and duration_s, each spec is sent once. With duration_s, no new
    request is scheduled after that many seconds and those in flight finish. Warm-up requests
    (warmup_specs, or else specs from the start: give distinct prompts if the server caches
    prefixes) go first at the load's concurrency and are kept apart.

    Or a replay: `timed` (offset seconds, request) pairs, sent at offset x time_scale (neither
    concurrency nor request_rate; max_concurrency caps it; every pair is sent unless num_requests
    or duration_s stops it first). Or `sessions` with `concurrency` of them in flight (with duration_s,
    no session and no turn starts after it; a session stopped so is not resumed).

    `on_window_start()` runs (on a thread) after the warm-up, before the measured window opens: what
    is read about the server from then on (its /metrics counters) leaves the warm-up out."""
    if timed is not None or sessions is not None:
        return await _traffic_load(endpoint, timed=timed, time_scale=time_scale, sessions=sessions,
                                   concurrency=concurrency, request_rate=request_rate,
                                   max_concurrency=max_concurrency, num_requests=num_requests,
                                   duration_s=duration_s, warmup_requests=warmup_requests,
                                   warmup_specs=warmup_specs, seed=seed, lag_interval_s=lag_interval_s,
                                   on_record=on_record, on_window_start=on_window_start)
    if (concurrency is None) == (request_rate is None):
        raise ValueError("give either concurrency (closed loop) or request_rate (open loop)")
    if concurrency is not None and concurrency < 1:
        raise ValueError(f"concurrency must be >= 1 (got {concurrency})")
    if request_rate is not None:
        _check_rate(request_rate, burstiness)
        if math.isinf(request_rate) and num_requests is None and duration_s is not None:
            raise ValueError("request_rate inf sends everything at once: give num_requests, not only duration_s")
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError(f"max_concurrency must be >= 1 (got {max_concurrency})")
    if not specs:
        raise ValueError("no requests to send")
    if num_requests is not None and num_requests < 1:
        raise ValueError(f"num_requests must be >= 1 (got {num_requests})")
    if duration_s is not None and not duration_s > 0:
        raise ValueError(f"duration_s must be positive (got {duration_s})")
    if warmup_requests < 0:
        raise ValueError(f"warmup_requests must be >= 0 (got {warmup_requests})")
    limit = num_requests if num_requests is not None else (None if duration_s is not None else len(specs))
    width = concurrency if concurrency is not None else (max_concurrency or 0)

    async with StreamingClient(endpoint, max_connections=width) as client:
        prepared = [(s, client.prepare(s)) for s in specs]
        warm = await _warmup(client, warmup_requests, warmup_specs or specs, width)

        def measured(origin: float):
            if concurrency is not None:
                return _closed_loop(client, prepared, concurrency, limit, duration_s, origin, on_record)
            return _open_loop(client, prepared, request_rate, burstiness, max_concurrency, limit,
                              duration_s, seed, origin, on_record)

        records, origin, wall, cpu, lag = await _measured_window(measured, lag_interval_s, on_window_start)
    return _outcome("closed" if concurrency is not None else "open", records, warm, concurrency=concurrency,
                    request_rate=request_rate, burstiness=burstiness, max_concurrency=max_concurrency, seed=seed,
                    num_requests=num_requests, duration_s=duration_s, wall=wall, cpu=cpu, lag=lag,
                    lag_interval_s=lag_interval_s, origin=origin)


async def _warmup(client: StreamingClient, n: int, specs: Sequence[RequestSpec], width: int) -> list[RequestRecord]:
    if not n:
        return []
    prepared = [(s, client.prepare(s)) for s in specs]
    return await _closed_loop(client, prepared, min(n, width or n), n, None, _now(), None)


async def _measured_window(measured: Callable[[float], Any], lag_interval_s: float,
                           on_start: Callable[[], None] | None = None):
    """Run `measured(origin)` with the client's health recorded: (records, origin, wall, cpu, lag)."""
    if on_start is not None:
        await asyncio.to_thread(on_start)
    # Freeze only when nothing else has: unfreezing afterwards must not undo a caller's freeze.
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.collect()
        gc.freeze()
    lag: list[float] = []
    try:
        cpu0 = time.process_time()
        origin = _now()
        monitor = asyncio.create_task(_lag_monitor(lag_interval_s, lag))
        try:
            records = await measured(origin)
        finally:
            monitor.cancel()
            try:
                await monitor
            except asyncio.CancelledError:
                pass
        wall = _now() - origin
        cpu = time.process_time() - cpu0
    finally:
        if freeze:
            gc.unfreeze()
    return records, origin, wall, cpu, lag


async def _traffic_load(endpoint: Endpoint, *, timed, time_scale, sessions, concurrency, request_rate,
                        max_concurrency, num_requests, duration_s, warmup_requests, warmup_specs, seed,
                        lag_interval_s, on_record, on_window_start=None) -> LoadOutcome:
    if timed is not None and sessions is not None:
        raise ValueError("give timed requests or sessions, not both")
    if request_rate is not None:
        raise ValueError("a replay or sessions set their own pace: give no request_rate")
    if sessions is not None and (concurrency is None or concurrency < 1):
        raise ValueError("sessions need a concurrency (the sessions in flight)")
    if timed is not None and concurrency is not None:
        raise ValueError("a replay follows its own clock: give no concurrency (max_concurrency caps it)")
    if not time_scale > 0:
        raise ValueError(f"time_scale must be positive (got {time_scale})")
    if warmup_requests and not warmup_specs:
        raise ValueError("warm-up requests for a replay or sessions need warmup_specs of their own")
    width = concurrency if sessions is not None else (max_concurrency or 0)
    async with StreamingClient(endpoint, max_connections=width) as client:
        warm = await _warmup(client, warmup_requests, warmup_specs or [], width)

        def measured(origin: float):
            if sessions is not None:
                return _session_loop(client, sessions, concurrency, duration_s, origin, on_record)
            return _replay_loop(client, iter(timed), time_scale, max_concurrency, num_requests, duration_s,
                                origin, on_record)

        records, origin, wall, cpu, lag = await _measured_window(measured, lag_interval_s, on_window_start)
    return _outcome("sessions" if sessions is not None else "replay", records, warm,
                    concurrency=concurrency, request_rate=None, burstiness=None, max_concurrency=max_concurrency,
                    seed=seed, num_requests=num_requests, duration_s=duration_s, wall=wall, cpu=cpu, lag=lag,
                    lag_interval_s=lag_interval_s, origin=origin, replay=timed is not None)


def _outcome(mode, records, warm, *, concurrency, request_rate, burstiness, max_concurrency, seed, num_requests,
             duration_s, wall, cpu, lag, lag_interval_s, origin, replay: bool = False) -> LoadOutcome:
    sent = [r.sent_s for r in records]
    ends = [r.end_s for r in records if math.isfinite(r.end_s)]
    window = (max(ends) - min(sent)) if records and ends else 0.0
    if replay:      # the trace's own rate, as the client could have achieved it
        offered = send_rate([r.scheduled_s for r in records]) if len(records) > 1 else None
        offered = offered if offered is not None and math.isfinite(offered) else None
    elif request_rate is None:
        offered = None
    elif math.isinf(request_rate):
        offered = math.inf
    else:
        offered = send_rate([r.scheduled_s for r in records])
        if not math.isfinite(offered):
            offered = float(request_rate)
    return LoadOutcome(
        mode=mode, records=records, warmup_records=warm,
        concurrency=concurrency, request_rate=request_rate,
        burstiness=burstiness if request_rate is not None else None, max_concurrency=max_concurrency,
        seed=seed, num_requests=num_requests, duration_s=duration_s, offered_request_rate=offered,
        achieved_send_rate=send_rate(sent), window_s=window, wall_s=wall, client_cpu_s=cpu,
        loop_lag_s=lag, loop_lag_interval_s=lag_interval_s, origin_perf_counter_s=origin)


def run_load(endpoint: Endpoint, specs: Sequence[RequestSpec], **kwargs) -> LoadOutcome:
    """`run_load_async` in its own event loop (see there for the arguments)."""
    box: list[LoadOutcome] = []

    async def main() -> None:
        # The outcome is handed back through `box`, not as the task's result: asyncio.run's
        # SIGINT clean-up formats the main task's repr, which would print every record (a
        # second of CPU after a large window).
        box.append(await run_load_async(endpoint, specs, **kwargs))

    asyncio.run(main())
    return box[0]
