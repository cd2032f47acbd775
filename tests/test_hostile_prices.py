"""Hostile inputs to the price importers and to `pricing validate` (issue 32): every one ends in a
one-line error naming the file and the field, exit 2, no traceback and no price file written -- or
is skipped with its reason counted. Each case starts from a real excerpt (fixtures/prices/real) and
breaks one value, so the rest of the file is known to import."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from helpers_cli import run_cli

REAL = Path(__file__).parent / "fixtures" / "prices" / "real"
AS_OF = "2026-11-20"


def _load(name: str) -> dict:
    return json.loads((REAL / name).read_text(encoding="utf-8"))


def _gcp(**unit_price) -> dict:
    """The real 'TpuV6e running in Dallas' SKU with its unitPrice replaced."""
    doc = _load("gcp_tpu_skus_2026-06-14.json")
    sku = copy.deepcopy(next(s for s in doc["skus"] if s["skuId"] == "2549-F208-72FA"))
    sku["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"] = {"currencyCode": "USD", **unit_price}
    return {"skus": [sku]}


def _aws_on_demand(usd: object) -> dict:
    """The real p5.48xlarge on-demand line with its USD price replaced."""
    doc = _load("aws_ec2_offer_2026-09-10.json")
    dim = doc["terms"]["OnDemand"]["3D4V8UAYEMB38GU2"]["3D4V8UAYEMB38GU2.JRTCKXETXF"]["priceDimensions"]
    dim["3D4V8UAYEMB38GU2.JRTCKXETXF.6YS6EN2CT7"]["pricePerUnit"]["USD"] = usd
    return doc


def _aws_reserved_without_unit() -> dict:
    """The real p5 product with a 1-year Partial Upfront term whose upfront fee has no unit."""
    doc = _load("aws_ec2_offer_2026-09-10.json")
    sku = "3D4V8UAYEMB38GU2"
    doc["terms"]["Reserved"] = {sku: {f"{sku}.HU7G6KETJZ": {
        "offerTermCode": "HU7G6KETJZ", "sku": sku, "effectiveDate": "2026-09-01T00:00:00Z",
        "priceDimensions": {
            f"{sku}.HU7G6KETJZ.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": "20.0"}, "description": "hourly"},
            f"{sku}.HU7G6KETJZ.2TG2D8R56U": {"pricePerUnit": {"USD": "131400"}, "description": "Upfront Fee"}},
        "termAttributes": {"LeaseContractLength": "1yr", "OfferingClass": "standard",
                           "PurchaseOption": "Partial Upfront"}}}}
    return doc


def _azure(**changes) -> dict:
    """The real eastus ND96isr H100 v5 Linux on-demand item, changed (None deletes a key)."""
    doc = _load("azure_nd_h100_v5_eastus_2026-09-16.json")
    item = dict(doc["Items"][0])
    for key, value in changes.items():
        if value is None:
            item.pop(key, None)
        else:
            item[key] = value
    return {"Items": [item]}


def _deep(levels: int = 100_000) -> str:
    return '{"skus": ' + "[" * levels + "]" * levels + "}"


BIG = "9" * 5000

# (command, file text, words the error must contain, field path the error must name)
CASES = {
    # GCP: units + nanos (google.type.Money), read as integers, nanos below 1e9.
    "gcp-units-nan": ("import-gcp", _gcp(units="NaN", nanos=0), "not an integer", "unitPrice.units"),
    "gcp-nanos-json-nan": ("import-gcp", _gcp(units="2", nanos=float("nan")), "not an integer", "unitPrice.nanos"),
    "gcp-units-inf": ("import-gcp", _gcp(units=float("inf"), nanos=0), "not an integer", "unitPrice.units"),
    "gcp-negative": ("import-gcp", _gcp(units="-2", nanos=-700000000), "negative price", "unitPrice"),
    "gcp-nanos-1e30": ("import-gcp", _gcp(units="0", nanos=1e30), "not below 1,000,000,000", "unitPrice.nanos"),
    "gcp-nanos-5e9": ("import-gcp", _gcp(units="2", nanos=5_000_000_000), "not below 1,000,000,000",
                      "unitPrice.nanos"),
    "gcp-units-5000-digit-string": ("import-gcp", _gcp(units=BIG, nanos=0), "is not an integer amount",
                                    "unitPrice.units"),
    "gcp-units-5000-digit-number": ("import-gcp", json.dumps(_gcp(units="UNITS", nanos=0)).replace('"UNITS"', BIG),
                                    "not an integer", "unitPrice.units"),
    "azure-5000-digit-number": ("import-azure", json.dumps(_azure(retailPrice="P")).replace('"P"', BIG),
                                "not a finite price", "Items[0].retailPrice"),
    "gcp-deep-nesting": ("import-gcp", _deep(), "nested too deeply", ""),
    # AWS: pricePerUnit.USD must be a finite number >= 0; every dimension needs its unit.
    "aws-nan": ("import-aws", _aws_on_demand("NaN"), "not a finite price", "pricePerUnit.USD"),
    "aws-inf": ("import-aws", _aws_on_demand("Infinity"), "not a finite price", "pricePerUnit.USD"),
    "aws-negative": ("import-aws", _aws_on_demand("-55.04"), "negative price", "pricePerUnit.USD"),
    "aws-bool": ("import-aws", _aws_on_demand(True), "true/false is not a price", "pricePerUnit.USD"),
    "aws-5000-digit-price": ("import-aws", _aws_on_demand(BIG), "not a finite price", "pricePerUnit.USD"),
    "aws-upfront-fee-without-unit": ("import-aws", _aws_reserved_without_unit(), "upfront fee",
                                     "terms.Reserved.3D4V8UAYEMB38GU2.3D4V8UAYEMB38GU2.HU7G6KETJZ.priceDimensions."
                                     "3D4V8UAYEMB38GU2.HU7G6KETJZ.2TG2D8R56U.unit"),
    "aws-deep-nesting": ("import-aws", _deep().replace("skus", "products"), "nested too deeply", ""),
    # Azure: retailPrice a finite number >= 0 (not a bool), unitOfMeasure required.
    "azure-retail-price-true": ("import-azure", _azure(retailPrice=True), "true/false is not a price",
                                "Items[0].retailPrice"),
    "azure-nan": ("import-azure", _azure(retailPrice=float("nan")), "not a finite price", "Items[0].retailPrice"),
    "azure-inf": ("import-azure", _azure(retailPrice=float("inf")), "not a finite price", "Items[0].retailPrice"),
    "azure-negative": ("import-azure", _azure(retailPrice=-98.32), "negative price", "Items[0].retailPrice"),
    "azure-no-unit-of-measure": ("import-azure", _azure(unitOfMeasure=None), "cannot be taken as hourly",
                                 "Items[0].unitOfMeasure"),
    "azure-deep-nesting": ("import-azure", _deep().replace("skus", "Items"), "nested too deeply", ""),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_price_file_is_one_line_exit_2_and_writes_nothing(case, tmp_path, monkeypatch, capsys):
    command, content, words, field = CASES[case]
    path = tmp_path / "prices.json"
    text = content if isinstance(content, str) else json.dumps(content)     # json writes NaN / Infinity as-is
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out.csv"
    code, stdout, stderr = run_cli(monkeypatch, capsys, "pricing", command, str(path), "--out", str(out),
                                   "--as-of", AS_OF)
    message = (stderr + stdout).strip()
    assert code == 2, message
    assert "Traceback" not in message and "internal error" not in message.lower()
    assert len(message.splitlines()) == 1 and len(message) < 600, message
    assert message.startswith(f"error: {path}") or str(path) in message.splitlines()[0]
    assert words in message
    if field:
        assert field in message
    assert not out.exists()


def test_the_unbroken_real_items_import(tmp_path, monkeypatch, capsys):
    """The cases above differ from these files in one value only: unbroken, each imports."""
    for command, doc in (("import-gcp", _gcp(units="2", nanos=700000000)), ("import-aws", _aws_on_demand("55.04")),
                         ("import-azure", _azure())):
        path = tmp_path / f"{command}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        code, stdout, _ = run_cli(monkeypatch, capsys, "pricing", command, str(path), "--out",
                                  str(tmp_path / f"{command}.csv"), "--as-of", AS_OF)
        assert code == 0 and "wrote" in stdout, stdout


LONG_HEADER = ("cloud,region,instance_type,accelerator,chips_per_instance,plan,usd_per_instance_hour,upfront_usd,"
               "term_months,source,as_of\n")


@pytest.mark.parametrize("row,words,field", [
    # What an importer that read nanos 1e30 as a price would have written: 1e21 USD per hour.
    ("gcp,us-south1,tpu-v6e-8,TPU v6e,8,on_demand,1e21,,,x,2026-06-14", "is not a price: over 1000",
     "usd_per_instance_hour"),
    # An upfront fee read as an hourly rate: 131,400 USD/h for 8 chips.
    ("aws,us-east-1,p5.48xlarge,H100,8,commit_1y,131400,,,x,2026-09-10", "is not a price", "usd_per_instance_hour"),
    ("azure,eastus,Standard_ND96isr_H100_v5,H100,8,on_demand,nan,,,x,2026-09-16", "not a finite number",
     "usd_per_instance_hour"),
    ("azure,eastus,Standard_ND96isr_H100_v5,H100,8,on_demand,inf,,,x,2026-09-16", "not a finite number",
     "usd_per_instance_hour"),
    ("azure,eastus,Standard_ND96isr_H100_v5,H100,8,on_demand,-98.32,,,x,2026-09-16", "positive number",
     "usd_per_instance_hour"),
    (f"gcp,us-south1,tpu-v6e-8,TPU v6e,8,on_demand,{BIG},,,x,2026-06-14", "not a finite number",
     "usd_per_instance_hour"),
    (f"gcp,us-south1,tpu-v6e-8,TPU v6e,{BIG},on_demand,21.6,,,x,2026-06-14", "not a finite number",
     "chips_per_instance"),
])
def test_pricing_validate_rejects_bad_price_rows(row, words, field, tmp_path, monkeypatch, capsys):
    path = tmp_path / "bad.csv"
    path.write_text(LONG_HEADER + row + "\n", encoding="utf-8")
    code, stdout, stderr = run_cli(monkeypatch, capsys, "pricing", "validate", str(path))
    message = (stderr + stdout).strip()
    assert code == 2, message
    assert "Traceback" not in message and len(message.splitlines()) == 1
    assert f"{path}:2" in message and field in message and words in message
