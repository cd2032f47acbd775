"""A streaming client for any OpenAI-compatible server, built to measure it (docs/scenarios/serve.md).

One aiohttp ClientSession per run, its connector sized for the load (aiohttp's default connector
quietly caps a session at 100 connections, which turns a concurrency of 256 into 100 without a
word) and a 4 MiB read buffer (the default 64 KiB throttles long streamed replies, vLLM issue
#39963). Request bodies are encoded before the measured window: a 50,000-token prompt takes
milliseconds to serialise, which would otherwise land in the send time.

Times come from `time.perf_counter` (the monotonic clock; on Linux the same clock in every
process), read where the event loop meets the socket, not where the request's task gets to run:
- a reply's bytes are stamped in the connection protocol's `data_received`, the moment the loop
  reads them from the socket (_TimedProtocol), and parsed right there: aiohttp's parser hands the
  body bytes of each read to the reply (_follow), so the request's task is woken once for the
  head and once when the reply is over, not for every read, and the client's own work on other
  streams is not counted in a TTFT or an ITL; every SSE event completed by one read shares that
  read's arrival time, which is when the client could have shown it;
- a request's send time is when its bytes are handed to the socket (_stamp_send, on aiohttp's
  public request trace; the headers go out with the body in one write), not when it was handed to
  aiohttp: the request's preparation and a wait for the loop to run aiohttp's write are the
  client's own lateness (`queue_s`), not the server's TTFT. A request that never reaches a write
  (cannot connect), a redirected one, and a session not opened here keep the time it was handed
  to aiohttp (and a session without _TimedProtocol has its bodies read by the task, stamped when
  it runs: _pull).
A record stores them relative to an origin the caller gives (the start of the measured window).

aiohttp has no public hook for the first two, so they rest on its internals, and pyproject pins
the range they are tested on (aiohttp>=3.12,<3.15: 3.12.0, 3.12.15, 3.13.5, 3.14.0 and 3.14.5):
the connection protocol (_TimedProtocol subclasses aiohttp.client_proto.ResponseHandler and
replaces the connector's `_factory`), the reply's payload (_follow swaps the class of its live
StreamReader for _FedPayload, which overrides feed_data/feed_eof/set_exception) and, for a reply
that came whole in one read and whose connection is already back in the pool, the payload's
`_protocol`. The send stamp is public (TraceConfig.on_request_chunk_sent); before 3.12 aiohttp
wrote the headers on their own ahead of the body, so that stamp came after the server had the
request. tests/test_serving_client.py (test_the_timing_hooks_are_engaged_on_this_aiohttp) fails
on an aiohttp where a hook does not engage; a new minor joins the range once the client's tests
(tests/test_serving_client*.py, tests/test_hostile_server.py) pass on it.

What counts:
- a token-bearing chunk is an SSE event whose first choice carries non-empty text (`text` for
  completions; `delta.content`, or a reasoning model's `delta.reasoning_content` / `reasoning`,
  for chat); a chunk may carry several tokens (speculative decoding, servers that batch their
  writes), so token counts come from the server's `usage`, never from counting chunks, unless the
  server sends no usage (then the chunk count stands in and `usage_reported` is False);
- TTFT = first token-bearing chunk - send; E2E = last token-bearing chunk - send (the usage chunk
  and `[DONE]` carry no token); `end_s` is when the reply finished, which is what the window and
  the concurrency see;
- a reply is complete at `[DONE]`, or at the end of the body after a `finish_reason` (transformers
  serve sends no `[DONE]`); anything else is an error kept in the record: HTTP 4xx/5xx with the
  body's first line, a broken or truncated stream, an error event inside the stream, a timeout,
  a reply that is not OpenAI SSE (HTML, JSON without choices, a whole JSON completion).

A server is not trusted (issue 17, item 12). Its `usage` is checked against the stream in every
mode (`impossible_usage`: the rule is there) and an impossible count fails the request; a stream
carrying more token-bearing chunks than max_tokens is cut there (each chunk carries at least one
token, and this bounds the memory of an endless stream); a line or event over MAX_EVENT_BYTES
fails the request (a stream without newlines would otherwise grow without bound until the
timeout); a redirect is followed and the URL that served the request kept (`served_url`); every
text from the server that enters a record is clipped and stored safely (a lone surrogate, valid in
JSON, cannot be encoded in UTF-8: it is escaped, see tpubench.records.result.safe_text).
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

import aiohttp
import yarl
from aiohttp.client_proto import ResponseHandler

from tpubench.records.result import safe_text
from tpubench.serving.traffic.common import RequestSpec  # the request type every traffic mode makes

_now = time.perf_counter
_loads = json.loads
try:    # pydantic's JSON parser (Rust): a chunk's JSON in ~1 us where json.loads takes ~4
    from pydantic_core import from_json as _fast_loads
except ImportError:     # pragma: no cover - pydantic is a dependency
    _fast_loads = json.loads


def _event_json(payload: bytes) -> Any:
    """An SSE event's JSON, as json.loads reads it: what the fast parser refuses (a lone surrogate
    escape such as \\ud800, which json.loads accepts; a non-UTF-8 payload) is read by json.loads,
    which also decides what is not JSON at all (ValueError)."""
    try:
        return _fast_loads(payload)
    except ValueError:
        return _loads(payload)

READ_BUFFER_BYTES = 4 << 20
ERROR_BODY_BYTES = 64 << 10
# After [DONE] the end of the chunked body normally arrives in the same read; wait this long for
# it so the connection can be reused rather than closed.
_DRAIN_AFTER_DONE_S = 0.25
# The longest SSE line or event kept (bytes): a real chunk is under a few KiB even with logprobs;
# past this the stream is not an OpenAI stream, and buffering it would grow memory until the timeout.
MAX_EVENT_BYTES = 1 << 20
# A detokenizer may drop the first token's leading space (SentencePiece): that token shows no byte.
_DROPPED_LEADING_TOKENS = 1


@dataclass(frozen=True)
class Endpoint:
    """Where and how to send: `url` is the server (`http://host:port`, `.../v1` or the full
    endpoint URL), `api` picks /v1/completions or /v1/chat/completions. `extra_body` is merged
    into every body last (so it may override the defaults): `ignore_eos`, `min_tokens`,
    `temperature`... The caller decides what the server accepts (transformers serve answers 422
    to `ignore_eos`)."""

    url: str
    model: str
    api: Literal["completions", "chat"] = "completions"
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    timeout_s: float = 120.0
    api_key: str | None = None
    max_tokens_field: str = "max_tokens"

    def __post_init__(self):
        if self.api not in ("completions", "chat"):
            raise ValueError(f"api must be 'completions' or 'chat' (got {self.api!r})")
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https:// (got {self.url!r})")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be positive (got {self.timeout_s})")

    def request_url(self) -> str:
        url = self.url.rstrip("/")
        if url.endswith("/completions"):
            return url
        if not url.endswith("/v1"):
            url += "/v1"
        return url + ("/chat/completions" if self.api == "chat" else "/completions")

    def headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h


def request_body(endpoint: Endpoint, spec: RequestSpec) -> dict:
    body: dict[str, Any] = {"model": endpoint.model}
    if spec.messages is not None:
        if endpoint.api != "chat":
            raise ValueError("chat messages go to /v1/chat/completions: use the chat endpoint")
        body["messages"] = list(spec.messages)
    elif endpoint.api == "chat":
        if not isinstance(spec.prompt, str):
            raise ValueError("a chat request needs a text prompt, not token ids")
        body["messages"] = [{"role": "user", "content": spec.prompt}]
    else:
        body["prompt"] = spec.prompt
    body[endpoint.max_tokens_field] = spec.max_tokens
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    body.update(endpoint.extra_body)
    return body


def encode_body(endpoint: Endpoint, spec: RequestSpec) -> bytes:
    return json.dumps(request_body(endpoint, spec), separators=(",", ":")).encode()


@dataclass
class RequestRecord:
    """One request as the client saw it. Times in seconds, relative to the measured window's
    origin on the client's perf_counter clock; durations (`*_s` without a point in time) are
    differences of those. None where undefined (no token received, no response)."""

    index: int
    prompt_len: int                     # asked
    max_tokens: int                     # asked
    scheduled_s: float                  # when the load meant to send it
    sent_s: float = math.nan            # when it was handed to the HTTP client
    queue_s: float = 0.0                # sent - scheduled: client lateness + slot_wait_s
    slot_wait_s: float = 0.0            # the part of queue_s spent waiting for a max_concurrency slot
    end_s: float = math.nan             # reply finished ([DONE] / end of body / error)
    ttft_s: float | None = None
    e2e_s: float | None = None          # send -> last token-bearing chunk
    token_chunk_s: list[float] = field(default_factory=list)   # arrival of each token-bearing chunk
    events: int = 0                     # SSE data events received (token-bearing or not)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage_reported: bool = False
    # Prompt tokens the engine served from its prefix cache (usage.prompt_tokens_details.cached_tokens;
    # vLLM with --enable-prompt-tokens-details, SGLang); None where the server does not say.
    cached_tokens: int | None = None
    finish_reason: str | None = None
    status: int | None = None           # HTTP status (None: no response)
    served_url: str | None = None       # where a redirect took the request (None: where it was sent)
    error: str | None = None
    ok: bool = False
    session: int | None = None          # multi-turn traffic: the conversation and its turn (from 0)
    turn: int | None = None

    @property
    def token_chunks(self) -> int:
        return len(self.token_chunk_s)

    @property
    def tpot_s(self) -> float | None:
        """(E2E - TTFT) / (completion tokens - 1); undefined for fewer than 2 tokens."""
        n = self.completion_tokens
        if self.ttft_s is None or self.e2e_s is None or n is None or n < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (n - 1)

    @property
    def itl_s(self) -> list[float]:
        a = self.token_chunk_s
        return [b - x for x, b in zip(a, a[1:])]

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("sent_s", "end_s"):
            if isinstance(d[k], float) and math.isnan(d[k]):
                d[k] = None
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> RequestRecord:
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for k in ("sent_s", "end_s"):
            if kw.get(k) is None:
                kw[k] = math.nan
        return cls(**kw)


class SSEParser:
    """Incremental Server-Sent Events parser (the WHATWG rules that OpenAI streams use): feed it
    bytes as they arrive, get back the (event type, data) of every event they complete. Lines end
    in LF or CRLF; `:` lines are comments; several `data:` lines of one event are joined by LF;
    an event ends at a blank line (or at the end of the stream, see `flush`)."""

    __slots__ = ("_data", "_data_bytes", "_event", "_pending", "_pending_bytes", "max_bytes")

    def __init__(self, max_bytes: int = MAX_EVENT_BYTES) -> None:
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._data: list[bytes] = []
        self._data_bytes = 0
        self._event: bytes | None = None
        self.max_bytes = max_bytes

    def feed(self, chunk: bytes) -> list[tuple[bytes | None, bytes]]:
        """Events completed by `chunk`; raises EventTooLarge once an unfinished line or event
        holds more than max_bytes."""
        if (chunk[:6] == b"data: " and chunk[-2:] == b"\n\n" and not self._pending and not self._data
                and self._event is None and b"\r" not in chunk):
            # The common case, one read of whole one-line `data:` events: the events the rules
            # below make, without going line by line; anything else takes the general way.
            # Commonest of all (a paced server, one token a write): one event, its only newlines
            # the last two; no split, one copy.
            if chunk.find(b"\n") == len(chunk) - 2 and len(chunk) - 8 <= self.max_bytes:
                return [(None, chunk[6:-2])]
            out = []
            for block in chunk[:-2].split(b"\n\n"):
                if block[:6] != b"data: " or b"\n" in block or len(block) - 6 > self.max_bytes:
                    break
                out.append((None, block[6:]))
            else:
                return out
        if b"\n" not in chunk:
            self._hold(chunk)
            return []
        if self._pending:
            self._pending.append(chunk)
            chunk = b"".join(self._pending)
            self._pending = []
            self._pending_bytes = 0
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if tail:
            self._hold(tail)
        return self._lines(lines)

    def _hold(self, part: bytes) -> None:
        self._pending.append(part)
        self._pending_bytes += len(part)
        if self._pending_bytes > self.max_bytes:
            raise EventTooLarge(self.max_bytes)

    def flush(self) -> list[tuple[bytes | None, bytes]]:
        """At the end of the stream: the last line and event, even without their blank line."""
        lines = [b"".join(self._pending)] if self._pending else []
        self._pending = []
        self._pending_bytes = 0
        out = self._lines(lines)
        if self._data:
            out.append(self._dispatch())
        return out

    def _dispatch(self) -> tuple[bytes | None, bytes]:
        data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        event = self._event
        self._data = []
        self._data_bytes = 0
        self._event = None
        return event, data

    def _lines(self, lines: list[bytes]) -> list[tuple[bytes | None, bytes]]:
        out = []
        for line in lines:
            if line[-1:] == b"\r":
                line = line[:-1]
            if not line:
                if self._data:
                    out.append(self._dispatch())
                else:
                    self._event = None
            elif line[:5] == b"data:":
                data = line[6:] if line[5:6] == b" " else line[5:]
                self._data.append(data)
                self._data_bytes += len(data)
                if self._data_bytes > self.max_bytes:
                    raise EventTooLarge(self.max_bytes)
            elif line[:1] == b":":
                continue
            elif line[:6] == b"event:":
                self._event = line[6:].strip()
            # id:, retry: and unknown fields carry nothing we measure
        return out


class EventTooLarge(ValueError):
    """An SSE line or event longer than the parser keeps."""

    def __init__(self, max_bytes: int):
        super().__init__(f"oversized SSE event: a line or event over {_size(max_bytes)} "
                         "(an OpenAI stream's events are a few KiB; this one never ends)")


def _size(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n} bytes"


def _looks_like_sse(data: bytes) -> bool:
    head = data.lstrip()[:6]
    return not head or head.startswith((b"data:", b":", b"event:", b"id:", b"retry:"))


def _clip(text: str, n: int = 300) -> str:
    """One short line of a server's text, safe to store (see safe_text)."""
    text = safe_text(" ".join(text.split()))
    return text if len(text) <= n else text[: n - 3] + "..."


