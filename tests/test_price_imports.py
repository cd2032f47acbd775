"""Importers of the clouds' own price files (GCP Cloud Billing Catalog, AWS Price List, Azure Retail
Prices): on excerpts of real public files (fixtures/prices/real, origins in its SOURCES.md; every
price asserted below is read by hand from the excerpt), and on small excerpts written after the
documented formats for what the real excerpts lack (reserved terms, upfront fees): rows, plans,
mapping, skipped SKUs with their reasons, round trip as a --prices file, and malformed files as
one-line errors. Hostile inputs are tests/test_hostile_prices.py."""

from __future__ import annotations

import json
import sys
from datetime import date
from pathlib import Path

import pandas as pd
import pytest

from tpubench.cli import main
from tpubench.errors import UserError
from tpubench.money import pricing
from tpubench.money.price_imports import aws, azure, gcp, mapping

FIXTURES = Path(__file__).parent / "fixtures" / "prices"
REAL = FIXTURES / "real"
TODAY = date(2026, 12, 2)
AS_OF = "2026-11-20"


def _rows(result) -> pd.DataFrame:
    return result.table().set_index(["region", "instance_type", "plan"])


def _round_trip(result, tmp_path: Path) -> pd.DataFrame:
    """The importer's rows written as a price file and read back over the shipped table."""
    path = pricing.write_price_csv(result.table(), tmp_path / "imported.csv", float_format="%.10g")
    return pricing.load_prices([path], today=TODAY)


# ----------------------------------------------------------------------------- GCP


def test_gcp_tpu_chip_hour_skus_become_slices_per_plan_and_region():
    result = gcp.import_gcp(FIXTURES / "gcp_skus.json", as_of=AS_OF)
    t = _rows(result)
    # 2.70 USD per chip-hour (units 2 + nanos 0.7e9) x 8 chips.
    assert t.loc[("us-central1", "tpu-v6e-8", "on_demand"), "usd_per_instance_hour"] == pytest.approx(21.6)
    assert t.loc[("us-east5", "tpu-v6e-1", "on_demand"), "usd_per_instance_hour"] == pytest.approx(2.7)
    assert t.loc[("us-central1", "tpu-v6e-4", "spot"), "usd_per_instance_hour"] == pytest.approx(4 * 0.59266)
    # The commitment SKU's latest pricingInfo entry (1.62, not the older 1.89) is its price.
    assert t.loc[("us-central1", "tpu-v6e-8", "commit_1y"), "usd_per_instance_hour"] == pytest.approx(8 * 1.62)
    assert t.loc[("us-central1", "tpu-v6e-8", "commit_1y"), "term_months"] == 12
    assert t.loc[("us-central1", "tpu-v5litepod-4", "commit_3y"), "usd_per_instance_hour"] == pytest.approx(4 * 0.54)
    assert t.loc[("us-central1", "tpu-v6e-8", "on_demand"), "chips_per_instance"] == 8
    assert "TEST-0001" in t.loc[("us-central1", "tpu-v6e-8", "on_demand"), "source"]
    assert set(result.table()["as_of"]) == {AS_OF}
    reasons = " | ".join(result.skipped)
    assert "GPU SKU" in reasons and "not a TPU SKU" in reasons and "'GiBy.mo', not per hour" in reasons
    assert sum(result.skipped.values()) == 3


def test_gcp_import_round_trips_as_a_price_file_over_the_shipped_table(tmp_path):
    prices = _round_trip(gcp.import_gcp(FIXTURES / "gcp_skus.json", as_of=AS_OF), tmp_path)
    v6e = prices[(prices.instance_type == "tpu-v6e-8") & (prices.region == "us-central1")].set_index("plan")
    assert v6e.loc["commit_1y", "usd_per_chip_hour"] == pytest.approx(1.62)
    assert v6e.loc["on_demand", "as_of"] == AS_OF


# ----------------------------------------------------------------------------- AWS


