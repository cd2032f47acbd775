"""money.price_age: a spot price is stale after 30 days, any other after 180 (today injected), and the
line beside a verdict names each stale price and the command that refreshes it; money.price_gaps: a
plan a chip lacks is named with the reason unpriced.csv gives, never dropped."""

from __future__ import annotations

from datetime import date

import pandas as pd
import pytest

from tpubench.money import price_age, price_gaps

TODAY = date(2026, 12, 7)


@pytest.mark.parametrize("plan, as_of, stale", [
    ("spot", "2026-11-07", False),            # 30 days: still current
    ("spot", "2026-11-06", True),             # 31 days
    ("on_demand", "2026-06-10", False),       # 180 days
    ("on_demand", "2026-06-09", True),        # 181 days
    ("commit_3y", "2024-12-11", True),
    ("on_demand-20%", "2026-06-09", True),    # a discount keeps its base plan's rule
    ("spot", None, False),                    # no date: not this rule's to judge
])
def test_the_age_rule_by_plan(plan, as_of, stale):
    assert (price_age.stale(plan, as_of, TODAY) is not None) is stale


def test_the_limit_is_the_plans():
    assert price_age.stale_after_days("spot") == 30
    assert price_age.stale_after_days("commit_1y") == price_age.stale_after_days("reservation") == 180
    assert price_age.age_days("2026-01-22", TODAY) == 319


def test_the_note_names_each_stale_price_and_the_refresh_command():
    note = price_age.stale_note([("spot", "2026-01-22", "H100 ×8 (aws eu-west-2)"),
                                 ("on_demand", "2026-11-30", "TPU v6e ×8")], TODAY)
    assert note.startswith("Stale price: H100 ×8 (aws eu-west-2) spot price dated 2026-01-22 is 319 days old (over 30")
    assert "TPU v6e" not in note                           # its price is current
    assert price_age.REFRESH_COMMAND in note
    assert price_age.stale_note([("on_demand", "2026-11-30", "x")], TODAY) is None


UNPRICED = pd.DataFrame([
    {"accelerator": "Trainium2", "plan": "on_demand", "reason": "empty on-demand price in the catalog",
     "source": "NOT PRICED: catalog", "as_of": "2026-12-07"},
    {"accelerator": "H200", "plan": "", "reason": "absent from the snapshot", "source": "NOT PRICED: v6", "as_of": ""},
])


def test_a_missing_plan_is_named_with_its_reason():
    assert price_gaps.missing_price("Trainium2", "on_demand", UNPRICED) == (
        "no on-demand price for Trainium2: empty on-demand price in the catalog (NOT PRICED: catalog, checked 2026-12-07)")
    # An every-plan note covers every plan; a chip the table says nothing of gets the way to add one.
    assert price_gaps.missing_price("H200", "commit_3y", UNPRICED).startswith("no 3-year commitment price for H200: absent")
    assert price_gaps.missing_price("Trainium2", "commit_3y", UNPRICED) == (
        f"no 3-year commitment price for Trainium2 in the price table: {price_gaps.ADD_A_PRICE}")


def test_an_unstated_source_or_date_is_left_out_not_written_nan():
    notes = pd.DataFrame([{"accelerator": "TPU7x", "plan": float("nan"), "reason": "not in the catalog",
                           "source": float("nan"), "as_of": float("nan")}])
    assert price_gaps.missing_price("TPU7x", "spot", notes) == "no spot price for TPU7x: not in the catalog"


def test_a_chip_in_one_plans_verdict_missing_from_another_is_listed_there():
    options = pd.DataFrame([
        {"workload": "w", "plan": "on_demand", "accelerator": "TPU v6e", "in_verdict": True},
        {"workload": "w", "plan": "on_demand", "accelerator": "Trainium2", "in_verdict": False},
        {"workload": "w", "plan": "spot", "accelerator": "TPU v6e", "in_verdict": True},
        {"workload": "w", "plan": "spot", "accelerator": "Trainium2", "in_verdict": True},
        {"workload": "w", "plan": "spot", "accelerator": "CPU x86 vCPU", "in_verdict": False},   # never ranked
    ])
    gaps = price_gaps.plan_gaps(options, UNPRICED)
    assert gaps == {("w", "on_demand"): ["no on-demand price for Trainium2: empty on-demand price in the catalog "
                                         "(NOT PRICED: catalog, checked 2026-12-07)"]}
    assert price_gaps.gap_words(gaps[("w", "on_demand")]).startswith("Not in this verdict: no on-demand price")
    assert price_gaps.gap_words([]) is None
