"""The entries scenario `serve` calls (serving/traffic/__init__.py says what the package holds):
a traffic section's files checked on load, and its requests planned for one point."""

from __future__ import annotations

from pathlib import Path

from tpubench.errors import UserError
from tpubench.serving.traffic import dataset, mode_of, multi_turn, shared_prefix, trace
from tpubench.serving.traffic.bounds import Context
from tpubench.serving.traffic.common import TrafficPlan, Vocabulary, resolve


def plan_traffic(traffic: dict, *, vocab: Vocabulary, seed: int, num_requests: int | None, concurrency: int | None,
                 warmup: int, base_dir: str | Path | None, output_length: int | None, chat: bool,
                 default_requests: int) -> TrafficPlan:
    """What one point sends. `seed` is the point's (distinct per point); `default_requests` is how
    many requests a mode without its own count makes when num_requests is not given."""
    mode, cfg = mode_of(traffic)
    n = num_requests or default_requests
    if mode == "dataset":
        return dataset.plan(cfg, n=n, warmup=warmup, seed=seed, vocab=vocab, base_dir=base_dir,
                            default_output=output_length, chat=chat)
    if mode == "shared_prefix":
        out = cfg.get("output_length") or output_length
        return shared_prefix.plan(cfg, n=n, warmup=warmup, seed=seed, vocab=vocab, output_length=out, chat=chat)
    if mode == "multi_turn":
        # A duration-bound point gets the sessions it can be expected to start (default_requests
        # over the turns), not one a worker: the session loop stops starting them at the duration.
        return multi_turn.plan(cfg, num_requests=n or None, concurrency=concurrency or 1, warmup=warmup,
                               seed=seed, vocab=vocab)
    return trace.plan(cfg, warmup=warmup, seed=seed, vocab=vocab, base_dir=base_dir, chat=chat, limit=num_requests)


def check_traffic(traffic: dict, base_dir: str | Path | None, output_length: int | None,
                  chat: bool = True, context: Context | None = None, limit: int | None = None) -> dict:
    """Read the files a traffic section names, whole (streamed), before anything runs: a bad row
    is a UserError naming file:line and field (a chat row when the endpoint is not chat, too; with
    `context`, a row that does not fit in it). Returns what was found (for a trace, also what a
    replay of its first `limit` rows sends: trace.scan)."""
    mode, cfg = mode_of(traffic)
    if mode == "dataset":
        path = resolve(cfg["path"], base_dir)
        rows = dataset.read_rows(path, cfg.get("output_length") or output_length, context)
        chat_rows = [line for line, s in rows if s.messages is not None]
        if chat_rows and not chat:
            raise UserError("a row of chat messages needs the chat endpoint: set scenario.endpoint: chat",
                            where=f"{path}:{chat_rows[0]}", field="messages")
        return {"rows": len(rows), "chat_rows": len(chat_rows)}
    if mode == "trace":
        path = resolve(cfg["path"], base_dir)
        return trace.scan(path, cfg.get("format"), context, limit)
    return {}
