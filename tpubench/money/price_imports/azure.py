"""Import Azure prices from a Retail Prices API response the user saved
(`GET https://prices.azure.com/api/retail/prices?$filter=serviceName eq 'Virtual Machines' and ...`;
pages may be concatenated into one `Items` array).

Format, as documented at https://learn.microsoft.com/en-us/rest/api/cost-management/retail-prices/azure-retail-prices
(checked 2026-12 through the docs search): `{"BillingCurrency", "Items": [{"currencyCode", "retailPrice",
"unitPrice", "armRegionName", "armSkuName", "skuName", "productName", "serviceName", "unitOfMeasure",
"type": "Consumption" | "Reservation" | "DevTestConsumption", "reservationTerm": "1 Year" | "3 Years",
"effectiveStartDate", ...}], "NextPageLink", "Count"}`. The documentation's reservation sample
(E64 v4, reservationTerm "1 Year", retailPrice 25007.0 with unitOfMeasure "1 Hour") is the price of
the whole term, not an hourly rate. Spot meters are Consumption items whose meterName (and, when
present, skuName) ends in "Spot": an item captured live for Standard_ND96isr_H100_v5 in eastus
(2026-09) has no skuName at all, only meterName "ND96isrH100v5 Spot", so spot is read from either.

Mapping (docs/extending/prices.md): armSkuName is the instance type, armRegionName the region;
accelerator and chips from `mapping`. Consumption -> on_demand, or spot when meterName or skuName
says "Spot";
Reservation "1 Year" -> commit_1y and "3 Years" -> commit_3y with the retailPrice as the upfront part
(hourly part 0; Azure's monthly payment of a reservation totals the same). Left out and counted: Windows
meters (productName ending in "Windows": the licence is not the accelerator's price), "Low Priority"
meters (Azure Batch's retired low-priority VMs, not a VM spot price), DevTestConsumption (Dev/Test
subscriptions only), prices not in USD, consumption not per "1 Hour", zero prices, other reservation
terms and VM sizes with no known accelerator. An item without unitOfMeasure is an error (it is not
assumed hourly), and so is a retailPrice that is not a finite number >= 0 (`true` is not 1 USD).
"""

from __future__ import annotations

import re
from pathlib import Path

from tpubench.errors import UserError
from tpubench.money import plans
from tpubench.money.price_imports import mapping
from tpubench.money.price_imports.common import ImportResult, file_date, listed_objects, price_number, read_json, require

RESERVATION_PLANS = {"1 Year": "commit_1y", "3 Years": "commit_3y"}
_SPOT = re.compile(r"\bspot\b", re.I)
_LOW_PRIORITY = re.compile(r"\blow\s+priority\b", re.I)


def import_azure(path: str | Path, *, as_of: str | None = None) -> ImportResult:
    """A saved Azure Retail Prices response -> VM price rows (see the module docstring)."""
    path = Path(path)
    where = str(path)
    data = read_json(path, "Azure Retail Prices file")
    as_of = as_of or file_date(path)
    result = ImportResult()
    for field_path, item in listed_objects(data, "Items", where):
        sku_name = str(item.get("skuName", ""))
        meter = str(item.get("meterName", ""))
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
        if _LOW_PRIORITY.search(sku_name) or _LOW_PRIORITY.search(meter):
            result.skip("Low Priority meter (Azure Batch, not a VM spot price)")
            continue
        if str(item.get("currencyCode", "USD")) != "USD":
            result.skip(f"price in {item.get('currencyCode')}, not USD")
            continue
        instance_type = str(require(item, "armSkuName", str, where, field_path + ".armSkuName"))
        region = str(require(item, "armRegionName", str, where, field_path + ".armRegionName"))
        price_field = "retailPrice" if "retailPrice" in item else "unitPrice"
        if price_field not in item:
            raise UserError("missing; the file does not follow the documented format", where=where,
                            field=field_path + ".retailPrice")
        price = price_number(item[price_field], where, f"{field_path}.{price_field}", "USD")
        unit = item.get("unitOfMeasure")
        if not isinstance(unit, str) or not unit.strip():
            raise UserError("missing: without a unit the price cannot be taken as hourly", where=where,
                            field=field_path + ".unitOfMeasure")
        known = mapping.instance_accelerator("azure", instance_type)
        if known is None:
            result.skip("VM size with no known accelerator (not an accelerator instance tpubench prices)")
            continue
        if price <= 0:
            result.skip("zero price")
            continue
        if kind == "Consumption":
            if unit.strip() != "1 Hour":
                result.skip(f"consumption priced per '{unit[:40]}', not per hour")
                continue
            plan = "spot" if _SPOT.search(meter) or _SPOT.search(sku_name) else "on_demand"
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
                   source=f"Azure Retail Prices {kind} meter '{meter or sku_name}' ({product}) from {path.name}",
                   where=where, field=f"{field_path}.{price_field}")
    return result
