"""A scripted OpenAI-compatible streaming server for tests and benchmarks (127.0.0.1 only).

It streams /v1/completions and /v1/chat/completions as vLLM does (token chunks, the last with
finish_reason, then a usage chunk with empty choices, then `data: [DONE]`) on a script: first
token `ttft_ms` after the request arrived, then one token every `itl_ms` (absolute deadlines, so
delays do not add up), `tokens` tokens (default: the body's max_tokens). A prompt that is a string
starting with `script:` followed by JSON overrides the server's default script for that request,
so one run can mix delays and faults. Faults: "500", "422" (as transformers serve answers
ignore_eos), "html", "json_no_choices", "json_completion" (not streamed), "break" (the connection
is cut after `break_after` tokens), "truncate" (the body ends cleanly after `break_after` tokens,
without finish_reason or [DONE]), "hang" (never answers), "hang_stream" (stops after
`break_after` tokens), "error_event" (an error event after `break_after` tokens), "not_json",
"odd_chunk" (JSON, but not an OpenAI chunk), "redirect" (a 307 to the same endpoint under
/moved, which serves the request), "endless_line" (`data: ` and then megabytes without a newline,
fast), and the shapes "no_usage", "no_done" (transformers serve sends no [DONE]). Hostile texts and
counts: `finish_reason` (default "length"), `error_message` (of "error_event"), `model_id` (what
GET /v1/models lists: the default script's), `completion_tokens` (what usage reports, instead of
the tokens streamed: any JSON value).

Every request is logged with the server's perf_counter times (the same monotonic clock as a
client's on Linux, in any process): when it arrived, when each token chunk was written, and how
many requests were in flight when it arrived.

In a test:   with ScriptedServer(Script(ttft_ms=50, itl_ms=10)) as srv: ... srv.url, srv.log
In another process:   python tests/scripted_server.py [--spin] [--raw] [--script JSON]   (prints
"PORT n", serves until stdin closes; GET /_log returns the log, POST /_reset clears it), or
`spawn()` below.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, replace

from aiohttp import web

_now = time.perf_counter


@dataclass(frozen=True)
class Script:
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    tokens: int | None = None          # default: the body's max_tokens
    prompt_tokens: int | None = None   # default: token ids given, or words in the text
    fault: str | None = None
    break_after: int = 2
    burst: int = 1                     # token chunks per network write (an "instant" server)
    usage: bool = True
    done: bool = True
    finish_reason: str = "length"
    error_message: str = "scripted error mid-stream"
    model_id: str = "scripted"
    completion_tokens: object = None   # reported in usage instead of `tokens` when given
    # The server's own capacity (the default script's): at most this many requests are served at
    # once, the others queue (their TTFT includes the wait), so the server saturates above
    # slots / (ttft + (tokens - 1) * itl) requests per second.
    slots: int | None = None


# What the "endless_line" fault streams before giving up: far past any sane event size.
ENDLESS_LINE_BYTES = 64 << 20


FAULTS = {"500", "422", "html", "json_no_choices", "json_completion", "break", "truncate", "hang",
          "hang_stream", "error_event", "not_json", "odd_chunk", "no_usage", "no_done", "redirect",
          "endless_line"}


def script_prompt(**kw) -> str:
    """A prompt that makes the server follow this script for one request."""
    bad = set(kw) - set(Script.__dataclass_fields__)
    if bad:
        raise ValueError(f"unknown script fields {sorted(bad)}")
    return "script:" + json.dumps(kw)


@dataclass(frozen=True)
class _Plan:
    n: int
    usage: dict
    head: bytes     # chat: the role chunk
    token: bytes
    last: bytes     # the last token chunk, with finish_reason
    tail: bytes     # usage chunk and [DONE]


def _sse(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _tail(usage: dict, script: Script, fault: str | None) -> bytes:
    tail = b""
    if script.usage and fault != "no_usage":
        tail += _sse({"id": "cmpl-1", "choices": [], "usage": usage})
    if script.done and fault != "no_done":
        tail += b"data: [DONE]\n\n"
    return tail


def _plan(body: dict, script: Script, chat: bool) -> _Plan:
    n = script.tokens if script.tokens is not None else int(body.get("max_tokens") or 16)
    prompt = body.get("prompt")
    pt = script.prompt_tokens
    if pt is None:
        pt = len(prompt) if isinstance(prompt, list) else len(str(prompt or body.get("messages")).split())
    usage = {"prompt_tokens": pt, "completion_tokens": n, "total_tokens": pt + n}
    if script.completion_tokens is not None:
        usage["completion_tokens"] = script.completion_tokens

    def chunk(text: str, finish: str | None = None) -> bytes:
        if chat:
            return _sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": body.get("model"),
                         "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]})
        return _sse({"id": "cmpl-1", "object": "text_completion", "model": body.get("model"),
                     "choices": [{"index": 0, "text": text, "finish_reason": finish}], "usage": None})

    head = _sse({"id": "chatcmpl-1", "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}) if chat else b""
    return _Plan(n, usage, head, chunk(" tok"), chunk(" tok", script.finish_reason),
                 _tail(usage, script, script.fault))


class _App:
    def __init__(self, default: Script, spin: bool):
        self.default = default
        self.spin = spin              # busy-wait the last 1.5 ms before a first token (own process only)
        self.log: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.cache_resets: list[dict] = []    # POST /reset_prefix_cache or /flush_cache: when, which
        self.slots: asyncio.Semaphore | None = None   # Script.slots, made on the server's loop

    def script_for(self, body: dict) -> Script:
        s = self.default
        prompt = body.get("prompt")
        if prompt is None and body.get("messages"):
            prompt = body["messages"][-1].get("content")
        if isinstance(prompt, str) and prompt.startswith("script:"):
            s = replace(s, **json.loads(prompt[7:]))
        if s.fault is not None and s.fault not in FAULTS:
            raise ValueError(f"unknown fault {s.fault!r}")
        return s

    def admit(self, body: dict, received: float) -> tuple[Script, dict]:
        """A request comes in: its script, counted in flight, and its log entry."""
        script = self.script_for(body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        entry = {"received": received, "in_flight": self.in_flight, "writes": [], "body": body,
                 "script": asdict(script)}
        self.log.append(entry)
        return script, entry

    async def wait_until(self, deadline: float, spin: bool = False) -> None:
        delay = deadline - _now()
        if spin:
            # Sleep to 1.5 ms before, then yield to the loop until due: exact to a few microseconds
            # and the loop still takes in other requests meanwhile.
            if delay > 0.0015:
                await asyncio.sleep(delay - 0.0015)
            while _now() < deadline:
                await asyncio.sleep(0)
        elif delay > 0:
            await asyncio.sleep(delay)

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.default.model_id, "object": "model"}]})

    async def reset_prefix_cache(self, request: web.Request) -> web.Response:
        """vLLM's (dev mode) and SGLang's prefix-cache resets: logged, answered as vLLM does."""
        self.cache_resets.append({"received": _now(), "path": request.path})
        return web.json_response({"success": True})

    async def get_log(self, request: web.Request) -> web.Response:
        return web.json_response({"log": self.log, "max_in_flight": self.max_in_flight})

    async def reset(self, request: web.Request) -> web.Response:
        self.log.clear()
        self.max_in_flight = 0
        return web.json_response({"ok": True})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=True)

    async def moved_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=False, moved=True)

    async def moved_chat(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, chat=True, moved=True)

    async def _serve(self, request: web.Request, chat: bool, moved: bool = False) -> web.StreamResponse:
        received = _now()
        body = await request.json()
        script, entry = self.admit(body, received)
        entry["path"] = request.path
        if moved and script.fault == "redirect":
            script = replace(script, fault=None)    # served where it was sent
        try:
            if self.default.slots:
                if self.slots is None:
                    self.slots = asyncio.Semaphore(self.default.slots)
                async with self.slots:
                    return await self._reply(request, body, script, chat, _now(), entry)
            return await self._reply(request, body, script, chat, received, entry)
        finally:
            if self.in_flight and not entry.get("released"):
                self.in_flight -= 1

    def _release(self, entry: dict) -> None:
        entry["released"] = True
        self.in_flight -= 1

    async def _reply(self, request, body, script: Script, chat: bool, received: float, entry: dict):
        fault = script.fault
        if fault == "500":
            return web.json_response({"error": {"message": "scripted internal error", "code": 500}}, status=500)
        if fault == "422":
            return web.json_response({"detail": [{"type": "extra_forbidden", "loc": ["body", "ignore_eos"],
                                                  "msg": "Extra inputs are not permitted"}]}, status=422)
        if fault == "html":
            return web.Response(text="<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>"
                                     "<body>nginx</body></html>", content_type="text/html")
        if fault == "json_no_choices":
            return web.json_response({"object": "list", "data": []})
        if fault == "hang":
            await asyncio.sleep(3600)
        if fault == "redirect":
            raise web.HTTPTemporaryRedirect("/moved" + request.path)
        plan = _plan(body, script, chat)
        if fault == "json_completion":
            return web.json_response({"id": "cmpl-1", "object": "text_completion", "usage": plan.usage,
                                      "choices": [{"index": 0, "text": " tok" * plan.n, "finish_reason": "length"}]})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        if plan.head:
            await resp.write(plan.head)
        if fault == "not_json":
            await resp.write(b"data: this is not json\n\n")
            return resp
        if fault == "odd_chunk":
            await resp.write(b'data: {"choices": ["x"]}\n\n')
            return resp
        if fault == "endless_line":
            await resp.write(b"data: ")
            block = b"x" * (64 << 10)
            try:
                for _ in range(ENDLESS_LINE_BYTES // len(block)):
                    await resp.write(block)
            except (ConnectionError, RuntimeError):   # the client hung up, as it should
                pass
            return resp
        stop_at = script.break_after if fault in ("break", "truncate", "hang_stream", "error_event") else plan.n
        await self.pace(resp.write, plan, script, received, entry, stop_at)
        if fault == "break":
            request.transport.abort()
            return resp
        if fault == "truncate":
            await resp.write_eof()
            return resp
        if fault == "hang_stream":
            await asyncio.sleep(3600)
        if fault == "error_event":
            await resp.write(_sse({"error": {"message": script.error_message}}))
            await resp.write_eof()
            return resp
        tail = plan.tail if fault not in ("no_usage", "no_done") else _tail(plan.usage, script, fault)
        if tail:
            await resp.write(tail)
        self._release(entry)
        await resp.write_eof()
        return resp

    async def pace(self, write, plan: _Plan, script: Script, received: float, entry: dict, stop_at: int) -> None:
        """Token chunks on the script's absolute deadlines, `burst` per write."""
        writes = entry["writes"]
        first, itl, n = received + script.ttft_ms / 1e3, script.itl_ms / 1e3, plan.n
        i, end = 0, min(n, stop_at)
        while i < end:
            k = min(script.burst, end - i)
            await self.wait_until(first + (i + k - 1) * itl, spin=self.spin and i == 0)
            data = b"".join(plan.last if j == n - 1 else plan.token for j in range(i, i + k))
            writes.extend([_now()] * k)        # before the write: the client cannot see it earlier
            await write(data)
            i += k

    def make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/moved/v1/completions", self.moved_completions)
        app.router.add_post("/moved/v1/chat/completions", self.moved_chat)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/_log", self.get_log)
        app.router.add_post("/_reset", self.reset)
        app.router.add_post("/reset_prefix_cache", self.reset_prefix_cache)
        app.router.add_post("/flush_cache", self.reset_prefix_cache)
        return app


