"""The client reads a reply's body where the loop reads the socket (client._follow: aiohttp's parser
hands each read to the reply): the records are the ones the request's task would make reading the
body itself (client._pull, which a session without the timing protocol takes), every hostile reply
included, and the task is not woken for each read."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from aiohttp.client_proto import ResponseHandler
from scripted_server import FAULTS, Script, ScriptedServer, script_prompt

from tpubench.serving import client as client_module
from tpubench.serving.client import Endpoint, RequestSpec, StreamingClient


@pytest.fixture(scope="module")
def srv():
    with ScriptedServer(Script(ttft_ms=0, itl_ms=0, tokens=2)) as server:
        yield server


def _records(url: str, specs: list[RequestSpec], *, timed: bool, timeout_s: float = 0.6, sequential=False):
    """The records of `specs` sent at once (or one after another), through the client's own session
    (timed: the body followed) or a plain aiohttp session (the body pulled by the task)."""

    async def run():
        session = None if timed else aiohttp.ClientSession(read_bufsize=client_module.READ_BUFFER_BYTES)
        try:
            async with StreamingClient(Endpoint(url, "m", timeout_s=timeout_s), session=session) as client:
                origin = time.perf_counter()
                calls = [client.request(s, index=i, origin=origin, scheduled_s=0.0) for i, s in enumerate(specs)]
                if sequential:
                    return [await c for c in calls]
                return await asyncio.gather(*calls)
        finally:
            if session is not None:
                await session.close()

    return asyncio.run(run())


def _outcome(rec) -> tuple:
    return (rec.ok, rec.status, rec.error, rec.token_chunks, rec.events, rec.completion_tokens,
            rec.prompt_tokens, rec.usage_reported, rec.finish_reason, rec.served_url is None)


def test_followed_and_pulled_bodies_make_the_same_records(srv):
    faults = sorted(FAULTS - {"hang"})      # "hang" never answers: no body to read either way
    specs = [RequestSpec(script_prompt(fault=f, itl_ms=1, tokens=4), 1, 4) for f in faults]
    specs += [RequestSpec(script_prompt(itl_ms=1, tokens=6), 1, 6), RequestSpec(script_prompt(tokens=6), 1, 3)]
    followed = _records(srv.url, specs, timed=True)
    pulled = _records(srv.url, specs, timed=False)
    for name, a, b in zip(faults + ["good", "cut at max_tokens"], followed, pulled):
        assert _outcome(a) == _outcome(b), name
    assert followed[-2].ok and followed[-2].token_chunks == 6
    assert not followed[-1].ok and "max_tokens" in followed[-1].error
    assert sum(r.ok for r in followed) >= 4    # no_usage, no_done, redirect, good: not all failures


def test_the_task_does_not_read_the_body_itself(srv, monkeypatch):
    """Each read is parsed in the protocol's callback: readany (a task wake-up a read) is never
    called for a followed body, and is for a pulled one."""
    calls = []
    readany = aiohttp.StreamReader.readany

    async def counted(self):
        if isinstance(self._protocol, ResponseHandler):     # the client's, not the server's
            calls.append(1)
        return await readany(self)

    monkeypatch.setattr(aiohttp.StreamReader, "readany", counted)
    spec = RequestSpec(script_prompt(itl_ms=1, tokens=30), 1, 30)
    (rec,) = _records(srv.url, [spec], timed=True)
    assert rec.ok and rec.token_chunks == 30 and not calls
    (rec,) = _records(srv.url, [spec], timed=False)
    assert rec.ok and rec.token_chunks == 30 and len(calls) > 1


def test_a_followed_reply_leaves_its_connection_reusable(srv, monkeypatch):
    """After [DONE] the body's end is read and the connection goes back to the pool: requests one
    after another share one connection, and the payload is a plain StreamReader again."""
    made = []
    connection_made = client_module._TimedProtocol.connection_made

    def count(self, transport):
        made.append(self)
        connection_made(self, transport)

    monkeypatch.setattr(client_module._TimedProtocol, "connection_made", count)
    specs = [RequestSpec(script_prompt(itl_ms=1, tokens=3), 1, 3) for _ in range(4)]
    records = _records(srv.url, specs, timed=True, sequential=True)
    assert all(r.ok and r.token_chunks == 3 for r in records)
    assert len(made) == 1 and made[0].body_reader is None
