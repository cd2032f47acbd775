"""The bytes of a results cache file (output/results_cache.py): a header, a JSON part, then the
columns JSON is slow to read as raw numbers. No pickle. numpy is imported where used: frames
imports the cache and must stay light to import.

Parsing JSON was most of the time a warm report spent reading its cache: over 10,000 results, 38
of ~50 ms went to 5.6 million characters of mostly repeated texts (the same workload, backend or
version in every row); laid out as below, it is 7 ms of JSON and ~15 ms in all. A column goes in
the form that reads fastest and gives back exactly its values:

- every value a float, or ints and floats (pandas makes float64 of them) with every int a float
  exactly: raw float64, one block for all such columns;
- every value an int that fits int64: raw int64, one block (numpy's int64 array makes the same
  pandas column as a list of those ints);
- values repeated (at most one distinct value for two rows): the distinct values in the JSON and,
  per row, the index of its value as raw unsigned ints, the narrowest that fit;
- otherwise its values in the JSON.

A file is `_HEADER` (magic, length of the JSON padded with spaces to 8 bytes, CRC-32 of those and
all that follows) + JSON + the raw blocks. CRC-32 rather than a cryptographic hash: it only has to
tell a damaged file (truncated, a flipped bit) and runs five times as fast as BLAKE2b here; nothing
trusts the cache beyond what it could also read from the results themselves.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

_MAGIC = b"TPBROWS2"
_HEADER = struct.Struct("<8sQQ")         # magic, JSON length, CRC-32 of those two and all that follows
_CHECKED = struct.Struct("<8sQ")          # the part of the header the CRC covers
_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_EXACT_INT = 2 ** 53      # every int up to this is a float exactly
_CODE_TYPES = ((2 ** 8, "<u1"), (2 ** 16, "<u2"), (2 ** 32, "<u4"))


def encode(meta: dict, columns: dict[str, Any]) -> bytes:
    """`meta` (JSON values; "rows": the number of rows) with `columns` (each a list of that many
    JSON values, or a float64 array), as a cache file's bytes."""
    import numpy as np

    n = meta["rows"]
    floats, ints, coded, plain = [], [], [], {}
    for name, values in columns.items():
        if isinstance(values, np.ndarray) and values.dtype == np.float64:
            floats.append(name)
            continue
        types = set(map(type, values))
        if types <= {float} or (types == {int, float} and _floats_hold(values)):
            floats.append(name)
        elif types == {int} and _INT64[0] <= min(values) and max(values) <= _INT64[1]:
            ints.append(name)
        elif (codes := _coded(values, types)) is not None:
            coded.append((name, *codes))
        else:
            plain[name] = values
    coded.sort(key=lambda c: -np.dtype(c[1]).itemsize)      # widest first: each block stays aligned
    head = json.dumps({**meta, "order": list(columns), "float_columns": floats, "int_columns": ints,
                       "coded_columns": [[name, dtype, uniques] for name, dtype, uniques, _ in coded],
                       "columns": plain}, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)          # the raw blocks start 8-byte aligned
    blocks = [np.asarray([columns[name] for name in floats], dtype="<f8").reshape(len(floats), n).tobytes(),
              np.asarray([columns[name] for name in ints], dtype="<i8").reshape(len(ints), n).tobytes()]
    blocks += [np.asarray(codes, dtype=dtype).tobytes() for _, dtype, _, codes in coded]
    body = b"".join([head, *blocks])
    return _HEADER.pack(_MAGIC, len(head), _crc(len(head), body)) + body


def _floats_hold(values: list) -> bool:
    """Whether a column of ints and floats (a count, NaN where a failed run has none) reads back as
    the same pandas column from raw floats: pandas makes it float64 either way, and each int here is
    a float exactly."""
    return all(-_EXACT_INT <= v <= _EXACT_INT for v in values if type(v) is int)


def _crc(size: int, body) -> int:
    return zlib.crc32(body, zlib.crc32(_CHECKED.pack(_MAGIC, size)))


def _coded(values: list, types: set) -> tuple[str, list, list[int]] | None:
    """(code dtype, distinct values, each row's index into them) when values repeat enough to pay."""
    # A value is its own key unless a float or a bool could equal a value of another type or sign
    # (True, 1 and 1.0 are equal keys; so are 0.0 and -0.0): then its type and text are the key.
    exact = float in types or (bool in types and len(types) > 1)
    try:
        keys = [(type(v), repr(v)) for v in values] if exact else values
        distinct = dict.fromkeys(keys)
    except TypeError:         # a value that cannot be a key (a list): kept as it is
        return None
    if len(distinct) > len(values) // 2:
        return None
    index = {key: i for i, key in enumerate(distinct)}
    if exact:       # each key's value from the row it first appears in (later ones overwrite earlier)
        first = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))
        uniques = [values[first[key]] for key in distinct]
    else:
        uniques = list(distinct)
    dtype = next(dtype for limit, dtype in _CODE_TYPES if len(index) <= limit)
    return dtype, uniques, list(map(index.__getitem__, keys))


def decode(blob: bytes) -> tuple[dict, dict[str, Any]] | None:
    """(meta, columns in their order) from a cache file's bytes: float and int columns as numpy
    arrays (read-only views of `blob`: a DataFrame made of them copies them), the others as lists;
    None when the bytes are not a sound cache file."""
    import numpy as np

    magic, size, checksum = _HEADER.unpack_from(blob)
    body = memoryview(blob)[_HEADER.size:]
    if magic != _MAGIC or size > len(body) or _crc(size, body) != checksum:
        return None
    meta = json.loads(bytes(body[:size]))
    n = meta["rows"]
    columns: dict[str, Any] = dict(meta["columns"])
    if type(n) is not int or any(len(v) != n for v in columns.values()):
        return None
    at = size
    for names, dtype in ((meta["float_columns"], "<f8"), (meta["int_columns"], "<i8")):
        block = np.frombuffer(body, dtype=dtype, count=len(names) * n, offset=at)
        columns.update(zip(names, block.reshape(len(names), n)))
        at += block.nbytes
    for name, dtype, uniques in meta["coded_columns"]:
        codes = np.frombuffer(body, dtype=dtype, count=n, offset=at)
        table = np.empty(len(uniques), dtype=object)
        table[:] = uniques
        columns[name] = table[codes].tolist()
        at += codes.nbytes
    order = meta["order"]
    if at != len(body) or sorted(order) != sorted(columns):
        return None
    return meta, {name: columns[name] for name in order}
