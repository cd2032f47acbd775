"""Import AWS prices from a Price List bulk offer file the user downloaded (the JSON `index.json`
of AmazonEC2 or AmazonSageMaker, whole or per region, from
https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/<offerCode>/current/[<region>/]index.json).

Format, as documented in "Reading the service price list file for an AWS service"
(https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/reading-service-price-list-file-for-services.html,
checked 2026-12 through the docs search) and seen in public excerpts: `{"offerCode", "publicationDate",
"products": {sku: {"sku", "productFamily", "attributes": {...}}}, "terms": {"OnDemand" | "Reserved":
{sku: {offerTermCode: {"sku", "effectiveDate", "priceDimensions": {rateCode: {"unit", "pricePerUnit":
{"USD"}, "description"}}, "termAttributes": {"LeaseContractLength": "1yr"|"3yr", "PurchaseOption":
"No Upfront"|"Partial Upfront"|"All Upfront", "OfferingClass": "standard"|"convertible"}}}}}}`. A
Reserved term's "Hrs" dimension is its hourly part and its "Quantity" dimension ("Upfront Fee") its
upfront part. The same page says the Price List does not include EC2 Spot prices: an AWS import
has no spot rows (spot comes from `pricing import-skypilot` or your own file). A dimension with any
other unit, or none, is a one-line error rather than dropped: a lost upfront fee would make a
commitment look that much cheaper. A price that is not a finite number >= 0 is an error too.

Mapping (docs/extending/prices.md): EC2 products of family "Compute Instance" with operatingSystem
Linux, tenancy Shared, preInstalledSw NA and capacitystatus Used (when present) -- the bare instance;
its marketoption (when present) says how it is bought: OnDemand as below, CapacityBlock (EC2
Capacity Blocks for ML, seen in the 2026-09 us-east-1 file as a p5.48xlarge line at 0.00 USD/h) ->
capacity_block when it carries a price, else skipped and counted (a block's price is the upfront
fee `aws ec2 describe-capacity-block-offerings` quotes: add it as a capacity_block row);
SageMaker products of family "ML Instance" whose component is "Hosting" (the inference endpoint tpubench
measures), as instance type "ml.<type>". Instance type -> accelerator and chips: `mapping`. Region:
the product's regionCode. OnDemand -> on_demand; Reserved 1yr -> commit_1y, 3yr -> commit_3y, keeping
per SKU and term the standard offering with the lowest effective price (hourly + upfront over the
term) -- which purchase option that was is in the row's source. Every product or term left out is
counted by reason.
"""

from __future__ import annotations

from pathlib import Path

from tpubench.errors import UserError
from tpubench.money import plans
from tpubench.money.price_imports import mapping
from tpubench.money.price_imports.common import ImportResult, file_date, iso_date, price_number, read_json, require

LEASE_PLANS = {"1yr": "commit_1y", "3yr": "commit_3y"}
_HOURLY_UNITS = ("hrs", "hours", "hour")
_UPFRONT_UNITS = ("quantity",)
_EC2_BARE = {"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA"}


def _product_instance(product: dict, result: ImportResult) -> tuple[str, str, str] | None:
    """(region, instance type, market) of a product tpubench prices, or None with the reason counted;
    market is "on_demand" or "capacity_block" (from the EC2 marketoption attribute)."""
    family = str(product.get("productFamily", ""))
    attrs = product.get("attributes") or {}
    if family == "Compute Instance":
        for key, want in _EC2_BARE.items():
            if attrs.get(key, want) != want:
                result.skip(f"EC2 product with {key} {attrs.get(key)} (only {key} {want} is the bare instance)")
                return None
        if attrs.get("capacitystatus", "Used") != "Used":
            result.skip(f"EC2 capacity-reservation line ({attrs.get('capacitystatus')})")
            return None
        market = {"OnDemand": "on_demand", "CapacityBlock": "capacity_block"}.get(str(attrs.get("marketoption", "OnDemand")))
        if market is None:
            result.skip(f"EC2 marketoption {attrs.get('marketoption')} (only OnDemand and CapacityBlock are priced)")
            return None
        instance_type = str(attrs.get("instanceType", ""))
    elif family == "ML Instance":
        market = "on_demand"
        if attrs.get("component", "Hosting") != "Hosting":
            result.skip(f"SageMaker component {attrs.get('component')} (only Hosting, inference, is priced)")
            return None
        instance_type = str(attrs.get("instanceName") or attrs.get("instanceType") or "")
        if instance_type and not instance_type.startswith("ml."):
            instance_type = "ml." + instance_type
    else:
        result.skip(f"product family '{family}' is not an instance")
        return None
    region = str(attrs.get("regionCode", ""))
    if not instance_type or not region:
        result.skip("product without instance type or regionCode")
        return None
    return region, instance_type, market


