"""Import GCP prices from a Cloud Billing Catalog API SKU list the user saved
(`GET https://cloudbilling.googleapis.com/v1/services/SERVICE_ID/skus`, e.g. the Cloud TPU or
Compute Engine service; pages may be concatenated into one `skus` array).

Format, as documented at https://cloud.google.com/billing/v1/how-tos/catalog-api (checked
2026-12 through the docs search): `{"skus": [{"skuId", "description", "category": {"resourceFamily",
"resourceGroup", "usageType"}, "serviceRegions": [...], "pricingInfo": [{"effectiveTime",
"pricingExpression": {"usageUnit", "tieredRates": [{"startUsageAmount", "unitPrice":
{"currencyCode", "units", "nanos"}}]}}]}]}`. A price is `units + nanos / 1e9` in `currencyCode` per
`usageUnit`; public SKU examples show usageType values OnDemand, Preemptible, Commit1Yr and
Commit3Yr and commitment SKUs billed per hour ("Commitment v1: ... for 1 Year", usageUnit "h"), so a
GCP commitment has no upfront part.

Mapping (docs/extending/prices.md): a SKU whose description names a TPU generation ("TpuV6e running
in Dallas", "Tpu-v5p ...", "TPU7x running in Americas", "DWS Defined Duration V6e ...", "TPU v5
Lite ...": `mapping.tpu_accelerator`) is a per-chip-hour price; it becomes one row per slice shape of
that accelerator (`mapping.tpu_slices`) at chips x price, in each of its serviceRegions. The
description decides first, because several real SKUs share the OnDemand usage type (seen in the
us-east5 catalog, 2026-08): "DWS Defined Duration ..." (Dynamic Workload Scheduler flex-start) ->
flex_start; "... in Calendar Mode" (a DWS calendar-mode reservation, booked and paid for its block of
days) -> reservation; "Capacity Optimized ..." is another provisioning product and is skipped, not
taken for the on-demand price. Otherwise usageType -> plan: OnDemand -> on_demand, Preemptible ->
spot, Commit1Yr -> commit_1y, Commit3Yr -> commit_3y. A unitPrice is `units` (an integer) plus
`nanos` (billionths, |nanos| < 1e9, the same sign as units: google.type.Money); anything else, and
any NaN, infinite or negative price, is a one-line error naming the field. Left out and counted:
GPU SKUs (a GCP GPU machine also bills host vCPU and memory SKUs, which this importer does not sum:
use `pricing import-skypilot` or a row of your own), every other non-TPU SKU, non-USD or non-hourly
prices, tiered prices, zero prices, unknown usage types and TPU generations with no known slice shape.
"""

from __future__ import annotations

import re
from pathlib import Path

from tpubench.errors import UserError
from tpubench.money.price_imports import mapping
from tpubench.money.price_imports.common import ImportResult, file_date, listed_objects, read_json, require

USAGE_PLANS = {"OnDemand": "on_demand", "Preemptible": "spot", "Commit1Yr": "commit_1y", "Commit3Yr": "commit_3y"}
# Description words that decide the plan before the usage type does (all seen on OnDemand SKUs).
_CALENDAR = re.compile(r"calendar\s*mode", re.I)
_FLEX_START = re.compile(r"\bDWS\b|defined\s+duration|flex[\s-]*start", re.I)
_OTHER_PRODUCT = re.compile(r"capacity\s+optimi[sz]ed", re.I)
_NANOS_PER_UNIT = 1_000_000_000


