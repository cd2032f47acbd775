"""Comparing two sets of results: per metric the ratio with propagated uncertainty and a verdict.

Points pair up only when everything that defines them is the same: workload, scale and model
config, shapes and lengths, dtype, execution mode and precision, experts implementation, the
parallel layout, the training settings, and for a server the load (concurrency or request rate,
burstiness, cap), the lengths drawn, the endpoint and exact-output mode (`match_key`). What is
compared may differ: the backend, device and stack (a server's launch or URL), and how long or
with which seed a point was measured. A point with no partner on the other side is listed, never
silently dropped, and never judged; so is a point that is not usable (records/usable.py: it failed
or is invalid), except in a numerics check, which reads any point that ran. A noisy point is
compared, its label says so, and its wider interval decides whether the verdict is a tie.

Chips are not part of the key, so the same point measured on 1 chip and on 4 still pairs, but
its throughputs are then compared per chip (`basis`): 4 chips giving twice the tokens/s of 1 chip
are half as fast per chip, and that is the headline `--fail-if-slower` judges. Latencies stay
per request.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field

from tpubench.measure.numerics import Parity, compare_numerics
from tpubench.measure.stats import ratio_with_uncertainty, verdict
from tpubench.records.usable import cv_words, result_is_usable
from tpubench.scenarios.registry import pair_label
from tpubench.workload_spec.point import RunPoint

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
    # images (docs/definitions.md#diffusion)
    ("images_per_s", True),
    ("image_mean_s", False),
    # energy over the timed window (docs/measurement.md#energy), where both sides measured it alike
    ("joules_per_token", False),
    ("joules_per_train_token", False),
    ("joules_per_image", False),
)
ENERGY_WORDS = ("less energy", "more energy")
# How many profile categories (run --profile) a comparison shows: those that moved most.
PROFILE_MOVES = 3
# Throughputs grow with the chips a point runs on; latencies do not.
THROUGHPUTS = tuple(name for name, _ in METRICS if name.endswith("_per_s"))
PER_CHIP = "_per_chip"
# The throughput a pair is judged by (--fail-if-slower): generation's, else training's; per chip
# when the two sides ran on different numbers of chips.
HEADLINES = ("output_tokens_per_s_per_chip", "train_tokens_per_s_per_chip", "images_per_s_per_chip",
             "output_tokens_per_s", "train_tokens_per_s", "images_per_s")

# Parts of a point that do not define what was measured: how long and with which seed it was
# measured, the model's provenance and compile options (the stack under comparison, as the
# backend and device are).
_NOT_DEFINING = frozenset({"measurement", "hub_id", "weights", "trust_remote_code", "compile_options"})
# The same for a server's params: which server (the stack compared), where the workload file was,
# how many requests for how long, SLOs (they judge goodput, not throughput) and the prompt seed.
_PARAMS_NOT_DEFINING = frozenset({"server", "workload_dir", "request_timeout_s", "num_requests", "duration_s",
                                  "warmup_requests", "slo", "seed"})
# A field a point lacks because it was measured before the field existed means its default; the
# defaults are RunPoint's, except matmul precision, which before the field existed was torch's
# own default, 'highest' (RunPoint.key treats the two alike too).
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(RunPoint) if f.default is not dataclasses.MISSING}
_BEFORE_FIELD = {"matmul_precision": "highest", "quality": {}}
# What a point's precision is made of: pairs agree on them unless a comparison across precisions is
# asked for (compare --allow-precision-mix), and then say that they cross.
PRECISION_FIELDS = ("dtype", "quantization", "quality")
# A parallel layout is another way to compute the same numbers: a numerics check pairs across it.
LAYOUT_FIELDS = frozenset({"tensor_parallel", "expert_parallel", "data_parallel"})


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
    # "total", or "per chip" when the two sides ran on different numbers of chips.
    basis: str = "total"
    # Where both ran with --profile: the categories that moved most (profile_moves).
    profile: list["ProfileMove"] = field(default_factory=list)

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


def compare_metrics(a_metrics: dict, b_metrics: dict, metrics=METRICS) -> list[MetricComparison]:
    out = []
    for name, higher_better in metrics:
        a, b = a_metrics.get(name), b_metrics.get(name)
        if a is None or b is None or not (math.isfinite(a) and math.isfinite(b)) or a == 0:
            continue
        ratio, half = ratio_with_uncertainty(b, _ci_half(b_metrics, name), a, _ci_half(a_metrics, name))
        words = ENERGY_WORDS if name.startswith("joules_") else ("faster", "slower")
        out.append(MetricComparison(name, a, b, ratio, half,
                                    verdict(ratio, half, higher_is_better=higher_better, words=words)))
    return out


def per_chip_metrics(metrics: dict, chips: float) -> dict:
    """Each throughput (and its CI) divided by `chips`, as `<name>_per_chip`; latencies as they are."""
    out = {k: v for k, v in metrics.items() if not k.startswith(THROUGHPUTS)}
    for name in THROUGHPUTS:
        for suffix in ("", "_ci95_low", "_ci95_high"):
            value = metrics.get(name + suffix)
            if value is not None:
                out[name + PER_CHIP + suffix] = value / chips
    return out


PER_CHIP_METRICS = tuple((name + PER_CHIP if name in THROUGHPUTS else name, higher) for name, higher in METRICS)


# ----------------------------------------------------------------------------- pairing


def defining_point(point: dict, *, with_workload: bool = True, with_layout: bool = True,
                   with_precision: bool = True) -> dict:
    """The parts of a result's point that define what was measured, defaults filled in."""
    out = {}
    for name in sorted(set(point) | set(_DEFAULTS) | set(_BEFORE_FIELD)):
        if name in _NOT_DEFINING or (name == "workload" and not with_workload) \
                or (name in LAYOUT_FIELDS and not with_layout) or (name in PRECISION_FIELDS and not with_precision):
            continue
        value = point.get(name)
        if value is None:
            value = _BEFORE_FIELD.get(name, _DEFAULTS.get(name))
        if name == "params":
            value = {k: v for k, v in (value or {}).items() if k not in _PARAMS_NOT_DEFINING}
        out[name] = value
    return out