def test_aws_offer_file_on_demand_and_reserved_with_upfront_parts():
    result = aws.import_aws(FIXTURES / "aws_offer.json")
    t = _rows(result)
    assert t.loc[("us-east-1", "p5.48xlarge", "on_demand"), "usd_per_instance_hour"] == 55.04
    assert t.loc[("us-east-2", "trn1.32xlarge", "on_demand"), "accelerator"] == "Trainium"
    assert t.loc[("us-east-2", "trn1.32xlarge", "on_demand"), "chips_per_instance"] == 16
    # 1yr standard: Partial Upfront 20 USD/h + 131,400 / 8,760 h = 35 effective beats No Upfront at 36.
    one = t.loc[("us-east-1", "p5.48xlarge", "commit_1y")]
    assert (one["usd_per_instance_hour"], one["upfront_usd"], one["term_months"]) == (20.0, 131_400.0, 12.0)
    assert "Partial Upfront" in one["source"]
    # 3yr All Upfront: hourly 0, the whole price upfront.
    three = t.loc[("us-east-1", "p5.48xlarge", "commit_3y")]
    assert (three["usd_per_instance_hour"], three["upfront_usd"]) == (0.0, 525_600.0)
    # The Price List has no spot prices: none are invented.
    assert "spot" not in set(result.table()["plan"])
    assert set(result.table()["as_of"]) == {"2026-11-01"}          # the file's publicationDate
    reasons = " | ".join(result.skipped)
    for words in ("operatingSystem Windows", "no known accelerator", "'Storage' is not an instance",
                  "convertible", "another purchase option"):
        assert words in reasons


def test_aws_effective_prices_after_loading(tmp_path):
    prices = _round_trip(aws.import_aws(FIXTURES / "aws_offer.json"), tmp_path)
    p5 = prices[(prices.instance_type == "p5.48xlarge") & (prices.region == "us-east-1")].set_index("plan")
    assert p5.loc["commit_1y", "usd_per_instance_hour"] == pytest.approx(35.0)
    assert p5.loc["commit_3y", "usd_per_instance_hour"] == pytest.approx(525_600 / (36 * 730))
    assert p5.loc["commit_3y", "usd_per_chip_hour"] == pytest.approx(20.0 / 8)
    assert p5.loc["spot", "source"].startswith("skypilot")             # the shipped spot price stays


def test_aws_sagemaker_hosting_instances_are_priced_as_ml_types():
    result = aws.import_aws(FIXTURES / "aws_sagemaker_offer.json")
    t = _rows(result)
    row = t.loc[("us-east-1", "ml.trn1.32xlarge", "on_demand")]
    assert (row["accelerator"], row["chips_per_instance"], row["usd_per_instance_hour"]) == ("Trainium", 16, 28.1)
    assert len(result.table()) == 1
    assert "component Training" in " ".join(result.skipped)


# ----------------------------------------------------------------------------- Azure


def test_azure_retail_prices_consumption_spot_and_reservations():
    result = azure.import_azure(FIXTURES / "azure_retail.json", as_of=AS_OF)
    t = _rows(result)
    key = ("eastus", "Standard_ND96isr_H100_v5")
    assert t.loc[key + ("on_demand",), "usd_per_instance_hour"] == 98.32
    assert t.loc[key + ("spot",), "usd_per_instance_hour"] == 39.33
    # A reservation's retailPrice is the whole term's price: all of it upfront.
    assert (t.loc[key + ("commit_1y",), "usd_per_instance_hour"], t.loc[key + ("commit_1y",), "upfront_usd"]) == \
        (0.0, 525_600.0)
    assert t.loc[key + ("commit_3y",), "term_months"] == 36
    assert t.loc[key + ("on_demand",), "accelerator"] == "H100"
    reasons = " | ".join(result.skipped)
    for words in ("Windows", "Low Priority", "no known accelerator", "DevTestConsumption"):
        assert words in reasons
    assert sum(result.skipped.values()) == 4


def test_azure_reservation_is_amortised_over_its_term(tmp_path):
    prices = _round_trip(azure.import_azure(FIXTURES / "azure_retail.json", as_of=AS_OF), tmp_path)
    nd = prices[(prices.instance_type == "Standard_ND96isr_H100_v5") & (prices.region == "eastus")].set_index("plan")
    # 525,600 USD over 12 x 730 h = 60 USD/h; 1,182,600 over 36 x 730 h = 45 USD/h.
    assert nd.loc["commit_1y", "usd_per_instance_hour"] == pytest.approx(60.0)
    assert nd.loc["commit_3y", "usd_per_instance_hour"] == pytest.approx(45.0)


