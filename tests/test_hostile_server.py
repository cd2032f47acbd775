"""A broken or hostile OpenAI server never crashes a run nor exhausts memory (issue 17, item 12):
lone surrogates in what it sends, impossible token counts, redirects, an endless line. Every
case against the scripted server on 127.0.0.1; every point that ran leaves a result on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from helpers_cli import run_cli as cli

from tpubench.records.result import read_result

pytest.importorskip("aiohttp")
from scripted_server import Script, ScriptedServer, script_prompt  # noqa: E402

from tpubench.serving.client import MAX_EVENT_BYTES, Endpoint, EventTooLarge, RequestSpec, SSEParser  # noqa: E402
from tpubench.serving.load import run_load  # noqa: E402
from tpubench.serving.metrics import outcome_metrics, request_warnings, validity_reasons  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SURROGATE = "\ud800"


def url_workload(tmp_path: Path, concurrency=(1, 2), output_length: int = 4) -> Path:
    """serve_local pointed at a running server, with a few short requests per point."""
    data = yaml.safe_load((REPO / "workloads" / "serve_local.yaml").read_text())
    data["scenario"].update(server={"url": "http://127.0.0.1:9", "model": "scripted"}, input_length=8,
                            output_length=output_length,
                            load={"concurrency": list(concurrency), "num_requests": 3, "warmup_requests": 0})
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def results_in(folder: Path):
    return [read_result(f) for f in sorted(folder.glob("*.json"))]


def one(srv, prompt: str, max_tokens: int = 4, **endpoint):
    out = run_load(Endpoint(srv.url, "m", **endpoint), [RequestSpec(prompt, 1, max_tokens)], concurrency=1)
    return out.records[0]


# ----------------------------------------------------------------------------- lone surrogates


@pytest.mark.parametrize("script", [Script(finish_reason=SURROGATE), Script(fault="error_event",
                                                                             error_message=SURROGATE)],
                         ids=["finish_reason", "error_event"])
@pytest.mark.slow
def test_a_lone_surrogate_from_the_server_is_stored_escaped(tmp_path, monkeypatch, capsys, script):
    workload = url_workload(tmp_path)
    with ScriptedServer(script) as srv:
        code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--server-url", srv.url,
                             "--out", str(tmp_path / "r"))
        assert "internal error" not in err, err
        results = results_in(tmp_path / "r")
        assert len(results) == 2, (code, out, err)             # the sweep went on past the first point
        texts = json.dumps([r.model_dump(mode="json") for r in results])
        assert "\\\\ud800" in texts                             # kept, escaped: "\ud800" as six characters
        # --resume reads them back and measures nothing again.
        code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--server-url", srv.url,
                             "--out", str(tmp_path / "r"), "--resume")
    assert "internal error" not in err and out.count("already measured") == 2, out + err


@pytest.mark.slow
def test_a_lone_surrogate_in_the_served_model_id(tmp_path, monkeypatch, capsys):
    data = yaml.safe_load(url_workload(tmp_path).read_text())
    del data["scenario"]["server"]["model"]                 # the model is what /v1/models lists
    workload = tmp_path / "serve.yaml"
    workload.write_text(yaml.safe_dump(data, sort_keys=False))
    with ScriptedServer(Script(model_id="m" + SURROGATE)) as srv:
        code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--server-url", srv.url,
                             "--out", str(tmp_path / "r"))
    assert code == 0 and "internal error" not in err, err
    results = results_in(tmp_path / "r")
    assert len(results) == 2 and all(r.status == "ok" for r in results)
    assert results[0].environment["server"]["model"] == "m\\ud800"


def test_a_result_that_cannot_be_serialized_is_written_as_failed(tmp_path):
    from tpubench.records.result import RunResult, write_result

    result = RunResult(point={"workload": "w"}, point_key="k", backend="torch", device="cpu",
                       metrics={"x": 1.0}, unserializable=object())
    path = write_result(result, tmp_path)
    back = read_result(path)
    assert back.status == "failed" and "cannot be serialized" in back.error
    assert back.point_key == "k" and not back.validity.valid


def test_surrogates_from_a_user_are_stored_escaped(tmp_path):
    from tpubench.records.result import RunResult, write_result

    result = RunResult(point={"workload": "w" + SURROGATE}, point_key="k", backend="torch", device="cpu",
                       warnings=["a" + SURROGATE + "b"])
    back = read_result(write_result(result, tmp_path))
    assert back.status == "ok" and back.warnings == ["a\\ud800b"] and back.point["workload"] == "w\\ud800"


# ----------------------------------------------------------------------------- usage against the stream


@pytest.mark.parametrize("reported, why", [
    (5, "fewer than the 16 token-bearing chunks streamed"),
    (-16, "not a non-negative integer"),
    (16.5, "not a non-negative integer"),
    ("16", "not a non-negative integer"),
    (True, "not a non-negative integer"),
    (10_000, "more than the"),
])
def test_usage_is_checked_against_the_stream(reported, why):
    with ScriptedServer(Script(tokens=16, completion_tokens=reported)) as srv:
        r = one(srv, "p", max_tokens=16)
    assert not r.ok and r.error.startswith("impossible usage") and why in r.error, r.error
    assert r.completion_tokens is None and r.token_chunks == 16


@pytest.mark.slow
def test_usage_above_the_streamed_bytes_is_impossible():
    # 16 chunks of " tok" are 64 bytes of text: 65 tokens at most (a token shows at least a byte;
    # one more for a leading space a detokenizer may drop).
    with ScriptedServer(Script(tokens=16, completion_tokens=66)) as srv:
        r = one(srv, "p", max_tokens=100)
        assert not r.ok and "more than the 64 bytes" in r.error, r.error
        srv.app.default = Script(tokens=16, completion_tokens=65)
        assert one(srv, "p", max_tokens=100).ok


@pytest.mark.slow
def test_a_lying_server_never_gives_a_valid_point_nor_negative_throughput():
    specs = [RequestSpec("p", 1, 16)] * 4
    for reported in (5, -16):
        with ScriptedServer(Script(tokens=16, completion_tokens=reported)) as srv:
            out = run_load(Endpoint(srv.url, "m"), specs, concurrency=2)
        m = outcome_metrics(out, n_boot=0)
        assert m["requests_ok"] == 0 and m["output_tokens_per_s"] == 0, reported
        assert any("4 of 4 requests failed" in r and "impossible usage" in r
                   for r in validity_reasons(m, out.records)), reported


def test_more_token_chunks_than_max_tokens_stops_the_request():
    # An endless stream of token chunks is cut at max_tokens, not at the timeout (whose error would
    # say "timeout after 30 s").
    with ScriptedServer(Script(tokens=100_000)) as srv:
        r = one(srv, "p", max_tokens=8, timeout_s=30)
    assert not r.ok and "more token-bearing chunks than the 8 max_tokens asked" in r.error, r.error


# ----------------------------------------------------------------------------- redirects


def test_a_redirect_records_where_the_request_was_served():
    with ScriptedServer(Script(tokens=2)) as srv:
        out = run_load(Endpoint(srv.url, "m"), [RequestSpec(script_prompt(fault="redirect"), 1, 2),
                                                RequestSpec("plain", 1, 2)], concurrency=1)
    moved, plain = out.records
    assert moved.ok and moved.served_url == f"{srv.url}/moved/v1/completions"
    assert plain.ok and plain.served_url is None
    warnings = request_warnings(out.records)
    assert len(warnings) == 1 and "1 of 2 requests were redirected" in warnings[0]
    assert f"{srv.url}/moved/v1/completions" in warnings[0]


def test_a_redirected_point_says_so_in_its_result(tmp_path, monkeypatch, capsys):
    workload = url_workload(tmp_path, concurrency=(1,))
    with ScriptedServer(Script(fault="redirect")) as srv:
        code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--server-url", srv.url,
                             "--out", str(tmp_path / "r"))
    assert code == 0, out + err
    (r,) = results_in(tmp_path / "r")
    assert all(q["served_url"] == f"{srv.url}/moved/v1/completions" for q in r.requests)
    assert any("redirected" in w for w in r.warnings), r.warnings


# ----------------------------------------------------------------------------- size bounds


def test_an_endless_line_fails_the_request_quickly():
    # Failed by the size bound (1 MiB), not by the 60 s timeout.
    with ScriptedServer(Script(fault="endless_line")) as srv:
        r = one(srv, "p", timeout_s=60)
    assert not r.ok and r.error.startswith("oversized SSE event"), r.error
    assert "1 MiB" in r.error


def test_the_sse_parser_bounds_lines_and_events():
    parser = SSEParser()
    parser.feed(b"data: " + b"x" * (MAX_EVENT_BYTES // 2))
    with pytest.raises(EventTooLarge):
        parser.feed(b"x" * (MAX_EVENT_BYTES // 2 + 1))
    # Many short data lines of one event (never a blank line) are bounded too.
    parser = SSEParser()
    with pytest.raises(EventTooLarge):
        for _ in range(MAX_EVENT_BYTES // 1000 + 2):
            parser.feed(b"data: " + b"y" * 1000 + b"\n")
    # Right under the limit is fine.
    parser = SSEParser()
    assert parser.feed(b"data: " + b"z" * (MAX_EVENT_BYTES - 100) + b"\n\n") == [(None, b"z" * (MAX_EVENT_BYTES - 100))]


@pytest.mark.slow
def test_a_point_whose_every_request_fails_records_a_failed_result_and_the_sweep_goes_on(tmp_path, monkeypatch,
                                                                                        capsys):
    workload = url_workload(tmp_path)
    with ScriptedServer(Script(fault="endless_line")) as srv:
        code, out, err = cli(monkeypatch, capsys, "run", str(workload), "--server-url", srv.url,
                             "--out", str(tmp_path / "r"))
    assert code == 1 and "internal error" not in err
    results = results_in(tmp_path / "r")
    assert len(results) == 2 and all(r.status == "failed" and "oversized SSE event" in r.error for r in results)