def match_key(result, *, with_workload: bool = True, with_layout: bool = True, with_precision: bool = True) -> str:
    """Equal for two results of the same point (a canonical JSON of defining_point)."""
    return json.dumps(defining_point(result.point, with_workload=with_workload, with_layout=with_layout,
                                     with_precision=with_precision), sort_keys=True, default=str)


def precision_words(point: dict) -> str:
    """'float32' or 'float32 q=int8_dynamic': a point's precision in the words a pair label uses."""
    q = point.get("quantization") or "none"
    return f"{point.get('dtype')}" + (f" q={q}" if q != "none" else "")


def point_differences(a: dict, b: dict) -> list[str]:
    """'field: A vs B' for every defining field that differs (nested fields dotted)."""
    out = []
    for name in sorted(set(a) | set(b)):
        x, y = a.get(name), b.get(name)
        if isinstance(x, dict) and isinstance(y, dict):
            out.extend(f"{name}.{d}" for d in point_differences(x, y))
        elif x != y:
            out.append(f"{name}: {_short(x)} vs {_short(y)}")
    return out


def _short(value) -> str:
    text = json.dumps(value, sort_keys=True, default=str) if isinstance(value, (dict, list)) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def chips_of(result) -> float | None:
    """The chips a result ran on, as its environment records them; None when unknown."""
    chips = result.environment.get("chips")
    try:
        chips = float(chips)
    except (TypeError, ValueError):
        return None
    return chips if math.isfinite(chips) and chips > 0 else None


def _latest_per_key(results, key) -> dict:
    """key -> the latest (path, result) measured for it: a point measured again supersedes."""
    latest = {}
    for f, r in sorted(results, key=lambda fr: fr[1].started_at):
        latest[key(r)] = (f, r)
    return latest


def point_label(result) -> str:
    """What a point is, in a few words: workload, scale, shape or load, layout, dtype (its scenario's
    pair_label)."""
    return pair_label(result.point)


def compare_results(a_results, b_results, *, numerics_only: bool = False,
                    allow_precision_mix: bool = False) -> tuple[list[PairComparison], list[str]]:
    """Pair up (path, RunResult) lists by match_key and compare each pair; the second value lists
    the points with no partner on the other side ('only in A: ...'). Two single files are paired
    whatever their workload names, if the rest of their points agree (else both are listed, with
    how they differ). For a numerics check alone (`numerics_only`) the parallel layout may differ:
    a sharded model must compute what the unsharded one does. Points pair only at the same
    precision (dtype and quantisation) unless `allow_precision_mix`; a pair that then crosses
    precisions says so in its label."""
    # A numerics check reads any point that ran; a speed comparison only usable ones (records/usable.py).
    take = (lambda r: r.status == "ok") if numerics_only else result_is_usable
    a_ok = [(f, r) for f, r in a_results if take(r)]
    b_ok = [(f, r) for f, r in b_results if take(r)]
    left_out = [f"not compared, invalid in {side}: {f} ({point_label(r)}): {'; '.join(r.validity.reasons)}"
                for side, results in (("A", a_results), ("B", b_results)) for f, r in results
                if r.status == "ok" and not take(r)]
    with_workload = not (len(a_ok) == 1 and len(b_ok) == 1)

    def key(r):
        return match_key(r, with_workload=with_workload, with_precision=not allow_precision_mix)

    latest_a, latest_b = _latest_per_key(a_ok, key), _latest_per_key(b_ok, key)
    if numerics_only:
        pairs = _pairs_across_layouts(latest_a, latest_b, with_workload)
    else:
        pairs = [(latest_a[k], latest_b[k]) for k in latest_a if k in latest_b]
    paired_a = {id(pa[1]) for pa, _ in pairs}
    paired_b = {id(pb[1]) for _, pb in pairs}
    unmatched = [f"only in A: {f} ({point_label(r)})" for f, r in latest_a.values() if id(r) not in paired_a]
    unmatched += [f"only in B: {f} ({point_label(r)})" for f, r in latest_b.values() if id(r) not in paired_b]
    if not pairs and not with_workload:
        (_, ra), (_, rb) = a_ok[0], b_ok[0]
        with_layout = not numerics_only
        differ = point_differences(defining_point(ra.point, with_workload=False, with_layout=with_layout),
                                   defining_point(rb.point, with_workload=False, with_layout=with_layout))
        unmatched.append("not the same point: " + "; ".join(differ))
    return [compare_pair(pa, pb) for pa, pb in pairs], unmatched + left_out


