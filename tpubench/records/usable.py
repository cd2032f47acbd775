"""Which measured points are used: the one definition that run, report, answer, budget and compare
all call.

A point is **usable** when it ran (`status` "ok") and nothing is wrong with it (`validity.valid`:
no wrong token count, recompile, CPU fallback, numerics or quality failure, timing past the chip's
peak; a server's client too late to measure it). Only usable points are ranked, enter a verdict,
a budget or a comparison; an unusable one is listed with its reasons (priced for reference where a
report prices everything, never ranked).

A **noisy** point is usable. Noise is not something wrong with the point but with the host it ran
on: its headline's spread above `max_cv`, its 95% interval still wider than `target_ci` when
`max_seconds` ran out, fewer than `min_iterations` iterations in `max_seconds`, a timed phase
shorter than `min_seconds` (`validity.noise`, with the headline's CV in `validity.cv`). It is measured, priced and reported,
marked noisy with its CV ("noisy: CV 25.4%"); its wider interval is what keeps it out of a verdict where the noise
would change it ("tie within noise").

Result files written before this distinction (tpubench 0.x up to issue 50) marked high variation
invalid ("throughput CV 25.4% above max_cv=10%"); reading them moves such reasons to `noise`
(`split_older_reasons`), so an old file reads as the new rule would have written it.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable

# What older versions wrote among a point's invalidity reasons that is noise under this rule.
_OLDER_NOISE = (
    re.compile(r"^throughput CV (?P<cv>[0-9.]+)% above max_cv="),
    re.compile(r"^only \d+ timed iterations, fewer than min_iterations=\d+ \(max_seconds=[0-9.e+]+ reached\)$"),
    re.compile(r"^timed phase lasted [0-9.]+ s, under min_seconds=[0-9.e+]+$"),
)


def split_older_reasons(reasons: Iterable[str]) -> tuple[list[str], list[str], float | None]:
    """(what is wrong, what is noise, the CV an older noise reason states or None) of a result's
    stored invalidity reasons."""
    wrong, noise, cv = [], [], None
    for reason in reasons:
        hit = next((m for m in (p.match(reason) for p in _OLDER_NOISE) if m), None)
        if hit is None:
            wrong.append(reason)
            continue
        noise.append(reason)
        if "cv" in hit.groupdict():
            cv = float(hit["cv"]) / 100
    return wrong, noise, cv


def is_usable(status: Any, valid: Any) -> bool:
    """The rule itself: it ran, and nothing is wrong with it. A missing `valid` (a row made by hand
    or by another tool) counts as valid, a missing status as ran."""
    ran = status is None or _missing(status) or status == "ok"
    return bool(ran and (valid is None or _missing(valid) or bool(valid)))


def result_is_usable(result) -> bool:
    """is_usable of a RunResult."""
    return is_usable(result.status, result.validity.valid)


def row_is_usable(row) -> bool:
    """is_usable of one row of a results or priced table (a dict or a pandas row)."""
    return is_usable(row.get("status"), row.get("valid"))


def usable_mask(frame):
    """is_usable of every row of a results or priced table, as a boolean pandas Series."""
    import pandas as pd

    ran = frame["status"].eq("ok") | frame["status"].isna() if "status" in frame else True
    valid = True
    if "valid" in frame:     # a column of booleans is its own answer; anything else value by value
        column = frame["valid"]
        valid = column if column.dtype == bool else column.map(lambda v: is_usable(None, v)).astype(bool)
    mask = pd.Series(True, index=frame.index) & ran & valid
    return mask.astype(bool)


def usable_rows(frame):
    """(the usable rows of a results or priced table, how many result files were left out as unusable)."""
    mask = usable_mask(frame)
    left_out = frame.loc[~mask, "file"].nunique() if "file" in frame else int((~mask).sum())
    return frame[mask].copy(), int(left_out)


def is_noisy(row) -> bool:
    """Whether a usable row was marked noisy (its `noisy` column; absent: not noisy)."""
    value = row.get("noisy")
    return bool(value) and not _missing(value)


def noise_label(row) -> str:
    """'noisy: CV 25.4%' for a noisy row, '' otherwise: how every table marks it."""
    if not is_noisy(row):
        return ""
    return "noisy" + cv_words(row.get("headline_cv"))


def cv_words(cv) -> str:
    """': CV 25.4%', or '' when the CV is unknown."""
    return f": CV {cv:.1%}" if isinstance(cv, (int, float)) and math.isfinite(cv) else ""


def _missing(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)
