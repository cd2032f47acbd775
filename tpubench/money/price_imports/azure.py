"""Import Azure prices from a Retail Prices API response the user saved
(`GET https://prices.azure.com/api/retail/prices?$filter=serviceName eq 'Virtual Machines' and ...`;
pages may be concatenated into one `Items` array).

Format, as documented at https://learn.microsoft.com/en-us/rest/api/cost-management/retail-prices/azure-retail-prices
(checked 2026-12 through the docs search): `{"BillingCurrency", "Items": [{"currencyCode", "retailPrice",
"unitPrice", "armRegionName", "armSkuName", "skuName", "productName", "serviceName", "unitOfMeasure",
"type": "Consumption" | "Reservation" | "DevTestConsumption", "reservationTerm": "1 Year" | "3 Years",
"effectiveStartDate", ...}], "NextPageLink", "Count"}`. The documentation's reservation sample
(E64 v4, reservationTerm "1 Year", retailPrice 25007.0 with unitOfMeasure "1 Hour") is the price of
the whole term, not an hourly rate; spot meters are Consumption items whose skuName ends in "Spot".

Mapping (docs/extending/prices.md): armSkuName is the instance type, armRegionName the region;
accelerator and chips from `mapping`. Consumption -> on_demand, or spot when skuName ends in "Spot";
Reservation "1 Year" -> commit_1y and "3 Years" -> commit_3y with the retailPrice as the upfront part
(hourly part 0; Azure's monthly payment of a reservation totals the same). Left out and counted: Windows
meters (productName ending in "Windows": the licence is not the accelerator's price), "Low Priority"
meters (Azure Batch's retired low-priority VMs, not a VM spot price), DevTestConsumption (Dev/Test
subscriptions only), prices not in USD, consumption not per "1 Hour", zero prices, other reservation
terms and VM sizes with no known accelerator.
"""

from __future__ import annotations

from pathlib import Path

from tpubench.errors import UserError
from tpubench.money import plans
from tpubench.money.price_imports import mapping
from tpubench.money.price_imports.common import ImportResult, file_date, listed_objects, read_json, require

RESERVATION_PLANS = {"1 Year": "commit_1y", "3 Years": "commit_3y"}


def import_azure(path: str | Path, *, as_of: str | None = None) -> ImportResult:
    """A saved Azure Retail Prices response -> VM price rows (see the module docstring)."""
    path = Path(path)
    where = str(path)
    data = read_json(path, "Azure Retail Prices file")
    as_of = as_of or file_date(path)
    result = ImportResult()
    for field_path, item in listed_objects(data, "Items", where):
        sku_name = str(item.get("skuName", ""))
        product = str(item.get("productName", ""))
        kind = str(require(item, "type", str, where, field_path + ".type"))
        if kind == "DevTestConsumption":
            result.skip("DevTestConsumption (Dev/Test subscriptions only)")
            continue
        if kind not in ("Consumption", "Reservation"):
            result.skip(f"price type '{kind}'")
            continue
        if product.endswith("Windows"):
            result.skip("Windows meter (licence included)")
            continue
        if sku_name.endswith("Low Priority"):
            result.skip("Low Priority meter (Azure Batch, not a VM spot price)")
            continue
        if str(item.get("currencyCode", "USD")) != "USD":
            result.skip(f"price in {item.get('currencyCode')}, not USD")
            continue
        instance_type = str(require(item, "armSkuName", str, where, field_path + ".armSkuName"))
        region = str(require(item, "armRegionName", str, where, field_path + ".armRegionName"))
        raw = item.get("retailPrice", item.get("unitPrice"))
        try:
            price = float(raw)
        except (TypeError, ValueError):
            raise UserError(f"'{raw}' is not a number", where=where, field=field_path + ".retailPrice") from None
        known = mapping.instance_accelerator("azure", instance_type)
        if known is None:
            result.skip("VM size with no known accelerator (not an accelerator instance tpubench prices)")
            continue
        if price <= 0:
            result.skip("zero price")
            continue
        if kind == "Consumption":
            if str(item.get("unitOfMeasure", "1 Hour")) != "1 Hour":
                result.skip(f"consumption priced per '{item.get('unitOfMeasure')}', not per hour")
                continue
            plan = "spot" if sku_name.endswith("Spot") else "on_demand"
            hourly, upfront, months = price, 0.0, None
        else:
            term = str(item.get("reservationTerm", ""))
            plan = RESERVATION_PLANS.get(term)
            if plan is None:
                result.skip(f"reservation term '{term}'")
                continue
            hourly, upfront, months = 0.0, price, plans.PLANS[plan].term_months
        accelerator, chips = known
        result.add(cloud="azure", region=region, instance_type=instance_type, accelerator=accelerator, chips=chips,
                   plan=plan, hourly=hourly, upfront=upfront, term_months=months, as_of=as_of,
                   source=f"Azure Retail Prices {kind} meter '{sku_name}' ({item.get('productName', '')}) "
                          f"from {path.name}")
    return result