def _pairs_across_layouts(latest_a: dict, latest_b: dict, with_workload: bool) -> list:
    """For a numerics check: each B point with the A point of the same layout where A has it, else
    with A's point of that point on the fewest chips (the unsharded baseline, usually)."""
    def free_key(r):
        return match_key(r, with_workload=with_workload, with_layout=False)

    a_by_free: dict[str, list] = {}
    for k, (f, r) in latest_a.items():
        a_by_free.setdefault(free_key(r), []).append((k, (f, r)))
    pairs = []
    for k, b in latest_b.items():
        candidates = a_by_free.get(free_key(b[1]), [])
        if not candidates:
            continue
        same = next((a for ka, a in candidates if ka == k), None)
        pairs.append((same or min((a for _, a in candidates), key=lambda a: chips_of(a[1]) or math.inf), b))
    return pairs


def compare_pair(a, b) -> PairComparison:
    """One matched pair of (path, RunResult): per chip when the two ran on different chip counts."""
    (fa, ra), (fb, rb) = a, b
    ca, cb = chips_of(ra), chips_of(rb)
    label = f"{point_label(ra)}: {ra.backend}:{ra.device} -> {rb.backend}:{rb.device}"
    pa, pb = precision_words(ra.point), precision_words(rb.point)
    if pa != pb:
        label += f" (crosses precisions: {pa} -> {pb})"
    for side, r in (("A", ra), ("B", rb)):   # noisy: compared, its wider CI in the verdict
        if r.validity.noise:
            label += f" ({side} noisy{cv_words(r.validity.cv)})"
    if ca == cb:
        metrics, basis = compare_metrics(ra.metrics, rb.metrics), "total"
    elif ca is None or cb is None:
        # Whether the chips differ is unknown: a total throughput could be off by any factor.
        latencies = tuple(m for m in METRICS if m[0] not in THROUGHPUTS)
        metrics = compare_metrics(ra.metrics, rb.metrics, latencies)
        basis = "latency only (chips unknown on one side)"
        label += f" ({basis})"
    else:
        metrics = compare_metrics(per_chip_metrics(ra.metrics, ca), per_chip_metrics(rb.metrics, cb),
                                  PER_CHIP_METRICS)
        basis = "per chip"
        label += f" (per chip: {ca:g} vs {cb:g} chips)"
    return PairComparison(label, str(fa), str(fb), _energy_alike(metrics, ra, rb), compare_numerics(ra, rb), basis,
                          profile_moves(ra.profile, rb.profile))


@dataclass
class ProfileMove:
    category: str      # a measure/profile.py category, e.g. "attention_s"
    a_s: float         # seconds per iteration in A's profiled pass
    b_s: float

    @property
    def change_s(self) -> float:
        return self.b_s - self.a_s


def profile_moves(a_profile: dict, b_profile: dict, top: int = PROFILE_MOVES) -> list[ProfileMove]:
    """The `top` categories whose seconds per iteration changed most between two profiled passes
    (largest absolute change first; unchanged ones left out); [] unless both have categories.
    Each profiled pass is one iteration (a generate batch, a training step, a pipeline call), so its
    seconds are per iteration on both sides."""
    a, b = (p.get("categories") or {} for p in (a_profile or {}, b_profile or {}))
    if not a or not b:
        return []
    moves = [ProfileMove(k, float(a.get(k, 0.0)), float(b.get(k, 0.0))) for k in dict.fromkeys([*a, *b])]
    moves = [m for m in moves if math.isfinite(m.change_s) and m.change_s != 0]
    return sorted(moves, key=lambda m: -abs(m.change_s))[:top]


def _energy_alike(metrics: list[MetricComparison], ra, rb) -> list[MetricComparison]:
    """A measured energy figure is never compared with a modelled one as if alike: such a pair's
    energy rows stay, with no ratio and a verdict that says why."""
    methods = [(r.energy or {}).get("method") for r in (ra, rb)]
    if methods[0] == methods[1]:
        return metrics
    why = f"not compared: A {methods[0] or 'unmeasured'}, B {methods[1] or 'unmeasured'}"
    return [dataclasses.replace(m, ratio=math.nan, half_width=math.nan, verdict=why)
            if m.metric.startswith("joules_") else m for m in metrics]


def slower_than(comparisons: list[PairComparison], pct: float) -> list[PairComparison]:
    """Pairs whose headline throughput dropped by more than `pct` percent, beyond noise."""
    tripped = []
    for c in comparisons:
        h = c.headline()
        if h and h.ratio < 1 - pct / 100 and h.verdict == "slower":
            tripped.append(c)
    return tripped
