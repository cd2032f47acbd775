"""How to buy over a horizon (money/buying.py): the load profile's base, each plan's cost for a layer
of instances, spot's preemption overhead, break-even utilisation and the cheapest mix, on
hand-computed cases."""

from __future__ import annotations

import math

import pytest

from tpubench.budget import buying
from tpubench.errors import UserError

# One platform's instance: 10 $/h on demand, a 1-year commitment at 6 $/h effective, a 3-year one
# at 4 $/h, spot at 3 $/h preempted 0.1 times an hour losing half an hour each time.
ON_DEMAND = buying.Offer.of_plan("on_demand", 10.0)
COMMIT_1Y = buying.Offer.of_plan("commit_1y", 6.0)
COMMIT_3Y = buying.Offer.of_plan("commit_3y", 4.0)
SPOT = buying.Offer.of_plan("spot", 3.0, preemption_rate_per_h=0.1)
HOURS_A_YEAR = 730 * 12  # 8760


def test_plans_take_their_nature_from_the_vocabulary():
    assert COMMIT_1Y.committed and COMMIT_1Y.term_months == 12 and not COMMIT_1Y.interruptible
    assert SPOT.interruptible and not SPOT.committed
    assert buying.Offer.of_plan("on_demand-20%", 8.0).committed is False      # a discount keeps its base's nature
    # A reservation's term comes from its price row.
    assert buying.Offer.of_plan("reservation", 9.0, term_months=1).term_months == 1
    assert buying.Offer.of_plan("made_up", 1.0) is None


def test_load_profile_keeps_the_days_tokens():
    # 1000 tokens/s on average, x3 for 4 h: peak 3000, base 1000 * (24 - 12) / 20 = 600 tokens/s,
    # and 600 * 20 h + 3000 * 4 h = 24,000 = 1000 * 24 h.
    profile = buying.LoadProfile(1000.0, 3.0, 4.0)
    assert profile.peak_tokens_per_s == 3000
    assert profile.base_tokens_per_s == pytest.approx(600)
    assert profile.peak_utilisation == pytest.approx(4 / 24)
    flat = buying.LoadProfile(1000.0)
    assert flat.base_tokens_per_s == flat.peak_tokens_per_s == 1000 and flat.peak_utilisation == 1


@pytest.mark.parametrize("factor,hours,match", [
    (2.0, None, "needs the hours a day at the peak"),
    (3.0, 10.0, "more than the day's tokens"),
    (2.0, 0.0, r"in \(0, 24\]"),
    (2.0, 25.0, r"in \(0, 24\]"),
])
def test_bad_profiles_are_user_errors(factor, hours, match):
    with pytest.raises(UserError, match=match) as info:
        buying.LoadProfile(1000.0, factor, hours)
    assert info.value.field == "--peak-hours"


def test_spot_overhead_prices_the_lost_work():
    # 0.1 preemptions/h x 0.5 h lost = 5% of the hours lost: 3 / 0.95 = 3.15789 $/useful hour.
    assert buying.spot_effective_usd_per_hour(3.0, 0.1, 0.5) == pytest.approx(3 / 0.95)
    assert buying.spot_effective_usd_per_hour(3.0, 0.0, 0.5) == 3.0
    assert buying.spot_effective_usd_per_hour(3.0, 2.0, 0.5) == math.inf   # every hour lost


def test_layer_costs_per_plan():
    # 4 instances busy 1/6 of the hours for 12 months.
    u = 4 / 24
    assert buying.layer_usd(ON_DEMAND, 4, u, 12) == pytest.approx(4 * 10 * u * HOURS_A_YEAR)       # 58,400
    assert buying.layer_usd(COMMIT_1Y, 4, u, 12) == pytest.approx(4 * 6 * HOURS_A_YEAR)            # 210,240
    assert buying.layer_usd(SPOT, 4, u, 12, lost_hours=0.5) == pytest.approx(4 * 3 / 0.95 * u * HOURS_A_YEAR)
    # A 3-year term is bought whole even for a 12-month horizon: 4 * 4 * 730 * 36.
    assert buying.layer_usd(COMMIT_3Y, 4, u, 12) == pytest.approx(4 * 4 * 730 * 36)
    # 13 months of a 1-year commitment buy two terms.
    assert buying.committed_usd_per_instance(COMMIT_1Y, 13) == pytest.approx(2 * 6 * HOURS_A_YEAR)
    # Flex-start comes in day blocks: a daily peak holds it all day.
    flex = buying.Offer.of_plan("flex_start", 7.0)
    assert buying.layer_usd(flex, 4, u, 12) == pytest.approx(4 * 7 * HOURS_A_YEAR)
    # Spot with no preemption rate anywhere cannot be priced; a default rate prices it.
    unrated = buying.Offer.of_plan("spot", 3.0)
    assert math.isnan(buying.layer_usd(unrated, 4, u, 12, lost_hours=0.5))
    assert buying.layer_usd(unrated, 4, u, 12, lost_hours=0.5, default_preemption_rate=0.1) == pytest.approx(
        buying.layer_usd(SPOT, 4, u, 12, lost_hours=0.5))


