"""What the engine itself reports about a load point: its Prometheus `/metrics` scraped before and
after the point (and sampled during it), reduced to the figures a serving cost depends on.

Counters are kept as deltas over the point (before -> after), gauges as their peak while it ran:

    prefix_cache_queries   prompt tokens looked up in the prefix cache      (counter, delta)
    prefix_cache_hits      of those, tokens found there                     (counter, delta)
    prefix_cache_hit_rate  hits / queries                                   (None without queries)
    preemptions            requests the engine preempted (KV cache full)    (counter, delta)
    kv_cache_usage_peak    share of the KV cache in use, 0-1                (gauge, peak)
    running_peak           requests running in the engine                   (gauge, peak)
    waiting_peak           requests waiting in its queue                    (gauge, peak)

Metric names per engine (sources: vLLM's v1 metrics, vllm/v1/metrics/loggers.py of vLLM 0.32 as
installed here; SGLang's "Production Metrics" docs, served with --enable-metrics):

    vLLM    vllm:prefix_cache_queries_total, vllm:prefix_cache_hits_total,
            vllm:num_preemptions_total, vllm:kv_cache_usage_perc (older: vllm:gpu_cache_usage_perc),
            vllm:num_requests_running, vllm:num_requests_waiting
    SGLang  sglang:prompt_tokens_total (queries), sglang:cached_tokens_total (hits),
            sglang:token_usage, sglang:num_running_reqs, sglang:num_queue_reqs

A series with labels (one per model, engine or rank) is summed over its labels. A metric the
engine does not expose is left out (None), and which ones were missing is said, as a warning, never
an error: a server without /metrics (transformers serve) still gets measured.

The text exposition format is parsed here (prometheus_client is not among tpubench's
dependencies): `name{labels} value [timestamp]` lines, `#` comments skipped.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from tpubench.serving.server_api import get

SCRAPE_TIMEOUT_S = 5.0
SAMPLE_INTERVAL_S = 1.0     # a /metrics scrape during the point (for peaks); cheap next to the load

# figure -> (kind, metric names in order of preference); names are summed over their labels.
COUNTERS = {
    "prefix_cache_queries": ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries",
                             "vllm:gpu_prefix_cache_queries_total", "sglang:prompt_tokens_total"),
    "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits",
                          "vllm:gpu_prefix_cache_hits_total", "sglang:cached_tokens_total"),
    "preemptions": ("vllm:num_preemptions_total", "vllm:num_preemptions"),
}
GAUGES = {
    "kv_cache_usage_peak": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
    "running_peak": ("vllm:num_requests_running", "sglang:num_running_reqs"),
    "waiting_peak": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
}
FIGURES = (*COUNTERS, "prefix_cache_hit_rate", *GAUGES)
_PREFIXES = tuple({name.split(":")[0] + ":" for names in (*COUNTERS.values(), *GAUGES.values()) for name in names})


def parse_exposition(text: str, wanted: tuple[str, ...] | None = None) -> dict[str, float]:
    """{metric name: value summed over its label sets} of a Prometheus text exposition; only the
    names in `wanted` when given. Lines that do not parse are skipped (a scrape is best effort)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if wanted is not None and not line.startswith(_PREFIXES):
            continue
        brace = line.find("{")
        if brace >= 0:
            name = line[:brace]
            close = line.rfind("}")
            if close < brace:
                continue
            rest = line[close + 1:].split()
        else:
            name, *rest = line.split()
        if not rest or (wanted is not None and name not in wanted):
            continue
        try:
            value = float(rest[0])
        except ValueError:
            continue
        if math.isnan(value):
            continue
        out[name] = out.get(name, 0.0) + value
    return out


_WANTED = tuple(name for names in (*COUNTERS.values(), *GAUGES.values()) for name in names)


