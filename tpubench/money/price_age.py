"""How old a price may be before a verdict resting on it must say so: the age rule, pure, with
"today" passed in.

A spot price follows a market that moves within weeks (public snapshots of one AWS instance's spot
price moved 64-236% between January and August 2026, issue 49), so it is stale after
`SPOT_STALE_AFTER_DAYS`; a list, commitment or reservation price changes when the cloud announces
it, so it is stale after `STALE_AFTER_DAYS`. A price's age is whole days from its `as_of` date to
today (UTC). What refreshes a stale table is one command, `REFRESH_COMMAND`, named beside the note.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Iterable

from tpubench.money import plans as plan_vocab

SPOT_STALE_AFTER_DAYS = 30
STALE_AFTER_DAYS = 180
REFRESH_COMMAND = "tpubench pricing refresh --out pricing/refreshed.csv"
# Said after the command: how the refreshed table is used.
REFRESH_USE = "then pass --prices pricing/refreshed.csv"


def today_utc() -> date:
    return datetime.now(timezone.utc).date()


def age_days(as_of: str | date, today: date) -> int:
    """Whole days from a price's `as_of` date to `today`."""
    day = as_of if isinstance(as_of, date) else date.fromisoformat(str(as_of)[:10])
    return (today - day).days


def stale_after_days(plan: str) -> int:
    """How many days a price of `plan` stays current: spot's market moves faster than list prices."""
    info = plan_vocab.plan_info(plan)
    return SPOT_STALE_AFTER_DAYS if info is not None and info.interruptible else STALE_AFTER_DAYS


@dataclass(frozen=True)
class StalePrice:
    """One price older than its plan allows."""
    plan: str
    as_of: str
    age_days: int
    limit_days: int
    what: str = ""          # which price ("aws p5.48xlarge (eu-west-2)"), for the note

    def words(self) -> str:
        kind = "spot prices move within weeks" if self.limit_days == SPOT_STALE_AFTER_DAYS else "list prices change"
        subject = f"{self.what} " if self.what else ""
        return (f"{subject}{plan_vocab.plan_label(self.plan)} price dated {self.as_of} is {self.age_days} days old "
                f"(over {self.limit_days}: {kind})")


def stale(plan: str, as_of: str | date | None, today: date, what: str = "") -> StalePrice | None:
    """The price of `plan` dated `as_of` as a StalePrice when it is older than its plan allows, else
    None (a price with no date is not called stale here: the loader refuses a row without one)."""
    if as_of is None or str(as_of) in ("", "nan", "None"):
        return None
    age, limit = age_days(as_of, today), stale_after_days(plan)
    return StalePrice(plan, str(as_of)[:10], age, limit, what) if age > limit else None


def stale_note(prices: Iterable[tuple[str, str | date | None, str]], today: date) -> str | None:
    """The line beside a verdict resting on `prices` ((plan, as_of, what) each): which of them are
    stale and the command that refreshes them; None when every one is current."""
    found = [s for plan, as_of, what in prices if (s := stale(plan, as_of, today, what)) is not None]
    if not found:
        return None
    listed = "; ".join(dict.fromkeys(s.words() for s in found))
    return f"Stale price: {listed}. Refresh: `{REFRESH_COMMAND}`, {REFRESH_USE}"


__all__ = ["REFRESH_COMMAND", "SPOT_STALE_AFTER_DAYS", "STALE_AFTER_DAYS", "StalePrice", "age_days", "stale",
           "stale_after_days", "stale_note", "today_utc"]
