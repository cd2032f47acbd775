"""Traffic mode `dataset`: the user's own prompts or chats, from a JSONL file.

One JSON object a line (blank lines skipped): `prompt` (a string, sent to /v1/completions or as
one user message) or `messages` (OpenAI chat messages: role and string content, sent to
/v1/chat/completions), and optionally the answer's length as `output_length` or `max_tokens`
(else the workload's). Rows are taken in the file's order or sampled (a seeded permutation, every
row once before any repeats), cycling when more requests are sent than the file has rows.

The prompts are the user's text, so the length asked of the server is not known before it counts
it: `prompt_len` is 0 and the server's usage stands. The same text is sent at every point of a
sweep (that is the point of a dataset): the engine's prefix cache reset between points is what
keeps a point cold.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from tpubench.errors import UserError
from tpubench.serving.traffic.bounds import UNKNOWN_CONTEXT, Context
from tpubench.serving.traffic.common import (
    STREAM_ORDER,
    RequestSpec,
    TrafficPlan,
    Vocabulary,
    jsonl_objects,
    open_file,
    resolve,
    show,
    text_lines,
    warmup_specs,
)

ROLES = ("system", "user", "assistant", "developer", "tool")


def read_rows(path: str | Path, default_output: int | None,
              context: Context | None = None) -> list[tuple[int, RequestSpec]]:
    """(line number, request) for every row; a bad row is a UserError naming file:line and field.
    With `context`, an answer that leaves no room for a prompt in it is a bad row too."""
    p = Path(path)
    return list(_rows(p, default_output, context))


def _rows(p: Path, default_output: int | None, context: Context | None) -> Iterator[tuple[int, RequestSpec]]:
    found = False
    with open_file(p, "dataset") as f:
        for line_no, where, row in jsonl_objects(p, text_lines(p, f)):
            found = True
            spec = _spec(row, where, default_output)
            if context is not None and spec.max_tokens >= context.tokens:
                name = next((n for n in ("output_length", "max_tokens") if n in row), "output_length")
                raise UserError(f"{spec.max_tokens:,} output tokens leave no room for the prompt in {context.words()}",
                                where=where, field=name)
            yield line_no, spec
    if not found:
        raise UserError("the dataset has no rows", where=str(p))


def _spec(row: dict, where: str, default_output: int | None) -> RequestSpec:
    has_prompt, has_messages = "prompt" in row, "messages" in row
    if has_prompt == has_messages:
        raise UserError("give either prompt (a string) or messages (OpenAI chat messages)", where=where,
                        field="prompt" if not has_prompt else "messages")
    out = default_output
    for name in ("output_length", "max_tokens"):
        if name in row:
            v = row[name]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UserError(f"must be a positive integer (got {show(v)})", where=where, field=name)
            if v > UNKNOWN_CONTEXT:
                raise UserError(f"{show(v)} tokens: more than any model's context ({UNKNOWN_CONTEXT:,})", where=where,
                                field=name)
            out = v
    if out is None:
        raise UserError("no output length: give output_length in the row or the workload's output_length",
                        where=where, field="output_length")
    if has_prompt:
        prompt = row["prompt"]
        if not isinstance(prompt, str) or not prompt:
            raise UserError(f"must be a non-empty string (got {show(prompt)})", where=where, field="prompt")
        return RequestSpec(prompt, 0, out)
    messages = row["messages"]
    if not isinstance(messages, list) or not messages:
        raise UserError(f"must be a non-empty list of messages (got {show(messages)})", where=where,
                        field="messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise UserError(f"a message is an object with role and content (got {show(m)})", where=where,
                            field=f"messages.{i}")
        if m.get("role") not in ROLES:
            raise UserError(f"role must be one of {', '.join(ROLES)} (got {show(m.get('role'))})", where=where,
                            field=f"messages.{i}.role")
        if not isinstance(m.get("content"), str):
            raise UserError(f"content must be a string (got {show(m.get('content'))})", where=where,
                            field=f"messages.{i}.content")
    return RequestSpec("", 0, out, messages=tuple({"role": m["role"], "content": m["content"]} for m in messages))


def plan(cfg: dict, *, n: int, warmup: int, seed: int, vocab: Vocabulary, base_dir: str | Path | None,
         default_output: int | None, chat: bool) -> TrafficPlan:
    """n requests from the file, in order or sampled from the seed."""
    path = resolve(cfg["path"], base_dir)
    rows = [spec for _, spec in read_rows(path, cfg.get("output_length") or default_output)]
    if not chat and any(s.messages is not None for s in rows):
        raise UserError("the dataset has chat messages: set scenario.endpoint: chat", where=str(path))
    if cfg.get("order", "sampled") == "in_order":
        order = [k % len(rows) for k in range(n)]
    else:
        import numpy as np  # here, not at the top: `validate` reads the file but draws nothing

        rng = np.random.default_rng([seed, STREAM_ORDER])
        order = []
        while len(order) < n:
            order.extend(int(i) for i in rng.permutation(len(rows)))
        order = order[:n]
    specs = [rows[i] for i in order]
    mean_out = max(1, round(sum(s.max_tokens for s in rows) / len(rows)))
    return TrafficPlan(
        label=f"dataset {path.name}", specs=specs, exact_prompt_lengths=False,
        warmup=warmup_specs(vocab, warmup, 16, mean_out, seed, chat=chat),
        summary={"mode": "dataset", "path": str(cfg["path"]), "rows": len(rows),
                 "order": cfg.get("order", "sampled"), "distinct_rows_sent": len(set(order))})
