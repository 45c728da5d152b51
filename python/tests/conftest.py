"""Shared helpers of the spillway pytest suite: the column types spillway supports and random
tables of them."""

import numpy as np
import pyarrow as pa
import pytest


def _ints(low, high, dtype=np.int64):
    return lambda rng, n: rng.integers(low, high, n).astype(dtype)


def _strings(rng, n):
    lengths = rng.integers(0, 12, n)
    return ["".join(chr(97 + int(c)) for c in rng.integers(0, 4, int(k))) for k in lengths]


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


def check_sorted(result, table, sorting, null_placement="at_end"):
    """Asserts that `result` holds the rows of `table` (by row id) in the order pyarrow's
    sort_by gives its keys: the same key columns, every row once, each row intact."""
    expected = table.sort_by([(name, order, null_placement) for name, order in sorting])
    assert result.schema == table.schema
    assert result.num_rows == table.num_rows
    for name, _ in sorting:
        assert result.column(name).equals(expected.column(name)), name
    rids = result.column("rid").to_numpy()
    assert sorted(rids.tolist()) == list(range(table.num_rows))
    assert table.take(pa.array(rids)).equals(result.combine_chunks())


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)
