"""Cross-backend numerics parity: do two results of the same workload compute the same thing?

Each result carries a fingerprint of sequence 0 of the fixed prompt: its greedy tokens and a
summary of the first-step logits (a fixed sample of vocabulary ids, the top ids and values).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Absolute max |delta logit| allowed in float32: summation order differs between backends and
# kernels, which moves fp32 logits by ~1e-5 on these models; 1e-3 leaves room, a real bug does not fit.
FP32_ABS_TOL = 1e-3
# In bf16/fp16, rounding alone moves logits by a fraction of their spread: on the test models
# torch bf16 differs from torch fp32 by up to 0.22 standard deviations of the logits (and the
# JAX twin from torch bf16 by 0.12). The bound is relative to that spread, and only the first
# greedy token must agree, since a near-tie later can legitimately send the paths apart.
HALF_REL_TOL = 0.25

# What must be equal for two fingerprints to be comparable: same model, weights, prompt.
_SAME = ("family", "model_config", "weights", "batch_size", "input_length", "output_length")


@dataclass
class Parity:
    verdict: str                 # "agree" | "disagree" | "not comparable"
    detail: str
    token_agreement: float = math.nan
    first_token_equal: bool | None = None
    max_abs_delta: float = math.nan
    tolerance: float = math.nan


def tolerance(dtype_a: str, dtype_b: str, logits_std: float) -> tuple[float, bool]:
    """(max |delta| allowed, whether all greedy tokens must match) for the looser of two dtypes."""
    if dtype_a == dtype_b == "float32":
        return FP32_ABS_TOL, True
    return HALF_REL_TOL * logits_std, False


def compare_numerics(a, b) -> Parity:
    """Parity of two RunResults' fingerprints, with a dtype-aware verdict."""
    fa, fb = a.numerics, b.numerics
    if not fa or not fb:
        return Parity("not comparable", "a result has no numerics fingerprint (failed run?)")
    different = [k for k in _SAME if a.point.get(k) != b.point.get(k)]
    if a.point.get("measurement", {}).get("seed") != b.point.get("measurement", {}).get("seed"):
        different.append("seed")
    if different:
        return Parity("not comparable", f"different {', '.join(different)}: not the same model, weights and prompt")
    if not (fa.get("weights_identical_across_devices") and fb.get("weights_identical_across_devices")):
        return Parity("not comparable", "weights were initialised on the device, so they differ between devices")
    if "tensors" in fa or "tensors" in fb:
        return compare_tensors(a, b)

    ta, tb = fa["greedy_tokens"], fb["greedy_tokens"]
    n = min(len(ta), len(tb))
    agreement = sum(x == y for x, y in zip(ta, tb)) / n if n else math.nan
    first_equal = bool(n) and ta[0] == tb[0]
    delta = max_logit_delta(fa, fb)
    std = float(np.mean([fa.get("logits_std", 0.0), fb.get("logits_std", 0.0)]))
    tol, all_tokens = tolerance(a.point["dtype"], b.point["dtype"], std)
    problems = []
    if delta > tol:
        problems.append(f"max |delta logit| {delta:.3g} > {tol:.3g}")
    if all_tokens and agreement < 1.0:
        problems.append(f"greedy tokens agree on {agreement:.0%} of {n}")
    if not all_tokens and not first_equal:
        problems.append("first greedy token differs")
    verdict = "disagree" if problems else "agree"
    detail = "; ".join(problems) or (f"max |delta logit| {delta:.3g} <= {tol:.3g}, greedy tokens agree on "
                                     f"{agreement:.0%} of {n}")
    return Parity(verdict, detail, agreement, first_equal, delta, tol)


def max_logit_delta(fa: dict, fb: dict) -> float:
    """Max |delta| over the logits both fingerprints hold: the fixed sample and each side's top ids."""
    va, vb = _logits_by_id(fa), _logits_by_id(fb)
    common = va.keys() & vb.keys()
    if not common:
        return math.inf
    return max(abs(va[k] - vb[k]) for k in common)


def _logits_by_id(f: dict) -> dict[int, float]:
    values = dict(zip(f.get("logits_sample_ids", []), f.get("logits_sample", [])))
    values.update(zip(f.get("top_ids", []), f.get("top_values", [])))
    return values


def compare_tensors(a, b) -> Parity:
    """Parity of two `tensors` fingerprints (named tensors, each a fixed sample of values with its
    spread: an image pipeline's first noise prediction and final latents). Every tensor both have
    must agree within the dtype-aware tolerance, relative to the tensor's spread in half precision."""
    if (a.point.get("params") or {}) != (b.point.get("params") or {}):
        return Parity("not comparable", "different scenario settings (resolution, steps, scheduler, ...)")
    ta, tb = a.numerics.get("tensors") or {}, b.numerics.get("tensors") or {}
    names = sorted(ta.keys() & tb.keys())
    if not names:
        return Parity("not comparable", "the fingerprints share no tensor")
    problems, worst, worst_tol = [], -math.inf, math.nan
    for name in names:
        fa, fb = ta[name], tb[name]
        if fa.get("shape") != fb.get("shape") or fa.get("sample_ids") != fb.get("sample_ids"):
            problems.append(f"{name}: shapes differ ({fa.get('shape')} vs {fb.get('shape')})")
            continue
        delta = float(np.max(np.abs(np.subtract(fa["sample"], fb["sample"])))) if fa["sample"] else 0.0
        std = float(np.mean([fa.get("std", 0.0), fb.get("std", 0.0)]))
        tol, _ = tolerance(a.point["dtype"], b.point["dtype"], std)
        if not delta <= tol:   # NaN fails too
            problems.append(f"{name}: max |delta| {delta:.3g} > {tol:.3g}")
        if not delta <= worst:   # the largest, or a NaN
            worst, worst_tol = delta, tol
    verdict = "disagree" if problems else "agree"
    detail = "; ".join(problems) or f"max |delta| {worst:.3g} <= {worst_tol:.3g} over {', '.join(names)}"
    return Parity(verdict, detail, max_abs_delta=worst if worst != -math.inf else math.nan, tolerance=worst_tol)
