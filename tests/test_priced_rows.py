"""Results, prices and their pairs kept apart (money/priced_rows.py): the pairs an inner merge
would make, in its order; columns taken from whichever table holds them; the frame price_results
returns built only when asked."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from helpers_synthetic import make_result

from tpubench.money import cost, pricing
from tpubench.money.priced_rows import PricedRows
from tpubench.output.frames import load_results
from tpubench.output.report import data as report_data
from tpubench.scenarios import registry


def test_pairs_are_an_inner_merge_result_by_result():
    results = ["a", "b", "c", "a", None, "b"]
    prices = ["b", "a", "x", "b", "a", None]
    result_at, price_at = PricedRows.pairs(results, prices)
    # a's price rows are 1 and 4, b's 0 and 3; c has none; a missing key matches nothing.
    assert list(zip(result_at.tolist(), price_at.tolist())) == [(0, 1), (0, 4), (1, 0), (1, 3), (3, 1), (3, 4),
                                                                (5, 0), (5, 3)]
    merged = (pd.DataFrame({"k": results, "i": range(6)}).dropna()
              .merge(pd.DataFrame({"k": prices, "j": range(6)}).dropna(), on="k"))
    assert list(zip(merged["i"], merged["j"])) == list(zip(result_at.tolist(), price_at.tolist()))
    for r, p in (([], []), (["a"], []), ([], ["a"])):
        assert [len(x) for x in PricedRows.pairs(r, p)] == [0, 0]


@pytest.fixture
def rows() -> PricedRows:
    measured = pd.DataFrame({"file": ["f0", "f1"], "workload": ["w", "w"], "tput": [10.0, 20.0]})
    prices = pd.DataFrame({"cloud": ["gcp", "aws", "gcp"], "plan": ["on_demand", "spot", "spot"],
                           "usd": [3.0, 1.0, 2.0]})
    result_at, price_at = np.array([0, 0, 1, 1]), np.array([0, 2, 1, 2])
    figures = pd.DataFrame({"usd_per_tput": [0.3, 0.2, 0.05, 0.1]})
    return PricedRows(measured, prices, result_at, price_at, figures,
                      columns=["file", "workload", "cloud", "plan", "usd", "tput", "usd_per_tput", "never_set"])


def test_columns_come_from_the_table_that_holds_them(rows):
    picked = rows.select(["usd_per_tput", "file", "cloud", "tput"], [3, 0])
    assert picked.to_dict("list") == {"usd_per_tput": [0.1, 0.3], "file": ["f1", "f0"], "cloud": ["gcp", "gcp"],
                                      "tput": [20.0, 10.0]}
    whole = rows.frame()
    assert list(whole.columns) == rows.columns and len(whole) == 4
    assert whole["never_set"].isna().all() and whole["never_set"].dtype == object
    assert rows.take([2]).iloc[0].to_dict() == {**whole.iloc[2].to_dict()}
    assert rows.results_priced() == 2


def test_groups_number_equal_values_alike(rows):
    by_plan = rows.group_of(["plan"])
    assert by_plan[1] == by_plan[2] == by_plan[3] != by_plan[0]
    # The pairs' (file, cloud): (f0, gcp), (f0, gcp), (f1, aws), (f1, gcp).
    g = rows.group_of(["file", "cloud"]).tolist()
    assert g[0] == g[1] and len({g[1], g[2], g[3]}) == 3
    assert rows.group_of(["no_such_column"]).tolist() == [0, 0, 0, 0]


def test_used_prices_each_once_in_first_use_order(rows):
    assert rows.used_prices()["usd"].tolist() == [3.0, 2.0, 1.0]


def test_a_frame_read_as_the_three_tables_is_itself():
    frame = pd.DataFrame({"file": ["a", "b"], "plan": ["x", "y"], "v": [1.0, math.nan]})
    frame.attrs["price_notes"] = ["n"]
    rows = PricedRows.of_frame(frame)
    pd.testing.assert_frame_equal(rows.frame(), frame)
    pd.testing.assert_frame_equal(rows.take([1]), frame.iloc[[1]].reset_index(drop=True))
    assert rows.notes == ["n"] and rows.used_prices() is rows.frame()


def test_summaries_from_the_tables_are_those_of_the_whole_frame(tmp_path):
    for n, (accelerator, batch) in enumerate([("NVIDIA H100 80GB HBM3", 1), ("NVIDIA H100 80GB HBM3", 8),
                                              ("TPU v6 lite", 4), ("Trainium2", 16)]):
        result = make_result(accelerator=accelerator, batch_size=batch, seed=n,
                             device="cuda" if "H100" in accelerator else "tpu" if "TPU" in accelerator else "neuron")
        (tmp_path / f"r{n}.json").write_text(result.model_dump_json(), encoding="utf-8")
    results = load_results(tmp_path)
    rows, _ = cost.price_rows(results, pricing.load_prices())
    frame, _ = cost.price_results(results, pricing.load_prices())
    pd.testing.assert_frame_equal(rows.frame(), frame)
    for unit in registry.units():
        pd.testing.assert_frame_equal(report_data.summarise(rows, unit), report_data.summarise(frame, unit))
