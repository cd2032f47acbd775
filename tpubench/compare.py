"""Comparing two sets of results: per metric the ratio with propagated uncertainty and a verdict.

Pairs are matched by what was measured (workload, scale, shapes, dtype, execution mode, experts
implementation), so `compare baseline/ candidate/` lines up the same points across two folders.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tpubench.numerics import Parity, compare_numerics
from tpubench.stats import ratio_with_uncertainty, verdict

# (metric, higher is better); each has mean and 95% CI columns in a result's metrics.
METRICS = (
    ("output_tokens_per_s", True),
    ("prefill_tokens_per_s", True),
    ("decode_tokens_per_s", True),
    ("ttft_mean_s", False),
    ("tpot_mean_s", False),
    ("e2e_mean_s", False),
    # training (scenario train)
    ("train_tokens_per_s", True),
    ("step_mean_s", False),
)
# The throughput a pair is judged by (--fail-if-slower): generation's, else training's.
HEADLINES = ("output_tokens_per_s", "train_tokens_per_s")
_MATCH = ("workload", "scale", "batch_size", "input_length", "output_length", "dtype", "execution_mode",
          "experts_implementation")


@dataclass
class MetricComparison:
    metric: str
    a: float
    b: float
    ratio: float                   # b / a
    half_width: float              # 95% half-width of the ratio
    verdict: str                   # b is faster / slower / tie within noise


@dataclass
class PairComparison:
    label: str
    a_file: str
    b_file: str
    metrics: list[MetricComparison] = field(default_factory=list)
    numerics: Parity | None = None

    def headline(self) -> MetricComparison | None:
        by_name = {m.metric: m for m in self.metrics}
        return next((by_name[name] for name in HEADLINES if name in by_name), None)


def _ci_half(metrics: dict, name: str) -> float:
    # ttft_mean_s -> ttft_ci95_high_s (step_mean_s -> step_ci95_high_s);
    # output_tokens_per_s -> output_tokens_per_s_ci95_high
    base, unit = (name[: -len("_mean_s")], "_s") if name.endswith("_mean_s") else (name, "")
    hi, lo = metrics.get(f"{base}_ci95_high{unit}"), metrics.get(f"{base}_ci95_low{unit}")
    if hi is None or lo is None or not (math.isfinite(hi) and math.isfinite(lo)):
        return 0.0
    return (hi - lo) / 2


def compare_metrics(a_metrics: dict, b_metrics: dict) -> list[MetricComparison]:
    out = []
    for name, higher_better in METRICS:
        a, b = a_metrics.get(name), b_metrics.get(name)
        if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)) or a == 0:
            continue
        ratio, half = ratio_with_uncertainty(b, _ci_half(b_metrics, name), a, _ci_half(a_metrics, name))
        out.append(MetricComparison(name, a, b, ratio, half, verdict(ratio, half, higher_is_better=higher_better)))
    return out


def match_key(result) -> tuple:
    return tuple(result.point.get(k) for k in _MATCH)


def compare_results(a_results, b_results) -> tuple[list[PairComparison], list[str]]:
    """Pair up (path, RunResult) lists; a single file on each side is compared as a pair regardless."""
    a_ok = [(f, r) for f, r in a_results if r.status == "ok"]
    b_ok = [(f, r) for f, r in b_results if r.status == "ok"]
    if len(a_ok) == 1 and len(b_ok) == 1:
        pairs = [(a_ok[0], b_ok[0])]
        unmatched: list[str] = []
    else:
        latest_b = {}
        for f, r in sorted(b_ok, key=lambda fr: fr[1].started_at):
            latest_b[match_key(r)] = (f, r)
        pairs, unmatched, seen = [], [], set()
        for f, r in sorted(a_ok, key=lambda fr: fr[1].started_at):
            key = match_key(r)
            if key in latest_b and key not in seen:
                seen.add(key)
                pairs.append(((f, r), latest_b[key]))
        unmatched = [str(f) for f, r in a_ok if match_key(r) not in latest_b]
        unmatched += [str(f) for f, r in b_ok if match_key(r) not in {match_key(x) for _, x in a_ok}]
    comparisons = []
    for (fa, ra), (fb, rb) in pairs:
        p = ra.point
        shape = " ".join(f"{tag}{p[key]}" for tag, key in (("b", "batch_size"), ("i", "input_length"),
                                                            ("o", "output_length")) if p.get(key) is not None)
        kind = " train" if p.get("scenario_kind") == "train" else ""
        label = (f"{p.get('workload')} {p.get('scale')}{kind} {shape} {p.get('dtype')}: "
                 f"{ra.backend}:{ra.device} -> {rb.backend}:{rb.device}")
        comparisons.append(PairComparison(label, str(fa), str(fb), compare_metrics(ra.metrics, rb.metrics),
                                          compare_numerics(ra, rb)))
    return comparisons, unmatched


def slower_than(comparisons: list[PairComparison], pct: float) -> list[PairComparison]:
    """Pairs whose headline throughput dropped by more than `pct` percent, beyond noise."""
    tripped = []
    for c in comparisons:
        h = c.headline()
        if h and h.ratio < 1 - pct / 100 and h.verdict == "slower":
            tripped.append(c)
    return tripped