def first_line(body: bytes | str) -> str:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    for line in text.splitlines():
        if line.strip():
            return _clip(line.strip())
    return "(empty body)"


_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def _error_message(obj: Any) -> str:
    err = obj.get("error") if isinstance(obj, dict) else obj
    if isinstance(err, dict):
        err = err.get("message") or err
    return _clip(err if isinstance(err, str) else json.dumps(err))


def describe_non_sse(content_type: str, body: bytes) -> str:
    """Why a 200 reply is not an OpenAI stream, in one line."""
    stripped = body.strip()
    if "html" in content_type or stripped[:1] == b"<":
        m = _TITLE.search(stripped)
        what = _clip(m.group(1).decode("utf-8", "replace")) if m else first_line(stripped)
        return f"non-OpenAI reply (HTML, {content_type or 'no content type'}): {what}"
    try:
        obj = _loads(stripped)
    except ValueError:
        return f"non-OpenAI reply ({content_type or 'no content type'}): {first_line(stripped)}"
    if isinstance(obj, dict) and obj.get("error") is not None:
        return f"server error in a 200 reply: {_error_message(obj)}"
    if isinstance(obj, dict) and "choices" in obj:
        return "reply not streamed (one JSON completion): TTFT and ITL cannot be measured"
    return f"non-OpenAI reply: JSON without choices: {first_line(stripped)}"


