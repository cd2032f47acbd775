"""Traffic mode `multi_turn`: conversations over /v1/chat/completions whose every turn resends
the growing history (system prompt, every earlier user turn and the server's own answers), with
a think time between an answer and the next turn.

The load's concurrency is the number of sessions in flight: each worker runs one session to its
end, then takes the next. Sessions in all: `sessions`, or enough for the load's num_requests
(ceil(num_requests / turns); a duration-bound point gets as many as it can be expected to start,
and no session or turn starts after the duration). `num_system_prompts` system prompts of
`system_prompt_length` tokens are shared by the sessions (session i uses prompt i mod num_system_prompts), as chat products
share one; user turns are `user_length` tokens of their own; answers are asked for
`answer_length` tokens. The answers resent are what the server answered (its text as streamed),
so the server sees its own tokens again, as in a real chat, and its prefix cache can serve the
whole history.

Running the sessions (timing, think time) is the load generator's (load.py); this module only
says what they are.
"""

from __future__ import annotations

import math

from tpubench.serving.traffic.common import STREAM_SYSTEM, STREAM_USER, Session, TrafficPlan, Vocabulary, warmup_specs


def plan(cfg: dict, *, num_requests: int | None, concurrency: int, warmup: int, seed: int,
         vocab: Vocabulary) -> TrafficPlan:
    turns = cfg["turns"]
    count = cfg.get("sessions") or math.ceil((num_requests or concurrency * turns) / turns)
    n_sys, sys_len = cfg.get("num_system_prompts", 1), cfg.get("system_prompt_length", 0)
    systems = [vocab.text(sys_len, seed, STREAM_SYSTEM, j) if sys_len else None for j in range(n_sys)]
    think, answer = float(cfg.get("think_time_s", 0.0)), cfg["answer_length"]
    sessions = [Session(index=i, system=systems[i % n_sys],
                        user_turns=tuple(vocab.text(cfg["user_length"], seed, STREAM_USER, i, t) for t in range(turns)),
                        max_tokens=(answer,) * turns, think_time_s=think)
                for i in range(count)]
    return TrafficPlan(
        label=f"multi-turn {turns} turns think {think:g}s", sessions=sessions, exact_prompt_lengths=False,
        warmup=warmup_specs(vocab, warmup, cfg["user_length"], answer, seed, chat=True),
        summary={"mode": "multi_turn", "sessions": count, "turns": turns, "think_time_s": think,
                 "user_length": cfg["user_length"], "answer_length": answer,
                 "system_prompt_length": sys_len, "num_system_prompts": n_sys})


def turn_messages(session: Session, history: list[dict], turn: int) -> tuple[dict, ...]:
    """The messages of a session's turn: the system prompt, the history so far, the new user turn."""
    head = [{"role": "system", "content": session.system}] if session.system is not None else []
    return tuple(head + history + [{"role": "user", "content": session.user_turns[turn]}])