def test_break_even_utilisation():
    # 12 months of 1-year terms: 6 / 10 = 60% busy pays the commitment back.
    assert buying.break_even_utilisation(COMMIT_1Y, 10.0, 12) == pytest.approx(0.6)
    # 24 months: two whole terms, still 60%.
    assert buying.break_even_utilisation(COMMIT_1Y, 10.0, 24) == pytest.approx(0.6)
    # 6 months of a 12-month term: 6 * 730 * 12 / (10 * 730 * 6) = 1.2, never pays back.
    assert buying.break_even_utilisation(COMMIT_1Y, 10.0, 6) == pytest.approx(1.2)
    # 3-year at 4 $/h: 40% over 36 months, 120% over 12.
    assert buying.break_even_utilisation(COMMIT_3Y, 10.0, 36) == pytest.approx(0.4)
    assert buying.break_even_utilisation(COMMIT_3Y, 10.0, 12) == pytest.approx(1.2)
    assert math.isnan(buying.break_even_utilisation(ON_DEMAND, 10.0, 12))


def test_a_flat_load_buys_commitment():
    # 3 instances all day for 12 months: on demand 3 * 10 * 8760 = 262,800 $; 1-year commitment
    # 3 * 6 * 8760 = 157,680 $; the 3-year term costs 3 * 4 * 730 * 36 = 315,360 $ for the year.
    mix = buying.choose_mix([ON_DEMAND, COMMIT_1Y, COMMIT_3Y], 3, 3, 1.0, 12)
    assert mix.base == buying.LayerChoice("commit_1y", pytest.approx(157_680))
    assert mix.peak.plan is None and mix.peak.usd == 0
    assert mix.monthly_usd == pytest.approx(157_680 / 12)
    # Over 36 months the 3-year term wins: 3 * 4 * 730 * 36 = 315,360 against 3 * 6 * 730 * 36 = 473,040.
    assert buying.choose_mix([ON_DEMAND, COMMIT_1Y, COMMIT_3Y], 3, 3, 1.0, 36).base.plan == "commit_3y"


def test_a_spiky_load_commits_the_base_and_buys_the_peak_by_the_hour():
    # Base 2 instances, peak 6 for 4 h a day (u = 1/6), 12 months.
    # Base: commitment 2 * 6 * 8760 = 105,120 $ (on demand would be 175,200 $).
    # Peak layer, 4 instances: on demand 4 * 10 / 6 * 8760 = 58,400 $, against 210,240 $ committed.
    u = 4 / 24
    mix = buying.choose_mix([ON_DEMAND, COMMIT_1Y], 2, 6, u, 12)
    assert (mix.base.plan, mix.peak.plan) == ("commit_1y", "on_demand")
    assert mix.base.usd == pytest.approx(105_120) and mix.peak.usd == pytest.approx(58_400)
    assert mix.usd == pytest.approx(163_520)
    # With spot: the peak goes to spot at 4 * 3 / 0.95 / 6 * 8760 = 18,442.1 $; the base never does,
    # even though spot (3.16 $/useful h) is cheaper than the commitment there.
    mix = buying.choose_mix([ON_DEMAND, COMMIT_1Y, SPOT], 2, 6, u, 12, lost_hours=0.5)
    assert (mix.base.plan, mix.peak.plan) == ("commit_1y", "spot")
    assert mix.peak.usd == pytest.approx(4 * 3 / 0.95 / 6 * HOURS_A_YEAR)
    # A peak busy 16 h a day (u = 2/3 > the 60% break-even) is committed too.
    assert buying.choose_mix([ON_DEMAND, COMMIT_1Y], 2, 6, 16 / 24, 12).peak.plan == "commit_1y"


def test_a_short_horizon_stays_on_demand():
    # 6 months: the 1-year term costs 3 * 6 * 8760 = 157,680 $ against 3 * 10 * 4380 = 131,400 $ on demand.
    mix = buying.choose_mix([ON_DEMAND, COMMIT_1Y], 3, 3, 1.0, 6)
    assert mix.base.plan == "on_demand" and mix.usd == pytest.approx(131_400)


@pytest.mark.parametrize("value", [0, -1, math.inf, math.nan])
def test_horizon_must_be_positive(value):
    with pytest.raises(UserError, match="positive number of months"):
        buying.check_horizon(value)