async def _read_up_to(content: aiohttp.StreamReader, limit: int = ERROR_BODY_BYTES) -> bytes:
    parts, size = [], 0
    while size < limit:
        data = await content.read(limit - size)
        if not data:
            break
        parts.append(data)
        size += len(data)
    return b"".join(parts)


if hasattr(asyncio, "timeout"):      # Python 3.11+
    _deadline = asyncio.timeout
else:                                # pragma: no cover - Python 3.10
    class _deadline:
        def __init__(self, delay: float):
            self._delay, self._fired, self._handle = delay, False, None

        async def __aenter__(self):
            task = asyncio.current_task()
            self._handle = asyncio.get_running_loop().call_later(self._delay, self._fire, task)

        def _fire(self, task):
            self._fired = True
            task.cancel()

        async def __aexit__(self, exc_type, exc, tb):
            self._handle.cancel()
            if exc_type is asyncio.CancelledError and self._fired:
                raise asyncio.TimeoutError from exc
            return False


class _TimedProtocol(ResponseHandler):
    """aiohttp's client protocol, noting when the loop last read bytes from its socket
    (`data_t`); while a reply is followed (_follow), its body's reader."""

    data_t = math.nan
    body_reader: _BodyReader | None = None     # the reply being read on this connection (_follow)

    def data_received(self, data: bytes) -> None:
        if data:    # aiohttp calls it with b"" itself when a reader resumes: that is no read
            self.data_t = _now()
        super().data_received(data)

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)    # ends the reply's payload, or sets its error
        reader = self.body_reader
        if reader is not None and not reader.over.done():
            reader.on_error(aiohttp.ServerDisconnectedError())    # neither: nothing more can come


