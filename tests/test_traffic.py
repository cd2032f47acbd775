"""The user's own traffic (serving/traffic/): each mode's requests (deterministic, shared prefixes
shared word for word, which is token for token with a pool of one-token words), multi-turn
sessions against the scripted server (history grows and is resent with the server's answers,
think time honoured), trace replay on the trace's clock, and bad dataset and trace rows (one-line
errors naming file:line and field, exit 2 through the CLI)."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
import yaml
from helpers_cli import run_cli as cli

from tpubench.errors import UserError
from tpubench.serving.traffic import dataset, multi_turn, shared_prefix, trace
from tpubench.serving.traffic.common import RequestSpec, Vocabulary
from tpubench.serving.traffic.plan import check_traffic, plan_traffic

REPO = Path(__file__).resolve().parents[1]
VOCAB = Vocabulary(tuple(f"w{i}" for i in range(300)), special_tokens=1, exact=True)


def write(path: Path, lines: list) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


# ----------------------------------------------------------------------------- common


def test_words_are_deterministic_and_a_short_draw_is_a_prefix_of_a_long_one():
    assert VOCAB.words_for(50, 7, 1, 3) == VOCAB.words_for(50, 7, 1, 3)
    assert VOCAB.words_for(50, 7, 1, 3) != VOCAB.words_for(50, 8, 1, 3)
    assert VOCAB.words_for(700, 7, 1, 3)[:300] == VOCAB.words_for(300, 7, 1, 3)
    # A completions prompt of n tokens: n - special words.
    assert len(VOCAB.prompt(20, 1).split()) == 19


# ----------------------------------------------------------------------------- dataset


def test_dataset_rows_in_order_and_sampled(tmp_path):
    path = write(tmp_path / "d.jsonl", [
        {"prompt": "hello there", "output_length": 5},
        "",
        {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
         "max_tokens": 7},
        {"prompt": "third"},
    ])
    rows = dataset.read_rows(path, default_output=3)
    assert [line for line, _ in rows] == [1, 3, 4]
    assert [s.max_tokens for _, s in rows] == [5, 7, 3]
    assert rows[1][1].messages[0] == {"role": "system", "content": "be brief"}
    cfg = {"path": str(path), "order": "in_order"}
    ordered = dataset.plan(cfg, n=7, warmup=1, seed=0, vocab=VOCAB, base_dir=None, default_output=3, chat=True)
    assert [s.max_tokens for s in ordered.specs] == [5, 7, 3, 5, 7, 3, 5]
    sampled = [dataset.plan({"path": str(path)}, n=6, warmup=0, seed=s, vocab=VOCAB, base_dir=None,
                            default_output=3, chat=True).specs for s in (1, 1, 2)]
    assert sampled[0] == sampled[1]                          # the seed decides
    assert sorted(s.max_tokens for s in sampled[0][:3]) == [3, 5, 7]   # every row once before repeats
    with pytest.raises(UserError, match="set scenario.endpoint: chat"):
        dataset.plan(cfg, n=2, warmup=0, seed=0, vocab=VOCAB, base_dir=None, default_output=3, chat=False)


@pytest.mark.parametrize("row, where, field, message", [
    ('{"prompt": "a"', 2, None, "not a JSON object"),
    ({"text": "a"}, 2, "prompt", "either prompt"),
    ({"prompt": "a", "messages": []}, 2, "messages", "either prompt"),
    ({"prompt": ""}, 2, "prompt", "non-empty string"),
    ({"prompt": "a", "output_length": 0}, 2, "output_length", "positive integer"),
    ({"prompt": "a", "max_tokens": "9"}, 2, "max_tokens", "positive integer"),
    ({"messages": [{"role": "robot", "content": "x"}]}, 2, "messages.0.role", "role must be one of"),
    ({"messages": [{"role": "user", "content": 3}]}, 2, "messages.0.content", "content must be a string"),
    ([1, 2], 2, None, "expected a JSON object"),
])
def test_bad_dataset_rows_name_file_line_and_field(tmp_path, row, where, field, message):
    path = write(tmp_path / "bad.jsonl", [{"prompt": "fine"}, row])
    with pytest.raises(UserError, match=message) as exc:
        dataset.read_rows(path, default_output=4)
    assert exc.value.where == f"{path}:{where}" and exc.value.field == field


def test_a_dataset_row_without_any_output_length(tmp_path):
    path = write(tmp_path / "d.jsonl", [{"prompt": "x"}])
    with pytest.raises(UserError, match="no output length") as exc:
        dataset.read_rows(path, default_output=None)
    assert exc.value.where == f"{path}:1"


# ----------------------------------------------------------------------------- shared prefix


def test_shared_prefixes_are_shared_word_for_word_and_only_when_asked():
    cfg = {"num_prefixes": 3, "prefix_length": 40, "suffix_length": 10, "prefix_share": 1.0}
    a = shared_prefix.plan(cfg, n=30, warmup=2, seed=5, vocab=VOCAB, output_length=4, chat=False)
    assert a.specs == shared_prefix.plan(cfg, n=30, warmup=2, seed=5, vocab=VOCAB, output_length=4, chat=False).specs
    prefixes = {tuple(s.prompt.split()[:40]) for s in a.specs}
    assert len(prefixes) == 3                                   # every request uses one of the 3
    assert len({tuple(s.prompt.split()[40:]) for s in a.specs}) == 30   # each question its own
    # Exact lengths: prefix + question = the asked length with the tokenizer's special token.
    assert {(len(s.prompt.split()) + VOCAB.special_tokens, s.prompt_len) for s in a.specs} == {(50, 50)}
    # A one-token question still gets its word beside the special token: its length says so.
    short = shared_prefix.plan({**cfg, "suffix_length": 1}, n=3, warmup=0, seed=5, vocab=VOCAB, output_length=4,
                               chat=False)
    assert {(len(s.prompt.split()) + VOCAB.special_tokens, s.prompt_len) for s in short.specs} == {(42, 42)}
    # No sharing: the same lengths, but no two prompts begin alike.
    none = shared_prefix.plan({**cfg, "prefix_share": 0.0}, n=30, warmup=0, seed=5, vocab=VOCAB,
                              output_length=4, chat=False)
    assert len({tuple(s.prompt.split()[:40]) for s in none.specs}) == 30
    assert none.summary["requests_sharing"] == 0 and a.summary["requests_sharing"] == 30
    # The warm-up prompts share nothing with the measured ones.
    assert not {tuple(w.prompt.split()[:40]) for w in a.warmup} & prefixes
    half = shared_prefix.plan({**cfg, "prefix_share": 0.5}, n=400, warmup=0, seed=5, vocab=VOCAB,
                              output_length=4, chat=False)
    assert 150 < half.summary["requests_sharing"] < 250


def test_shared_prefix_on_chat_is_the_system_message():
    cfg = {"num_prefixes": 1, "prefix_length": 8, "suffix_length": 4}
    plan = shared_prefix.plan(cfg, n=3, warmup=0, seed=0, vocab=VOCAB, output_length=4, chat=True)
    systems = {s.messages[0]["content"] for s in plan.specs}
    assert len(systems) == 1 and [m["role"] for m in plan.specs[0].messages] == ["system", "user"]


def test_shared_prefix_token_for_token_with_the_demo_tokenizer():
    pytest.importorskip("transformers")
    from tpubench.serving.demo_model import build_tokenizer, word_pool

    tok = build_tokenizer(512)
    vocab = Vocabulary(tuple(word_pool(tok)), special_tokens=len(tok("")["input_ids"]), exact=True)
    cfg = {"num_prefixes": 2, "prefix_length": 32, "suffix_length": 8}
    plan = shared_prefix.plan(cfg, n=6, warmup=0, seed=1, vocab=vocab, output_length=4, chat=False)
    ids = [tok(s.prompt)["input_ids"] for s in plan.specs]
    assert {len(i) for i in ids} == {40}
    assert len({tuple(i[:32]) for i in ids}) == 2


# ----------------------------------------------------------------------------- multi-turn


def test_multi_turn_sessions_are_deterministic_and_share_system_prompts():
    cfg = {"turns": 3, "user_length": 5, "answer_length": 4, "system_prompt_length": 12, "num_system_prompts": 2}
    plan = multi_turn.plan(cfg, num_requests=10, concurrency=2, warmup=1, seed=3, vocab=VOCAB)
    assert len(plan.sessions) == 4                              # ceil(10 / 3)
    assert plan.sessions == multi_turn.plan(cfg, num_requests=10, concurrency=2, warmup=1, seed=3,
                                            vocab=VOCAB).sessions
    assert len({s.system for s in plan.sessions}) == 2
    assert len({u for s in plan.sessions for u in s.user_turns}) == 12
    history = [{"role": "user", "content": "u0"}, {"role": "assistant", "content": "a0"}]
    msgs = multi_turn.turn_messages(plan.sessions[0], history, 1)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]


def test_multi_turn_resends_the_growing_history_with_the_servers_answers():
    pytest.importorskip("aiohttp")
    from scripted_server import Script, ScriptedServer

    from tpubench.serving.client import Endpoint
    from tpubench.serving.load import run_load

    cfg = {"turns": 3, "user_length": 4, "answer_length": 3, "system_prompt_length": 6, "think_time_s": 0.05}
    plan = multi_turn.plan(cfg, num_requests=None, concurrency=2, warmup=1, seed=0, vocab=VOCAB)
    assert len(plan.sessions) == 2
    with ScriptedServer(Script(ttft_ms=5, itl_ms=2)) as srv:
        out = run_load(Endpoint(url=srv.url, model="scripted", api="chat"), [], concurrency=2,
                       sessions=plan.sessions, warmup_requests=1, warmup_specs=plan.warmup)
        log = [e for e in srv.log if e["body"]["messages"][0]["role"] == "system"]
    assert out.mode == "sessions" and len(out.records) == 6 and all(r.ok for r in out.records)
    assert len(out.warmup_records) == 1
    for session in plan.sessions:
        assert session.system == plan.sessions[0].system       # one system prompt, shared
        bodies = [e["body"]["messages"] for e in log if e["body"]["messages"][1]["content"] == session.user_turns[0]]
        assert [len(m) for m in bodies] == [2, 4, 6]            # system + 2 per earlier turn + the new turn
        for t in (1, 2):
            assert bodies[t][:-2] == bodies[t - 1]              # the earlier request, resent whole
            assert bodies[t][-2] == {"role": "assistant", "content": " tok" * 3}   # the server's own answer
            assert bodies[t][-1] == {"role": "user", "content": session.user_turns[t]}
        recs = sorted((r for r in out.records if r.session == session.index), key=lambda r: r.turn)
        assert [r.turn for r in recs] == [0, 1, 2]
        for a, b in zip(recs, recs[1:]):
            assert b.scheduled_s == pytest.approx(a.end_s + 0.05)
            assert b.sent_s - a.end_s >= 0.05                   # think time honoured


def test_multi_turn_under_a_duration_has_sessions_to_last_it_and_starts_no_turn_after_it():
    pytest.importorskip("aiohttp")
    from scripted_server import Script, ScriptedServer

    from tpubench.serving.client import Endpoint
    from tpubench.serving.load import run_load

    cfg = {"turns": 3, "user_length": 4, "answer_length": 2, "think_time_s": 0.3}
    # A duration-bound point (num_requests None) gets the sessions its default count asks, not one a worker.
    plan = plan_traffic({"multi_turn": cfg}, vocab=VOCAB, seed=0, num_requests=None, concurrency=2, warmup=0,
                        base_dir=None, output_length=None, chat=True, default_requests=12)
    assert len(plan.sessions) == 4                              # ceil(12 / 3)
    with ScriptedServer(Script(ttft_ms=2, itl_ms=1)) as srv:
        out = run_load(Endpoint(url=srv.url, model="scripted", api="chat"), [], concurrency=2,
                       sessions=plan.sessions, duration_s=0.2)
    # Turn 0 of the first two sessions goes out at once; each next turn would be due after 0.3 s.
    assert sorted((r.session, r.turn) for r in out.records) == [(0, 0), (1, 0)]


# ----------------------------------------------------------------------------- trace


def mooncake(tmp_path: Path, rows: list) -> Path:
    return write(tmp_path / "t.jsonl", rows)


def test_mooncake_rows_and_blocks_shared_by_hash_id(tmp_path):
    path = mooncake(tmp_path, [
        {"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [0, 1, 2]},
        {"timestamp": 0, "input_length": 700, "output_length": 6, "hash_ids": [0, 3]},
        {"timestamp": 2500, "input_length": 300, "output_length": 7, "hash_ids": [4]},
        {"timestamp": 2600.5, "input_length": 1030, "output_length": 8, "hash_ids": [0, 1, 5]},
    ])
    assert trace.check(path) == {"rows": 4, "span_s": 2.6005, "rows_with_hash_ids": 4, "input_tokens": 3130}
    plan = trace.plan({"path": str(path)}, warmup=1, seed=9, vocab=VOCAB, base_dir=None, chat=False)
    timed = list(plan.timed())
    assert [t for t, _ in timed] == [0.0, 0.0, 2.5, 2.6005]
    assert timed == list(plan.timed())                          # deterministic, read again from the file
    words = [s.prompt.split() for _, s in timed]
    assert [len(w) + 1 for w in words] == [1100, 700, 300, 1030] == [s.prompt_len for _, s in timed]
    # A one-token row keeps a word beside the special token: its length says what is sent.
    (tmp_path / "one").mkdir()
    one = mooncake(tmp_path / "one", [{"timestamp": 0, "input_length": 1, "output_length": 2}])
    ((_, spec),) = trace.plan({"path": str(one)}, warmup=0, seed=9, vocab=VOCAB, base_dir=None, chat=False).timed()
    assert len(spec.prompt.split()) + 1 == spec.prompt_len == 2
    assert words[0][:512] == words[1][:512] == words[3][:512]   # block 0
    assert words[0][512:1024] == words[3][512:1024]             # block 1
    assert words[1][512:] != words[0][512:700]                  # blocks 3 and 1 differ
    assert not set(map(tuple, [words[2][:50]])) & {tuple(w[:50]) for w in words[:2]}
    # The cache of recent blocks changes nothing but the time taken.
    row = next(trace.rows(path))
    cache = trace.BlockCache(VOCAB, 9, 512, size=1)
    assert [trace.prompt_words(VOCAB, row, 1099, 9, 512, cache) for _ in range(2)] == [words[0]] * 2
    # Another seed (another point): nothing shared with this one.
    other = trace.plan({"path": str(path)}, warmup=0, seed=10, vocab=VOCAB, base_dir=None, chat=False)
    assert next(other.timed())[1].prompt.split()[:512] != words[0][:512]


def test_azure_trace_offsets_from_its_first_row(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2023-11-16 18:15:46.6805900,374,44\n"
                    "2023-11-16 18:15:50.9951690,396,109\n"
                    "2023-11-16 18:15:51,879,6\n")
    rows = list(trace.rows(path))
    assert [r.line for r in rows] == [2, 3, 4]
    assert [round(r.at_s, 7) for r in rows] == [0.0, 4.314579, 4.31941]
    assert [(r.input_length, r.output_length, r.hash_ids) for r in rows][0] == (374, 44, None)


@pytest.mark.parametrize("rows, line, field, message", [
    ([{"timestamp": 0, "input_length": 5, "output_length": 1}, "{oops"], 2, None, "not a JSON object"),
    ([{"timestamp": 0, "output_length": 1}], 1, "input_length", "missing"),
    ([{"timestamp": -1, "input_length": 5, "output_length": 1}], 1, "timestamp", "milliseconds"),
    ([{"timestamp": 0, "input_length": 0, "output_length": 1}], 1, "input_length", "positive"),
    ([{"timestamp": 0, "input_length": 5, "output_length": 1.5}], 1, "output_length", "positive"),
    ([{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1, "x"]}], 1, "hash_ids", "block ids"),
    ([{"timestamp": 10, "input_length": 5, "output_length": 1},
      {"timestamp": 5, "input_length": 5, "output_length": 1}], 2, "timestamp", "must not go back"),
])
def test_bad_mooncake_rows(tmp_path, rows, line, field, message):
    path = mooncake(tmp_path, rows)
    with pytest.raises(UserError, match=message) as exc:
        trace.check(path)
    assert exc.value.where == f"{path}:{line}" and exc.value.field == field


@pytest.mark.parametrize("text, line, field, message", [
    ("TIMESTAMP,Context,GeneratedTokens\n", 1, None, "missing ContextTokens"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,12,x\n", 2, "GeneratedTokens", "positive"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,12,3\n", 2, "TIMESTAMP", "YYYY-MM-DD"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,12\n", 2, None, "columns"),
])
def test_bad_azure_rows(tmp_path, text, line, field, message):
    path = tmp_path / "a.csv"
    path.write_text(text)
    with pytest.raises(UserError, match=message) as exc:
        trace.check(path)
    assert exc.value.where == f"{path}:{line}" and exc.value.field == field


def test_trace_replay_follows_the_trace_clock_scaled():
    """Sends are never early and follow the scaled schedule; lateness at 200 req/s is measured by
    benchmarks/serve_client.py (a timing bound here could flake on a shared machine)."""
    pytest.importorskip("aiohttp")
    from scripted_server import Script, ScriptedServer

    from tpubench.serving.client import Endpoint
    from tpubench.serving.load import run_load

    offsets = [k * 0.005 for k in range(40)]                    # 200 req/s on the trace's clock
    spec = RequestSpec("hello world", 0, 2)
    with ScriptedServer(Script(ttft_ms=1, itl_ms=1)) as srv:
        out = run_load(Endpoint(url=srv.url, model="scripted"), [], timed=iter((t, spec) for t in offsets),
                       time_scale=2.0, max_concurrency=8)
    assert out.mode == "replay" and len(out.records) == 40 and all(r.ok for r in out.records)
    assert [r.scheduled_s for r in out.records] == pytest.approx([2 * t for t in offsets])
    assert all(r.sent_s >= r.scheduled_s for r in out.records)
    assert out.offered_request_rate == pytest.approx(100.0)     # the trace's rate, halved
    assert out.concurrency is None and out.request_rate is None


def test_the_shipped_trace_is_what_its_script_generates(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_trace", REPO / "benchmarks" / "make_small_trace.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    out = tmp_path / "t.jsonl"
    make.write_trace(out)
    assert out.read_text() == (REPO / "workloads" / "traces" / "small_mooncake.jsonl").read_text()
    info = trace.check(out)
    assert info["rows"] == make.ROWS and info["rows_with_hash_ids"] == make.ROWS


# ----------------------------------------------------------------------------- workloads


def traffic_workload(tmp_path: Path, traffic: dict, **changes) -> Path:
    data = yaml.safe_load((REPO / "workloads" / "serve_local.yaml").read_text())
    scenario = data["scenario"]
    scenario.pop("input_length")
    scenario["traffic"] = traffic
    scenario.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del scenario[key]
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_bad_trace_row_fails_validate_with_file_line_and_field(tmp_path, monkeypatch, capsys):
    bad = mooncake(tmp_path, [{"timestamp": 0, "input_length": 5, "output_length": 1},
                              {"timestamp": 3, "input_length": -5, "output_length": 1}])
    wl = traffic_workload(tmp_path, {"trace": {"path": bad.name}}, load={"num_requests": 4}, output_length=None)
    code, out, err = cli(monkeypatch, capsys, "validate", str(wl))
    assert code == 2, out + err
    assert f"{bad}:2: input_length: must be a positive integer (got -5)" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("traffic, changes, message", [
    ({"trace": {"path": "x.jsonl"}}, {}, "replayed on its own clock"),
    ({"multi_turn": {"turns": 2, "user_length": 4, "answer_length": 4}}, {}, "set endpoint: chat"),
    ({"multi_turn": {"turns": 2, "user_length": 4, "answer_length": 4}},
     {"endpoint": "chat", "output_length": [8, 16]}, "a list of output_length sweeps nothing"),
    ({"shared_prefix": {"prefix_length": 4, "suffix_length": 4}, "dataset": {"path": "d.jsonl"}}, {},
     "give one of"),
])
def test_traffic_sections_checked_on_load(tmp_path, monkeypatch, capsys, traffic, changes, message):
    wl = traffic_workload(tmp_path, traffic, **changes)
    code, out, err = cli(monkeypatch, capsys, "validate", str(wl))
    assert code == 2 and message in err, out + err


def test_traffic_is_in_the_point_label(tmp_path):
    from tpubench.run.workload import load_workload
    from tpubench.scenarios.serve import sweep

    d = write(tmp_path / "chats.jsonl", [{"prompt": "a b c"}])
    wl = load_workload(traffic_workload(tmp_path, {"dataset": {"path": d.name}}))
    pts = sweep.points(wl, "full", sweep.sweep_axes(wl, "full"), str(tmp_path / "w.yaml"))
    assert [sweep.label(p) for p in pts] == [f"c{c} dataset chats.jsonl out16 completions" for c in (1, 2, 4)]
    assert len({p.key() for p in pts}) == 3


def test_plan_traffic_dispatches_every_mode(tmp_path):
    d = write(tmp_path / "d.jsonl", [{"prompt": "a"}])
    t = mooncake(tmp_path, [{"timestamp": 0, "input_length": 9, "output_length": 2}])
    common = dict(vocab=VOCAB, seed=1, num_requests=4, concurrency=2, warmup=1, base_dir=tmp_path,
                  output_length=3, chat=True, default_requests=4)
    got = {mode: plan_traffic({mode: cfg}, **common) for mode, cfg in {
        "dataset": {"path": d.name}, "shared_prefix": {"num_prefixes": 1, "prefix_length": 4, "suffix_length": 2},
        "multi_turn": {"turns": 2, "user_length": 3, "answer_length": 2}, "trace": {"path": t.name}}.items()}
    assert len(got["dataset"].specs) == 4 and len(got["shared_prefix"].specs) == 4
    assert len(got["multi_turn"].sessions) == 2 and len(list(got["trace"].timed())) == 1
    assert all(len(p.warmup) == 1 for p in got.values())
    assert check_traffic({"trace": {"path": t.name}}, tmp_path, None)["rows"] == 1
    assert not math.isnan(got["trace"].summary["span_s"])


@pytest.mark.slow
def test_trace_and_shared_prefix_points_end_to_end(tmp_path, monkeypatch, capsys):
    """`tpubench run` against the scripted server: a replay point per time scale, the whole trace
    sent on its clock; shared-prefix prompts sharing what they should; traffic in the result."""
    pytest.importorskip("aiohttp")
    from scripted_server import Script, ScriptedServer

    from tpubench.records.result import read_result

    t = mooncake(tmp_path, [{"timestamp": 20 * k, "input_length": 40, "output_length": 3,
                             "hash_ids": [k % 2]} for k in range(6)])
    runs = {
        "trace": ({"trace": {"path": t.name, "time_scale": [1.0, 0.5], "block_size": 16}},
                  {"load": {"warmup_requests": 1}, "output_length": None}),
        "shared": ({"shared_prefix": {"num_prefixes": 2, "prefix_length": 12, "suffix_length": 4}},
                   {"load": {"concurrency": 2, "num_requests": 6, "warmup_requests": 1}, "output_length": 3}),
    }
    for name, (traffic, changes) in runs.items():
        traffic_workload(tmp_path, traffic, **changes).rename(tmp_path / f"{name}.yaml")
        with ScriptedServer(Script(ttft_ms=1, itl_ms=1)) as srv:
            code, out, err = cli(monkeypatch, capsys, "run", str(tmp_path / f"{name}.yaml"), "--server-url", srv.url,
                                 "--out", str(tmp_path / name))
            log = list(srv.log)
        assert code == 0, err + out
        results = [read_result(f) for f in sorted((tmp_path / name).glob("*.json"))]
        assert results and all(r.status == "ok" for r in results), [r.error for r in results]
        if name == "trace":
            assert "replay x1 trace t.jsonl completions" in out and "replay x0.5 trace t.jsonl" in out
            for r in results:
                scale = r.point["params"]["load"]["time_scale"]
                assert [q["scheduled_s"] for q in r.requests] == pytest.approx([0.02 * k * scale for k in range(6)])
                assert r.environment["traffic"]["rows"] == 6 and r.environment["traffic"]["mode"] == "trace"
            measured = [e["body"]["prompt"].split() for e in log if len(e["body"]["prompt"].split()) == 40]
            # Plain words (no tokenizer): the requests of block 0, and of block 1, share their first 16
            # words at a point, never across points; each point's warm-up request shares nothing.
            counts = Counter(tuple(w[:16]) for w in measured)
            assert sorted(counts.values()) == [1, 1, 3, 3, 3, 3]
        else:
            (r,) = results
            assert "shared-prefix 2x12+4 share 1" in out
            assert r.environment["traffic"]["requests_sharing"] == 6
            prompts = [e["body"]["prompt"].split() for e in log][1:]    # the first is the warm-up
            assert len(prompts) == 6 and len({tuple(p[:12]) for p in prompts}) == 2


def test_a_chat_row_needs_the_chat_endpoint(tmp_path, monkeypatch, capsys):
    d = write(tmp_path / "chats.jsonl", [{"prompt": "a"}, {"messages": [{"role": "user", "content": "hi"}]}])
    wl = traffic_workload(tmp_path, {"dataset": {"path": d.name}})
    code, out, err = cli(monkeypatch, capsys, "validate", str(wl))
    assert code == 2 and f"{d}:2: messages: a row of chat messages needs the chat endpoint" in err, out + err
    wl = traffic_workload(tmp_path, {"dataset": {"path": d.name}}, endpoint="chat")
    code, out, err = cli(monkeypatch, capsys, "validate", str(wl))
    assert code == 0, out + err


def test_a_replay_reads_the_trace_as_it_goes():
    """A streamed trace: at most the look-ahead of requests is made before they are due."""
    pytest.importorskip("aiohttp")
    from scripted_server import Script, ScriptedServer

    from tpubench.serving import load
    from tpubench.serving.client import Endpoint

    pulled, seen = [0], []

    def rows():
        for k in range(load._REPLAY_AHEAD + 100):
            pulled[0] += 1
            yield (0.0 if k == 0 else 0.3 + 1e-4 * k), RequestSpec("hi", 0, 1)

    with ScriptedServer(Script()) as srv:
        out = load.run_load(Endpoint(url=srv.url, model="scripted"), [], timed=rows(),
                            on_record=lambda r: seen.append(pulled[0]) if r.index == 0 else None)
    assert len(out.records) == load._REPLAY_AHEAD + 100 and all(r.ok for r in out.records)
    assert seen[0] <= load._REPLAY_AHEAD + 2       # not the whole trace when the first reply came back


@pytest.mark.slow
def test_labels_of_traffic_need_no_numpy():
    """The scenario's labels import the traffic package at CLI start-up: it stays free of numpy."""
    import subprocess
    import sys

    code = ("import sys; from tpubench.scenarios.registry import SCENARIOS; "
            "import tpubench.serving.traffic; print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_duration_bound_shared_prefix_point_that_reuses_its_prompts_says_so(tmp_path, monkeypatch, capsys):
    """Shared-prefix prompts are made up front, as plain ones: a point that outruns them is warned."""
    pytest.importorskip("aiohttp")
    from scripted_server import Script, ScriptedServer

    from tpubench.records.result import read_result
    from tpubench.scenarios.serve import measure

    monkeypatch.setattr(measure, "DURATION_PROMPTS", 4)
    monkeypatch.setattr(measure, "DURATION_REQUESTS_PER_SLOT_S", 1.0)     # 4 prompts for a 0.3 s point
    wl = traffic_workload(tmp_path, {"shared_prefix": {"num_prefixes": 1, "prefix_length": 4, "suffix_length": 2}},
                          load={"concurrency": 1, "num_requests": None, "duration_s": 0.3, "warmup_requests": 0},
                          output_length=2)
    with ScriptedServer(Script(ttft_ms=1, itl_ms=1)) as srv:
        code, out, err = cli(monkeypatch, capsys, "run", str(wl), "--server-url", srv.url, "--out", str(tmp_path / "o"))
    assert code == 0, out + err
    (r,) = [read_result(f) for f in (tmp_path / "o").glob("*.json")]
    assert len(r.requests) > 4
    assert any("cycled through its 4 prompts" in w for w in r.warnings), r.warnings
