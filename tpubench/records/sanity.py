"""Whether a result file that parses is also usable: the fields reports, costs and budgets compute
with hold values of the right kind and a possible size.

A result file travels between teams and may have been edited by hand or written by a broken
tool: `"scale": ["a", "b"]`, `"chips": "two"`, a negative batch or a throughput of 1e308 parse
as JSON and pass the schema (point, environment and metrics are open dictionaries), yet they
crash a report (a list is not hashable) or rank a platform by nonsense (a negative cost is the
cheapest). `problem(result)` names the first such field, so that reading skips that one file
with a warning naming it and reports the rest (records.result.read_results).

The rules, exactly:

* point: `workload`, `scale`, `family`, `dtype`, `execution_mode`, `experts_implementation`,
  `hub_id`, `scenario_kind` and `matmul_precision` are text or absent/null; `batch_size`,
  `tensor_parallel`, `expert_parallel` and `data_parallel` are whole numbers >= 1 (or null);
  `input_length` and `output_length` whole numbers >= 0 (or null).
* environment: `chips` is a finite number > 0 (a fraction is allowed: a Trainium logical core is
  part of a chip) and at most MAX_CHIPS, or null; `world_size` a whole number >= 1;
  `accelerator_name`, `hostname` and `instance` text or null.
* energy: `method`, `detail`, `verdict` and `reason` are text or null; `idle_power_w` a list of
  finite watts >= 0 or null.
* metrics and timing: every value is null or a finite number of magnitude at most MAX_MAGNITUDE;
  rates (`..._per_s`) at most MAX_RATE; times (`..._s`, `..._s_per_token`), rates, byte counts
  (`..._bytes`) and energies (`..._j`, `joules_per_...`) are >= 0, except a lower CI bound
  (`..._ci95_low...`) and the energy above idle, which may dip below zero.

Booleans are not numbers here (JSON `true` is not a batch of 1).
"""

from __future__ import annotations

import math
from typing import Any

# Far beyond any real figure, far below what overflows a float sum: 1e15 bytes is a petabyte of
# device memory, 1e15 J a quarter of a TWh.
MAX_MAGNITUDE = 1e15
# No fleet reaches 1e12 tokens (or images, or requests) a second.
MAX_RATE = 1e12
MAX_CHIPS = 1e6

_TEXT_POINT_FIELDS = ("workload", "scale", "family", "dtype", "execution_mode", "experts_implementation", "hub_id",
                      "scenario_kind", "matmul_precision")
_COUNT_POINT_FIELDS = {"batch_size": 1, "tensor_parallel": 1, "expert_parallel": 1, "data_parallel": 1,
                       "input_length": 0, "output_length": 0}
_TEXT_ENV_FIELDS = ("accelerator_name", "hostname", "instance")
_NON_NEGATIVE_SUFFIXES = ("_per_s", "_s", "_s_per_token", "_bytes", "_j")
# A trend or a difference may fall below zero (a TTFT that shrinks over a window).
_MAY_BE_NEGATIVE = ("ci95_low", "energy_above_idle", "slope", "drift", "delta", "offset")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _count_problem(value: Any, low: int) -> str | None:
    if value is None:
        return None
    if not _is_number(value) or not math.isfinite(value) or value != int(value):
        return f"{_shown(value)} is not a whole number"
    if value < low or value > MAX_MAGNITUDE:
        return f"{_shown(value)} is not a count >= {low}"
    return None


def _value_problem(name: str, value: Any) -> str | None:
    """Why a metric or timing value is unusable, or None."""
    if value is None:
        return None
    if not _is_number(value):
        return f"{_shown(value)} is not a number"
    if not math.isfinite(value):
        return None if math.isnan(value) else f"{value} is not finite"
    if abs(value) > MAX_MAGNITUDE or (name.endswith("_per_s") and value > MAX_RATE):
        return f"{value:g} is beyond any measurable figure"
    signed = any(part in name for part in _MAY_BE_NEGATIVE)
    if value < 0 and not signed and (name.endswith(_NON_NEGATIVE_SUFFIXES) or name.startswith("joules_per_")
                                     or "_per_s_" in name or "tokens_per_s" in name):
        return f"{value:g} is negative"
    return None


def problem(result) -> str | None:
    """The first unusable field of a parsed RunResult as 'field: why', or None (module docstring)."""
    point = result.point if isinstance(result.point, dict) else {}
    for name in _TEXT_POINT_FIELDS:
        value = point.get(name)
        if value is not None and not isinstance(value, str):
            return f"point.{name}: {_shown(value)} is not text"
    for name, low in _COUNT_POINT_FIELDS.items():
        why = _count_problem(point.get(name), low)
        if why:
            return f"point.{name}: {why}"
    env = result.environment if isinstance(result.environment, dict) else {}
    chips = env.get("chips")
    if chips is not None and not (_is_number(chips) and math.isfinite(chips) and 0 < chips <= MAX_CHIPS):
        return f"environment.chips: {_shown(chips)} is not a number of chips > 0"
    why = _count_problem(env.get("world_size"), 1)
    if why:
        return f"environment.world_size: {why}"
    for name in _TEXT_ENV_FIELDS:
        value = env.get(name)
        if value is not None and not isinstance(value, str):
            return f"environment.{name}: {_shown(value)} is not text"
    energy = result.energy if isinstance(result.energy, dict) else {}
    for name in ("method", "detail", "verdict", "reason"):
        value = energy.get(name)
        if value is not None and not isinstance(value, str):
            return f"energy.{name}: {_shown(value)} is not text"
    idle = energy.get("idle_power_w")
    if idle is not None and not (isinstance(idle, list) and all(_value_problem("idle_w", w) is None and w is not None
                                                                  and math.isfinite(w) and w >= 0 for w in idle)):
        return f"energy.idle_power_w: {_shown(idle)} is not a list of watts >= 0"
    for where, values in (("metrics", result.metrics), ("timing", result.timing)):
        for name, value in (values or {}).items():
            # Most values are plain numbers within every rule (0 <= v <= MAX_RATE < MAX_MAGNITUDE):
            # skipping the name's rules for them halves the cost of reading 10,000 files.
            if (type(value) is float or type(value) is int) and 0 <= value <= MAX_RATE:
                continue
            why = _value_problem(name, value)
            if why:
                return f"{where}.{name}: {why}"
    return None
