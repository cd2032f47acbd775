"""Price tables: the shipped data, validation errors (one line naming file, row, column), layering,
discounts, device-name mapping, staleness and the SkyPilot importer."""

from __future__ import annotations

import csv
import math
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from tpubench.errors import UserError
from tpubench.hardware.accelerators import normalize_accelerator
from tpubench.money import accelerator_map, pricing, sky_prices

FIXTURES = Path(__file__).parent / "fixtures"
REFERENCE = Path("/work/shared/reference/public_prices.csv")
TODAY = date(2026, 12, 2)
CANONICAL = {"H100", "H200", "B200", "B300", "L4", "TPU v4", "TPU v5e", "TPU v5p", "TPU v6e", "TPU7x",
             "Trainium", "Trainium2", "Inferentia2", "CPU x86 vCPU"}
HEADER = "cloud,region,instance_type,accelerator,chips_per_instance,on_demand,spot,source,as_of"


def write(tmp_path: Path, text: str, name: str = "prices.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- shipped data


def test_shipped_table_loads_with_canonical_names_sources_and_iso_dates():
    prices = pricing.load_prices(today=TODAY)
    wide = pricing.prices_wide(prices)
    assert len(wide) == 49                  # 44 catalog instances + tpu-v6e-1 us-east5, 3 tpu7x-8, p5 us-east-2
    assert set(wide["accelerator"]) <= CANONICAL
    assert (wide["chips_per_instance"] >= 1).all()
    assert (prices["source"].str.len() > 40).all()          # every price says where it comes from
    assert prices["as_of"].str.fullmatch(r"\d{4}-\d{2}-\d{2}").all()
    assert set(prices["plan"]) == set(pricing.PLANS)         # every plan a budget buys has at least one price
    # A TPU slice is priced whole: tpu-v6e-8 is 8 chips at 21.6 $/h, so 2.7 $/chip-h.
    row = prices[(prices.instance_type == "tpu-v6e-8") & (prices.region == "us-central1")
                 & (prices.plan == "on_demand")].iloc[0]
    assert row.chips_per_instance == 8
    assert row.usd_per_chip_hour == pytest.approx(2.7)


def test_shipped_commitments_match_their_public_sources():
    """Trillium's GA list (1.89 / 1.22 per chip-hour), the v5p 3-year SKU (1.911) and TPU7x on demand (12.00)."""
    prices = pricing.load_prices(today=TODAY).set_index(["instance_type", "region", "plan"])
    assert prices.loc[("tpu-v6e-8", "us-east5", "commit_1y"), "usd_per_chip_hour"] == pytest.approx(1.89)
    assert prices.loc[("tpu-v6e-8", "us-east5", "commit_3y"), "usd_per_chip_hour"] == pytest.approx(1.22)
    assert prices.loc[("tpu-v6e-8", "us-east5", "commit_3y"), "as_of"] == "2024-12-11"
    assert prices.loc[("tpu-v5p-8", "europe-west4", "commit_3y"), "usd_per_chip_hour"] == pytest.approx(1.911)
    assert prices.loc[("tpu7x-8", "us-central1", "on_demand"), "usd_per_chip_hour"] == pytest.approx(12.0)
    assert prices.loc[("p5.48xlarge", "us-east-1", "capacity_block"), "usd_per_chip_hour"] == pytest.approx(4.91625)


def test_every_plan_the_table_lacks_for_a_compared_chip_has_a_reason():
    """Committed use for v5e/v5p/v6e, GPU commitments, Trainium2 on demand and TPU7x: a price or a reason."""
    prices = pricing.load_prices(today=TODAY)
    unpriced = pricing.load_unpriced_notes()
    said = set(zip(unpriced["accelerator"], unpriced["plan"]))
    for chip in ("TPU v5e", "TPU v5p", "TPU v6e", "H100", "H200", "B200", "Trainium2", "TPU7x"):
        priced = set(prices.loc[prices["accelerator"] == chip, "plan"])
        for plan in ("on_demand", "commit_1y", "commit_3y"):
            assert plan in priced or (chip, plan) in said or (chip, "") in said, (chip, plan)


def test_shipped_files_live_in_the_package():
    for path in (pricing.SHIPPED_PRICES, pricing.SHIPPED_UNPRICED, pricing.SHIPPED_ACCELERATORS):
        assert path.is_file()
        assert path.parent == Path(pricing.__file__).parent.parent / "data"


@pytest.mark.skipif(not REFERENCE.is_file(), reason="reference data not mounted")
def test_every_reference_row_is_carried_over():
    shipped = {tuple(r) for r in pricing.prices_wide(pricing.load_prices(today=TODAY))[
        ["cloud", "region", "instance_type"]].itertuples(index=False)}
    unpriced = pricing.load_unpriced_notes()
    with open(REFERENCE, newline="") as fh:
        for r in csv.DictReader(fh):
            if r["source"].startswith("NOT PRICED"):    # still unpriced, or priced since from a public source
                name = r["instance_type"].split(" ")[0]
                assert any(str(t).startswith(name) for t in set(unpriced["instance_type"]))
            else:
                assert (r["cloud"], r["region"], r["instance_type"]) in shipped


def test_accelerator_specs_are_in_base_units():
    specs = pricing.load_accelerator_specs()
    h100 = specs.loc["H100"]
    assert h100["peak_bf16_flops"] == pytest.approx(989e12)
    assert h100["memory_bytes"] == 80 * 2**30
    assert h100["memory_bandwidth_bytes_per_s"] == pytest.approx(3.35e12)
    assert specs.loc["TPU v6e", "peak_bf16_flops"] == pytest.approx(918e12)
    assert specs["source"].notna().all()


# ----------------------------------------------------------------------------- validation errors

ERROR_CASES = [
    # (name, file text, expected "line: column" prefix after the path, words in the message)
    ("missing column", "cloud,region,instance_type,accelerator,chips_per_instance,on_demand,source\n"
     "aws,us-east-1,x,H100,8,10,s\n", "1: as_of", "missing column"),
    ("non-numeric price", f"{HEADER}\naws,us-east-1,x,H100,8,ten,,s,2026-01-01\n", "2: on_demand", "not a number"),
    ("zero price", f"{HEADER}\naws,us-east-1,x,H100,8,10,0,s,2026-01-01\n", "2: spot", "positive"),
    ("negative price", f"{HEADER}\naws,us-east-1,x,H100,8,-3,,s,2026-01-01\n", "2: on_demand", "positive"),
    ("chips below one", f"{HEADER}\naws,us-east-1,x,H100,0,10,,s,2026-01-01\n", "2: chips_per_instance", ">= 1"),
    ("fractional chips", f"{HEADER}\naws,us-east-1,x,H100,1.5,10,,s,2026-01-01\n", "2: chips_per_instance", "whole"),
    ("unknown plan column", "cloud,region,instance_type,accelerator,chips_per_instance,reserved,source,as_of\n"
     "aws,us-east-1,x,H100,8,10,s,2026-01-01\n", "1: reserved", "unknown column"),
    ("misspelt plan column", "cloud,region,instance_type,accelerator,chips_per_instance,ondemand,source,as_of\n"
     "aws,us-east-1,x,H100,8,10,s,2026-01-01\n", "1: ondemand", "did you mean 'on_demand'"),
    ("duplicate row", f"{HEADER}\naws,us-east-1,x,H100,8,10,,s,2026-01-01\naws,us-east-1,x,H100,8,11,,s,2026-01-01\n",
     "3: instance_type", "line 2 already prices"),
    ("bad date", f"{HEADER}\naws,us-east-1,x,H100,8,10,,s,2026-13-01\n", "2: as_of", "ISO date"),
    ("date in words", f"{HEADER}\naws,us-east-1,x,H100,8,10,,s,Jan 2026\n", "2: as_of", "ISO date"),
    ("future date", f"{HEADER}\naws,us-east-1,x,H100,8,10,,s,2027-06-01\n", "2: as_of", "future"),
    ("empty region", f"{HEADER}\naws,,x,H100,8,10,,s,2026-01-01\n", "2: region", "empty"),
    ("ragged row", f"{HEADER}\naws,us-east-1,x,H100,8,10,,s\n", "2", "fields"),
    ("no price at all", f"{HEADER}\naws,us-east-1,x,H100,8,,,s,2026-01-01\n", "2", "no price"),
    ("new instance without accelerator", f"{HEADER}\naws,us-east-1,new,,8,10,,s,2026-01-01\n",
     "2: accelerator", "required"),
    ("no plan columns", "cloud,region,instance_type,accelerator,chips_per_instance,source,as_of\n", "1", "no price column"),
    ("blank lines keep real line numbers", f"{HEADER}\n\naws,us-east-1,x,H100,8,-1,,s,2026-01-01\n",
     "3: on_demand", "positive"),
]


@pytest.mark.parametrize("name,text,where,words", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_validation_errors_name_file_row_and_column(tmp_path, name, text, where, words):
    path = write(tmp_path, text)
    with pytest.raises(UserError) as info:
        pricing.load_prices([path], today=TODAY)
    message = info.value.one_line()
    assert message.startswith(f"{path}:{where}")
    assert words in message
    assert "\n" not in message


def test_missing_and_empty_files_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="no such price file"):
        pricing.load_prices([tmp_path / "absent.csv"], today=TODAY)
    with pytest.raises(UserError, match="empty"):
        pricing.load_prices([write(tmp_path, "\n\n")], today=TODAY)


def test_unknown_plan_and_bad_discount_are_user_errors():
    prices = pricing.load_prices(today=TODAY)
    with pytest.raises(UserError, match="unknown plan 'ondemand'.*did you mean 'on_demand'"):
        pricing.select_plans(prices, ["ondemand"])
    for bad in (0, 100, -5, math.nan):
        with pytest.raises(UserError, match="--discount"):
            pricing.apply_discount(prices, bad)


# ----------------------------------------------------------------------------- layering


def test_user_file_adds_a_plan_and_keeps_the_shipped_prices(tmp_path):
    path = write(tmp_path, "cloud,region,instance_type,commit_1y,source,as_of\n"
                           "aws,us-east-1,p5.48xlarge,38.5,contract 42,2026-11-01\n")
    prices = pricing.load_prices([path], today=TODAY)
    p5 = prices[(prices.instance_type == "p5.48xlarge") & (prices.region == "us-east-1")].set_index("plan")
    assert p5.loc["on_demand", "usd_per_instance_hour"] == 55.04          # shipped, untouched
    assert p5.loc["on_demand", "as_of"] == "2026-01-22"
    assert p5.loc["commit_1y", "usd_per_instance_hour"] == 38.5           # added
    assert p5.loc["commit_1y", "source"] == "contract 42"
    assert p5.loc["commit_1y", "as_of"] == "2026-11-01"
    assert p5.loc["commit_1y", "usd_per_chip_hour"] == pytest.approx(38.5 / 8)
    assert p5.loc["commit_1y", "origin"] == f"{path}:2"


def test_later_files_override_earlier_ones_and_may_add_instances(tmp_path):
    first = write(tmp_path, f"{HEADER}\naws,us-east-1,p5.48xlarge,H100,8,50,,mine,2026-11-01\n"
                            "onprem,dc1,box,H100,4,20,,amortised,2026-10-01\n", "a.csv")
    second = write(tmp_path, "cloud,region,instance_type,on_demand,source,as_of\n"
                             "aws,us-east-1,p5.48xlarge,45,renegotiated,2026-11-15\n", "b.csv")
    prices = pricing.load_prices([first, second], today=TODAY)
    on_demand = prices[prices.plan == "on_demand"].set_index(["cloud", "instance_type", "region"])
    assert on_demand.loc[("aws", "p5.48xlarge", "us-east-1"), "usd_per_instance_hour"] == 45
    assert on_demand.loc[("aws", "p5.48xlarge", "us-east-1"), "source"] == "renegotiated"
    assert on_demand.loc[("onprem", "box", "dc1"), "usd_per_chip_hour"] == 5
    counts = pricing.validate_price_files([first, second], today=TODAY)
    assert counts == {str(first): 1, str(second): 1}


def test_the_example_override_file_is_valid():
    example = Path(__file__).resolve().parents[1] / "pricing" / "example_negotiated.csv"
    prices = pricing.load_prices([example], today=TODAY)
    assert "commit_1y" in pricing.plan_names(prices)


def test_discount_adds_a_plan_priced_at_a_percentage_off():
    prices = pricing.load_prices(discount_pct=20, today=TODAY)
    rows = prices[(prices.instance_type == "trn1.32xlarge") & (prices.region == "us-east-1")].set_index("plan")
    # 21.5 $/h on demand, 20% off: 17.2 $/h, over 16 chips 1.075 $/chip-h.
    assert rows.loc["on_demand-20%", "usd_per_instance_hour"] == pytest.approx(17.2)
    assert rows.loc["on_demand-20%", "usd_per_chip_hour"] == pytest.approx(1.075)
    assert "less 20% discount" in rows.loc["on_demand-20%", "source"]
    assert pricing.plan_names(prices)[-1] == "on_demand-20%"


# ----------------------------------------------------------------------------- device names


@pytest.mark.parametrize("raw,device,expected", [
    ("NVIDIA H100 80GB HBM3", "cuda", "H100"),
    ("NVIDIA H100 PCIe", "cuda", "H100 PCIe"),
    ("NVIDIA H200", "cuda", "H200"),
    ("NVIDIA B200", "cuda", "B200"),
    ("NVIDIA L4", "cuda", "L4"),
    ("NVIDIA L40S", "cuda", "L40S"),
    ("NVIDIA A100-SXM4-80GB", "cuda", "A100 80GB"),
    ("TPU v6 lite", "tpu", "TPU v6e"),
    ("TPU v6e", "tpu", "TPU v6e"),
    ("TPU v5 lite", "tpu", "TPU v5e"),
    ("TPU v5", "tpu", "TPU v5p"),
    ("TPU v4", "xla", "TPU v4"),
    ("TPU7x", "tpu", "TPU7x"),
    ("Trainium2", "neuron", "Trainium2"),
    ("AWS Trainium (Trn1)", "neuron", "Trainium"),
    ("Inferentia2", "neuron", "Inferentia2"),
    ("Intel(R) Xeon(R) Platinum 8481C", "cpu", "CPU x86 vCPU"),
    ("AMD EPYC 9B14", "cpu", "CPU x86 vCPU"),
    ("Neoverse-V2", "cpu", None),
    ("NVIDIA GeForce RTX 4090", "cuda", None),
    ("Apple M3 Max", "mps", None),
])
def test_normalize_accelerator(raw, device, expected):
    assert normalize_accelerator(raw, device) == expected


def test_arm_cpus_and_new_accelerators_match_only_priced_rows():
    assert normalize_accelerator("Neoverse-V2", "cpu", known=["CPU arm vCPU"]) == "CPU arm vCPU"
    assert normalize_accelerator("AMD Instinct MI300X", "cuda", known=["MI300X"]) == "MI300X"   # AMD names map
    assert normalize_accelerator("AMD Instinct MI350P", "cuda", known=["MI300X"]) is None
    assert normalize_accelerator("MI300X", "cuda", known=["MI300X"]) == "MI300X"


def test_map_accelerators_over_a_column():
    names = pd.Series(["NVIDIA H200", "TPU v6 lite", None, "NVIDIA H200"])
    devices = pd.Series(["cuda", "tpu", "cpu", "cuda"])
    assert accelerator_map.map_accelerators(names, devices, ["H200"]).tolist() == ["H200", "TPU v6e", "CPU x86 vCPU", "H200"]


# ----------------------------------------------------------------------------- staleness


def test_price_age_and_stale_warnings_use_the_injected_date():
    assert pricing.price_age_days("2026-01-22", date(2026, 7, 21)) == 180
    prices = pricing.load_prices(today=TODAY)
    catalog = prices[prices["as_of"].isin(["2026-01-22", "2024-06-01"])]
    fresh = pricing.stale_price_warnings(catalog, today=date(2026, 2, 21))      # spot 30 days old: not yet
    assert len(fresh) == 1 and "2024-06-01" in fresh[0]             # only the Azure snapshot
    spot = pricing.stale_price_warnings(catalog, today=date(2026, 2, 22))
    assert len(spot) == 2 and "(spot)" in spot[1] and "31 days" in spot[1] and "pricing refresh" in spot[1]
    late = pricing.stale_price_warnings(catalog, today=date(2026, 7, 22))
    assert any("(on-demand)" in w and "181 days" in w for w in late)


# ----------------------------------------------------------------------------- SkyPilot import


def _by_key(table: pd.DataFrame) -> pd.DataFrame:
    return table.set_index(["region", "instance_type"])


def test_import_gcp_sums_host_and_gpu_prices_and_prices_tpu_slices_whole():
    table = sky_prices.import_skypilot(FIXTURES / "skypilot_gcp_vms.csv", "gcp", as_of="2026-11-01")
    t = _by_key(table)
    # a3-highgpu-8g us-east4: host 9.46006 + 8 H100 78.37241 = 87.83247 on demand (both zones);
    # spot per zone 3.68077 + 30.4792 = 34.15997 and 3.6 + 30.0 = 33.6: the region's lowest, 33.6.
    assert t.loc[("us-east4", "a3-highgpu-8g"), "on_demand"] == pytest.approx(87.83247)
    assert t.loc[("us-east4", "a3-highgpu-8g"), "spot"] == pytest.approx(33.6)
    assert t.loc[("us-east4", "a3-highgpu-8g"), "accelerator"] == "H100"
    assert t.loc[("us-east4", "a3-highgpu-8g"), "chips_per_instance"] == 8
    # us-central1: 9.46006 + 33.60609 = 43.06615; 5.15632 + 42.7096 = 47.86592.
    assert t.loc[("us-central1", "a3-highgpu-8g"), "on_demand"] == pytest.approx(43.06615)
    assert t.loc[("us-central1", "a3-highgpu-8g"), "spot"] == pytest.approx(47.86592)
    # g2-standard-4 = host 0.14679 + one L4 0.56004.
    assert t.loc[("us-central1", "g2-standard-4"), "on_demand"] == pytest.approx(0.70683)
    # The a4 host is priced 0.0 (skipped), so the B200 machine has no price; the europe-west4 GPU
    # row has no host in its zone; the 4-GPU row has no 4-GPU host here.
    assert ("us-central1", "a4-highgpu-8g") not in t.index
    assert ("europe-west4", "a3-highgpu-8g") not in t.index
    # TPU slices: whole-slice price, chips from the name (v5p-8 counts TensorCores: 4 chips).
    assert t.loc[("us-central1", "tpu-v6e-8"), "on_demand"] == 21.6
    assert t.loc[("us-central1", "tpu-v6e-8"), "spot"] == pytest.approx(4.74132)
    assert t.loc[("us-central1", "tpu-v6e-8"), "chips_per_instance"] == 8
    assert t.loc[("us-east5", "tpu-v5p-8"), "chips_per_instance"] == 4
    assert t.loc[("us-east5", "tpu-v5p-8"), "accelerator"] == "TPU v5p"
    assert t.loc[("us-central1", "tpu-v5litepod-4"), "accelerator"] == "TPU v5e"
    # 700.0 is a placeholder: europe-west4 v6e-8 keeps its spot price only; v6e-1 has nothing left.
    assert math.isnan(t.loc[("europe-west4", "tpu-v6e-8"), "on_demand"])
    assert t.loc[("europe-west4", "tpu-v6e-8"), "spot"] == pytest.approx(14.256)
    assert ("us-east5", "tpu-v6e-1") not in t.index
    # CPU-only VMs only when asked for.
    assert ("us-central1", "n2-standard-48") not in t.index
    assert set(table["as_of"]) == {"2026-11-01"}
    assert list(table.columns) == list(pricing.BASIC_COLUMNS)


def test_import_gcp_cpu_vms_are_priced_per_vcpu():
    t = _by_key(sky_prices.import_skypilot(FIXTURES / "skypilot_gcp_vms.csv", "gcp", include_cpu=True))
    assert t.loc[("us-central1", "n2-standard-48"), "accelerator"] == "CPU x86 vCPU"
    assert t.loc[("us-central1", "n2-standard-48"), "chips_per_instance"] == 48
    assert t.loc[("us-central1", "t2a-standard-8"), "accelerator"] == "CPU arm vCPU"
    assert ("us-central1", "a3-highgpu-8g") in t.index            # GPU hosts are not CPU VMs


def test_import_aws_zones_spot_rules_and_local_zones():
    t = _by_key(sky_prices.import_skypilot(FIXTURES / "skypilot_aws_vms.csv", "aws"))
    # p5 us-east-1: spot 17.2517 and 19.5 in two zones; use1-az4 lists spot == on-demand (no spot).
    assert t.loc[("us-east-1", "p5.48xlarge"), "on_demand"] == 55.04
    assert t.loc[("us-east-1", "p5.48xlarge"), "spot"] == pytest.approx(17.2517)
    # The local zone use1-atl2-az1 (spot 13.5724) is left out.
    assert t.loc[("us-east-1", "p6-b200.48xlarge"), "spot"] == pytest.approx(22.1118)
    assert t.loc[("us-east-1", "trn1.32xlarge"), "chips_per_instance"] == 16
    assert t.loc[("us-east-1", "trn1.32xlarge"), "accelerator"] == "Trainium"
    assert math.isnan(t.loc[("us-west-2", "trn1.32xlarge"), "spot"])          # spot == on-demand
    assert math.isnan(t.loc[("us-east-2", "trn2.48xlarge"), "on_demand"])     # empty cell
    assert t.loc[("us-east-2", "trn2.48xlarge"), "accelerator"] == "Trainium2"
    assert ("us-east-1", "m7i.48xlarge") not in t.index
    with_cpu = _by_key(sky_prices.import_skypilot(FIXTURES / "skypilot_aws_vms.csv", "aws", include_cpu=True))
    assert with_cpu.loc[("us-east-1", "m7i.48xlarge"), "accelerator"] == "CPU x86 vCPU"
    assert with_cpu.loc[("us-east-1", "c7g.16xlarge"), "accelerator"] == "CPU arm vCPU"


def test_imported_table_round_trips_as_a_user_price_file(tmp_path):
    table = sky_prices.import_skypilot(FIXTURES / "skypilot_aws_vms.csv", "aws", as_of="2026-11-01")
    path = pricing.write_price_csv(table, tmp_path / "aws.csv")
    prices = pricing.load_prices([path], shipped=False, today=TODAY)
    assert len(pricing.prices_wide(prices)) == len(table)


def test_import_errors(tmp_path):
    with pytest.raises(UserError, match="supported: gcp, aws"):
        sky_prices.import_skypilot(FIXTURES / "skypilot_aws_vms.csv", "azure")
    bad = write(tmp_path, "InstanceType,Price\nx,1\n", "vms.csv")
    with pytest.raises(UserError) as info:
        sky_prices.import_skypilot(bad, "gcp")
    assert info.value.one_line().startswith(f"{bad}:1: vCPUs: missing column")


# ----------------------------------------------------------------------------- flagged prices (issue 17 item 3)


FLAG_HEADER = HEADER + ",flagged"


def test_flagged_is_derived_once_from_the_source_note_the_flag_cell_and_spot_above_on_demand(tmp_path):
    path = write(tmp_path, FLAG_HEADER + "\n"
                 "c,r,noted,H100,8,40,30,catalog [FLAG: SKU mismatch suspected],2026-01-01,\n"
                 "c,r,dearer-spot,H100,8,40,48,catalog,2026-01-01,\n"
                 "c,r,by-cell,H100,8,40,30,my contract,2026-01-01,true\n"
                 "c,r,vouched,H100,8,40,30,catalog [FLAG: old],2026-01-01,false\n"
                 "c,r,plain,H100,8,80,30,catalog,2026-01-01,\n")
    prices = pricing.load_prices([path], shipped=False, today=TODAY)
    reason = {(r.instance_type, r.plan): r.flag_reason for r in prices.itertuples()}
    flagged = {(r.instance_type, r.plan): r.flagged for r in prices.itertuples()}
    assert reason[("noted", "on_demand")] == "SKU mismatch suspected" and flagged[("noted", "spot")]
    # Spot 48 > on-demand 40 USD/h: one of the two is not this instance's price; both are flagged.
    assert reason[("dearer-spot", "on_demand")] == reason[("dearer-spot", "spot")]
    assert "spot 48 above on-demand 40" in reason[("dearer-spot", "spot")]
    assert reason[("by-cell", "on_demand")] == "flagged in the price file"
    assert not flagged[("vouched", "on_demand")] and not flagged[("plain", "on_demand")]
    assert pricing.prices_wide(prices).set_index("instance_type")["flagged"].to_dict() == {
        "noted": True, "dearer-spot": True, "by-cell": True, "vouched": False, "plain": False}


def test_a_flag_cell_that_is_not_a_boolean_names_file_line_and_column(tmp_path):
    path = write(tmp_path, FLAG_HEADER + "\nc,r,i,H100,8,40,30,s,2026-01-01,maybe\n")
    with pytest.raises(UserError) as err:
        pricing.load_prices([path], shipped=False, today=TODAY)
    assert str(err.value) == f"{path}:2: flagged: 'maybe' is not true or false"


def test_the_shipped_flagged_h100_row_is_set_aside_for_an_unflagged_one():
    prices = pricing.load_prices(today=TODAY)
    row = prices[(prices.instance_type == "a3-highgpu-8g") & (prices.region == "us-central1")
                 & (prices.plan == "on_demand")].iloc[0]
    assert row.flagged and "SKU mismatch" in row.flag_reason
    assert row.usd_per_chip_hour == pytest.approx(43.06615 / 8)          # 5.38 $/GPU-h, the suspect price
    chosen = pricing.prefer_unflagged(prices)
    h100 = chosen[(chosen.accelerator == "H100") & (chosen.plan == "on_demand")]
    assert not h100["flagged"].any()
    # The cheapest honest H100 on-demand chip-hour: p5.48xlarge us-east-1, 55.04 / 8 = 6.88 $.
    assert h100["usd_per_chip_hour"].min() == pytest.approx(6.88)
    # B200 has unflagged AWS rows, so GCP's GPU-only lower bounds are set aside too; Trainium2 has
    # only a flagged spot row, which stays (there is nothing else to price it with).
    assert not chosen[chosen.accelerator == "B200"]["flagged"].any()
    assert chosen[chosen.accelerator == "Trainium2"]["flagged"].all()
    assert len(pricing.prefer_unflagged(prices, include_flagged=True)) == len(prices)
    note = pricing.flagged_set_aside_note(prices, chosen)
    assert note.startswith("7 flagged price row(s) set aside") and "gcp/us-central1/a3-highgpu-8g" in note


def test_the_importer_flags_a_catalog_spot_price_above_on_demand(tmp_path):
    catalog = write(tmp_path, "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,"
                              "AvailabilityZone,Price,SpotPrice,Arch\n"
                              "p5.48xlarge,192,2048,H100,8,,us-east-1,use1-az1,55.04,60.0,x86_64\n"
                              "p5.48xlarge,192,2048,H100,8,,us-west-2,usw2-az1,55.04,17.0,x86_64\n", "vms.csv")
    table = sky_prices.import_skypilot(catalog, "aws", as_of="2026-11-01")
    out = pricing.write_price_csv(table, tmp_path / "imported.csv")
    loaded = pricing.load_prices([out], shipped=False, today=TODAY)
    # Flagged once, where every price file is read, with the reason the numbers give.
    assert set(loaded.loc[loaded.flagged, "region"]) == {"us-east-1"}
    assert set(loaded.loc[loaded.flagged, "flag_reason"]) == {
        "spot 60 above on-demand 55.04 USD/h (SKU mismatch suspected)"}


# ----------------------------------------------------------------------------- purchase options (plans)

LONG_HEADER = ("cloud,region,instance_type,accelerator,chips_per_instance,plan,usd_per_instance_hour,"
               "upfront_usd,term_months,preemption_rate_per_h,source,as_of")


def test_plan_vocabulary_and_effective_hourly_price():
    from tpubench.money import plans

    assert plans.PLAN_NAMES[:4] == ("on_demand", "spot", "commit_1y", "commit_3y")
    assert {"reservation", "flex_start", "capacity_block"} <= set(plans.PLAN_NAMES)
    assert plans.PLANS["commit_3y"].term_months == 36 and plans.PLANS["commit_3y"].committed
    assert plans.PLANS["spot"].interruptible and not plans.PLANS["on_demand"].interruptible
    # 10 USD/h + 43,800 USD over 12 months (8,760 h) = 10 + 5 = 15 USD/h.
    assert plans.effective_usd_per_hour(10.0, 43_800.0, 12) == pytest.approx(15.0)
    assert plans.effective_usd_per_hour(10.0) == 10.0
    with pytest.raises(ValueError, match="term"):
        plans.effective_usd_per_hour(10.0, 100.0, None)
    # Over its whole term the effective price pays the upfront part and every hourly one.
    assert plans.effective_usd_per_hour(10.0, 43_800.0, 12) * plans.term_hours(12) == pytest.approx(43_800 + 87_600)
    assert plans.preemption_rate_per_hour(0.48, "day") == pytest.approx(0.02)
    # A --discount plan shares its base plan's nature.
    assert plans.plan_info("commit_1y-15%") is plans.PLANS["commit_1y"]
    assert plans.plan_label("commit_1y-15%") == "1-year commitment -15%"
    # One source of labels: the reports' plan_label is the vocabulary's, new plans included.
    from tpubench.output.report import format as report_format
    assert report_format.plan_label("capacity_block") == "capacity block"
    assert report_format.plan_label("flex_start") == "calendar / flex-start"
    assert plans.plan_info("mine") is None


def test_wide_file_with_upfront_new_plans_and_preemption_rate(tmp_path):
    path = write(tmp_path, "cloud,region,instance_type,accelerator,chips_per_instance,on_demand,spot,"
                           "preemption_rate_per_day,commit_1y,commit_1y_upfront,commit_3y,commit_3y_upfront,"
                           "reservation,capacity_block,source,as_of\n"
                           "aws,us-east-1,p5x,H100,8,40,16,0.48,20,87600,0,876000,40,31.5,quote 7,2026-11-01\n")
    prices = pricing.load_prices([path], shipped=False, today=TODAY).set_index("plan")
    # 1y: 20 USD/h + 87,600 USD / 8,760 h = 30 USD/h effective; 3y all upfront: 876,000 / 26,280 h.
    assert prices.loc["commit_1y", "usd_per_instance_hour"] == pytest.approx(30.0)
    assert prices.loc["commit_1y", "hourly_usd_per_instance_hour"] == 20.0
    assert prices.loc["commit_1y", "upfront_usd"] == 87_600 and prices.loc["commit_1y", "term_months"] == 12
    assert prices.loc["commit_3y", "usd_per_instance_hour"] == pytest.approx(876_000 / (36 * 730))
    assert prices.loc["commit_3y", "usd_per_chip_hour"] == pytest.approx(876_000 / (36 * 730) / 8)
    assert prices.loc["spot", "preemption_rate_per_h"] == pytest.approx(0.02)
    assert math.isnan(prices.loc["on_demand", "preemption_rate_per_h"])
    assert prices.loc["capacity_block", "usd_per_instance_hour"] == 31.5
    assert list(prices.index) == ["on_demand", "spot", "commit_1y", "commit_3y", "reservation", "capacity_block"]
    # Discounts apply to both parts of a commitment.
    discounted = pricing.apply_discount(prices.reset_index(), 10, "commit_1y").set_index("plan")
    assert discounted.loc["commit_1y-10%", "usd_per_instance_hour"] == pytest.approx(27.0)
    assert discounted.loc["commit_1y-10%", "upfront_usd"] == pytest.approx(78_840)


def test_long_form_file_with_a_plan_column_layers_over_the_shipped_table(tmp_path):
    path = write(tmp_path, f"{LONG_HEADER}\n"
                           "aws,us-east-1,p5.48xlarge,,,commit_3y,12,100000,,,RI quote,2026-11-01\n"
                           "aws,us-east-1,p5.48xlarge,,,spot,30,,,0.05,spot advisor,2026-11-02\n"
                           "aws,us-east-1,p5.48xlarge,,,capacity_block,31.464,,0.5,,capacity block,2026-11-03\n"
                           "onprem,dc1,box,H100,8,reservation,20,50000,24,,lease,2026-10-01\n")
    prices = pricing.load_prices([path], today=TODAY)
    p5 = prices[(prices.instance_type == "p5.48xlarge") & (prices.region == "us-east-1")].set_index("plan")
    assert p5.loc["on_demand", "as_of"] == "2026-01-22"                 # shipped, untouched
    assert p5.loc["commit_3y", "usd_per_instance_hour"] == pytest.approx(12 + 100_000 / (36 * 730))
    assert p5.loc["commit_3y", "source"] == "RI quote" and p5.loc["commit_3y", "origin"] == f"{path}:2"
    assert p5.loc["spot", "preemption_rate_per_h"] == 0.05 and p5.loc["spot", "as_of"] == "2026-11-02"
    assert p5.loc["capacity_block", "term_months"] == 0.5
    box = prices[prices.cloud == "onprem"].set_index("plan")
    assert box.loc["reservation", "usd_per_instance_hour"] == pytest.approx(20 + 50_000 / (24 * 730))


PLAN_ERROR_CASES = [
    ("unknown plan", f"{LONG_HEADER}\naws,us-east-1,x,H100,8,reserved,10,,,,s,2026-01-01\n", "2: plan",
     "did you mean 'reservation'"),
    ("upfront on a plan without one", f"{LONG_HEADER}\naws,us-east-1,x,H100,8,on_demand,10,500,,,s,2026-01-01\n",
     "2: upfront_usd", "no upfront part"),
    ("upfront without a term", f"{LONG_HEADER}\naws,us-east-1,x,H100,8,reservation,10,500,,,s,2026-01-01\n",
     "2: term_months", "needs term_months"),
    ("wrong term for commit_1y", f"{LONG_HEADER}\naws,us-east-1,x,H100,8,commit_1y,10,,36,,s,2026-01-01\n",
     "2: term_months", "12-month term"),
    ("preemption on on-demand", f"{LONG_HEADER}\naws,us-east-1,x,H100,8,on_demand,10,,,0.1,s,2026-01-01\n",
     "2: preemption_rate_per_h", "applies to spot"),
    ("negative preemption", f"{LONG_HEADER}\naws,us-east-1,x,H100,8,spot,10,,,-1,s,2026-01-01\n",
     "2: preemption_rate_per_h", ">= 0"),
    ("duplicate plan row", f"{LONG_HEADER}\naws,us-east-1,x,H100,8,spot,10,,,,s,2026-01-01\n"
     "aws,us-east-1,x,H100,8,spot,11,,,,s,2026-01-01\n", "3: plan", "line 2 already prices"),
    ("zero hourly without upfront", f"{LONG_HEADER}\naws,us-east-1,x,H100,8,commit_1y,0,,,,s,2026-01-01\n",
     "2: usd_per_instance_hour", "positive"),
    ("wide upfront without hourly", "cloud,region,instance_type,accelerator,chips_per_instance,on_demand,"
     "commit_1y,commit_1y_upfront,source,as_of\naws,us-east-1,x,H100,8,10,,900,s,2026-01-01\n",
     "2: commit_1y_upfront", "needs the plan's hourly price"),
    ("wide preemption without spot", "cloud,region,instance_type,accelerator,chips_per_instance,on_demand,"
     "preemption_rate_per_h,source,as_of\naws,us-east-1,x,H100,8,10,0.1,s,2026-01-01\n",
     "2: preemption_rate_per_h", "needs the spot price"),
    ("long form unknown column", "cloud,region,instance_type,plan,usd_per_instance_hour,upfront,as_of\n"
     "aws,us-east-1,x,spot,1,2,2026-01-01\n", "1: upfront", "did you mean 'upfront_usd'"),
]


@pytest.mark.parametrize("name,text,where,words", PLAN_ERROR_CASES, ids=[c[0] for c in PLAN_ERROR_CASES])
def test_plan_validation_errors_name_file_row_and_column(tmp_path, name, text, where, words):
    path = write(tmp_path, text)
    with pytest.raises(UserError) as info:
        pricing.load_prices([path], today=TODAY)
    message = info.value.one_line()
    assert message.startswith(f"{path}:{where}")
    assert words in message
    assert "\n" not in message


def test_the_inferencex_compatible_figure_says_which_price_it_uses():
    from tpubench.output.report.format import METHOD_NOTES

    (note,) = [n for n in METHOD_NOTES if "InferenceX-compatible" in n]
    for words in ("Platform", "Plan", "$/chip-h", "list price", "--prices", "TCO tiers"):
        assert words in note


def test_pricing_list_shows_upfront_parts_and_preemption_rates(tmp_path):
    path = write(tmp_path, f"{LONG_HEADER}\n"
                           "aws,us-east-1,p5.48xlarge,,,commit_1y,20,131400,,,RI,2026-11-01\n"
                           "aws,us-east-1,p5.48xlarge,,,spot,17,,,0.05,advisor,2026-11-01\n")
    prices = pricing.load_prices([path], today=TODAY)
    assert pricing.upfront_notes(prices) == [
        "1-year commitment aws us-east-1 p5.48xlarge: 20 USD/h + 131,400 USD upfront over 12 months = 35 USD/h effective"]
    wide = pricing.prices_wide(prices).set_index(["cloud", "region", "instance_type"])
    assert wide.loc[("aws", "us-east-1", "p5.48xlarge"), "commit_1y"] == pytest.approx(35.0)
    assert wide.loc[("aws", "us-east-1", "p5.48xlarge"), "spot_preemptions_per_h"] == 0.05
    assert math.isnan(wide.loc[("aws", "eu-west-2", "p5.48xlarge"), "spot_preemptions_per_h"])


def test_pricing_list_heads_plan_columns_with_their_labels(tmp_path, monkeypatch, capsys):
    import sys

    from rich.console import Console

    from tpubench import cli

    path = write(tmp_path, f"{LONG_HEADER}\n"
                           "aws,us-east-1,p5.48xlarge,,,capacity_block,31,,,,CB quote,2026-11-01\n"
                           "aws,us-east-1,p5.48xlarge,,,flex_start,30,,,,DWS quote,2026-11-01\n")
    # A page wide enough for one line per header: no wrapping to test around.
    monkeypatch.setattr(cli, "_console", lambda stderr=False: Console(width=400, highlight=False))
    monkeypatch.setattr(sys, "argv", ["tpubench", "pricing", "list", "--prices", str(path), "-a", "H100"])
    try:
        cli.main()
    except SystemExit as exc:
        assert not exc.code
    out = capsys.readouterr().out
    assert "capacity block" in out and "calendar / flex-start" in out and "on-demand" in out
    assert "capacity_block" not in out and "on_demand" not in out
