"""Cost and fleet budget of multi-chip points (tensor / expert parallel, docs/multi-chip.md), by hand.

A point measured on N chips is priced as N chips (`chips` = the world size), and a fleet rents
whole replicas of N chips, rounded up to whole instances or TPU slices.
"""

from __future__ import annotations

from datetime import date

import pandas as pd
import pytest
from helpers_synthetic import make_result
from helpers_synthetic import results_frame as frame

from tpubench.budget import fleet
from tpubench.budget import tokens as budget
from tpubench.money import cost, pricing

TODAY = date(2026, 12, 2)


@pytest.fixture(scope="module")
def prices():
    return pricing.load_prices(today=TODAY)


def sharded(*, tensor: int = 1, expert: int = 1, **kwargs):
    """A synthetic result measured on a world of tensor x expert chips (as the launcher writes it:
    the layout in the point, chips = world size in the environment)."""
    world = tensor * expert
    result = make_result(chips=world, **kwargs)
    result.point.update(tensor_parallel=tensor, expert_parallel=expert)
    result.environment.update(world_size=world)
    return result


def row(df: pd.DataFrame, instance: str, region: str, plan: str = "on_demand", **match) -> pd.Series:
    mask = (df.instance_type == instance) & (df.region == region) & (df.plan == plan)
    for key, value in match.items():
        mask &= df[key] == value
    rows = df[mask]
    assert len(rows) == 1, rows
    return rows.iloc[0]


# ----------------------------------------------------------------------------- cost


def test_cost_per_chip_halves_the_per_chip_throughput_as_it_should(prices):
    # The same measured batch on 1 and on 2 chips (tensor parallel): B=8, I=1024, O=128,
    # TTFT 0.2 s, E2E 2.0 s -> 8*128/2 = 512 output tokens/s either way.
    # Priced on p5.48xlarge us-east-1: 55.04 $/h / 8 = 6.88 $/chip-h.
    one = make_result(chips=1, workload="one")
    two = sharded(tensor=2, workload="two")
    priced, _ = cost.price_results(frame(one, two), prices, plans=["on_demand"], today=TODAY)
    a = row(priced, "p5.48xlarge", "us-east-1", workload="one")
    b = row(priced, "p5.48xlarge", "us-east-1", workload="two")
    assert a.output_tokens_per_s == b.output_tokens_per_s == pytest.approx(512)
    # Per chip: 512 on one chip, 256 on each of two.
    assert a.output_tokens_per_s_per_chip == pytest.approx(512)
    assert b.output_tokens_per_s_per_chip == pytest.approx(256)
    assert b.output_tokens_per_s_per_chip_ci95_low == pytest.approx(a.output_tokens_per_s_per_chip_ci95_low / 2)
    # InferenceX: 6.88e6 / (3600 * 512) = 3.7326 $/Mtok on one chip, 6.88e6 / (3600 * 256) = 7.4653 on two.
    assert a.inferencex_usd_per_mtok == pytest.approx(6.88e6 / (3600 * 512))
    assert b.inferencex_usd_per_mtok == pytest.approx(6.88e6 / (3600 * 256))
    # Time-attributed: blended = E2E * chips * 6.88/3600 / (8 * 1152) * 1e6
    # = 0.41474 $/Mtok on one chip, 0.82948 on two; input and output double the same way.
    assert a.blended_usd_per_mtok == pytest.approx(2.0 * 6.88 / 3600 / 9216 * 1e6)
    assert b.blended_usd_per_mtok == pytest.approx(2 * 2.0 * 6.88 / 3600 / 9216 * 1e6)
    for col in ("input_usd_per_mtok", "output_usd_per_mtok", "blended_usd_per_mtok", "inferencex_usd_per_mtok",
                "blended_usd_per_mtok_ci95_low", "inferencex_usd_per_mtok_ci95_high"):
        assert b[col] == pytest.approx(2 * a[col]), col
    # The layout travels with the priced rows; a result that predates it reads as one chip.
    assert (b.tensor_parallel, b.expert_parallel, b.world_size) == (2, 1, 2)
    assert (a.tensor_parallel, a.expert_parallel, a.world_size) == (1, 1, 1)


def test_expert_parallel_priced_like_any_world(prices):
    # 4 chips, expert parallel, 4x the single-chip throughput: the same $/Mtok as one chip.
    one = make_result(chips=1, workload="one")
    four = sharded(expert=4, workload="four", ttft_s=0.05, e2e_s=0.5)
    priced, _ = cost.price_results(frame(one, four), prices, plans=["on_demand"], today=TODAY)
    a = row(priced, "p5.48xlarge", "us-east-1", workload="one")
    d = row(priced, "p5.48xlarge", "us-east-1", workload="four")
    assert d.output_tokens_per_s == pytest.approx(4 * 512)
    assert d.output_tokens_per_s_per_chip == pytest.approx(512)
    assert d.blended_usd_per_mtok == pytest.approx(a.blended_usd_per_mtok)
    assert (d.tensor_parallel, d.expert_parallel, d.world_size) == (1, 4, 4)