class _Sent:
    """When a request's bytes were written (`t`): the trace context of one request (_exchange)."""

    __slots__ = ("t",)

    def __init__(self) -> None:
        self.t = math.nan


async def _stamp_send(session, context, params) -> None:
    """aiohttp's public request trace (TraceConfig.on_request_chunk_sent), called as the request's
    bytes are handed to the transport: the headers go out with the body in one write, so its
    first call is when the request was sent."""
    sent = context.trace_request_ctx
    if isinstance(sent, _Sent) and sent.t != sent.t:     # nan: the first write, not a redirect's
        sent.t = _now()


def _send_trace() -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(_stamp_send)
    trace.freeze()
    return trace


def _time_connections(connector: aiohttp.TCPConnector) -> None:
    """Make the connector's connections _TimedProtocol. aiohttp has no public hook for this: where
    its protocol factory is not the one expected, nothing changes and times are taken as the
    request's task sees them (later by the loop's other work)."""
    factory = getattr(connector, "_factory", None)
    if isinstance(factory, functools.partial) and factory.func is ResponseHandler:
        connector._factory = functools.partial(_TimedProtocol, *factory.args, **factory.keywords)


def open_session(max_connections: int = 0) -> aiohttp.ClientSession:
    """One session for a run. `max_connections` 0 means unbounded: the load decides how many
    requests are in flight, never a connector limit."""
    connector = aiohttp.TCPConnector(limit=max(0, int(max_connections)), limit_per_host=0)
    _time_connections(connector)
    return aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None),
                                 read_bufsize=READ_BUFFER_BYTES, cookie_jar=aiohttp.DummyCookieJar(),
                                 trace_configs=[_send_trace()])


