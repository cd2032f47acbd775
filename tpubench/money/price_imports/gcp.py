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

Mapping (docs/extending/prices.md): a SKU whose description names a TPU ("TPU v5e", "v6e",
"Trillium", ...) is a per-chip-hour price; it becomes one row per slice shape of that accelerator
(`mapping.tpu_slices`) at chips x price, in each of its serviceRegions. usageType -> plan:
OnDemand -> on_demand, Preemptible -> spot, Commit1Yr -> commit_1y, Commit3Yr -> commit_3y; a TPU
SKU whose description says "DWS", "flex" or "calendar" (Dynamic Workload Scheduler) -> flex_start
(recognised by those words: the API has no field for it). Left out and counted: GPU SKUs (a GCP GPU
machine also bills host vCPU and memory SKUs, which this importer does not sum: use
`pricing import-skypilot` or a row of your own), every other non-TPU SKU, non-USD or non-hourly
prices, tiered prices, zero prices, unknown usage types and TPU generations with no known slice shape.
"""

from __future__ import annotations

import re
from pathlib import Path

from tpubench.errors import UserError
from tpubench.money.price_imports import mapping
from tpubench.money.price_imports.common import ImportResult, file_date, listed_objects, read_json, require

USAGE_PLANS = {"OnDemand": "on_demand", "Preemptible": "spot", "Commit1Yr": "commit_1y", "Commit3Yr": "commit_3y"}
_FLEX_WORDS = re.compile(r"\bDWS\b|flex|calendar", re.I)


def _unit_price(rate: dict, where: str, field_path: str) -> tuple[float, str]:
    price = require(rate, "unitPrice", dict, where, field_path + ".unitPrice")
    try:
        value = float(price.get("units", 0) or 0) + float(price.get("nanos", 0) or 0) / 1e9
    except (TypeError, ValueError):
        raise UserError("units / nanos are not numbers", where=where, field=field_path + ".unitPrice") from None
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
    tiers = require(expr, "tieredRates", list, where, field_path + ".pricingInfo[-1].pricingExpression.tieredRates")
    prices = [_unit_price(t, where, field_path + ".tieredRates[]") for t in tiers]
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
        accelerator = mapping.tpu_accelerator(description) if "tpu" in description.lower() else None
        if accelerator is None:
            if str(category.get("resourceGroup", "")).upper() == "GPU":
                result.skip("GPU SKU: a GCP GPU machine also bills host vCPU and memory SKUs (use "
                            "pricing import-skypilot or your own row)")
            else:
                result.skip("not a TPU SKU")
            continue
        plan = "flex_start" if _FLEX_WORDS.search(description) else USAGE_PLANS.get(usage)
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
                           chips=chips, plan=plan, hourly=chip_hour * chips, source=source, as_of=as_of)
    return result