# ----------------------------------------------------------------------------- budget


def tpu_point(chips: int, **layout):
    # B=10, I=1000, O=250, TTFT 1 s, E2E 5 s: a replica serves 10*1250/5 = 2500 tokens/s for a
    # 20% output mix (test_budget), i.e. 2500 / chips tokens/s per chip.
    return sharded(accelerator="TPU v6 lite", device="tpu", batch_size=10, input_length=1000,
                   output_length=250, ttft_s=1.0, e2e_s=5.0, **layout)


def test_two_chip_replicas_pack_four_to_a_v6e_8_slice(prices):
    point = tpu_point(2, tensor=2)
    # 8.64e8 tokens/day = 1e4 tokens/s at peak x1: 1e4 / 2500 = 4 replicas = 8 chips = 1 slice.
    plan = budget.plan_budget(frame(point), prices, tokens_per_day=8.64e8, output_share=0.2,
                              peak_factor=1.0, plans=["on_demand"], today=TODAY)
    s8 = row(plan.options, "tpu-v6e-8", "us-central1")
    assert s8.tokens_per_s_per_chip == pytest.approx(1250)
    assert (s8.replicas, s8.required_chips, s8.instances, s8.rented_chips) == (4, 8, 1, 8)
    assert s8.monthly_usd == pytest.approx(21.6 * 730)
    assert not s8.replica_spans_instances and s8.tensor_parallel == 2 and s8.world_size == 2
    # Peak x1.25: 5 replicas; four fit a slice, the fifth needs a second one (16 chips rented).
    more = budget.plan_budget(frame(point), prices, tokens_per_day=8.64e8, output_share=0.2,
                              peak_factor=1.25, plans=["on_demand"], today=TODAY)
    s8 = row(more.options, "tpu-v6e-8", "us-central1")
    assert (s8.replicas, s8.required_chips, s8.instances, s8.rented_chips) == (5, 10, 2, 16)
    assert s8.monthly_usd == pytest.approx(2 * 21.6 * 730)
    assert s8.fleet_utilisation == pytest.approx(1.25e4 / (1250 * 16))
    # A 1-chip slice cannot hold a 2-chip replica (ICI joins chips within one slice only): left
    # out, and said so, instead of being priced as two separate slices.
    assert not (plan.options.instance_type == "tpu-v6e-1").any()
    assert any("TPU slices smaller than their world" in note for note in plan.notes)


def test_four_chip_replicas_two_to_an_eight_gpu_instance(prices):
    # 4-chip tensor-parallel point on H100: B=8, I=1024, O=128, TTFT 0.2 s, E2E 2.0 s ->
    # 8*1152/2 = 4608 tokens/s per replica at the point's own mix (128/1152), 1152 per chip.
    point = sharded(tensor=4)
    mix = 128 / 1152
    # 3 replicas' worth: 3 * 4608 tokens/s = 1.19439e9 tokens/day.
    plan = budget.plan_budget(frame(point), prices, tokens_per_day=3 * 4608 * 86400, output_share=mix,
                              plans=["on_demand"], today=TODAY)
    p5 = row(plan.options, "p5.48xlarge", "us-east-1")
    assert p5.tokens_per_s_per_chip == pytest.approx(1152)
    # Two 4-chip replicas per 8-GPU instance: 3 replicas -> 2 instances, 12 of 16 chips busy.
    assert (p5.replicas, p5.required_chips, p5.instances, p5.rented_chips) == (3, 12, 2, 16)
    assert p5.monthly_usd == pytest.approx(2 * 55.04 * 730)
    assert not p5.replica_spans_instances


def test_sixteen_chip_replica_spans_two_eight_gpu_instances(prices):
    point = sharded(tensor=16)
    # 16 chips, same batch and times: 4608 tokens/s per replica, 288 per chip; 3 replicas.
    plan = budget.plan_budget(frame(point), prices, tokens_per_day=3 * 4608 * 86400,
                              output_share=128 / 1152, plans=["on_demand"], today=TODAY)
    p5 = row(plan.options, "p5.48xlarge", "us-east-1")
    assert p5.tokens_per_s_per_chip == pytest.approx(288)
    # Each replica needs ceil(16/8) = 2 instances: 6 instances, 48 chips.
    assert (p5.replicas, p5.required_chips, p5.instances, p5.rented_chips) == (3, 48, 6, 48)
    assert p5.monthly_usd == pytest.approx(6 * 55.04 * 730)
    assert p5.replica_spans_instances and p5.world_size == 16
    assert fleet.instances_needed(3, 16, 8) == 6
    assert fleet.instances_needed(5, 2, 8) == 2
    assert fleet.instances_needed(3, 4, 8) == 2