class StreamingClient:
    """Sends RequestSpecs to one endpoint and records what comes back; never raises for a failed
    request (the record says what failed). Use as `async with StreamingClient(ep, n) as c:`."""

    def __init__(self, endpoint: Endpoint, max_connections: int = 0,
                 session: aiohttp.ClientSession | None = None):
        self.endpoint = endpoint
        self.url = endpoint.request_url()
        self._url = yarl.URL(self.url)        # parsed once, not per request
        self._headers = endpoint.headers()
        self._own_session = session is None
        self._max_connections = max_connections
        self.session = session

    async def __aenter__(self) -> StreamingClient:
        if self.session is None:
            self.session = open_session(self._max_connections)
        return self

    async def __aexit__(self, *exc) -> None:
        if self._own_session and self.session is not None:
            await self.session.close()
            self.session = None

    def prepare(self, spec: RequestSpec) -> bytes:
        return encode_body(self.endpoint, spec)

    async def request(self, spec: RequestSpec, *, index: int, origin: float, scheduled_s: float,
                      body: bytes | None = None, slot_wait_s: float = 0.0,
                      text: list[str] | None = None) -> RequestRecord:
        """Send one request now; `origin` is the perf_counter value times are relative to. The
        reply's text pieces are appended to `text` when given (a multi-turn history resends it)."""
        if body is None:
            body = self.prepare(spec)
        rec = RequestRecord(index=index, prompt_len=spec.prompt_len, max_tokens=spec.max_tokens,
                            scheduled_s=scheduled_s, slot_wait_s=slot_wait_s)
        sent = _now()       # until the request is written (_exchange): when it was handed to aiohttp
        rec.sent_s = sent - origin
        rec.queue_s = rec.sent_s - scheduled_s
        stream = _Stream(text=text)
        try:
            async with _deadline(self.endpoint.timeout_s):
                await self._exchange(rec, body, origin, stream)
        except EventTooLarge as exc:
            rec.error = str(exc)
        except asyncio.TimeoutError:
            rec.error = (f"timeout after {self.endpoint.timeout_s:g} s "
                         f"({len(rec.token_chunk_s)} token-bearing chunks received)")
        except aiohttp.ClientPayloadError as exc:
            rec.error = f"broken stream: {_clip(str(exc).split(': <')[0])}"
        except aiohttp.ServerDisconnectedError:
            rec.error = ("broken stream: server disconnected" if rec.status is not None
                         else "server disconnected before replying")
        except aiohttp.ClientConnectorError as exc:
            rec.error = f"cannot connect: {_clip(str(exc))}"
        except (aiohttp.ClientError, OSError) as exc:
            rec.error = f"{type(exc).__name__}: {_clip(str(exc))}"
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, UnicodeError) as exc:
            # What a reply of an unexpected shape can raise while it is read fails its request,
            # never the run; any other exception is a bug of tpubench's and is not hidden.
            rec.error = f"unexpected reply ({type(exc).__name__}): {_clip(str(exc))}"
        if math.isnan(rec.end_s):
            rec.end_s = _now() - origin
        self._finish(rec, stream)
        return rec

    @staticmethod
    def _finish(rec: RequestRecord, stream: _Stream) -> None:
        chunks = rec.token_chunk_s
        if chunks:
            rec.ttft_s = chunks[0] - rec.sent_s
            rec.e2e_s = chunks[-1] - rec.sent_s
        usage = stream.usage
        pt, ct = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if ct is None:
            rec.completion_tokens = len(chunks)
        else:
            rec.usage_reported = True
            problem = impossible_usage(ct, pt, token_chunks=len(chunks), text_bytes=stream.text_bytes,
                                       chunks_without_text=stream.chunks_without_text, max_tokens=rec.max_tokens)
            if problem is None:
                rec.completion_tokens, rec.prompt_tokens = ct, pt
                rec.cached_tokens = cached_prompt_tokens(usage, pt)
            elif rec.error is None:
                rec.error = f"impossible usage: {problem}"
        rec.ok = rec.error is None

    async def _exchange(self, rec: RequestRecord, body: bytes, origin: float, stream: _Stream) -> None:
        handed = rec.sent_s + origin
        sent = _Sent()
        async with self.session.post(self._url, data=body, headers=self._headers, trace_request_ctx=sent) as resp:
            rec.status = resp.status
            content = resp.content
            connection = resp.connection
            # A reply that came whole with its head (in one read) has had its connection put back
            # in the pool already; its payload still knows the protocol that read it, whose last
            # read is this reply's (the task runs before the loop reads its socket again).
            protocol = connection.protocol if connection is not None else getattr(content, "_protocol", None)
            if not isinstance(protocol, _TimedProtocol):
                protocol = None
            if resp.history:     # followed a redirect: say where the request was served
                rec.served_url = safe_text(str(resp.url))
            elif handed <= sent.t <= _now():
                rec.sent_s = sent.t - origin      # written to the socket (module docstring)
                rec.queue_s = rec.sent_s - rec.scheduled_s
            if resp.status != 200:
                rec.error = f"HTTP {resp.status}: {first_line(await _read_up_to(content))}"
                return
            reply = _Reply(rec, stream, origin, sse=resp.content_type == "text/event-stream")
            if protocol is not None:
                await _follow(reply, content, protocol)
            else:
                await _pull(reply, content)
            if reply.not_sse is not None:
                rest = await _read_up_to(content, ERROR_BODY_BYTES)
                rec.error = describe_non_sse(resp.content_type, reply.not_sse + rest)
            elif reply.done:
                if not content.at_eof():
                    try:
                        # Bounded: a server streaming on after [DONE] gets its connection closed.
                        await asyncio.wait_for(_read_up_to(content), _DRAIN_AFTER_DONE_S)
                    except (asyncio.TimeoutError, aiohttp.ClientError):
                        pass
            elif rec.error is None and rec.finish_reason is None:
                rec.error = ("broken stream: the body ended before [DONE] or a finish_reason "
                             f"({len(rec.token_chunk_s)} token-bearing chunks received)")