def _term_parts(term: dict, where: str, field_path: str) -> tuple[float | None, float]:
    """(hourly USD, upfront USD) of one term; hourly None when it has no per-hour dimension."""
    dims = require(term, "priceDimensions", dict, where, field_path + ".priceDimensions")
    hourly, upfront = None, 0.0
    for code, dim in dims.items():
        dim_path = f"{field_path}.priceDimensions.{code}"
        price = require(dim, "pricePerUnit", dict, where, dim_path + ".pricePerUnit")
        if "USD" not in price:
            continue
        value = price_number(price["USD"], where, dim_path + ".pricePerUnit.USD")
        unit = dim.get("unit")
        if not isinstance(unit, str) or not unit.strip():
            raise UserError("missing: a price with no unit could be an hourly rate or an upfront fee",
                            where=where, field=dim_path + ".unit")
        if unit.strip().lower() in _HOURLY_UNITS:
            hourly = (hourly or 0.0) + value
        elif unit.strip().lower() in _UPFRONT_UNITS:
            upfront += value
        else:
            raise UserError(f"unit '{unit[:40]}' is neither Hrs (per hour) nor Quantity (upfront fee)",
                            where=where, field=dim_path + ".unit")
    return hourly, upfront


def import_aws(path: str | Path, *, as_of: str | None = None) -> ImportResult:
    """A saved AWS Price List offer file -> instance price rows (see the module docstring)."""
    path = Path(path)
    where = str(path)
    data = read_json(path, "AWS Price List offer file")
    products = require(data, "products", dict, where, "products")
    terms = require(data, "terms", dict, where, "terms")
    offer = str(data.get("offerCode", "AWS")) if isinstance(data, dict) else "AWS"
    as_of = as_of or iso_date(str(data.get("publicationDate", ""))) or file_date(path)
    result = ImportResult()
    wanted: dict[str, tuple[str, str, str, str, int]] = {}
    for sku, product in products.items():
        if not isinstance(product, dict):
            raise UserError("expected a JSON object", where=where, field=f"products.{sku}")
        found = _product_instance(product, result)
        if found is None:
            continue
        region, instance_type, market = found
        known = mapping.instance_accelerator("aws", instance_type)
        if known is None:
            result.skip("instance type with no known accelerator (not an accelerator instance tpubench prices)")
            continue
        wanted[sku] = (region, instance_type, market, *known)

    for term_type, by_sku in terms.items():
        if not isinstance(by_sku, dict):
            raise UserError("expected a JSON object", where=where, field=f"terms.{term_type}")
        if term_type not in ("OnDemand", "Reserved"):
            result.skip(f"term type {term_type}", len(by_sku))
            continue
        for sku, offers in by_sku.items():
            if sku not in wanted:
                continue        # its product was already counted as skipped (or is not in this file)
            region, instance_type, market, accelerator, chips = wanted[sku]
            if not isinstance(offers, dict):
                raise UserError("expected a JSON object", where=where, field=f"terms.{term_type}.{sku}")
            best: dict[str, tuple[float, float, float, str]] = {}
            for code, term in offers.items():
                field_path = f"terms.{term_type}.{sku}.{code}"
                hourly, upfront = _term_parts(term, where, field_path)
                attrs = term.get("termAttributes") or {}
                if term_type == "OnDemand" and market == "capacity_block":
                    plan, months, label = "capacity_block", None, "Capacity Block"
                elif term_type == "OnDemand":
                    plan, months, label = "on_demand", None, "on-demand"
                elif market == "capacity_block":
                    result.skip("reserved term of a Capacity Block line")
                    continue
                else:
                    plan = LEASE_PLANS.get(str(attrs.get("LeaseContractLength", "")))
                    if plan is None:
                        result.skip(f"reserved lease length '{attrs.get('LeaseContractLength')}'")
                        continue
                    if str(attrs.get("OfferingClass", "standard")) != "standard":
                        result.skip("convertible reserved offering (the standard one is kept)")
                        continue
                    months = plans.PLANS[plan].term_months
                    label = f"{attrs.get('LeaseContractLength')} {attrs.get('OfferingClass', '')} " \
                            f"{attrs.get('PurchaseOption', '')} reserved".replace("  ", " ")
                if hourly is None and not upfront:
                    result.skip("term without a USD price")
                    continue
                hourly = hourly or 0.0
                if hourly <= 0 and upfront <= 0:
                    result.skip("Capacity Block line at 0 USD/h (the Price List does not carry a block's price: its "
                                "upfront fee comes from describe-capacity-block-offerings; add it as a capacity_block "
                                "row)" if plan == "capacity_block" else "zero price")
                    continue
                if upfront and months is None:
                    result.skip(f"{label} with an upfront fee but no term to spread it over")
                    continue
                effective = plans.effective_usd_per_hour(hourly, upfront, months)
                if plan in best:
                    result.skip("another purchase option of the same term (kept the cheapest effective price)")
                    if effective >= best[plan][0]:
                        continue
                best[plan] = (effective, hourly, upfront, label)
            for plan, (_, hourly, upfront, label) in best.items():
                result.add(cloud="aws", region=region, instance_type=instance_type, accelerator=accelerator,
                           chips=chips, plan=plan, hourly=hourly, upfront=upfront,
                           term_months=plans.PLANS[plan].term_months,
                           source=f"AWS Price List {offer} SKU {sku} ({label}) from {path.name}", as_of=as_of,
                           where=where, field=f"terms.{term_type}.{sku}")
    return result
