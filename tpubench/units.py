"""Units, chosen only when rendering: data stays in seconds, bytes, fractions and USD.

One place for every output: the reports (output/report/format.py: markdown, HTML) show significant
figures and an en dash for a missing value; the terminal tables (console.py, launch/render.py)
show fixed decimals and pass their own `missing` mark. Nothing here imports more than the
standard library, so the terminal stays quick to start.
"""

from __future__ import annotations

import math

MISSING = "–"   # an absent or non-finite value in a report (an en dash)


def finite(x) -> bool:
    """A number that can be shown: not None, not NaN or infinite, not text."""
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def fixed(x, spec: str, missing: str = MISSING) -> str:
    """`x` with a format spec (',.1f'), or `missing`."""
    return format(x, spec) if finite(x) else missing


def sig(x, digits: int = 3) -> str:
    """A number with `digits` significant figures, thousands separated, '–' when missing."""
    if not finite(x):
        return "∞" if x == math.inf else MISSING
    x = float(x)
    if x == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(x)))
    decimals = max(0, digits - 1 - magnitude)
    return f"{x:,.{decimals}f}"


def number(x) -> str:
    """A count or rate as data holds it: 8 (not 8.0, which a column with gaps makes of it), 2.5."""
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return f"{x:g}" if isinstance(x, float) else str(x)


def with_ci(value, low, high, fmt=sig) -> str:
    """'1.23 (1.20–1.26)': the value and its 95% CI."""
    text = fmt(value)
    if finite(low) or finite(high) or high == math.inf:
        text += f" ({fmt(low)}–{fmt(high)})"
    return text


def with_range(value, low, high, spec: str = ",.1f", missing: str = MISSING) -> str:
    """'1,234.5 (1,220.1-1,250.3)': the value and its 95% CI, the value alone when the CI is
    unknown. A range, not '±': the interval of a positive quantity is not symmetric (measure/stats.py)."""
    if not finite(value):
        return missing
    if not (finite(low) and finite(high)):
        return format(value, spec)
    return f"{format(value, spec)} ({format(low, spec)}-{format(high, spec)})"


# ----------------------------------------------------------------------------- seconds


def ms(seconds, digits: int = 3, *, spec: str | None = None, missing: str = MISSING) -> str:
    """Seconds in milliseconds: `digits` significant figures, or a format spec ('.1f')."""
    if not finite(seconds):
        return missing
    value = float(seconds) * 1e3
    return sig(value, digits) if spec is None else format(value, spec)


def duration(seconds, missing: str = MISSING) -> str:
    """A latency bound or figure in the unit that reads: '2 s', '450 ms', '8.5 ms'."""
    if not finite(seconds):
        return missing
    value = float(seconds)
    return f"{value:.3g} s" if value >= 1 else f"{value * 1e3:.3g} ms"


# ----------------------------------------------------------------------------- fractions


def share(x, missing: str = MISSING) -> str:
    """A fraction of a peak (MFU, MBU) as a percentage: 0.4123 -> '41.2%'."""
    return f"{float(x) * 100:.3g}%" if finite(x) else missing


def pct(x) -> str:
    """A percentage difference, signed: 12.34 -> '+12.3%'."""
    return f"{float(x):+.1f}%" if finite(x) else MISSING


# ----------------------------------------------------------------------------- bytes


def human_bytes(n, missing: str = MISSING) -> str:
    """Bytes in binary units: '512 B', '1.5 GiB'."""
    if not finite(n):
        return missing
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


# ----------------------------------------------------------------------------- money


def usd(x) -> str:
    """Dollars to 3 significant figures: '$0.0412', '$1,230'."""
    return f"${sig(x)}" if finite(x) else MISSING


def usd_whole(x) -> str:
    """Whole dollars: '$1,235', never '$-0'."""
    if not finite(x):
        return MISSING
    value = round(float(x))
    return f"-${-value:,.0f}" if value < 0 else f"${value:,.0f}"


def usd_cents(x, missing: str = MISSING, *, below_a_dollar: int = 2) -> str:
    """Dollars and cents, '$1,234.50'; amounts under a dollar with `below_a_dollar` decimals
    (a price per million tokens of $0.0042 needs 4)."""
    if not finite(x):
        return missing
    return f"${x:,.2f}" if x >= 1 else f"${x:,.{below_a_dollar}f}"
