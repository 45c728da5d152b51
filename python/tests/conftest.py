"""Shared helpers of the spillway pytest suite: the column types spillway supports and random
tables of them."""

import decimal

import numpy as np
import pyarrow as pa
import pytest


def _ints(low, high, dtype=np.int64):
    return lambda rng, n: rng.integers(low, high, n).astype(dtype)


def _strings(rng, n):
    lengths = rng.integers(0, 12, n)
    return ["".join(chr(97 + int(c)) for c in rng.integers(0, 4, int(k))) for k in lengths]


def _decimals(digits, scale):
    def make(rng, n):
        # Unscaled values of up to `digits` digits (beyond 64 bits where the type holds them),
        # either sign, drawn from a pool of a quarter as many (ties).
        pool = []
        for _ in range(max(n // 4, 1)):
            unscaled = 0
            for _ in range((digits + 17) // 18):
                unscaled = unscaled * 10**18 + int(rng.integers(0, 10**18))
            unscaled %= 10**digits
            pool.append(decimal.Decimal(-unscaled if rng.integers(0, 2) else unscaled).scaleb(-scale))
        return [pool[int(i)] for i in rng.integers(0, len(pool), n)]

    return make


def _fixed_bytes(rng, n):
    return [bytes(97 + int(c) for c in rng.integers(0, 3, 3)) for _ in range(n)]


# Every Arrow type spillway sorts today (src/io/arrow/type_conversion.cpp), with a generator of
# random values (duplicates included). A new type is one line here.
SUPPORTED_TYPES = [
    ("bool", pa.bool_(), lambda rng, n: rng.integers(0, 2, n).astype(bool)),
    ("int8", pa.int8(), _ints(-128, 128, np.int8)),
    ("int16", pa.int16(), _ints(-500, 500, np.int16)),
    ("int32", pa.int32(), _ints(-(2**31), 2**31 - 1, np.int32)),
    ("int64", pa.int64(), _ints(-(2**62), 2**62)),
    ("uint8", pa.uint8(), _ints(0, 256, np.uint8)),
    ("uint16", pa.uint16(), _ints(0, 1000, np.uint16)),
    ("uint32", pa.uint32(), _ints(0, 2**32, np.uint32)),
    ("uint64", pa.uint64(), lambda rng, n: rng.integers(0, 2**63, n, dtype=np.uint64) * 2 + 1),
    ("float32", pa.float32(), lambda rng, n: (rng.standard_normal(n) * 100).astype(np.float32)),
    ("float64", pa.float64(), lambda rng, n: rng.standard_normal(n) * 1e6),
    ("timestamp_ms", pa.timestamp("ms"), _ints(0, 2**41)),
    ("timestamp_us_utc", pa.timestamp("us", tz="UTC"), _ints(0, 2**50)),
    ("string", pa.string(), _strings),
    ("large_string", pa.large_string(), _strings),
    ("date32", pa.date32(), _ints(-1000, 30000, np.int32)),
    ("date64", pa.date64(), lambda rng, n: rng.integers(-1000, 30000, n) * 86_400_000),
    ("time32_ms", pa.time32("ms"), _ints(0, 86_400_000, np.int32)),
    ("time64_us", pa.time64("us"), _ints(0, 86_400_000_000)),
    ("duration_ns", pa.duration("ns"), _ints(-(2**40), 2**40)),
    ("binary", pa.binary(), lambda rng, n: [v.encode() for v in _strings(rng, n)]),
    ("large_binary", pa.large_binary(), lambda rng, n: [v.encode() for v in _strings(rng, n)]),
    ("time32_s", pa.time32("s"), _ints(0, 86_400, np.int32)),
    ("time64_ns", pa.time64("ns"), _ints(0, 86_400_000_000_000)),
    ("duration_s", pa.duration("s"), _ints(-(2**40), 2**40)),
    ("string_view", pa.string_view(), _strings),
    ("binary_view", pa.binary_view(), lambda rng, n: [v.encode() for v in _strings(rng, n)]),
    ("fixed_size_binary", pa.binary(3), _fixed_bytes),
    ("dictionary_string", pa.dictionary(pa.int32(), pa.string()), _strings),
    ("decimal32", pa.decimal32(7, 2), _decimals(7, 2)),
    ("decimal64", pa.decimal64(16, 3), _decimals(16, 3)),
    ("decimal128", pa.decimal128(30, 4), _decimals(30, 4)),
    ("decimal256", pa.decimal256(60, 10), _decimals(60, 10)),
]


def random_array(rng, type_entry, rows, null_fraction=0.1):
    """An array of `rows` random values of one SUPPORTED_TYPES entry, about `null_fraction` null."""
    _, arrow_type, make = type_entry
    values = make(rng, rows)
    mask = rng.random(rows) < null_fraction if null_fraction > 0 else None
    return pa.array(values, type=arrow_type, mask=mask)


def random_table(rng, rows, columns, null_fraction=0.1):
    """A table of the SUPPORTED_TYPES entries `columns` (name -> entry) and a row id `rid`."""
    data = {name: random_array(rng, entry, rows, null_fraction) for name, entry in columns.items()}
    data["rid"] = pa.array(np.arange(rows, dtype=np.int64))
    return pa.table(data)


def _comparable(table):
    """`table` with the columns pyarrow cannot sort or compare as spillway writes them cast to
    the same values in a type it can: views to their plain types, small decimals to decimal128,
    dictionaries (re-encoded on output) to their values."""
    columns = []
    for column in table.columns:
        kind = column.type
        if pa.types.is_dictionary(kind):
            column = column.cast(kind.value_type)
        elif kind == pa.string_view():
            column = column.cast(pa.string())
        elif kind == pa.binary_view():
            column = column.cast(pa.binary())
        elif pa.types.is_decimal32(kind) or pa.types.is_decimal64(kind):
            column = column.cast(pa.decimal128(38, kind.scale))
        columns.append(column)
    return pa.table(columns, names=table.column_names)


def check_sorted(result, table, sorting, null_placement="at_end"):
    """Asserts that `result` holds the rows of `table` (by row id) in the order pyarrow's
    sort_by gives its keys: the same key columns, every row once, each row intact, and the
    columns of the types they came in."""
    assert result.schema == table.schema
    assert result.num_rows == table.num_rows
    result, table = _comparable(result), _comparable(table)
    expected = table.sort_by([(name, order, null_placement) for name, order in sorting])
    for name, _ in sorting:
        assert result.column(name).equals(expected.column(name)), name
    rids = result.column("rid").to_numpy()
    assert sorted(rids.tolist()) == list(range(table.num_rows))
    assert table.take(pa.array(rids)).equals(result.combine_chunks())


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)