class _Reply:
    """A 200 reply's body, read as OpenAI SSE into its record as the bytes come. `take` is given
    each read with its arrival time and says when the reply is over: at [DONE] (`done`), at an
    error (in the record), or at a first read that is not SSE (`not_sse`: the caller reads the rest
    of the body to say what it is); `end` is the end of the body."""

    __slots__ = ("done", "not_sse", "origin", "parser", "rec", "sse", "stream")

    def __init__(self, rec: RequestRecord, stream: _Stream, origin: float, sse: bool) -> None:
        self.rec, self.stream, self.origin, self.sse = rec, stream, origin, sse
        self.parser = SSEParser()
        self.done = False
        self.not_sse: bytes | None = None

    def take(self, data: bytes, t: float) -> bool:
        """One read's bytes, that arrived at `t` (relative to the origin); True when the reply is over."""
        if not self.sse:
            if not _looks_like_sse(data):
                self.rec.end_s = t
                self.not_sse = data
                return True
            self.sse = True
        return self._events(self.parser.feed(data), t)

    def end(self, t: float) -> None:
        """The end of the body at `t`: the last event, even without its blank line."""
        self._events(self.parser.flush(), t)
        self.rec.end_s = t

    def _events(self, events: list[tuple[bytes | None, bytes]], t: float) -> bool:
        rec = self.rec
        for event, payload in events:
            if payload == b"[DONE]":
                self.done = True
                rec.end_s = t
                return True
            rec.events += 1
            try:
                obj = _event_json(payload)
            except ValueError:
                rec.error = f"non-OpenAI stream: event data is not JSON: {first_line(payload)}"
                rec.end_s = t
                return True
            if event == b"error" or not isinstance(obj, dict) or obj.get("error") is not None:
                rec.error = (f"server error in stream: {_error_message(obj)}" if isinstance(obj, dict)
                             else f"non-OpenAI stream: {first_line(payload)}")
                rec.end_s = t
                return True
            if not _take_chunk(rec, self.stream, obj, payload, t):
                return True
        return False


