"""What every traffic mode shares: the words prompts are made of, the plan a mode hands the load
generator, and the seeding that keeps a mode deterministic.

The request type (`RequestSpec`, which the HTTP client sends) lives here too.

Prompts are words joined by single spaces, each word one token of the served model's tokenizer
alone and after a space (`demo_model.word_pool`). A text of n such words is then n tokens (plus the
tokenizer's own special tokens), and the concatenation of two such texts is the concatenation of
their tokens: that is what makes "these two requests share their first 512 tokens" true token by
token, at the server, without sending token ids (which `transformers serve` and chat endpoints do
not take). Without a tokenizer the words are a fixed English list, and lengths are approximate
(`Vocabulary.exact` is False; the server's usage counts then stand).

Every random choice draws from `numpy.random.default_rng([seed, stream, ...])`: the seed is the
point's (derived from its key, so two points never share a prompt unless a mode asks for sharing),
the stream names what is drawn, the rest says for which request or block.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from tpubench.errors import UserError

if TYPE_CHECKING:
    import numpy as np

FALLBACK_WORDS = (
    "time year people way day man thing woman life child world school state family student group "
    "country problem hand part place case week company system program question work government "
    "number night point home water room mother area money story fact month lot right study book "
    "eye job word business issue side kind head house service friend father power hour game line").split()

# Streams of the seed: what is drawn (a new mode takes a new number; the old ones keep their draws).
STREAM_PREFIX, STREAM_SUFFIX, STREAM_SHARE, STREAM_ORDER = 1, 2, 3, 4
STREAM_SYSTEM, STREAM_USER, STREAM_BLOCK, STREAM_WARMUP = 5, 6, 7, 8


@dataclass(frozen=True)
class RequestSpec:
    """One request: the prompt (text, or token ids for /v1/completions), the prompt length it was
    made to have (in the server's tokens; 0 when not known before the server counts it, as for a
    user's own text or a chat history) and the output tokens to ask for. `messages` (OpenAI chat
    messages) replace the prompt on /v1/chat/completions: a user's chat, or a multi-turn history.
    Here, not in client.py, so that traffic is planned and checked without the HTTP client."""

    prompt: str | list[int]
    prompt_len: int
    max_tokens: int
    messages: tuple[Mapping[str, Any], ...] | None = None


@dataclass(frozen=True)
class Vocabulary:
    """Words that are one token each (`exact`) or plain words (not exact), and the special tokens
    the tokenizer adds to any completions prompt."""

    words: tuple[str, ...]
    special_tokens: int = 0
    exact: bool = False
    @cached_property
    def _array(self) -> np.ndarray:
        # The words as an array, to pick many at once (a 2048-token prompt in well under a
        # millisecond). Made on first use: numpy (~90 ms) stays out of `validate`.
        import numpy as np

        return np.array(self.words, dtype=object)

    @classmethod
    def plain(cls) -> Vocabulary:
        return cls(tuple(FALLBACK_WORDS), 0, False)

    def words_for(self, n: int, *key: int) -> list[str]:
        """n words drawn from the seed key (the same words for the same key and n; the first k of a
        longer draw are the words of a shorter one, so a block cut short is its own prefix)."""
        if n <= 0:
            return []
        import numpy as np

        idx = np.random.default_rng(list(key)).integers(0, len(self.words), size=n)
        return self._array[idx].tolist()

    def text(self, n: int, *key: int) -> str:
        """A text of n words (n tokens of content when exact)."""
        return " ".join(self.words_for(n, *key))

    def prompt(self, tokens: int, *key: int) -> str:
        """A completions prompt the server counts as `tokens` tokens (its special tokens included)
        when exact."""
        return self.text(max(0, tokens - self.special_tokens), *key)


@dataclass(frozen=True)
class Session:
    """A multi-turn conversation: an optional system prompt, then user turns, each answered by the
    server before the next is sent (after `think_time_s`) with the whole history so far."""

    index: int
    system: str | None
    user_turns: tuple[str, ...]
    max_tokens: tuple[int, ...]
    think_time_s: float = 0.0


@dataclass
class TrafficPlan:
    """What one point sends, in one of three shapes the load generator knows:

    - `specs`: requests sent in this order under the load's concurrency or rate (dataset, shared
      prefix);
    - `timed`: a function returning an iterator of (send offset in seconds, request), read as the
      requests go out, so a trace larger than memory is streamed (trace replay);
    - `sessions`: conversations, one per worker at a time (multi-turn).

    `warmup` requests are distinct from the measured ones (they must not fill the prefix cache with
    what is measured). `summary` describes the traffic for the result."""

    label: str
    summary: dict
    warmup: list[RequestSpec] = field(default_factory=list)
    specs: Sequence[RequestSpec] | None = None
    timed: Callable[[], Iterator[tuple[float, RequestSpec]]] | None = None
    sessions: Sequence[Session] | None = None
    exact_prompt_lengths: bool = True


def warmup_specs(vocab: Vocabulary, n: int, prompt_tokens: int, max_tokens: int, seed: int,
                 chat: bool = False) -> list[RequestSpec]:
    """n warm-up requests with prompts of their own (never a prefix of a measured one)."""
    out = []
    for k in range(n):
        if chat:
            text = vocab.text(prompt_tokens, seed, STREAM_WARMUP, k)
            out.append(RequestSpec("", 0, max_tokens, messages=({"role": "user", "content": text},)))
        else:
            out.append(RequestSpec(vocab.prompt(prompt_tokens, seed, STREAM_WARMUP, k),
                                   prompt_tokens if vocab.exact else 0, max_tokens))
    return out


# A line of a traffic file longer than this is refused, not read: a file without newlines would
# otherwise be read whole into memory. A JSONL row is a prompt or a chat (a 128k-token chat is
# about 0.5 MB) or a trace row; 16 MiB is far beyond either.
MAX_LINE_BYTES = 16 << 20


def open_file(path: Path, what: str) -> BinaryIO:
    """A traffic file opened for reading as bytes (text_lines decodes it); anything else, a
    folder or a pipe included (a pipe would block the read), is a UserError naming it."""
    try:
        if not path.is_file():
            raise UserError(f"no such {what} file" if not path.exists() else f"the {what} is not a regular file",
                            where=str(path))
        return path.open("rb")
    except OSError as exc:
        raise UserError(f"cannot read the {what}: {exc.strerror or exc}", where=str(path)) from None


def text_lines(path: Path, f: BinaryIO) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line of `f`, its line ending kept: UTF-8 checked line by line
    (a byte that is not names its line), a UTF-8 byte order mark dropped, and a line over
    MAX_LINE_BYTES refused before it is read whole."""
    line_no = 0
    while True:
        raw = f.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        line_no += 1
        where = f"{path}:{line_no}"
        if len(raw.rstrip(b"\r\n")) > MAX_LINE_BYTES:
            raise UserError(f"a line longer than {MAX_LINE_BYTES >> 20} MiB: not a traffic file row", where=where)
        try:
            text = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise UserError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line): "
                            "save the file as UTF-8", where=where) from None
        yield line_no, text


