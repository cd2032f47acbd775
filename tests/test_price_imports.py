"""Importers of the clouds' own price files (GCP Cloud Billing Catalog, AWS Price List, Azure Retail
Prices) on small excerpts written after the documented formats: rows, plans, mapping, skipped SKUs
with their reasons, round trip as a --prices file, and malformed files as one-line errors."""

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
                     '"tieredRates": [{"unitPrice": {"units": "two"}}]}}]}]}', "tieredRates[].unitPrice"),
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