# ----------------------------------------------------------------------------- mapping and errors


def test_every_mapped_accelerator_is_a_known_accelerator():
    known = set(pricing.load_accelerator_specs().index)
    for cloud, table in mapping.EXTRA_INSTANCES.items():
        for instance_type, (accelerator, chips) in table.items():
            assert accelerator in known, (cloud, instance_type)
            assert chips >= 1
    assert set(mapping.TPU_SLICES) <= known
    assert mapping.instance_accelerator("aws", "ml.p5.48xlarge") == ("H100", 8)
    assert mapping.instance_accelerator("aws", "m5.xlarge") is None
    assert mapping.tpu_accelerator("TPU v5 Lite pod running in Americas") == "TPU v5e"
    assert mapping.tpu_accelerator("Trillium TPU chip") == "TPU v6e"


MALFORMED = [
    (gcp.import_gcp, '{"skus": [', "not valid JSON"),
    (gcp.import_gcp, '{"services": []}', "skus: missing"),
    (gcp.import_gcp, '{"skus": [{"description": "TPU v6e", "category": {"usageType": "OnDemand"}, '
                     '"serviceRegions": ["x"], "pricingInfo": [{"pricingExpression": {"usageUnit": "h", '
                     '"tieredRates": [{"unitPrice": {"units": "two"}}]}}]}]}', "tieredRates[0].unitPrice.units"),
    (aws.import_aws, '{"products": [], "terms": {}}', "products: expected a JSON object"),
    (azure.import_azure, '{"Items": [{"type": "Consumption", "armRegionName": "eastus"}]}', "Items[0].armSkuName"),
    (azure.import_azure, '[]', "Items: missing"),
]


@pytest.mark.parametrize("importer,text,words", MALFORMED, ids=[f"{m[0].__name__}-{i}" for i, m in enumerate(MALFORMED)])
def test_malformed_files_are_one_line_errors_naming_the_file(tmp_path, importer, text, words):
    path = tmp_path / "prices.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as info:
        importer(path)
    message = info.value.one_line()
    assert message.startswith(str(path)) and words in message and "\n" not in message


def _cli(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["tpubench", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_imports_writes_a_valid_price_file_and_reports_skips(tmp_path, monkeypatch, capsys):
    out = tmp_path / "azure.csv"
    code, stdout, _ = _cli(monkeypatch, capsys, "pricing", "import-azure", str(FIXTURES / "azure_retail.json"),
                           "--out", str(out), "--as-of", AS_OF)
    assert code == 0
    assert f"wrote 4 price row(s) to {out}" in stdout and "1 skipped: Windows meter" in stdout
    assert "plan" in out.read_text().splitlines()[0]
    code, stdout, _ = _cli(monkeypatch, capsys, "pricing", "validate", str(out))
    assert code == 0 and "ok" in stdout


def test_cli_malformed_file_exits_2_with_one_line(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"products": {}}), encoding="utf-8")
    code, stdout, stderr = _cli(monkeypatch, capsys, "pricing", "import-aws", str(bad), "--out", str(tmp_path / "o.csv"))
    assert code == 2
    assert f"{bad}: terms: missing" in stderr + stdout
    assert "Traceback" not in stderr + stdout
    assert not (tmp_path / "o.csv").exists()


# ----------------------------------------------------------------------------- real excerpts


