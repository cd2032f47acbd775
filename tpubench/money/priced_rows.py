"""Results joined to prices, kept as three tables: the priced results (one row each), the price rows
they were priced on (one row each), and per (result, price row) pair its costs; a consumer joins
what it reads, where it reads it (docs/commands.md#report-cache).

Over 10,000 results a report prices ~66,000 pairs. Materialised as one frame of every priced column
(`frame()`, what `cost.price_results` returns and the CSV report writes), that is ~160 columns, most
of them the results' text copied to each of their price rows. A summary ranks the pairs on a few
numbers and keeps a handful (`group_of`, `take`); the figures read a price per accelerator
(`used_prices`): neither needs the whole frame, so a report that does not write every priced row
never builds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

# Where a priced frame (cost.price_results) keeps which flagged prices were set aside.
PRICE_NOTES = "price_notes"


@dataclass
class PricedRows:
    """`result_at[k]` and `price_at[k]`: pair k's row in `measured` and in `prices` (both with a
    RangeIndex); `figures` (RangeIndex, a row a pair): what pricing computed for each pair. A column
    is read from `figures`, else `prices`, else `measured`; `columns` names the priced row's columns
    in their order, `missing` those no table holds (None on every row, as a result that predates
    them has)."""

    measured: pd.DataFrame
    prices: pd.DataFrame
    result_at: np.ndarray
    price_at: np.ndarray
    figures: pd.DataFrame
    columns: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)     # which flagged prices were set aside (cost.choose_prices)
    _frame: pd.DataFrame | None = field(default=None, repr=False)

    @staticmethod
    def pairs(result_keys, price_keys) -> tuple[np.ndarray, np.ndarray]:
        """(result_at, price_at) of every result with every price row of the same key, result by
        result, each result's price rows in their order: what an inner merge on the key gives."""
        codes, _ = pd.factorize(pd.concat([pd.Series(result_keys, dtype=object), pd.Series(price_keys, dtype=object)],
                                          ignore_index=True), use_na_sentinel=True)
        result_codes, price_codes = codes[:len(result_keys)], codes[len(result_keys):]
        order = np.argsort(price_codes, kind="stable")       # price rows by key, in their order within one
        counts = np.bincount(price_codes[price_codes >= 0], minlength=codes.max() + 1 if len(codes) else 0)
        starts = np.concatenate([[0], np.cumsum(counts)])[:-1] + int((price_codes < 0).sum())
        per_result = np.where(result_codes >= 0, counts[np.maximum(result_codes, 0)] if len(counts) else 0, 0)
        result_at = np.repeat(np.arange(len(result_keys)), per_result)
        offsets = np.arange(len(result_at)) - np.repeat(np.cumsum(per_result) - per_result, per_result)
        first = starts[np.maximum(result_codes, 0)] if len(starts) else np.zeros(len(result_keys), dtype=np.int64)
        return result_at, order[np.repeat(first, per_result) + offsets]

    def __len__(self) -> int:
        return len(self.result_at)

    @classmethod
    def of_frame(cls, frame: pd.DataFrame) -> PricedRows:
        """A priced frame (price_results') as the three tables: every column its own pair's."""
        frame = frame.reset_index(drop=True)
        at = np.arange(len(frame))
        return cls(frame, pd.DataFrame(index=at), at, at, pd.DataFrame(index=at), list(frame.columns),
                   list(frame.attrs.get(PRICE_NOTES, [])), frame)

    def _holder(self, name: str) -> tuple[pd.DataFrame | None, np.ndarray | None]:
        if name in self.figures:
            return self.figures, None
        if name in self.prices:
            return self.prices, self.price_at
        if name in self.measured:
            return self.measured, self.result_at
        return None, None

    def select(self, names: list[str], at: np.ndarray | None = None) -> pd.DataFrame:
        """The columns `names` of every pair (or of the pairs at positions `at`, in that order), each
        taken from the table that holds it (dtypes kept), with a RangeIndex."""
        pairs = np.arange(len(self)) if at is None else np.asarray(at, dtype=np.intp)
        parts = []
        for table, rows, wanted in self._tables_of(names):
            picked = pairs if rows is None else rows[pairs]
            parts.append(table[wanted].take(picked).reset_index(drop=True))
        out = pd.concat(parts, axis=1) if parts else pd.DataFrame(index=pd.RangeIndex(len(pairs)))
        missing = {name: None for name in names if name not in out}
        if missing:
            out = pd.concat([out, pd.DataFrame(missing, index=out.index, dtype=object)], axis=1)
        return out[list(names)]

    def frame(self) -> pd.DataFrame:
        """Every priced column of every pair: the frame cost.price_results returns (built once)."""
        if self._frame is None:
            self._frame = self.select(self.columns)
        return self._frame

    def take(self, at) -> pd.DataFrame:
        """Every priced column of the pairs at positions `at`, in that order."""
        if self._frame is not None:
            return self._frame.iloc[np.asarray(at, dtype=np.intp)].reset_index(drop=True)
        return self.select(self.columns, at)

    def measured_values(self, values) -> np.ndarray:
        """Per pair, its result's entry of `values` (one per row of `measured`)."""
        return np.asarray(values)[self.result_at]

    def group_of(self, keys: list[str]) -> np.ndarray:
        """Per pair, a number for its values of `keys` (equal values, NaN included, equal numbers),
        made from each table's distinct values rather than from the pairs' copies of them."""
        group = np.zeros(len(self), dtype=np.int64)
        for table, rows, names in self._tables_of(keys):
            codes = table[names].groupby(names, sort=False, dropna=False).ngroup().to_numpy(dtype=np.int64)
            width = int(codes.max()) + 1 if len(codes) else 1
            group = group * width + (codes if rows is None else codes[rows])
        return group

    def _tables_of(self, names: list[str]) -> list[tuple[pd.DataFrame, np.ndarray | None, list[str]]]:
        """(table, its row per pair or None for `figures`, the names it holds) for the tables holding
        some of `names`; a name no table holds is in none (None on every pair)."""
        tables: dict[int, tuple[pd.DataFrame, np.ndarray | None, list[str]]] = {}
        for name in names:
            table, rows = self._holder(name)
            if table is not None:
                tables.setdefault(id(table), (table, rows, []))[2].append(name)
        return list(tables.values())

    def used_prices(self) -> pd.DataFrame:
        """The price rows some pair was priced on, each once, in the order the pairs first have them."""
        if not len(self.prices.columns):        # of_frame: the price columns are the frame's
            return self.frame()
        return self.prices.iloc[pd.unique(self.price_at)]

    def results_priced(self) -> int:
        """How many results have at least one price."""
        return int(len(np.unique(self.result_at)))