def _integer(value: object, where: str, field: str) -> int:
    """An integer JSON field given as a number or a numeric string (the API writes int64 as strings)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise UserError("not an integer", where=where, field=field)
    text = str(value).strip()
    if len(text) > 20:          # int64 has 19 digits: longer is not an amount (and int() of 5000 digits fails)
        raise UserError(f"'{text[:20]}...' ({len(text)} characters) is not an integer amount", where=where, field=field)
    try:
        number = float(text) if isinstance(value, float) else int(text)
    except ValueError:
        raise UserError(f"'{text}' is not an integer", where=where, field=field) from None
    if isinstance(number, float):
        if not number.is_integer():
            raise UserError(f"'{text}' is not an integer", where=where, field=field)
        number = int(number)
    return number


def _unit_price(rate: dict, where: str, field_path: str) -> tuple[float, str]:
    """USD (or other currency) amount of one tier: units + nanos / 1e9, checked as google.type.Money."""
    field_path += ".unitPrice"
    price = require(rate, "unitPrice", dict, where, field_path)
    units = _integer(price.get("units", 0) or 0, where, field_path + ".units")
    nanos = _integer(price.get("nanos", 0) or 0, where, field_path + ".nanos")
    if abs(nanos) >= _NANOS_PER_UNIT:
        raise UserError(f"{nanos} is not below 1,000,000,000 (nanos are billionths of a unit)", where=where,
                        field=field_path + ".nanos")
    value = units + nanos / _NANOS_PER_UNIT
    if value < 0:
        raise UserError(f"negative price {value:g}", where=where, field=field_path)
    if units and nanos and (units < 0) != (nanos < 0):
        raise UserError("units and nanos have different signs", where=where, field=field_path + ".nanos")
    return value, str(price.get("currencyCode", "USD"))


def _hourly_price(sku: dict, where: str, field_path: str, result: ImportResult) -> tuple[float, str] | None:
    """The SKU's current USD price per hour (the last pricingInfo entry: they are in time order), or
    None with the reason counted."""
    infos = require(sku, "pricingInfo", list, where, field_path + ".pricingInfo")
    if not infos:
        result.skip("no pricingInfo")
        return None
    info = infos[-1]
    expr = require(info, "pricingExpression", dict, where, field_path + ".pricingInfo[-1].pricingExpression")
    unit = str(expr.get("usageUnit", ""))
    if unit != "h":
        result.skip(f"TPU SKU priced per '{unit}', not per hour")
        return None
    tiers_path = field_path + ".pricingInfo[-1].pricingExpression.tieredRates"
    tiers = require(expr, "tieredRates", list, where, tiers_path)
    prices = [_unit_price(t, where, f"{tiers_path}[{i}]") for i, t in enumerate(tiers)]
    if not prices:
        result.skip("no tieredRates")
        return None
    if len({p for p, _ in prices}) > 1:
        result.skip("tiered price (different rates by usage)")
        return None
    value, currency = prices[0]
    if currency != "USD":
        result.skip(f"price in {currency}, not USD")
        return None
    if value <= 0:
        result.skip("zero price")
        return None
    return value, str(info.get("effectiveTime", ""))


def import_gcp(path: str | Path, *, as_of: str | None = None) -> ImportResult:
    """A saved Cloud Billing Catalog SKU list -> TPU slice price rows (see the module docstring)."""
    path = Path(path)
    data = read_json(path, "GCP Cloud Billing Catalog SKUs file")
    where = str(path)
    as_of = as_of or file_date(path)
    result = ImportResult()
    for field_path, sku in listed_objects(data, "skus", where):
        description = str(require(sku, "description", str, where, field_path + ".description"))
        category = require(sku, "category", dict, where, field_path + ".category")
        usage = str(category.get("usageType", ""))
        accelerator = mapping.tpu_accelerator(description)
        if accelerator is None:
            if str(category.get("resourceGroup", "")).upper() == "GPU":
                result.skip("GPU SKU: a GCP GPU machine also bills host vCPU and memory SKUs (use "
                            "pricing import-skypilot or your own row)")
            else:
                result.skip("not a TPU SKU")
            continue
        if _OTHER_PRODUCT.search(description):
            result.skip("Capacity Optimized TPU SKU (another provisioning product, not the plain on-demand price)")
            continue
        if _CALENDAR.search(description):
            plan = "reservation"          # DWS calendar mode: a reservation of a block of days
        elif _FLEX_START.search(description):
            plan = "flex_start"           # DWS flex-start ("DWS Defined Duration")
        else:
            plan = USAGE_PLANS.get(usage)
        if plan is None:
            result.skip(f"usage type '{usage}' is not a plan tpubench knows")
            continue
        slices = mapping.tpu_slices(accelerator)
        if not slices:
            result.skip(f"{accelerator}: no known slice shape to price")
            continue
        priced = _hourly_price(sku, where, field_path, result)
        if priced is None:
            continue
        chip_hour, _ = priced
        regions = require(sku, "serviceRegions", list, where, field_path + ".serviceRegions")
        if not regions:
            result.skip("no serviceRegions")
            continue
        source = (f"GCP Cloud Billing Catalog SKU {sku.get('skuId', '?')} '{description}' "
                  f"({chip_hour:g} USD per chip-hour x chips) from {path.name}")
        for region in regions:
            for instance_type, chips in slices:
                result.add(cloud="gcp", region=str(region), instance_type=instance_type, accelerator=accelerator,
                           chips=chips, plan=plan, hourly=chip_hour * chips, source=source, as_of=as_of,
                           where=where, field=field_path + ".pricingInfo")
    return result