def test_real_gcp_tpu_skus_every_generation_and_plan_is_read():
    """7 real SKUs captured from the Cloud TPU service: TpuV5e / TpuV5p / TpuV6e / TPU7x on demand, a
    calendar-mode reservation, a spot and a 3-year commitment: all 7 priced (before: 0 of 7)."""
    result = gcp.import_gcp(REAL / "gcp_tpu_skus_2026-06-14.json", as_of=AS_OF)
    t = _rows(result)
    assert not result.skipped
    assert set(result.table()["source"].str.extract(r"SKU (\S+) ")[0]) == {
        "04C3-5B71-D137", "082F-763E-B398", "2549-F208-72FA", "0F71-4391-B6CA", "026F-E6A1-BDBB",
        "0561-8741-3BC7", "0115-21ED-7F03"}
    # "TpuV6e running in Dallas": units "2", nanos 700000000 per chip-hour.
    assert t.loc[("us-south1", "tpu-v6e-8", "on_demand"), "usd_per_instance_hour"] == pytest.approx(8 * 2.70)
    # "TpuV5e running in Delhi": 1 + 441320000e-9.
    assert t.loc[("asia-south2", "tpu-v5litepod-1", "on_demand"), "usd_per_instance_hour"] == pytest.approx(1.44132)
    # "TpuV5p running in Sao Paulo": 6.430995 per chip; tpu-v5p-8 is 4 chips.
    assert t.loc[("southamerica-east1", "tpu-v5p-8", "on_demand"), "usd_per_instance_hour"] == pytest.approx(4 * 6.430995)
    # "TpuV5e attached to Spot Preemptible VMs running in Singapore": 0.78.
    assert t.loc[("asia-southeast1", "tpu-v5litepod-4", "spot"), "usd_per_instance_hour"] == pytest.approx(4 * 0.78)
    # "Commitment v1: TpuV5p running in Netherlands for 3 Years": 1.911 per chip-hour, 36 months.
    three = t.loc[("europe-west4", "tpu-v5p-8", "commit_3y")]
    assert (three["usd_per_instance_hour"], three["term_months"]) == (pytest.approx(4 * 1.911), 36)
    # "Reserved TpuV5p in Delhi in Calendar Mode": 2.94, a reservation, not flex-start.
    assert t.loc[("asia-south2", "tpu-v5p-8", "reservation"), "usd_per_instance_hour"] == pytest.approx(4 * 2.94)
    # "TPU7x running in Americas": 12 USD per chip-hour in each of its three regions, now with slices.
    for region in ("us-west1", "us-central1", "us-east1"):
        row = t.loc[(region, "tpu7x-8", "on_demand")]
        assert (row["accelerator"], row["chips_per_instance"]) == ("TPU7x", 4)
        assert row["usd_per_instance_hour"] == pytest.approx(4 * 12.0)


def test_real_gcp_flex_start_is_the_dws_sku_not_the_calendar_reservation():
    """The us-east5 v6e SKUs: five describe the chip there and four are OnDemand. Flex-start is "DWS
    Defined Duration V6e" at 1.35 (before: the calendar-mode 1.89 took it and 1.35 was dropped)."""
    result = gcp.import_gcp(REAL / "gcp_tpu_skus_us-east5_2026-08-07.json", as_of=AS_OF)
    t = _rows(result)
    plans_ = {plan: t.loc[("us-east5", "tpu-v6e-1", plan), "usd_per_instance_hour"]
              for plan in ("on_demand", "spot", "flex_start", "reservation", "commit_1y")}
    assert plans_ == {"on_demand": pytest.approx(2.70), "spot": pytest.approx(1.4033),
                      "flex_start": pytest.approx(1.35), "reservation": pytest.approx(1.89),
                      "commit_1y": pytest.approx(1.89)}
    assert "DWS Defined Duration" in t.loc[("us-east5", "tpu-v6e-8", "flex_start"), "source"]
    assert t.loc[("asia-northeast1", "tpu-v6e-8", "on_demand"), "usd_per_instance_hour"] == pytest.approx(8 * 3.24)
    # "Capacity Optimized TpuV6e" (also OnDemand, 2.70) is not a second on-demand price.
    assert dict(result.skipped) == {
        "Capacity Optimized TPU SKU (another provisioning product, not the plain on-demand price)": 1}