class _RawHTTP(asyncio.Protocol):
    """A bare HTTP/1.1 server for the client's benchmark: the request's arrival is stamped in
    data_received, before any framework, so the way there measures the client and the kernel.
    POST /v1/completions and /v1/chat/completions (fault-free scripts), GET /_log, POST /_reset."""

    def __init__(self, app: _App):
        self.app = app
        self.buf = b""
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        t = _now()
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.buf[:end].decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in lines[1:] if ":" in h)}
            size = int(headers.get("content-length", 0))
            if len(self.buf) < end + 4 + size:
                return
            body = self.buf[end + 4:end + 4 + size]
            self.buf = self.buf[end + 4 + size:]
            asyncio.ensure_future(self.handle(method, path, body, t))

    def _json(self, obj) -> None:
        data = json.dumps(obj).encode()
        self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(data)).encode() + b"\r\n\r\n" + data)

    async def handle(self, method: str, path: str, raw: bytes, received: float) -> None:
        app = self.app
        if path == "/_log":
            return self._json({"log": app.log, "max_in_flight": app.max_in_flight})
        if path == "/_reset":
            app.log.clear()
            app.max_in_flight = 0
            return self._json({"ok": True})
        body = json.loads(raw)
        script, entry = app.admit(body, received)
        plan = _plan(body, script, chat=path.endswith("/chat/completions"))
        transport = self.transport

        async def write(data: bytes) -> None:
            transport.write(b"%x\r\n%s\r\n" % (len(data), data))

        transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                        b"Transfer-Encoding: chunked\r\n\r\n")
        if plan.head:
            await write(plan.head)
        await app.pace(write, plan, script, received, entry, plan.n)
        app._release(entry)
        transport.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(plan.tail), plan.tail) if plan.tail else b"0\r\n\r\n")


