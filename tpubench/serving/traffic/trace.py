"""Traffic mode `trace`: timestamped requests replayed on the trace's own clock (or scaled).

Two formats, told apart by the file's extension (or `format`):

- Mooncake (FAST'25, kvcache-ai/Mooncake; also read by AIPerf and Dynamo): JSONL, one request a
  line: `timestamp` (ms since the trace's start), `input_length`, `output_length` (tokens) and
  optionally `hash_ids`: one id per block of `block_size` (512) prompt tokens, equal ids meaning
  the same tokens, so two requests whose ids begin alike share that prefix.
- Azure LLM inference trace (Azure/AzurePublicDataset, 2023 and 2024): CSV with a header
  `TIMESTAMP,ContextTokens,GeneratedTokens`, TIMESTAMP an absolute time `YYYY-MM-DD HH:MM:SS.f`
  (up to 7 fraction digits); requests are sent at their offset from the first row. It has no
  block ids: every prompt is its own.

A request is sent at (its timestamp - the first row's) x `time_scale` seconds after the window
opens (0.5 replays twice as fast). Its prompt is made block by block: block id h is the words
drawn from (the point's seed, h), so equal ids are equal tokens (common.py), and a request's last
block, cut to its input length, is a prefix of the full block. Prompt tokens not covered by
hash_ids are the request's own.

The file is read as the replay goes (a generator), never held whole: a trace of millions of rows
is streamed. It is checked whole before anything is sent (`check`, one streamed pass): a bad row
is a UserError naming file:line and field; timestamps must not go back.
"""

from __future__ import annotations

import collections
import csv
import datetime as dt
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tpubench.errors import UserError
from tpubench.serving.traffic.bounds import MAX_SECONDS, UNKNOWN_CONTEXT, Context
from tpubench.serving.traffic.common import (
    STREAM_BLOCK,
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

MOONCAKE_BLOCK_TOKENS = 512
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
# Block keys of a request's own tokens (beyond hash_ids), apart from any trace's block ids: a
# trace's ids are below it.
_OWN = 1 << 40
# An Azure trace's fields are a time (27 characters) and two integers: anything this long is not one.
_AZURE_FIELD_CHARS = 64


@dataclass(frozen=True)
class TraceRow:
    line: int
    at_s: float                 # since the trace's first row
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...] | None


def trace_format(path: str | Path, fmt: str | None = None) -> str:
    if fmt:
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".json"):
        return "mooncake"
    if suffix == ".csv":
        return "azure"
    raise UserError("cannot tell the trace's format from its extension (.jsonl: mooncake, .csv: azure): "
                    "give traffic.trace.format", where=str(path))


def rows(path: str | Path, fmt: str | None = None) -> Iterator[TraceRow]:
    """The trace's rows, read as they are asked for; a bad row raises a UserError (file:line: field)."""
    p = Path(path)
    kind = trace_format(p, fmt)
    with open_file(p, "trace") as f:
        lines = text_lines(p, f)
        source = _mooncake(p, lines) if kind == "mooncake" else _azure(p, lines)
        first, last, found = None, -math.inf, False
        for line, t, i_len, o_len, ids in source:
            where = f"{p}:{line}"
            first = t if first is None else first
            if t < last:
                raise UserError(f"timestamps must not go back (this row is {last - t:g} s before the one above)",
                                where=where, field="timestamp" if kind == "mooncake" else "TIMESTAMP")
            if t - first > MAX_SECONDS:
                raise UserError(f"this row is {t - first:.3g} s after the first: a trace spans at most "
                                f"{MAX_SECONDS / 86400:g} days", where=where,
                                field="timestamp" if kind == "mooncake" else "TIMESTAMP")
            last = t
            found = True
            yield TraceRow(line, t - first, i_len, o_len, ids)
    if not found:
        raise UserError("the trace has no rows", where=str(p))