def jsonl_objects(path: Path, lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str, dict]]:
    """(line number, "file:line", object) of each non-blank line of a JSONL file (a dataset, a
    Mooncake trace), from text_lines; a line that is not a JSON object is a UserError naming
    file:line, a nesting too deep for the reader and a number of thousands of digits included."""
    for line_no, line in lines:
        if not line.strip():
            continue
        where = f"{path}:{line_no}"
        try:
            row = json.loads(line)
        except RecursionError:
            raise UserError("not a JSON object: nested too deeply to read", where=where) from None
        except json.JSONDecodeError as exc:
            raise UserError(f"not a JSON object: {exc.msg} (column {exc.colno})", where=where) from None
        except ValueError:
            # Python refuses to read an integer of more than 4300 digits (int_max_str_digits).
            raise UserError("not a JSON object: a number too long to read (over 4300 digits)", where=where) from None
        if not isinstance(row, dict):
            raise UserError(f"expected a JSON object, got {type(row).__name__}", where=where)
        yield line_no, where, row


def show(value: Any, width: int = 40) -> str:
    """A value for an error message, at most `width` characters: never a 16 MiB prompt or an
    integer of thousands of digits echoed to the terminal."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {len(str(value)) if value.bit_length() < 14000 else 'thousands of'} digits"
    try:
        text = repr(value) if isinstance(value, str) else json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= width else text[:width - 3] + "..."


def resolve(path: str | Path, base_dir: str | Path | None) -> Path:
    """A traffic file named in a workload: relative to the workload file's folder."""
    p = Path(path)
    return p if p.is_absolute() or base_dir is None else Path(base_dir) / p