def _listening_socket(host: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    sock.listen(1024)
    return sock


class ScriptedServer:
    """The server on its own event loop in a background thread of this process."""

    def __init__(self, default: Script | None = None, spin: bool = False):
        self.app = _App(default or Script(), spin)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> list[dict]:
        return self.app.log

    @property
    def max_in_flight(self) -> int:
        return self.app.max_in_flight

    def start(self) -> ScriptedServer:
        sock = _listening_socket()
        self.port = sock.getsockname()[1]
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def up():
            self._runner = web.AppRunner(self.app.make_app(), handler_cancellation=True, shutdown_timeout=0.5,
                                         access_log=None)
            await self._runner.setup()
            await web.SockSite(self._runner, sock).start()

        def main():
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(up())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=main, name="scripted-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the scripted server did not start")
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        fut = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
        try:
            fut.result(5)
        except Exception:  # noqa: BLE001 - shutting down a test server
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()
        self._loop = None

    def reset(self) -> None:
        self.app.log.clear()
        self.app.max_in_flight = 0

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def spawn(script: Script | None = None, spin: bool = True, cpu: int | None = None,
          raw: bool = False) -> tuple[subprocess.Popen, str]:
    """The server in a child process (optionally pinned to one CPU, optionally the bare HTTP
    server); returns (process, url)."""
    cmd = [sys.executable, __file__, "--script", json.dumps(asdict(script or Script()))]
    if spin:
        cmd.append("--spin")
    if raw:
        cmd.append("--raw")
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"the scripted server did not start: {line!r}")
    return proc, f"http://127.0.0.1:{int(line.split()[1])}"


def _main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", default="{}")
    ap.add_argument("--spin", action="store_true")
    ap.add_argument("--cpu", type=int)
    ap.add_argument("--raw", action="store_true", help="the bare HTTP server (benchmarks)")
    args = ap.parse_args()
    if args.cpu is not None:
        import os
        os.sched_setaffinity(0, {args.cpu})
    app = _App(Script(**json.loads(args.script)), args.spin)
    sock = _listening_socket()

    async def serve():
        if args.raw:
            server = await asyncio.get_running_loop().create_server(lambda: _RawHTTP(app), sock=sock)
            print(f"PORT {sock.getsockname()[1]}", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
            server.close()
            return
        runner = web.AppRunner(app.make_app(), handler_cancellation=True, shutdown_timeout=0.5, access_log=None)
        await runner.setup()
        await web.SockSite(runner, sock).start()
        print(f"PORT {sock.getsockname()[1]}", flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)   # until the parent closes stdin
        await runner.cleanup()

    asyncio.run(serve())


if __name__ == "__main__":
    _main()
