"""Reading the CSV tables a user may edit (price files, grid carbon): every row with the line a
user would look at, so that a bad value is a one-line error naming file:line and column."""

from __future__ import annotations

import csv
import difflib
import math
from pathlib import Path
from typing import Iterable, Sequence

from tpubench.errors import UserError


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def read_rows(path: Path, what: str, columns: Sequence[str]) -> tuple[int, list[str], list[tuple[int, list[str]]]]:
    """Header line number, header, and (line number, cells) for every non-blank row of the
    `what` file ("price file", ...) at `path`, whose header should name `columns`."""
    if not path.is_file():
        raise UserError(f"no such {what}", where=str(path))
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {what}: {exc}", where=str(path)) from None
    reader = csv.reader(text.splitlines(keepends=True))
    header: list[str] | None = None
    header_line = 0
    rows: list[tuple[int, list[str]]] = []
    try:
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue
            # reader.line_num is the line where this record ends: where a user looks for it.
            if header is None:
                header, header_line = [c.strip() for c in cells], reader.line_num
            else:
                rows.append((reader.line_num, cells))
    except csv.Error as exc:
        raise UserError(f"CSV syntax error: {exc}", where=f"{path}:{reader.line_num}") from None
    if header is None:
        raise UserError(f"the {what} is empty; expected a header row with " + ", ".join(columns), where=str(path))
    return header_line, header, rows


def check_header(path: Path, header_line: int, header: list[str], columns: Sequence[str],
                 required: Sequence[str], known: str) -> None:
    """Each column once, known (else `known` says which are) and every required one present."""
    where = f"{path}:{header_line}"
    seen = set()
    for col in header:
        if col in seen:
            raise UserError("column appears twice in the header", where=where, field=col)
        seen.add(col)
        if col not in columns:
            raise UserError(f"unknown column{did_you_mean(col, columns)}; {known}", where=where, field=col)
    for col in required:
        if col not in seen:
            raise UserError("missing column", where=where, field=col)


def parse_number(text: str, where: str, field: str, what: str = "") -> float | None:
    """None for an empty cell, else a finite float; anything else names file, row and column."""
    text = text.strip()
    if not text:
        return None
    about = f" ({what})" if what else ""
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"'{text}' is not a number{about}", where=where, field=field) from None
    if not math.isfinite(value):
        raise UserError(f"'{text}' is not a finite number{about}", where=where, field=field)
    return value