async def _pull(reply: _Reply, content: aiohttp.StreamReader) -> None:
    """Read the body in the request's task, a wake-up per read (a connection without the timing
    protocol: times are when the task runs, later by the loop's other work)."""
    while True:
        data = await content.readany()
        t = _now() - reply.origin
        if not data:
            reply.end(t)
            return
        if reply.take(data, t):
            return


async def _follow(reply: _Reply, content: aiohttp.StreamReader, protocol: _TimedProtocol) -> None:
    """Read the body where the loop reads the socket: aiohttp's parser hands each read's body bytes
    to `reply` from within the protocol's data_received (_FedPayload), and the request's task sleeps
    until the reply is over. With one token a read (a paced server), waking the task for each read
    (a future, a loop callback, a task step, readany, and aiohttp's buffer and flow control around
    them) was most of the client's work a chunk, and each wake-up waited behind the other streams'
    reads: here a read costs its parsing, and an arrival is its read's own time."""
    t = protocol.data_t - reply.origin
    while data := content.read_nowait(-1):   # what came with the response head; raises its error
        if reply.take(data, t):
            return
    if content.is_eof():
        reply.end(_now() - reply.origin)
        return
    if not protocol.connected:
        raise aiohttp.ServerDisconnectedError()
    reader = _BodyReader(reply, content, protocol)
    try:
        content.__class__ = _FedPayload     # same layout (no slots of its own), so Python allows it
    except TypeError:   # pragma: no cover - an aiohttp whose payload class is not StreamReader
        await _pull(reply, content)
        return
    protocol.body_reader = reader
    try:
        await reader.over
    finally:
        content.__class__ = aiohttp.StreamReader
        if protocol.body_reader is reader:
            protocol.body_reader = None


class _BodyReader:
    """What `_follow` hands a reply's body to: each read into the reply (stamped with the read's
    time), its end, its error; `over` is settled when the reply is over, the body ends, or with the
    error, which the request's task then raises as readany would have. Nothing here may raise into
    aiohttp's parser (it would take it for a malformed response)."""

    __slots__ = ("content", "over", "protocol", "reply")

    def __init__(self, reply: _Reply, content: aiohttp.StreamReader, protocol: _TimedProtocol) -> None:
        self.reply, self.content, self.protocol = reply, content, protocol
        self.over: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def on_data(self, data: bytes) -> None:
        try:
            if self.reply.take(data, self.protocol.data_t - self.reply.origin):
                self.over.set_result(None)
        except Exception as exc:    # an oversized event: the task raises it
            self.over.set_exception(exc)

    def on_end(self) -> None:
        try:
            self.reply.end(_now() - self.reply.origin)     # the end may come without a read (closed)
            self.over.set_result(None)
        except Exception as exc:
            self.over.set_exception(exc)

    def on_error(self, exc: BaseException) -> None:
        self.over.set_exception(exc)


class _FedPayload(aiohttp.StreamReader):
    """aiohttp's payload StreamReader for a reply being followed (`_follow` swaps its class in and
    out): while the reply is not over, the parser's body bytes, end and error go straight to its
    _BodyReader instead of the buffer and a waiting task. Nothing is buffered, so flow control has
    nothing to pause for, and no chunk boundary is kept (total_bytes does not move). After the
    reply is over (at [DONE], say), bytes are buffered as usual, for the drain that lets the
    connection be reused."""

    __slots__ = ()

    def _reader(self) -> _BodyReader | None:
        reader = getattr(self._protocol, "body_reader", None)
        if reader is None or reader.content is not self or reader.over.done():
            return None
        return reader

    def feed_data(self, data: bytes, size: int = 0) -> bool:
        reader = self._reader()
        if reader is None:
            return super().feed_data(data, size)
        if data:
            reader.on_data(data)
        return False

    def feed_eof(self) -> None:
        reader = self._reader()
        super().feed_eof()      # aiohttp's end of body (it releases the connection for reuse)
        if reader is not None:
            reader.on_end()

    def set_exception(self, exc: BaseException, *args: Any) -> None:
        reader = self._reader()
        super().set_exception(exc, *args)
        if reader is not None:
            reader.on_error(exc)


