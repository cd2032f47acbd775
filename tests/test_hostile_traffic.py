"""Hostile traffic files and workload numbers (issue 32): every one ends in one line naming the file
(and line, and field), exit 2, no traceback, before anything runs; lengths that would make a run
never end are bounded by the model's context and a point's size (serving/traffic/bounds.py).
All through `tpubench validate` or the library's own readers: no server starts."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
import yaml
from helpers_cli import click_command, numeric_leaves, validate  # noqa: F401 (fixtures)

from tpubench.errors import UserError
from tpubench.serving.traffic import common, dataset, trace

REPO = Path(__file__).resolve().parents[1]
SERVE_LOCAL = yaml.safe_load((REPO / "workloads" / "serve_local.yaml").read_text())   # context 2048
AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
AZURE_ROW = "2023-11-16 18:15:46.6805900,374,44\n"
DEEP = "[" * 100_000 + "]" * 100_000




def workload(tmp_path: Path, traffic: dict | None = None, *, model: bool = True, **changes) -> Path:
    """serve_local.yaml (a tiny Qwen3-MoE with a 2048-token context) with a traffic section and
    changes to its scenario (None drops a key)."""
    data = copy.deepcopy(SERVE_LOCAL)
    scenario = data["scenario"]
    if traffic is not None:
        scenario.pop("input_length")
        scenario["traffic"] = traffic
    if not model:      # a running server: no model block, so no context but the largest any model has
        del data["model"]
        scenario["server"] = {"url": "http://127.0.0.1:9"}
    for key, value in changes.items():
        if value is None:
            scenario.pop(key, None)
        else:
            scenario[key] = value
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def trace_workload(tmp_path: Path, name: str, **trace_cfg) -> Path:
    return workload(tmp_path, {"trace": {"path": name, **trace_cfg}}, load={"num_requests": 4}, output_length=None)


def mooncake_row(t=0, i=5, o=1, **extra) -> str:
    return json.dumps({"timestamp": t, "input_length": i, "output_length": o, **extra}) + "\n"


# ----------------------------------------------------------------------------- files

# (file name, bytes, expected line, words of the message); each file read as a dataset or a trace.
DATASET_FILES = [
    ("nonutf8.jsonl", b'{"prompt": "ok"}\n{"prompt": "\xff\xfe"}\n', 2, "not UTF-8 text (byte 0xff"),
    ("deep.jsonl", ('{"prompt": "a", "x": ' + DEEP + "}\n").encode(), 1, "nested too deeply"),
    ("bigint.jsonl", ('{"prompt": "a", "output_length": ' + "9" * 5000 + "}\n").encode(), 1,
     "a number too long to read"),
    ("toolong.jsonl", ('{"prompt": "a", "output_length": ' + "9" * 4000 + "}\n").encode(), 1,
     "output_length: an integer of 4000 digits tokens: more than any model's context"),
    ("nospace.jsonl", b'{"prompt": "a", "output_length": 2048}\n', 1,
     "output_length: 2,048 output tokens leave no room for the prompt in the model's context of 2,048"),
]
TRACE_FILES = [
    ("nonutf8.jsonl", (mooncake_row() + '{"timestamp": 1, "x": "\xff"}\n').encode("latin-1"), 2, "not UTF-8 text"),
    ("deep.jsonl", (mooncake_row()[:-2] + ', "hash_ids": ' + DEEP + "}\n").encode(), 1, "nested too deeply"),
    ("bigint.jsonl", ('{"timestamp": 0, "input_length": ' + "9" * 5000 + ', "output_length": 1}\n').encode(), 1,
     "a number too long to read"),
    ("long.jsonl", ('{"timestamp": 0, "input_length": ' + "9" * 4000 + ', "output_length": 1}\n').encode(), 1,
     "input_length: an integer of 4000 digits tokens: more than any model's context"),
    ("huge.jsonl", mooncake_row(i=2_000_000_000).encode(), 1, "input_length: 2000000000 tokens: more than any"),
    ("over_context.jsonl", (mooncake_row() + mooncake_row(t=5, i=2000, o=49)).encode(), 2,
     "input_length: 2,000 prompt + 49 output tokens exceed the model's context of 2,048 tokens"),
    ("inf.jsonl", b'{"timestamp": 1e999, "input_length": 5, "output_length": 1}\n', 1,
     "timestamp: must be milliseconds >= 0 (got Infinity)"),
    ("span.jsonl", (mooncake_row() + mooncake_row(t=1e300)).encode(), 2, "timestamp: this row is 1e+297 s after"),
    ("hash.jsonl", mooncake_row(hash_ids=[1, 2 ** 40]).encode(), 1, "hash_ids: must be a list of block ids"),
    ("nonutf8.csv", (AZURE_HEADER + AZURE_ROW).encode() + b"2023-11-16 18:15:47.0,3\xff4,44\n", 3, "not UTF-8 text"),
    ("bigint.csv", (AZURE_HEADER + "2023-11-16 18:15:46.68," + "9" * 5000 + ",44\n").encode(), 2,
     "ContextTokens: 5,000 characters: not a time or a token count"),
    ("bigfrac.csv", (AZURE_HEADER + "2023-11-16 18:15:46." + "1" * 5000 + ",4,44\n").encode(), 2,
     "TIMESTAMP: 5,020 characters"),
    ("bigfield.csv", (AZURE_HEADER + "2023-11-16 18:15:46.68," + "x" * 200_000 + ",44\n").encode(), 2,
     "not a CSV row of an Azure LLM inference trace: a field longer than 128 KiB"),
    ("over_context.csv", (AZURE_HEADER + "2023-11-16 18:15:46.68,3000,44\n").encode(), 2,
     "ContextTokens: 3,000 prompt + 44 output tokens exceed the model's context"),
]


@pytest.mark.parametrize("name, content, line, words", DATASET_FILES, ids=[c[0] for c in DATASET_FILES])
def test_hostile_dataset_files(tmp_path, validate, name, content, line, words):
    (tmp_path / name).write_bytes(content)
    code, err = validate(workload(tmp_path, {"dataset": {"path": name}}))
    assert code == 2 and f"{tmp_path / name}:{line}: " in err and words in err, err
    assert len(err) < 300      # never the offending value echoed whole


@pytest.mark.parametrize("name, content, line, words", TRACE_FILES, ids=[c[0] for c in TRACE_FILES])
def test_hostile_trace_files(tmp_path, validate, name, content, line, words):
    (tmp_path / name).write_bytes(content)
    code, err = validate(trace_workload(tmp_path, name))
    assert code == 2 and f"{tmp_path / name}:{line}: " in err and words in err, err
    assert len(err) < 300


def test_a_fraction_of_5000_digits_in_a_mooncake_trace_is_just_a_float(tmp_path, validate):
    (tmp_path / "t.jsonl").write_text('{"timestamp": 0.' + "1" * 5000 + ', "input_length": 5, "output_length": 1}\n')
    assert validate(trace_workload(tmp_path, "t.jsonl"))[0] == 0
    assert next(trace.rows(tmp_path / "t.jsonl")).at_s == 0.0


def test_a_utf8_bom_is_not_an_error(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"prompt": "hello"}\n')
    assert dataset.read_rows(path, default_output=4)[0][1].prompt == "hello"


def test_a_line_longer_than_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "MAX_LINE_BYTES", 1024)
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"prompt": "fine"}) + "\n" + json.dumps({"prompt": "x" * 2000}) + "\n")
    with pytest.raises(UserError, match="a line longer than") as exc:
        dataset.read_rows(path, default_output=4)
    assert exc.value.where == f"{path}:2"


def test_a_large_prompt_that_fits_in_a_line_is_the_users_own_text(tmp_path, validate):
    (tmp_path / "d.jsonl").write_text(json.dumps({"prompt": "a " * 100_000}) + "\n")   # 200 KB
    assert validate(workload(tmp_path, {"dataset": {"path": "d.jsonl"}}))[0] == 0


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_pipe_named_like_a_trace_does_not_hang(tmp_path, validate):
    os.mkfifo(tmp_path / "t.jsonl")
    code, err = validate(trace_workload(tmp_path, "t.jsonl"))
    assert code == 2 and "the trace is not a regular file" in err


# ----------------------------------------------------------------------------- bounds


def test_a_replay_larger_than_a_point_is_refused(tmp_path, validate, monkeypatch):
    from tpubench.scenarios.serve import schema

    (tmp_path / "t.jsonl").write_text("".join(mooncake_row(t=k, i=100, o=10) for k in range(6)))
    monkeypatch.setattr(schema, "MAX_REQUESTS", 5)
    wl = workload(tmp_path, {"trace": {"path": "t.jsonl"}}, load={"max_concurrency": 2}, output_length=None)
    code, err = validate(wl)
    assert code == 2 and "scenario.traffic.trace.path: a replay of 6 rows: 6 requests" in err, err
    assert err.endswith("set load.num_requests to replay the first rows")
    # Its first rows only: within the bound.
    wl = workload(tmp_path, {"trace": {"path": "t.jsonl"}}, load={"num_requests": 5}, output_length=None)
    assert validate(wl)[0] == 0
    monkeypatch.setattr(schema, "MAX_POINT_TOKENS", 500)
    code, err = validate(wl)
    assert code == 2 and "550 tokens sent and asked for, more than a point's 500" in err, err


def test_a_replay_slowed_past_thirty_days_is_refused(tmp_path, validate):
    (tmp_path / "t.jsonl").write_text(mooncake_row() + mooncake_row(t=86_400_000))    # one day apart
    code, err = validate(trace_workload(tmp_path, "t.jsonl", time_scale=[1.0, 40.0]))
    assert code == 2 and "scenario.traffic.trace.time_scale" in err and "86400 s x time_scale 40" in err, err


def test_multi_turn_of_100000_turns_of_100000_tokens(tmp_path, validate):
    wl = workload(tmp_path, {"multi_turn": {"turns": 100_000, "user_length": 100_000, "answer_length": 4}},
                  endpoint="chat", load={"concurrency": 1, "num_requests": 100_000})
    code, err = validate(wl)
    assert code == 2 and "scenario.traffic.multi_turn.turns: the last of 100,000 turns resends" in err, err
    assert "exceed the model's context of 2,048 tokens (model.config.max_position_embeddings)" in err


def test_multi_turn_within_any_context_but_too_large_a_point(tmp_path, validate):
    # No model block: the context is the largest any model has, and the point's total still binds.
    wl = workload(tmp_path, {"multi_turn": {"turns": 1000, "user_length": 8000, "answer_length": 8000}},
                  model=False, endpoint="chat", load={"concurrency": 4, "num_requests": 100_000})
    code, err = validate(wl)
    assert code == 2 and "scenario.load.num_requests: 100 sessions resending their histories" in err, err


@pytest.mark.parametrize("think, words", [
    (float("inf"), "think_time_s: Input should be a finite number"),
    (float("nan"), "think_time_s: not a number (NaN)"),
    (1e9, "think_time_s: Input should be less than or equal to 2592000"),
    (100_000.0, "think_time_s: 30 turns x 100000 s of think time: 3,000,000 seconds a session lasts"),
])
def test_think_time_is_finite_and_bounded(tmp_path, validate, think, words):
    wl = workload(tmp_path, {"multi_turn": {"turns": 30, "user_length": 4, "answer_length": 4, "think_time_s": think}},
                  endpoint="chat")
    code, err = validate(wl)
    assert code == 2 and words in err, err


@pytest.mark.parametrize("changes, words", [
    ({"input_length": 2000, "output_length": 49}, "scenario.input_length: 2,000 prompt + 49 output tokens exceed"),
    ({"input_length": {"uniform": [8, 2040]}, "output_length": 16}, "2,040 prompt + 16 output tokens exceed"),
    ({"load": {"concurrency": 1, "num_requests": 1_000_000}, "input_length": 1024, "output_length": 1000},
     "scenario.load.num_requests: 1,000,000 requests of up to 2,024 tokens"),
    ({"load": {"concurrency": 10 ** 9}}, "scenario.load.concurrency: Input should be less than or equal to 100000"),
    ({"request_timeout_s": float("inf")}, "scenario.request_timeout_s: Input should be a finite number"),
    ({"load": {"request_rate": float("nan"), "num_requests": 4}}, "scenario.load.request_rate: not a number (NaN)"),
    ({"load": {"request_rate": 10 ** 30, "num_requests": 4}}, "an integer of 31 digits"),
])
def test_synthetic_lengths_and_load_are_bounded(tmp_path, validate, changes, words):
    code, err = validate(workload(tmp_path, **changes))
    assert code == 2 and words in err, err


def test_an_infinite_request_rate_still_means_all_at_once(tmp_path, validate):
    assert validate(workload(tmp_path, load={"request_rate": [1.0, float("inf")], "num_requests": 4}))[0] == 0


# ----------------------------------------------------------------------------- every leaf

SHIPPED = sorted((REPO / "workloads").glob("*.yaml"))
HOSTILE_NUMBERS = (float("inf"), float("nan"), 1e308, 10 ** 30, -1e300, float("-inf"))



# The serve workloads' leaves in the fast tier; the others' (a few hundred validates) in the slow one.
LEAF_CASES = [pytest.param(source, path, HOSTILE_NUMBERS[i % len(HOSTILE_NUMBERS)],
                           id=f"{source.stem}:{'.'.join(map(str, path))}={HOSTILE_NUMBERS[i % len(HOSTILE_NUMBERS)]!r}",
                           marks=() if source.stem.startswith("serve") else pytest.mark.slow)
              for source in SHIPPED
              for i, (path, _) in enumerate(numeric_leaves(yaml.safe_load(source.read_text())))]


@pytest.mark.parametrize("source, path, value", LEAF_CASES)
def test_every_numeric_leaf_refuses_non_finite_and_huge_numbers(tmp_path, validate, source, path, value):
    """Each number of every shipped workload (model config values included) in turn replaced by an
    infinity, a NaN or a number beyond any value a workload holds: a clear error naming its field
    (a list's item by the list)."""
    data = yaml.safe_load(source.read_text())
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    (tmp_path / "traces").symlink_to(REPO / "workloads" / "traces")
    target = tmp_path / source.name
    target.write_text(yaml.safe_dump(data))
    code, err = validate(target)
    named = path[:max(i for i, part in enumerate(path) if isinstance(part, str)) + 1]
    assert code == 2 and f": {'.'.join(map(str, named))}" in err, err


# ----------------------------------------------------------------------------- the workload file itself


@pytest.mark.parametrize("tail, words", [
    (b"seed: " + b"9" * 5000 + b"\n", "a number of 5,000 digits"),
    (b"# \xff\n", "not UTF-8 text (byte 0xff)"),
])
def test_hostile_workload_files(tmp_path, validate, tail, words):
    text = (REPO / "workloads" / "serve_local.yaml").read_bytes()
    target = tmp_path / "w.yaml"
    lines = text.count(b"\n")
    target.write_bytes(text.replace(b"name: serve_local", b"name: serve_local") + tail)
    code, err = validate(target)
    assert code == 2 and f"{target}:{lines + 1}: " in err and words in err, err


def test_an_error_on_line_100_prints_the_line_number(tmp_path, validate):
    # rich reads ":100:" as an emoji code unless told not to.
    data = copy.deepcopy(SERVE_LOCAL)
    data["scenario"]["request_timeout_s"] = float("inf")
    text = yaml.safe_dump(data, sort_keys=False)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "request_timeout_s" in t)
    (tmp_path / "w.yaml").write_text("#\n" * (100 - line) + text)
    code, err = validate(tmp_path / "w.yaml")
    assert code == 2 and f"{tmp_path / 'w.yaml'}:100: scenario.request_timeout_s: " in err, err
