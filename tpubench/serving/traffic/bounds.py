"""How big a serve point may be, checked by `tpubench validate` before anything runs
(docs/scenarios/serve.md, "Bounds").

A request holds its prompt and its answer in the server's context: a request of more tokens than
the model's context (`max_position_embeddings` of the workload's model config) is refused by any
server, and tpubench would spend gigabytes making its prompt first. A point is bounded as a whole
too, since lengths that each fit can still multiply into a run that never ends: requests, tokens
sent and asked for (every resent history counted), prompt text made before the point starts, and
time. The numbers are generous: a real benchmark is far inside them; what lies outside is a typo,
a unit slip or a hostile file. Pure arithmetic here; the schema (scenarios/serve/schema.py) says
which field broke which bound.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpubench.workload_spec.sections import MAX_SECONDS, MAX_SEQUENCE_TOKENS

__all__ = ["MAX_BUILT_TOKENS", "MAX_CONCURRENCY", "MAX_POINT_TOKENS", "MAX_REQUESTS", "MAX_SECONDS", "UNKNOWN_CONTEXT",
           "Context", "multi_turn_request_tokens", "multi_turn_session_tokens", "sessions_of"]

# Requests one point sends (trace rows replayed, sessions x turns): each keeps a record in memory.
MAX_REQUESTS = 1_000_000
# Requests in flight at once (a concurrency, a cap, sessions at once): one client task each.
MAX_CONCURRENCY = 100_000
# Prompt tokens sent (a multi-turn history every time it is resent) plus output tokens asked for,
# per point: a billion tokens is hours even for a large deployment (at 100k tokens/s, 2.8 h).
MAX_POINT_TOKENS = 1_000_000_000
# Prompt tokens made before a point starts (synthetic lengths, shared prefixes, multi-turn user
# turns), held in memory as text: about 6 bytes a token, so at most about 600 MB. A trace is
# made as it is replayed and a dataset is the user's own text: neither counts.
MAX_BUILT_TOKENS = 100_000_000
# Any time in a serve workload (a timeout, a duration, a think time, an SLO, a replay's span x
# its time scale) is at most MAX_SECONDS (30 days), as any workload time. A request's context when
# the workload's model config gives none: the largest max_position_embeddings a config may have.
UNKNOWN_CONTEXT = MAX_SEQUENCE_TOKENS


@dataclass(frozen=True)
class Context:
    """The tokens one request may hold (prompt + answer), and where that number comes from."""

    tokens: int
    source: str

    @classmethod
    def of(cls, model_config: dict | None) -> Context:
        value = (model_config or {}).get("max_position_embeddings")
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= UNKNOWN_CONTEXT:
            return cls(value, "model.config.max_position_embeddings")
        return cls(UNKNOWN_CONTEXT, f"no max_position_embeddings in model.config: at most {UNKNOWN_CONTEXT:,}")

    def words(self) -> str:
        return f"the model's context of {self.tokens:,} tokens ({self.source})"


def multi_turn_request_tokens(turns: int, user: int, answer: int, system: int) -> int:
    """The last turn's request: the system prompt, every user turn and every answer (its own
    included), since each turn resends the whole history."""
    return system + turns * (user + answer)


def multi_turn_session_tokens(turns: int, user: int, answer: int, system: int) -> int:
    """Tokens one session sends and asks for: turn t (1-based) sends system + t user turns + t - 1
    answers and asks for one answer, so system + t (user + answer); summed over the turns."""
    return turns * system + (user + answer) * turns * (turns + 1) // 2


def sessions_of(sessions: int | None, num_requests: int | None, turns: int, concurrency: int) -> int:
    """The sessions a multi-turn point runs (as multi_turn.plan counts them)."""
    return sessions or -(-(num_requests or concurrency * turns) // turns)
