"""Importers of the clouds' own machine-readable price files (downloaded by the user; tpubench calls
no cloud API): GCP Cloud Billing Catalog SKUs (`gcp`), AWS Price List offer files (`aws`), Azure
Retail Prices JSON (`azure`). Each turns one file into long-form price rows (`pricing.LONG_FILE_COLUMNS`,
one row per instance and plan) that `--prices FILE` layers over the shipped table; `mapping` says
which instance types and accelerators the SKUs stand for, `common` holds what the three share.
"""
