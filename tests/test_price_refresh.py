"""`tpubench pricing refresh --from DIR`: the price table rebuilt offline from stored copies of real
public catalogs and price files (fixtures/prices/store, origins in its SOURCES.md), written dated,
with what moved more than 10% printed; and SkyPilot's own catalog fetch through the bridge."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from helpers_cli import run_cli

from tpubench.launch import skypilot
from tpubench.money import pricing, refresh

STORE = Path(__file__).parent / "fixtures" / "prices" / "store"


def test_refresh_from_stored_copies_writes_a_dated_table_and_prints_the_moved_prices(monkeypatch, capsys, tmp_path):
    out = tmp_path / "refreshed.csv"
    code, stdout, err = run_cli(monkeypatch, capsys, "pricing", "refresh", "--from", str(STORE), "--out", str(out),
                                "--as-of", "2026-12-01")
    assert code == 0, err
    table = pricing.load_prices([out], shipped=False)          # a valid price file on its own
    assert set(table["as_of"]) == {"2026-12-01"}
    key = table.set_index(["cloud", "region", "instance_type", "plan"])
    # SkyPilot's catalog, every region it has: the lowest zone's spot, 700.0 placeholders skipped.
    assert key.loc[("gcp", "asia-southeast1", "tpu-v6e-8", "spot"), "usd_per_chip_hour"] == pytest.approx(2.90339 / 8)
    assert ("gcp", "asia-east1", "tpu-v6e-8", "on_demand") not in key.index
    assert key.loc[("aws", "us-west-2", "p5.48xlarge", "spot"), "usd_per_instance_hour"] == pytest.approx(9.3722)
    # A cloud's own price file replaces the catalog's price of the same instance and plan, and adds plans.
    assert key.loc[("gcp", "us-east5", "tpu-v6e-8", "commit_1y"), "usd_per_chip_hour"] == pytest.approx(1.89)
    assert "Cloud Billing Catalog" in key.loc[("gcp", "us-east5", "tpu-v6e-8", "on_demand"), "source"]
    assert key.loc[("azure", "eastus", "Standard_ND96isr_H100_v5", "spot"), "usd_per_instance_hour"] == pytest.approx(
        18.169536)
    # What moved more than 10% against the shipped table, largest first, with both dates.
    assert "moved more than 10%" in stdout
    assert ("gcp europe-west4 tpu-v6e-8 (TPU v6e) spot: $1.782 -> $1.037/chip-h (-42%; 2026-01-22 -> 2026-12-01)"
            in stdout)
    assert "aws us-east-2 p5e.48xlarge (H200) spot: $2.403 -> $1.754/chip-h (-27%" in stdout
    assert "us-central1 tpu-v6e-8 (TPU v6e) spot" not in stdout          # -8%: under the threshold
    assert f"use it with --prices {out}" in stdout


def test_moved_is_the_relative_change_of_the_same_instance_and_plan():
    def table(price):
        return pd.DataFrame([{"cloud": "c", "region": "r", "instance_type": "i", "plan": "spot", "accelerator": "A",
                              "usd_per_instance_hour": price, "usd_per_chip_hour": price / 4, "as_of": "2026-01-01"}])
    assert refresh.moved(table(10.0), table(11.0)).empty                 # +10%: not more than 10%
    rows = refresh.moved(table(10.0), table(8.5))
    assert rows["change"].tolist() == pytest.approx([-0.15])
    assert refresh.coverage(table(10.0), table(8.5)) == (1, 0, 0)


def test_a_store_with_nothing_to_read_is_one_line(monkeypatch, capsys, tmp_path):
    code, _, err = run_cli(monkeypatch, capsys, "pricing", "refresh", "--from", str(tmp_path))
    assert code == 2 and "no catalog or price file" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.skipif(not skypilot.find_python(), reason="SkyPilot is not installed (TPUBENCH_SKYPILOT_PYTHON)")
def test_the_bridge_hands_back_skypilots_own_catalog_copy(tmp_path):
    """SkyPilot's read_catalog over its cache, without fetching (no network in tests): the path it
    reads, its schema version, and that a copy without SkyPilot's checksum counts as modified."""
    catalog = tmp_path / ".sky" / "catalogs" / "v8" / "gcp" / "vms.csv"
    catalog.parent.mkdir(parents=True)
    catalog.write_text((STORE / "skypilot" / "gcp" / "vms.csv").read_text())
    env = {**os.environ, "HOME": str(tmp_path), "SKY_RUNTIME_DIR": str(tmp_path)}
    request = json.dumps({"op": "catalog", "files": ["gcp/vms.csv"], "fetch": False})
    done = subprocess.run([skypilot.find_python(), str(skypilot.BRIDGE)], input=request, capture_output=True,
                          text=True, env=env, timeout=300)
    line = next(x for x in done.stdout.splitlines() if x.startswith(skypilot.MARK))
    answer = json.loads(line[len(skypilot.MARK):])
    entry = answer["files"][0]
    assert Path(entry["path"]) == catalog and entry["schema"] == "v8" and entry["modified_locally"] is True