def _take_chunk(rec: RequestRecord, stream: _Stream, obj: dict, payload: bytes, t: float) -> bool:
    """One OpenAI chunk into `rec` and `stream`: its text (a token-bearing arrival at `t`), usage and
    finish reason. False, with `rec.error` and `rec.end_s` set, when it cannot be such a chunk."""
    arrivals = rec.token_chunk_s
    try:
        u = obj.get("usage")
        if isinstance(u, dict):
            stream.usage.update(u)
        else:
            u = None
        choices = obj.get("choices")
        if choices:
            c = choices[0]
            text = c.get("text")
            if text is None:
                d = c.get("delta")
                if d:
                    text = d.get("content") or d.get("reasoning_content") or d.get("reasoning")
            if text:
                arrivals.append(t)
                if stream.text is not None:
                    stream.text.append(text)
                # ASCII (the common case) is one byte a character, known without encoding.
                stream.text_bytes += len(text) if text.isascii() else _utf8_len(text)
                if len(arrivals) > rec.max_tokens:
                    rec.error = (f"more token-bearing chunks than the {rec.max_tokens} max_tokens "
                                 "asked (a chunk carries at least one token)")
                    rec.end_s = t
                    return False
            else:
                stream.chunks_without_text += 1
            fr = c.get("finish_reason")
            if fr:
                rec.finish_reason = _clip(fr if isinstance(fr, str) else json.dumps(fr), 64)
        elif choices is None and u is None:
            raise TypeError("a chunk without choices")
    except (AttributeError, TypeError, KeyError, IndexError):
        rec.error = f"non-OpenAI stream: unexpected chunk: {first_line(payload)}"
        rec.end_s = t
        return False
    return True


@dataclass
class _Stream:
    """What one reply streamed, beyond the record: its usage, and what checks it."""

    usage: dict = field(default_factory=dict)
    text_bytes: int = 0             # UTF-8 bytes of the token-bearing chunks' text
    chunks_without_text: int = 0    # chunks with a choice but no text (a role chunk, a special token)
    text: list[str] | None = None   # the reply's text pieces, kept only when asked for


def cached_prompt_tokens(usage: Mapping, prompt_tokens: Any) -> int | None:
    """usage.prompt_tokens_details.cached_tokens when it is a count no larger than the prompt."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    if not _count(cached) or (_count(prompt_tokens) and cached > prompt_tokens):
        return None
    return int(cached)


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def impossible_usage(completion_tokens: Any, prompt_tokens: Any, *, token_chunks: int, text_bytes: int,
                     chunks_without_text: int, max_tokens: int) -> str | None:
    """Why a reply's usage cannot be true of what it streamed (None: it can be). The rule:

    - counts are non-negative integers (prompt_tokens may be absent);
    - completion_tokens >= the token-bearing chunks: a server sends a chunk when it has new text,
      which takes at least one new token (it may batch several tokens into a chunk, never split
      one token over two);
    - completion_tokens <= max_tokens asked: a server stops there;
    - completion_tokens <= the UTF-8 bytes of the streamed text + the chunks without text + 1: a
      token shows at least one byte (a byte-fallback token of a multi-byte character shows one of
      its bytes), except a token that shows nothing (a special token, skipped when detokenized),
      which a server streams as a chunk without text, and a first token whose leading space the
      detokenizer drops. Bytes, not characters, since three tokens may make one character.
    """
    if not _count(completion_tokens):
        return f"completion_tokens {_clip(repr(completion_tokens), 60)} is not a non-negative integer"
    if prompt_tokens is not None and not _count(prompt_tokens):
        return f"prompt_tokens {_clip(repr(prompt_tokens), 60)} is not a non-negative integer"
    if completion_tokens < token_chunks:
        return (f"completion_tokens {completion_tokens} is fewer than the {token_chunks} token-bearing chunks "
                "streamed (each carries at least one token)")
    if completion_tokens > max_tokens:
        return f"completion_tokens {completion_tokens} is more than the {max_tokens} max_tokens asked"
    shown = text_bytes + chunks_without_text + _DROPPED_LEADING_TOKENS
    if completion_tokens > shown:
        return (f"completion_tokens {completion_tokens} is more than the {text_bytes} bytes of text streamed "
                f"+ {chunks_without_text} chunks without text + {_DROPPED_LEADING_TOKENS} (a token shows at "
                "least one byte, or comes in a chunk without text)")
    return None


def records_to_dicts(records: Sequence[RequestRecord]) -> list[dict]:
    return [r.to_dict() for r in records]
