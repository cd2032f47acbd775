"""What the price-file importers share: reading a JSON file (a bad one is one line naming the file
and, where known, the field), collecting rows with their plan parts, counting every SKU left out by
reason (so nothing is dropped silently), and the long-form table they all return.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path

import pandas as pd

from tpubench.errors import UserError
from tpubench.money import plans
from tpubench.money.pricing import LONG_FILE_COLUMNS, MAX_USD_PER_CHIP_HOUR


def read_json(path: str | Path, what: str) -> object:
    """The parsed JSON of the `what` file ("GCP Cloud Billing Catalog SKUs file", ...)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"no such {what}", where=str(path))
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read the {what}: {exc}", where=str(path)) from None
    try:
        return json.loads(text, parse_int=_json_int)
    except json.JSONDecodeError as exc:
        raise UserError(f"not valid JSON ({exc.msg}, column {exc.colno})", where=f"{path}:{exc.lineno}") from None
    except RecursionError:
        # A hostile or broken file nested thousands of levels deep: no price file is.
        raise UserError(f"not a {what}: JSON nested too deeply to read", where=str(path)) from None
    except ValueError as exc:
        # json raises a bare ValueError for an integer literal over Python's 4300-digit limit.
        raise UserError(f"not a {what}: {str(exc).split(':')[0]}", where=str(path)) from None


def price_number(value: object, where: str, field: str, what: str = "USD") -> float:
    """A price read from JSON: a number or a numeric string, finite and >= 0; anything else (a
    bool, NaN, inf, a negative or a 5000-digit number) is a one-line error naming the field."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        kind = "true/false" if isinstance(value, bool) else "null" if value is None else f"a JSON {_json_kind(type(value))}"
        raise UserError(f"{kind} is not a price ({what})", where=where, field=field)
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise UserError(f"'{str(value)[:40]}' is not a number ({what})", where=where, field=field) from None
    if not math.isfinite(number):
        raise UserError(f"'{str(value)[:40]}' is not a finite price ({what})", where=where, field=field)
    if number < 0:
        raise UserError(f"negative price {number:g} ({what})", where=where, field=field)
    return number


def _json_int(text: str) -> int | float:
    """A JSON integer; one longer than Python converts (4300 digits) becomes an infinite float, so
    the field that holds it is rejected by name (`price_number`, the GCP unitPrice reader)."""
    digits = len(text.lstrip("-"))
    return int(text) if digits <= 4300 else float("-inf" if text.startswith("-") else "inf")


def require(mapping: object, key: str, kind: type, where: str, field_path: str):
    """`mapping[key]`, which must be a `kind`; anything else is a one-line error naming the field."""
    if not isinstance(mapping, dict) or key not in mapping:
        raise UserError("missing; the file does not follow the documented format", where=where, field=field_path)
    value = mapping[key]
    if not isinstance(value, kind):
        raise UserError(f"expected a JSON {_json_kind(kind)}, got {type(value).__name__}", where=where,
                        field=field_path)
    return value


def listed_objects(data: object, key: str, where: str):
    """(field path, object) for each entry of the array `data[key]` ("skus[3]", {...}); an entry
    that is not a JSON object is a one-line error naming it."""
    for i, entry in enumerate(require(data, key, list, where, key)):
        field_path = f"{key}[{i}]"
        if not isinstance(entry, dict):
            raise UserError("expected a JSON object", where=where, field=field_path)
        yield field_path, entry


def _json_kind(kind: type) -> str:
    return {dict: "object", list: "array", str: "string"}.get(kind, getattr(kind, "__name__", str(kind)))


def file_date(path: str | Path) -> str:
    """The file's modification date (UTC): when the user downloaded the prices."""
    return datetime.fromtimestamp(Path(path).stat().st_mtime, timezone.utc).date().isoformat()


def iso_date(text: str) -> str | None:
    """The YYYY-MM-DD date at the start of an ISO timestamp, or None when there is none."""
    try:
        return date.fromisoformat(str(text)[:10]).isoformat()
    except ValueError:
        return None


@dataclass
class ImportResult:
    """Rows imported from one price file, and every SKU left out, counted by reason."""
    rows: list[dict] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    _keys: dict = field(default_factory=dict)

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] += n

    def add(self, *, cloud: str, region: str, instance_type: str, accelerator: str, chips: int, plan: str,
            hourly: float, source: str, as_of: str, upfront: float = 0.0, term_months: float | None = None,
            where: str = "", field: str = "") -> None:
        """One price row; a second price for the same instance and plan keeps the first and is counted.
        A price no chip costs (over MAX_USD_PER_CHIP_HOUR) is an error naming `where` and `field`."""
        if term_months is None:
            term_months = plans.PLANS[plan].term_months     # a commitment's fixed term, written out
        per_chip = plans.effective_usd_per_hour(hourly, upfront, term_months) / max(int(chips), 1)
        if not math.isfinite(per_chip) or per_chip > MAX_USD_PER_CHIP_HOUR:
            raise UserError(f"{per_chip:g} USD per chip-hour for {instance_type} ({plan}) is not a price "
                            f"(over {MAX_USD_PER_CHIP_HOUR:g}): check the file's units", where=where or source,
                            field=field or None)
        key = (cloud, region, instance_type, plan)
        if key in self._keys:
            self.skip(f"second price for the same instance and plan (kept the first: {self._keys[key]})")
            return
        self._keys[key] = source
        self.rows.append({
            "cloud": cloud, "region": region, "instance_type": instance_type, "accelerator": accelerator,
            "chips_per_instance": int(chips), "plan": plan, "usd_per_instance_hour": hourly,
            "upfront_usd": upfront or math.nan, "term_months": math.nan if term_months is None else term_months,
            "preemption_rate_per_h": math.nan, "preemption_rate_per_day": math.nan,
            "source": source, "as_of": as_of, "flagged": "",
        })

    def table(self) -> pd.DataFrame:
        """The rows in the long price-file layout, sorted for a stable file."""
        df = pd.DataFrame.from_records(self.rows, columns=list(LONG_FILE_COLUMNS))
        if df.empty:
            return df
        order = {name: i for i, name in enumerate(plans.PLAN_NAMES)}
        df = df.assign(_order=df["plan"].map(order))
        df = df.sort_values(["cloud", "instance_type", "region", "_order"], kind="stable")
        return df.drop(columns="_order").reset_index(drop=True)

    def summary(self) -> list[str]:
        """One line per reason SKUs were left out, most frequent first."""
        return [f"{n} skipped: {reason}" for reason, n in self.skipped.most_common()]