def test_real_gcp_excerpts_round_trip_and_validate(tmp_path, monkeypatch, capsys):
    from helpers_cli import run_cli

    for name in ("gcp_tpu_skus_2026-06-14.json", "gcp_tpu_skus_us-east5_2026-08-07.json"):
        out = tmp_path / (name + ".csv")
        code, stdout, _ = run_cli(monkeypatch, capsys, "pricing", "import-gcp", str(REAL / name), "--out", str(out),
                                  "--as-of", AS_OF)
        assert code == 0 and "wrote 18 price row(s)" in stdout
        code, stdout, _ = run_cli(monkeypatch, capsys, "pricing", "validate", str(out))
        assert code == 0 and "ok" in stdout
    prices = pricing.load_prices([tmp_path / "gcp_tpu_skus_2026-06-14.json.csv"], today=TODAY)
    tpu7x = prices[(prices.instance_type == "tpu7x-8") & (prices.region == "us-central1")].set_index("plan")
    assert tpu7x.loc["on_demand", "usd_per_chip_hour"] == pytest.approx(12.0)


def test_real_aws_offer_p4d_maps_and_capacity_block_line_is_not_on_demand():
    result = aws.import_aws(REAL / "aws_ec2_offer_2026-09-10.json")
    t = _rows(result)
    # p4d.24xlarge per region, as the file prints them (us-west-2 differs at the 7th decimal).
    assert t.loc[("us-east-1", "p4d.24xlarge", "on_demand"), "usd_per_instance_hour"] == 21.957642
    assert t.loc[("us-west-2", "p4d.24xlarge", "on_demand"), "usd_per_instance_hour"] == 21.95764
    assert t.loc[("eu-west-1", "p4d.24xlarge", "on_demand"), "usd_per_instance_hour"] == 23.71569
    p4d = t.loc[("us-east-1", "p4d.24xlarge", "on_demand")]
    assert (p4d["accelerator"], p4d["chips_per_instance"]) == ("A100 40GB", 8)
    assert t.loc[("us-east-1", "p5.48xlarge", "on_demand"), "usd_per_instance_hour"] == 55.04
    assert t.loc[("us-east-1", "trn1.32xlarge", "on_demand"), "usd_per_instance_hour"] == 21.5
    assert set(result.table()["as_of"]) == {"2026-09-10"}
    # The Capacity Block p5 line (marketoption CapacityBlock, 0.00 USD/h) is neither a free p5 nor a
    # second on-demand price: counted with its reason.
    reasons = " | ".join(result.skipped)
    assert "Capacity Block line at 0 USD/h" in reasons and "second price" not in reasons
    assert "capacity_block" not in set(result.table()["plan"])
    for words in ("operatingSystem Windows", "UnusedCapacityReservation", "without instance type"):
        assert words in reasons
    assert sum(result.skipped.values()) == 4 and len(result.table()) == 6


def test_aws_capacity_block_line_with_a_price_is_a_capacity_block_row(tmp_path):
    doc = json.loads((REAL / "aws_ec2_offer_2026-09-10.json").read_text())
    term = doc["terms"]["OnDemand"]["5Q7AP3RH7KTVUNCJ"]["5Q7AP3RH7KTVUNCJ.JRTCKXETXF"]
    term["priceDimensions"]["5Q7AP3RH7KTVUNCJ.JRTCKXETXF.6YS6EN2CT7"]["pricePerUnit"]["USD"] = "31.464"
    path = tmp_path / "offer.json"
    path.write_text(json.dumps(doc))
    t = _rows(aws.import_aws(path))
    assert t.loc[("us-east-1", "p5.48xlarge", "capacity_block"), "usd_per_instance_hour"] == 31.464
    assert t.loc[("us-east-1", "p5.48xlarge", "on_demand"), "usd_per_instance_hour"] == 55.04


def test_real_azure_spot_is_read_from_the_meter_name():
    """Captured items carry no skuName: spot is in meterName "ND96isrH100v5 Spot" (before: taken
    for a second on-demand price and dropped)."""
    result = azure.import_azure(REAL / "azure_nd_h100_v5_eastus_2026-09-16.json", as_of=AS_OF)
    t = _rows(result)
    key = ("eastus", "Standard_ND96isr_H100_v5")
    assert t.loc[key + ("on_demand",), "usd_per_instance_hour"] == 98.32
    assert t.loc[key + ("spot",), "usd_per_instance_hour"] == 18.169536
    assert t.loc[key + ("spot",), "accelerator"] == "H100"
    # Windows (102.736) and the Windows Low Priority meter (41.094) are left out, by reason.
    assert dict(result.skipped) == {"Windows meter (licence included)": 2}
