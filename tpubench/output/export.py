"""`tpubench export`: the tidy table as CSV or Parquet, with a stable column set."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tpubench.errors import UserError
from tpubench.output.frames import EXPORT_COLUMNS
from tpubench.records.csv_safety import neutralize_frame
from tpubench.records.result import SCHEMA_VERSION, readable_by_all


def tidy(df):
    """Every EXPORT_COLUMNS column in order (missing ones empty), then any newer columns, sorted."""
    extra = sorted(c for c in df.columns if c not in EXPORT_COLUMNS)
    return df.reindex(columns=EXPORT_COLUMNS + extra)


def export_table(df, fmt: str, out: str | Path) -> Path:
    out = Path(out)
    table = tidy(df)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=out.suffix, dir=out.parent)
    readable_by_all(fd)
    os.close(fd)
    try:
        if fmt == "csv":
            neutralize_frame(table).to_csv(tmp, index=False)
        elif fmt == "parquet":
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise UserError("parquet export needs pyarrow: pip install 'tpubench[parquet]'", field="--to") from None
            table.attrs["tpubench_schema_version"] = SCHEMA_VERSION
            table.to_parquet(tmp, index=False)
        else:
            raise UserError(f"unknown format '{fmt}' (choose csv or parquet)", field="--to")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out