def _positive(v, where: str, name: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise UserError(f"must be a positive integer (got {show(v)})", where=where, field=name)
    if v > UNKNOWN_CONTEXT:
        # No model's context holds it (the check against the workload's own model comes after).
        raise UserError(f"{show(v)} tokens: more than any model's context ({UNKNOWN_CONTEXT:,})", where=where,
                        field=name)
    return v


def _mooncake(p: Path, lines) -> Iterator[tuple]:
    for line_no, where, row in jsonl_objects(p, lines):
        for name in ("timestamp", "input_length", "output_length"):
            if name not in row:
                raise UserError("missing", where=where, field=name)
        t = row["timestamp"]
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0:
            raise UserError(f"must be milliseconds >= 0 (got {show(t)})", where=where, field="timestamp")
        ids = row.get("hash_ids")
        if ids is not None:
            if not isinstance(ids, list) or any(isinstance(h, bool) or not isinstance(h, int) or not 0 <= h < _OWN
                                                for h in ids):
                raise UserError(f"must be a list of block ids, integers from 0 to 2**40 - 1 (got {show(ids)})",
                                where=where, field="hash_ids")
            ids = tuple(ids)
        yield (line_no, t / 1000.0, _positive(row["input_length"], where, "input_length"),
               _positive(row["output_length"], where, "output_length"), ids)


def _azure(p: Path, lines) -> Iterator[tuple]:
    reader = csv.reader(text for _, text in lines)
    try:
        yield from _azure_rows(p, reader)
    except csv.Error as exc:
        # csv's own refusals: a field over its 128 KiB limit, a stray quote or NUL byte.
        problem = "a field longer than 128 KiB" if "field limit" in str(exc) else str(exc)
        raise UserError(f"not a CSV row of an Azure LLM inference trace: {problem}",
                        where=f"{p}:{reader.line_num}") from None


def _azure_rows(p: Path, reader) -> Iterator[tuple]:
    header = next(reader, None)
    if header is None:
        raise UserError("the trace has no rows", where=str(p))
    names = [h.strip() for h in header]
    missing = [c for c in AZURE_COLUMNS if c not in names]
    if missing:
        raise UserError(f"an Azure LLM inference trace has the header {','.join(AZURE_COLUMNS)} "
                        f"(missing {', '.join(missing)})", where=f"{p}:1")
    col = [names.index(c) for c in AZURE_COLUMNS]
    first = None
    for row in reader:
        line_no = reader.line_num
        if not row or not any(c.strip() for c in row):
            continue
        where = f"{p}:{line_no}"
        if len(row) < len(names):
            raise UserError(f"expected {len(names)} columns, got {len(row)}", where=where)
        for name, i in zip(AZURE_COLUMNS, col):
            if len(row[i].strip()) > _AZURE_FIELD_CHARS:
                raise UserError(f"{len(row[i].strip()):,} characters: not a time or a token count", where=where,
                                field=name)
        seconds, fraction = _timestamp(row[col[0]].strip(), where)
        # Offsets from the first row in whole seconds, then the fraction: seconds since 1970 as a
        # float would round away the 100 ns ticks.
        first = seconds if first is None else first
        t = (seconds - first) + fraction
        lengths = []
        for name, i in zip(AZURE_COLUMNS[1:], col[1:]):
            try:
                lengths.append(_positive(int(row[i]), where, name))
            except ValueError:
                raise UserError(f"must be a positive integer (got {show(row[i])})", where=where, field=name) from None
        yield line_no, t, lengths[0], lengths[1], None


def _timestamp(text: str, where: str) -> tuple[int, float]:
    """(whole seconds since the epoch, fraction) of `YYYY-MM-DD HH:MM:SS[.fraction]` (UTC assumed);
    Python's parser takes 6 fraction digits and Azure writes 7 (100 ns ticks), so the fraction is
    read apart."""
    head, _, frac = text.partition(".")
    try:
        base = dt.datetime.strptime(head, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)
        if frac and not frac.isdigit():
            raise ValueError
    except ValueError:
        raise UserError(f"must be a time YYYY-MM-DD HH:MM:SS.fraction (got {show(text)})", where=where,
                        field="TIMESTAMP") from None
    return int(base.timestamp()), (float(f"0.{frac}") if frac else 0.0)


def check(path: str | Path, fmt: str | None = None, context: Context | None = None) -> dict:
    """Read the whole trace once (streamed) and say what it holds: rows, span, block ids."""
    info = scan(path, fmt, context)
    return {k: info[k] for k in ("rows", "span_s", "rows_with_hash_ids", "input_tokens")}


def scan(path: str | Path, fmt: str | None = None, context: Context | None = None,
         limit: int | None = None) -> dict:
    """`check`'s pass, also refusing a row of more tokens than `context` holds (file:line), and
    counting what a replay of the first `limit` rows (all without it) sends: rows, tokens sent and
    asked for, and its span on the trace's clock."""
    n, span, with_ids, tokens_in = 0, 0.0, 0, 0
    sent = {"rows_sent": 0, "tokens_sent": 0, "span_sent_s": 0.0}
    for row in rows(path, fmt):
        if context is not None and row.input_length + row.output_length > context.tokens:
            raise UserError(f"{row.input_length:,} prompt + {row.output_length:,} output tokens "
                            f"exceed {context.words()}",
                            where=f"{path}:{row.line}", field="input_length" if trace_format(path, fmt) == "mooncake"
                            else "ContextTokens")
        n, span = n + 1, row.at_s
        with_ids += row.hash_ids is not None
        tokens_in += row.input_length
        if limit is None or n <= limit:
            sent = {"rows_sent": n, "tokens_sent": sent["tokens_sent"] + row.input_length + row.output_length,
                    "span_sent_s": row.at_s}
    return {"rows": n, "span_s": span, "rows_with_hash_ids": with_ids, "input_tokens": tokens_in, **sent}


def prompt_words(vocab: Vocabulary, row: TraceRow, content: int, seed: int, block_size: int,
                 blocks: BlockCache | None = None) -> list[str]:
    """`content` words: the row's blocks in order (equal ids, equal words), the last cut short,
    then words of the row's own if its ids do not cover the prompt."""
    words: list[str] = []
    for h in row.hash_ids or ():
        if len(words) >= content:
            break
        n = min(block_size, content - len(words))
        if blocks is not None and n == block_size:
            words += blocks.get(h)
        else:
            words += vocab.words_for(n, seed, STREAM_BLOCK, h)
    if len(words) < content:
        words += vocab.words_for(content - len(words), seed, STREAM_BLOCK, _OWN + row.line)
    return words


class BlockCache:
    """The words of the most recently used whole blocks: a trace reuses its popular blocks (system
    prompts, conversations coming back) over and over. Bounded, since a trace may be huge."""

    def __init__(self, vocab: Vocabulary, seed: int, block_size: int, size: int = 1024):
        self.vocab, self.seed, self.block_size, self.size = vocab, seed, block_size, size
        self._blocks: collections.OrderedDict[int, list[str]] = collections.OrderedDict()

    def get(self, h: int) -> list[str]:
        words = self._blocks.get(h)
        if words is None:
            words = self._blocks[h] = self.vocab.words_for(self.block_size, self.seed, STREAM_BLOCK, h)
            if len(self._blocks) > self.size:
                self._blocks.popitem(last=False)
        else:
            self._blocks.move_to_end(h)
        return words


def plan(cfg: dict, *, warmup: int, seed: int, vocab: Vocabulary, base_dir: str | Path | None,
         chat: bool, limit: int | None = None) -> TrafficPlan:
    """The replay of one trace: (offset, request) pairs read from the file as they go out."""
    path = resolve(cfg["path"], base_dir)
    fmt = trace_format(path, cfg.get("format"))
    block = cfg.get("block_size") or MOONCAKE_BLOCK_TOKENS
    special = 0 if chat else vocab.special_tokens

    def timed() -> Iterator[tuple[float, RequestSpec]]:
        blocks = BlockCache(vocab, seed, block)
        for row in rows(path, fmt):
            content = max(1, row.input_length - special)    # a prompt keeps a word beside the special tokens
            text = " ".join(prompt_words(vocab, row, content, seed, block, blocks))
            if chat:
                yield row.at_s, RequestSpec("", 0, row.output_length,
                                            messages=({"role": "user", "content": text},))
            else:
                yield row.at_s, RequestSpec(text, content + special if vocab.exact else 0, row.output_length)

    head = rows(path, fmt)
    first = next(head)
    head.close()
    summary = {"mode": "trace", "path": str(cfg["path"]), "format": fmt, "block_size": block,
               **check(path, fmt)}
    if limit is not None:
        summary["rows_sent_at_most"] = limit
    return TrafficPlan(
        label=f"trace {path.name}", timed=timed, exact_prompt_lengths=vocab.exact and not chat, summary=summary,
        warmup=warmup_specs(vocab, warmup, min(first.input_length, 4 * block), first.output_length, seed, chat=chat))