def scrape(base_url: str, timeout: float = SCRAPE_TIMEOUT_S) -> tuple[dict[str, float] | None, str]:
    """(the engine's metrics by name, "") or (None, why) when /metrics gives none."""
    try:
        status, _, body = get(f"{base_url}/metrics", timeout=timeout)
    except OSError as exc:
        return None, f"GET /metrics: {exc}"
    if status != 200:
        return None, f"GET /metrics answered {status}"
    values = parse_exposition(body.decode("utf-8", errors="replace"), _WANTED)
    if not values:
        return None, "GET /metrics lists none of the engine metrics tpubench reads (vllm:*, sglang:*)"
    return values, ""


def _first(values: dict[str, float], names: tuple[str, ...]) -> float | None:
    return next((values[n] for n in names if n in values), None)


def point_figures(before: dict[str, float] | None, after: dict[str, float] | None,
                  samples: list[dict[str, float]]) -> tuple[dict[str, float | None], list[str]]:
    """The figures of one point (module docstring) from the scrapes before and after it and those
    sampled during it; and the names of the figures the engine did not give."""
    figures: dict[str, float | None] = {}
    for figure, names in COUNTERS.items():
        a = _first(before or {}, names)
        b = _first(after or {}, names)
        # A counter that went down was reset (an engine restart): no delta can be trusted.
        figures[figure] = b - a if a is not None and b is not None and b >= a else None
    queries, hits = figures["prefix_cache_queries"], figures["prefix_cache_hits"]
    # No lookups at all (no prompt reached the cache): no rate, which is not a rate of 0.
    figures["prefix_cache_hit_rate"] = hits / queries if queries and hits is not None else None
    for figure, names in GAUGES.items():
        seen = [v for v in (_first(s, names) for s in [*(samples or []), *(x for x in (before, after) if x)])
                if v is not None]
        figures[figure] = max(seen) if seen else None
    missing = [f for f in (*COUNTERS, *GAUGES) if figures[f] is None]
    return figures, missing


@dataclass
class PointScrape:
    """Scrapes /metrics before a point, every `interval_s` during it (a daemon thread), and after it;
    `window_starts()` (called when the warm-up is over) moves "before" to the measured window.

        with PointScrape(base_url) as scrape:
            run the load (on_window_start=scrape.window_starts)
        record, warnings = scrape.result()
    """

    base_url: str
    interval_s: float = SAMPLE_INTERVAL_S
    fetch: Callable[[str], tuple[dict[str, float] | None, str]] = scrape
    before: dict[str, float] | None = None
    after: dict[str, float] | None = None
    samples: list[dict[str, float]] = field(default_factory=list)
    why: str = ""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> PointScrape:
        self.before, self.why = self.fetch(self.base_url)
        if self.before is not None:    # an engine without metrics is not polled during the point
            self._thread = threading.Thread(target=self._sample, name="tpubench-metrics", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=SCRAPE_TIMEOUT_S + 1)
            self.after, why = self.fetch(self.base_url)
            self.why = self.why or why

    def window_starts(self) -> None:
        """The measured window opens (after the warm-up): counters count from here, and gauges
        sampled during the warm-up are dropped, so the point's figures leave the warm-up out. Kept
        as before when the engine cannot be read now."""
        values, _ = self.fetch(self.base_url)
        if values is not None and self.before is not None:
            self.before = values
            self.samples.clear()

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            values, _ = self.fetch(self.base_url)
            if values is not None:
                self.samples.append(values)

    def result(self) -> tuple[dict, list[str]]:
        """({"figures": ..., "before": ..., "after": ..., "samples": n}, warnings)."""
        if self.before is None or self.after is None:
            why = self.why or "no scrape after the point"
            return ({"figures": {f: None for f in FIGURES}, "available": False, "why": why},
                    [f"the server's engine metrics were not read ({why}): no prefix-cache hit rate or "
                     "KV-cache usage for this point"])
        figures, missing = point_figures(self.before, self.after, self.samples)
        warnings = [f"the server's /metrics lacks {', '.join(missing)}"] if missing else []
        return ({"figures": figures, "available": True, "samples": len(self.samples),
                 "before": self.before, "after": self.after}, warnings)
