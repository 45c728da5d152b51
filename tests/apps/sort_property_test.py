"""Property test of `spillway sort`: random tables, random flags, output checked row by row.

Every case is derived from one integer seed (the case seed = the base seed + the case's index):
a random table (one to three key columns of every type spillway reads, nulls, NaN, -0.0, +-inf,
strings sharing long prefixes, presorted and reverse-sorted inputs; zero to three payload
columns) written as Parquet (one or several files, various row group sizes), then sorted by
`spillway sort` with random key orders and null placements, device sizes from 2 MiB to ample,
small read batches, strategies merge, sample and auto, one or two ranks, 1-16 threads with 1-16
tasks of which 1-4 hold the device at once, and the host tier on or
off. The CLI has no switch that removes the host tier: "off" is the least host budget it accepts
(1 MiB), so that spills go to disk.

The output is checked against an order computed by Arrow (`pyarrow.compute.sort_indices` over
columns derived from the keys, see `order_columns`), independently of spillway's comparators and
key encoding: the keys of the output must equal, row by row, those of the input taken in that
order, and the output must hold the same multiset of rows as the input (bit for bit). That
oracle is itself checked against a plain Python sort (`test_oracle_matches_python_sort`).

The semantics checked are those of `include/spillway/ops/sort_order.hpp`: null placement is
positional (nulls_first puts nulls first for asc and desc alike; the default is asc,
nulls_first); floats compare numerically with -0.0 == 0.0 and every NaN equal to every other NaN
and greater than +inf (so desc puts NaN first; Arrow alone would put NaN last both ways); strings
compare as unsigned bytes, a proper prefix first.

Environment:
  SPILLWAY_EXE                 the `spillway` program (CTest passes the built one)
  SPILLWAY_SORT_SEED           base seed (default fixed, so CI is reproducible; `random` picks one)
  SPILLWAY_SORT_CASES          cases of the fast slice (default 60)
  SPILLWAY_SORT_SOAK_SECONDS   also run cases for this long, collecting every failure
  SPILLWAY_SORT_MAX_ROWS       most rows of a case (default 600000, in a soak 1000000)
  SPILLWAY_SORT_MINIMIZE       1: shrink a failing case (rows, columns, flags) before reporting
  SPILLWAY_SORT_TMP            where case directories go (default: the system's temporary dir)

A failure prints the case seed, the command that reproduces it (its input is kept) and the
command that reruns exactly that case:
  SPILLWAY_SORT_SEED=<case seed> SPILLWAY_SORT_CASES=1 SPILLWAY_SORT_MAX_ROWS=<rows>
    python3 -m pytest -q tests/apps/sort_property_test.py -k fast
"""

import decimal
import functools
import json
import math
import os
import random
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import time

try:
    import pytest
except ImportError:  # CTest runs this file as a program: skipped (77) without pytest
    if __name__ == "__main__":
        print("pytest is missing: spillway sort property test skipped")
        sys.exit(77)
    raise

pa = pytest.importorskip("pyarrow")
pc = pytest.importorskip("pyarrow.compute")
pq = pytest.importorskip("pyarrow.parquet")

DEFAULT_SEED = 20250611
FAST_CASES = int(os.environ.get("SPILLWAY_SORT_CASES", "60"))
FAST_MAX_ROWS = int(os.environ.get("SPILLWAY_SORT_MAX_ROWS", "600000"))
SOAK_SECONDS = float(os.environ.get("SPILLWAY_SORT_SOAK_SECONDS", "0"))
SOAK_MAX_ROWS = int(os.environ.get("SPILLWAY_SORT_MAX_ROWS", "1000000"))
MINIMIZE = os.environ.get("SPILLWAY_SORT_MINIMIZE", "") not in ("", "0")
RUN_TIMEOUT_S = 300
THIS_FILE = "tests/apps/sort_property_test.py"  # from the repository root


def base_seed(default):
    text = os.environ.get("SPILLWAY_SORT_SEED", "")
    if text == "":
        return default
    if text == "random":
        return random.SystemRandom().randrange(1, 2**31)
    return int(text)


BASE_SEED = base_seed(DEFAULT_SEED)
SOAK_SEED = base_seed(random.SystemRandom().randrange(1, 2**31)) if SOAK_SECONDS > 0 else 0

# ---------------------------------------------------------------------------------------------
# Types and values

INT_TYPES = {
    "int8": (pa.int8(), -(2**7), 2**7 - 1),
    "int16": (pa.int16(), -(2**15), 2**15 - 1),
    "int32": (pa.int32(), -(2**31), 2**31 - 1),
    "int64": (pa.int64(), -(2**63), 2**63 - 1),
    "uint8": (pa.uint8(), 0, 2**8 - 1),
    "uint16": (pa.uint16(), 0, 2**16 - 1),
    "uint32": (pa.uint32(), 0, 2**32 - 1),
    "uint64": (pa.uint64(), 0, 2**64 - 1),
}
TIMESTAMP_UNITS = ("s", "ms", "us", "ns")
# Dates, times of day and durations: (Arrow type, the most units a value holds, units per day).
TEMPORAL_TYPES = {
    "date32": (pa.date32(), 100000, 1),
    "date64": (pa.date64(), 100000 * 86400000, 86400000),
    "time32_s": (pa.time32("s"), 86400 - 1, None),
    "time32_ms": (pa.time32("ms"), 86400 * 10**3 - 1, None),
    "time64_us": (pa.time64("us"), 86400 * 10**6 - 1, None),
    "time64_ns": (pa.time64("ns"), 86400 * 10**9 - 1, None),
    "duration_s": (pa.duration("s"), 2**62 // 1000, None),
    "duration_ns": (pa.duration("ns"), 2**62, None),
}
# Decimals: (Arrow type, precision, scale). Values are unscaled integers of up to `precision`
# digits, so the wide ones go beyond 64 bits.
DECIMAL_TYPES = {
    "decimal32": (pa.decimal32(9, 2), 9, 2),
    "decimal64": (pa.decimal64(18, 4), 18, 4),
    "decimal128": (pa.decimal128(38, 10), 38, 10),
    "decimal128_15_2": (pa.decimal128(15, 2), 15, 2),
    "decimal256": (pa.decimal256(76, 20), 76, 20),
}
TYPE_NAMES = (
    list(INT_TYPES)
    + ["float32", "float64", "bool", "string"]
    + ["timestamp_" + unit for unit in TIMESTAMP_UNITS]
    + list(TEMPORAL_TYPES)
    + list(DECIMAL_TYPES)
)
FLOAT_SPECIALS = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0]
FLOAT64_EDGES = [5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1.7976931348623157e308]
FLOAT32_EDGES = [1.401298464324817e-45, -1.401298464324817e-45, 3.4028234663852886e38, -3.4028234663852886e38]
STRING_PIECES = ["a", "b", "z", "A", "0", " ", "\x00", "\x7f", "\u00e9", "\u00ff", "\u4e2d", "\U0001f600"]


def arrow_type(name):
    if name in INT_TYPES:
        return INT_TYPES[name][0]
    if name.startswith("timestamp_"):
        return pa.timestamp(name[len("timestamp_"):])
    if name in TEMPORAL_TYPES:
        return TEMPORAL_TYPES[name][0]
    if name in DECIMAL_TYPES:
        return DECIMAL_TYPES[name][0]
    return {"float32": pa.float32(), "float64": pa.float64(), "bool": pa.bool_(), "string": pa.string()}[name]


def as_float32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def random_float(rng, name):
    """A float of the column's width: edges, random bit patterns (any NaN too), ties, spreads."""
    bits = 32 if name == "float32" else 64
    choice = rng.random()
    if choice < 0.25:
        return rng.choice(FLOAT_SPECIALS + (FLOAT32_EDGES if bits == 32 else FLOAT64_EDGES))
    if choice < 0.45:
        raw = rng.getrandbits(bits).to_bytes(bits // 8, "little")
        return struct.unpack("<f" if bits == 32 else "<d", raw)[0]
    if choice < 0.7:
        value = float(rng.randint(-20, 20))
    else:
        value = rng.uniform(-1e6, 1e6) * rng.choice([1e-12, 1e-3, 1.0, 1e6])
    return as_float32(value) if bits == 32 else value


def random_string(rng, shared_prefix):
    kind = rng.random()
    if kind < 0.1:
        return ""
    if kind < 0.4 and shared_prefix:  # longer than the 8 bytes a key prefix holds
        return shared_prefix + "".join(rng.choice(STRING_PIECES) for _ in range(rng.randint(0, 4)))
    if kind < 0.6:
        return "".join(rng.choice(STRING_PIECES) for _ in range(rng.randint(1, 10)))
    return "".join(chr(rng.randint(0x20, 0x7e)) for _ in range(rng.randint(1, rng.choice([3, 12, 40]))))


def value_pool(rng, name, size):
    """`size` random values of type `name` (a Python list; duplicates allowed), with its edges."""
    if name in INT_TYPES:
        _, low, high = INT_TYPES[name]
        edges = [low, high, low + 1, high - 1, 0, 1] + ([-1] if low < 0 else [])
        narrow = (max(low, -100), min(high, 100))
        pool = []
        for _ in range(size):
            pick = rng.random()
            if pick < 0.1:
                pool.append(rng.choice(edges))
            elif pick < 0.5:
                pool.append(rng.randint(*narrow))
            else:
                pool.append(rng.randint(low, high))
        return pool
    if name in ("float32", "float64"):
        return [random_float(rng, name) for _ in range(size)]
    if name == "bool":
        return [rng.random() < 0.5 for _ in range(size)]
    if name == "string":
        prefix = "".join(rng.choice(STRING_PIECES) for _ in range(rng.randint(8, 20)))
        return [random_string(rng, prefix) for _ in range(size)]
    if name in TEMPORAL_TYPES:
        _, most, per_day = TEMPORAL_TYPES[name]
        low = 0 if name.startswith("time") else -most
        edges = [low, most, 0, 1 if per_day is None else per_day]
        values = [rng.choice(edges) if rng.random() < 0.1 else rng.randint(low, most) for _ in range(size)]
        # A date64 is a whole number of days.
        return [value - value % per_day if per_day else value for value in values]
    if name in DECIMAL_TYPES:
        _, precision, scale = DECIMAL_TYPES[name]
        most = 10**precision - 1
        edges = [-most, most, 0, 1, -1, 2**63, -(2**63) - 1, 2**64]
        edges = [value for value in edges if -most <= value <= most]
        values = []
        for _ in range(size):
            pick = rng.random()
            if pick < 0.1:
                values.append(rng.choice(edges))
            elif pick < 0.4:
                values.append(rng.randint(-100, 100))
            elif pick < 0.6:
                bits = rng.randint(1, most.bit_length() - 1)
                values.append(rng.choice([-1, 1]) * rng.getrandbits(bits))
            else:
                values.append(rng.randint(-most, most))
        exact = decimal.Context(prec=100)  # scaleb rounds to the context's 28 digits otherwise
        return [decimal.Decimal(value).scaleb(-scale, context=exact) for value in values]
    unit = name[len("timestamp_"):]
    # Parquet stores seconds as milliseconds: keep those values clear of int64's ends.
    bound = 2**62 // 1000 if unit == "s" else 2**62
    scale = rng.choice([1000, 10**9, bound])
    return [rng.randint(-scale, scale) for _ in range(size)]


def random_column(rng, name, rows, arrow_seed):
    """A column of `rows` values drawn from a pool (uniform or skewed), some of them null."""
    distinct = rng.choice([1, 2, 3, 10, 100, 1000, 20000, 100000])
    distinct = max(1, min(distinct, max(rows, 1)))
    pool = pa.array(value_pool(rng, name, distinct), arrow_type(name))
    if rows == 0:
        return pa.array([], arrow_type(name))
    uniform = pc.random(rows, initializer=arrow_seed)
    if rng.random() < 0.3:
        uniform = pc.power(uniform, rng.choice([2.0, 4.0, 8.0]))  # skew towards the pool's head
    picks = pc.cast(pc.floor(pc.multiply(uniform, float(distinct))), pa.int64())
    picks = pc.min_element_wise(picks, pa.scalar(distinct - 1, pa.int64()))
    values = pool.take(picks)
    null_fraction = rng.choice([0.0, 0.0, 0.0, 0.02, 0.3, 0.9, 0.99, 1.0])
    if null_fraction > 0 and rows > 0:
        mask = pc.less(pc.random(rows, initializer=arrow_seed + 1), null_fraction)
        values = pc.if_else(mask, pa.scalar(None, values.type), values)
    return values


# ---------------------------------------------------------------------------------------------
# The oracle: Arrow's sort over columns derived from the keys


def as_array(column):
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def is_counted(kind):
    """Whether values of `kind` are integer counts of a unit (timestamps, dates, times, durations)."""
    return (
        pa.types.is_timestamp(kind)
        or pa.types.is_date(kind)
        or pa.types.is_time(kind)
        or pa.types.is_duration(kind)
    )


def is_narrow_decimal(kind):
    """Whether `kind` is decimal32 or decimal64, which Arrow does not sort (decimal128 holds it)."""
    return pa.types.is_decimal(kind) and kind.bit_width < 128


def as_counts(column):
    """A column of counted values as the integers it holds."""
    column = as_array(column)
    return column.view(pa.int32() if column.type.bit_width == 32 else pa.int64())


def key_image(column):
    """Columns without nulls whose ascending lexicographic order and equality are the column's
    values' (nulls aside, which the caller places): NaN as a flag above every number, then the
    number with NaN as 0 and -0.0 as 0.0; timestamps as int64."""
    column = as_array(column)
    kind = column.type
    if pa.types.is_floating(kind):
        is_nan = pc.fill_null(pc.is_nan(column), False)
        number = pc.add(pc.if_else(is_nan, pa.scalar(0.0, kind), column), pa.scalar(0.0, kind))
        return [pc.cast(is_nan, pa.int8()), pc.fill_null(number, pa.scalar(0.0, kind))]
    if is_counted(kind):
        return [pc.fill_null(as_counts(column), 0)]
    if pa.types.is_boolean(kind):
        return [pc.cast(pc.fill_null(column, False), pa.int8())]
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return [pc.fill_null(pc.cast(column, pa.large_binary()), b"")]
    if is_narrow_decimal(kind):
        return key_image(pc.cast(column, pa.decimal128(kind.precision, kind.scale)))
    return [pc.fill_null(column, 0)]


def order_columns(table, keys):
    """The derived columns of `keys` ((name, descending, nulls_first) each) and their Arrow sort
    keys: per key, its null flag (positional placement), then its image in the key's direction."""
    names, arrays, sort_keys = [], [], []
    for index, (name, descending, nulls_first) in enumerate(keys):
        column = table.column(name)
        derived = [pc.cast(pc.is_null(as_array(column)), pa.int8())] + key_image(column)
        directions = ["descending" if nulls_first else "ascending"] + (
            ["descending" if descending else "ascending"] * (len(derived) - 1)
        )
        for part, (array, direction) in enumerate(zip(derived, directions)):
            names.append("key%d_%d" % (index, part))
            arrays.append(array)
            sort_keys.append(("key%d_%d" % (index, part), direction))
    return pa.table(arrays, names=names), sort_keys


def oracle_order(table, keys):
    """The row indices of `table` in the order `keys` ask for (ties in any order)."""
    derived, sort_keys = order_columns(table, keys)
    return pc.sort_indices(derived, sort_keys=sort_keys)


def exact_image(column):
    """Columns without nulls equal for two rows exactly when the values are bit for bit equal."""
    column = as_array(column)
    kind = column.type
    valid = pc.cast(pc.is_valid(column), pa.int8())
    if pa.types.is_float32(kind):
        value = column.view(pa.int32())
    elif pa.types.is_float64(kind):
        value = column.view(pa.int64())
    elif is_counted(kind):
        value = as_counts(column)
    elif pa.types.is_boolean(kind):
        value = pc.cast(column, pa.int8())
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        value = pc.cast(column, pa.large_binary())
    elif is_narrow_decimal(kind):
        value = pc.cast(column, pa.decimal128(kind.precision, kind.scale))
    else:
        value = column
    zero = b"" if pa.types.is_large_binary(value.type) else 0
    return [valid, pc.fill_null(value, zero)]


def canonical_rows(table):
    """`table`'s rows as exact images, sorted by every column: equal for equal multisets."""
    arrays, names = [], []
    for column_name in table.column_names:
        for part, array in enumerate(exact_image(table.column(column_name))):
            names.append("%s_%d" % (column_name, part))
            arrays.append(array)
    images = pa.table(arrays, names=names)
    return images.take(pc.sort_indices(images, sort_keys=[(name, "ascending") for name in names]))


def first_difference(left, right):
    """The first row at which two tables of equal shape differ, or None."""
    first = None
    for name in left.column_names:
        differs = pc.fill_null(pc.not_equal(as_array(left.column(name)), as_array(right.column(name))), True)
        at = pc.index(differs, True).as_py()
        if at >= 0 and (first is None or at < first):
            first = at
    return first


# ---------------------------------------------------------------------------------------------
# Cases


def size_text(bytes_):
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if bytes_ % factor == 0:
            return "%d%s" % (bytes_ // factor, unit)
    return str(bytes_)


def by_text(keys, explicit):
    parts = []
    for (name, descending, nulls_first), (say_direction, say_nulls) in zip(keys, explicit):
        text = name
        if say_direction or descending:
            text += ":desc" if descending else ":asc"
        if say_nulls or not nulls_first:
            text += ":nulls_first" if nulls_first else ":nulls_last"
        parts.append(text)
    return ",".join(parts)


class Case:
    """One case: its table (in memory), the Parquet layout and the flags of the sort."""

    def __init__(self, seed, max_rows):
        rng = random.Random(seed)
        self.seed = seed
        size = rng.random()
        if size < 0.06:
            rows = rng.choice([0, 1, 2, 3, 17, 64, 65])
        elif size < 0.25:
            rows = rng.randint(100, 20000)
        elif size < 0.7:
            rows = rng.randint(20000, max(20000, max_rows // 3))
        else:
            rows = rng.randint(max(20000, max_rows // 3), max(20000, max_rows))
        key_count = rng.choice([1, 1, 2, 2, 3])
        payload_count = rng.choice([0, 1, 2, 3])
        columns = {}
        for index in range(key_count):
            columns["k%d" % index] = rng.choice(TYPE_NAMES)
        for index in range(payload_count):
            columns["p%d" % index] = rng.choice(TYPE_NAMES)
        names = list(columns)
        rng.shuffle(names)  # the keys are not always the first columns
        self.types = {name: columns[name] for name in names}
        self.keys = [("k%d" % index, rng.random() < 0.5, rng.random() < 0.5) for index in range(key_count)]
        self.explicit = [(rng.random() < 0.7, rng.random() < 0.7) for _ in range(key_count)]
        arrow_seed = rng.randrange(2**31)
        table = pa.table(
            {name: random_column(rng, kind, rows, arrow_seed + 7 * i) for i, (name, kind) in enumerate(self.types.items())}
        )
        self.arrangement = rng.choice(["random", "random", "random", "sorted", "reversed", "runs"])
        self.table = arrange(table, self.keys, self.arrangement, rng)
        self.row_group_rows = rng.choice([1000, 4096, 10000, 65536, 1 << 20])
        self.files = rng.choice([1, 1, 1, 2, 3])

        if rng.random() < 0.7:  # a device a fraction of the data, so that runs are merged
            device_mib = estimated_bytes(self.table) // (rng.choice([2, 4, 8, 16, 32]) << 20)
            device_mib = max(2, min(device_mib, 64))
        else:
            device_mib = rng.choice([2, 3, 4, 6, 8, 12, 16, 32, 64, 512])
        flags = ["--device-memory", "%dMiB" % device_mib]
        if rng.random() < 0.4:
            flags += ["--batch-size", size_text(rng.choice([16, 64, 128, 256, 1024]) * 1024)]
        self.host_tier = rng.random() < 0.6
        if self.host_tier:
            flags += ["--host-memory", rng.choice(["2MiB", "4MiB", "64MiB", "2GiB"])]
        else:
            flags += ["--host-memory", "1MiB"]  # the least the CLI accepts: spills go to disk
        self.strategy = rng.choice(["merge", "sample", "auto"])
        flags += ["--strategy", self.strategy]
        self.ranks = rng.choice([1, 1, 1, 2])
        if self.ranks > 1:
            flags += ["--ranks", str(self.ranks), "--shuffle-mode", rng.choice(["push", "pull"])]
        if rng.random() < 0.3:
            flags += ["--file-size", size_text(rng.choice([64, 256, 1024, 4096]) * 1024)]
        if rng.random() < 0.3:
            flags += ["--compression", rng.choice(["none", "snappy", "zstd"])]
        if rng.random() < 0.5:  # many tasks on the device, more threads than cores
            flags += ["--threads", str(rng.choice([1, 2, 3, 8, 16])),
                      "--tasks", str(rng.choice([1, 2, 4, 16])),
                      "--device-tasks", str(rng.choice([1, 2, 4]))]
        self.flags = flags

    def describe(self):
        return "%d rows, columns %s, keys %s, arranged %s, %d file(s) of row groups of %d" % (
            self.table.num_rows,
            ", ".join("%s %s" % item for item in self.types.items()),
            by_text(self.keys, self.explicit),
            self.arrangement,
            self.files,
            self.row_group_rows,
        )


def estimated_bytes(table):
    """The bytes `table` takes on spillway's device, about: values, offsets and null masks."""
    total = 0
    for column in table.columns:
        if pa.types.is_string(column.type):
            total += column.nbytes + 4 * len(column)  # 64-bit offsets where Arrow has 32
        else:
            total += len(column) * max(1, column.type.bit_width // 8)
    return total


def arrange(table, keys, arrangement, rng):
    """The table as generated, sorted, sorted the other way, or in sorted runs."""
    if arrangement == "random" or table.num_rows < 2:
        return table
    if arrangement == "sorted":
        return table.take(oracle_order(table, keys))
    if arrangement == "reversed":
        flipped = [(name, not descending, not nulls_first) for name, descending, nulls_first in keys]
        return table.take(oracle_order(table, flipped))
    runs = rng.randint(2, 9)
    step = (table.num_rows + runs - 1) // runs
    pieces = [table.slice(start, step) for start in range(0, table.num_rows, step)]
    return pa.concat_tables([piece.take(oracle_order(piece, keys)) for piece in pieces])


def write_input(table, directory, files, row_group_rows):
    """Writes `table` as Parquet (one file, or a directory of several); returns the path."""
    if files == 1:
        path = os.path.join(directory, "input.parquet")
        pq.write_table(table, path, row_group_size=max(1, row_group_rows))
        return path
    path = os.path.join(directory, "input")
    os.makedirs(path, exist_ok=True)
    step = max(1, (table.num_rows + files - 1) // files)
    for index in range(files):
        piece = table.slice(min(index * step, table.num_rows), step)
        pq.write_table(piece, os.path.join(path, "part-%d.parquet" % index), row_group_size=max(1, row_group_rows))
    return path


def read_input(path):
    if os.path.isdir(path):
        files = sorted(os.path.join(path, name) for name in os.listdir(path) if name.endswith(".parquet"))
        return pa.concat_tables([pq.read_table(name) for name in files])
    return pq.read_table(path)


def read_output(directory, schema):
    """The output files in name order (the order of the sorted rows), cast to the input's types."""
    names = sorted(name for name in os.listdir(directory) if name.endswith(".parquet"))
    tables = [pq.read_table(os.path.join(directory, name)) for name in names]
    if not tables:
        return schema.empty_table(), names
    if any(table.column_names != schema.names for table in tables):
        raise AssertionError("output columns %s, input columns %s" % (tables[0].column_names, schema.names))
    return pa.concat_tables([table.cast(schema) for table in tables]), names


def spillway_exe():
    exe = os.environ.get("SPILLWAY_EXE", "")
    if not exe:
        guess = os.path.join(os.path.dirname(__file__), "..", "..", "build", "release", "apps", "spillway")
        exe = guess if os.path.exists(guess) else ""
    if not exe or not os.access(exe, os.X_OK):
        pytest.skip("no spillway program (set SPILLWAY_EXE)")
    return os.path.abspath(exe)


def plain(column):
    """`column` with counted values as their integers (Python's datetime holds few of them)."""
    return as_counts(column) if is_counted(column.type) else column


def row_text(table, row):
    return "{%s}" % ", ".join("%s: %r" % (name, plain(table.column(name))[row].as_py()) for name in table.column_names)


def check_sort(work, table, keys, by, flags, files, row_group_rows):
    """Writes `table`, sorts it with `flags` and checks the output. Returns (problem or None,
    command, summary)."""
    input_path = write_input(table, work, files, row_group_rows)
    output = os.path.join(work, "output")
    spill = os.path.join(work, "spill")
    os.makedirs(spill, exist_ok=True)
    shutil.rmtree(output, ignore_errors=True)
    command = [spillway_exe(), "sort", input_path, "-o", output, "--by", by, "--spill-dir", spill, "--json"] + flags
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return "spillway sort did not finish within %d s" % RUN_TIMEOUT_S, command, {}
    if done.returncode != 0:
        return "spillway sort exited %d: %s" % (done.returncode, done.stderr.strip()[-2000:]), command, {}
    try:
        summary = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        summary = {}
    expected_input = read_input(input_path)  # as spillway reads it (Parquet stores seconds as ms)
    try:
        got, output_files = read_output(output, expected_input.schema)
    except (AssertionError, pa.ArrowInvalid) as failure:
        return "unreadable output: %s" % failure, command, summary
    if got.num_rows != expected_input.num_rows:
        return (
            "output has %d rows, input %d (output files %s)" % (got.num_rows, expected_input.num_rows, output_files),
            command,
            summary,
        )
    # (1) the keys, row by row, against Arrow's order of the input
    expected = expected_input.take(oracle_order(expected_input, keys))
    got_keys, _ = order_columns(got, keys)
    expected_keys, _ = order_columns(expected, keys)
    row = first_difference(got_keys, expected_keys)
    if row is not None:
        key_names = [name for name, _, _ in keys]
        context = "".join(
            "\n    row %d: output %s, expected %s"
            % (at, row_text(got.select(key_names), at), row_text(expected.select(key_names), at))
            for at in range(max(0, row - 2), min(got.num_rows, row + 3))
        )
        return (
            "output out of order at row %d of %d (output files %s):%s" % (row, got.num_rows, output_files, context),
            command,
            summary,
        )
    # (2) the same multiset of rows, bit for bit
    if not canonical_rows(got).equals(canonical_rows(expected_input)):
        lost = first_difference(canonical_rows(got), canonical_rows(expected_input))
        return "output rows differ from the input's (first difference at canonical row %s)" % lost, command, summary
    return None, command, summary


def run_case(seed, max_rows):
    """Runs one case; returns (failure message or None, summary of the run)."""
    case = Case(seed, max_rows)
    parent = os.environ.get("SPILLWAY_SORT_TMP") or None
    work = tempfile.mkdtemp(prefix="spillway-sort-%d-" % seed, dir=parent)
    by = by_text(case.keys, case.explicit)
    problem, command, summary = check_sort(work, case.table, case.keys, by, case.flags, case.files, case.row_group_rows)
    if problem is None:
        shutil.rmtree(work, ignore_errors=True)
        return None, summary
    message = [
        "spillway sort property case seed %d failed: %s" % (seed, problem),
        "  case: %s" % case.describe(),
        "  reproduce: %s" % shlex.join(command),
        "  rerun this case: SPILLWAY_EXE=%s SPILLWAY_SORT_SEED=%d SPILLWAY_SORT_CASES=1 SPILLWAY_SORT_MAX_ROWS=%d "
        "python3 -m pytest -q %s -k fast" % (shlex.quote(spillway_exe()), seed, max_rows, THIS_FILE),
        "  kept: %s" % work,
    ]
    if MINIMIZE:
        message += minimize(case, work)
    return "\n".join(message), summary


def minimize(case, work):
    """Shrinks a failing case: columns, keys, rows and flags, as long as it still fails."""
    deadline = time.monotonic() + 300
    table, keys, explicit, flags = case.table, list(case.keys), list(case.explicit), list(case.flags)
    files, row_group_rows = case.files, case.row_group_rows
    scratch = os.path.join(work, "minimize")

    def fails(candidate_table, candidate_keys, candidate_explicit, candidate_flags, candidate_files):
        shutil.rmtree(scratch, ignore_errors=True)
        os.makedirs(scratch)
        by = by_text(candidate_keys, candidate_explicit)
        problem, _, _ = check_sort(
            scratch, candidate_table, candidate_keys, by, candidate_flags, candidate_files, row_group_rows
        )
        return problem is not None

    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for name in list(table.column_names):  # payload columns, then keys
            if time.monotonic() >= deadline:
                break
            key_index = next((i for i, key in enumerate(keys) if key[0] == name), None)
            if key_index is not None and len(keys) == 1:
                continue
            smaller_keys = [key for i, key in enumerate(keys) if i != key_index]
            smaller_explicit = [item for i, item in enumerate(explicit) if i != key_index]
            if fails(table.drop_columns([name]), smaller_keys, smaller_explicit, flags, files):
                table, keys, explicit, changed = table.drop_columns([name]), smaller_keys, smaller_explicit, True
        for start_fraction in (0, 0.5):  # halves of the rows
            if time.monotonic() >= deadline or table.num_rows < 2:
                break
            half = table.slice(int(table.num_rows * start_fraction), (table.num_rows + 1) // 2)
            if fails(half, keys, explicit, flags, files):
                table, changed = half, True
                break
        if files > 1 and time.monotonic() < deadline and fails(table, keys, explicit, flags, 1):
            files, changed = 1, True
        for position in range(len(flags) - 1, -1, -1):  # flags with their values, defaults back
            if time.monotonic() >= deadline:
                break
            if not flags[position].startswith("--") or flags[position] == "--device-memory":
                continue
            end = position + 2 if position + 1 < len(flags) and not flags[position + 1].startswith("--") else position + 1
            fewer = flags[:position] + flags[end:]
            if fails(table, keys, explicit, fewer, files):
                flags, changed = fewer, True
    final = os.path.join(work, "minimal")
    shutil.rmtree(final, ignore_errors=True)
    os.makedirs(final)
    by = by_text(keys, explicit)
    problem, command, _ = check_sort(final, table, keys, by, flags, files, row_group_rows)
    if problem is None:
        return ["  minimized: (the shrunk case passed when rerun; flaky)"]
    shutil.rmtree(scratch, ignore_errors=True)
    return [
        "  minimized: %d rows, columns %s: %s"
        % (table.num_rows, ", ".join("%s %s" % (name, case.types[name]) for name in table.column_names), problem),
        "  minimized reproduce: %s" % shlex.join(command),
    ]


# ---------------------------------------------------------------------------------------------
# Tests


def python_order(table, keys):
    """The oracle's reference: a plain Python sort with the documented comparisons."""
    columns = {name: plain(table.column(name)).to_pylist() for name, _, _ in keys}
    kinds = {name: table.column(name).type for name, _, _ in keys}

    def compare_values(kind, left, right):
        if pa.types.is_floating(kind):
            left_nan, right_nan = math.isnan(left), math.isnan(right)
            if left_nan or right_nan:
                return int(left_nan) - int(right_nan)
        if pa.types.is_string(kind):
            left, right = left.encode(), right.encode()
        return (left > right) - (left < right)

    def compare_rows(left, right):
        for name, descending, nulls_first in keys:
            a, b = columns[name][left], columns[name][right]
            if a is None or b is None:
                if a is None and b is None:
                    continue
                return (-1 if a is None else 1) * (1 if nulls_first else -1)
            result = compare_values(kinds[name], a, b)
            if result != 0:
                return -result if descending else result
        return 0

    return sorted(range(table.num_rows), key=functools.cmp_to_key(compare_rows))


def test_oracle_matches_python_sort():
    """Arrow's order over the derived columns is the documented order of a plain Python sort."""
    rng = random.Random(BASE_SEED)
    for trial in range(150):
        rows = rng.randint(0, 300)
        key_count = rng.randint(1, 3)
        types = [rng.choice(TYPE_NAMES) for _ in range(key_count)]
        table = pa.table({"k%d" % i: random_column(rng, kind, rows, rng.randrange(2**31)) for i, kind in enumerate(types)})
        keys = [("k%d" % i, rng.random() < 0.5, rng.random() < 0.5) for i in range(key_count)]
        by_arrow = order_columns(table.take(oracle_order(table, keys)), keys)[0]
        by_python = order_columns(table.take(pa.array(python_order(table, keys), pa.int64())), keys)[0]
        assert by_arrow.equals(by_python), "trial %d: keys %s of types %s" % (trial, keys, types)
    # and the multiset check sees a changed bit
    floats = pa.table({"x": pa.array([0.0, math.nan], pa.float64())})
    assert not canonical_rows(floats).equals(canonical_rows(pa.table({"x": pa.array([-0.0, math.nan])})))


@pytest.mark.parametrize("index", range(FAST_CASES), ids=lambda index: "seed=%d" % (BASE_SEED + index))
def test_fast_sort_case(index):
    """One case of the fast slice (seed = SPILLWAY_SORT_SEED + index)."""
    failure, summary = run_case(BASE_SEED + index, FAST_MAX_ROWS)
    COVERAGE.append(summary)
    if failure:
        pytest.fail(failure, pytrace=False)


COVERAGE = []


def test_fast_slice_merges():
    """The fast slice reaches the out-of-core paths: several input batches and merge rounds."""
    if FAST_CASES < 20:
        pytest.skip("too few cases to judge coverage")
    single = [summary for summary in COVERAGE if "input_batches" in summary]
    if len(single) < 10:
        pytest.skip("too few one-rank cases ran")
    batched = sum(1 for summary in single if summary["input_batches"] > 1)
    merged = sum(1 for summary in single if summary["rounds"] > 1)
    assert batched >= len(single) // 2, "only %d of %d one-rank cases read several batches" % (batched, len(single))
    assert merged >= len(single) // 4, "only %d of %d one-rank cases merged" % (merged, len(single))


@pytest.mark.skipif(SOAK_SECONDS <= 0, reason="set SPILLWAY_SORT_SOAK_SECONDS to soak")
def test_soak():
    """Runs cases from SOAK_SEED on for SPILLWAY_SORT_SOAK_SECONDS, then reports every failure."""
    deadline = time.monotonic() + SOAK_SECONDS
    failures, cases = [], 0
    print("\nspillway sort soak: base seed %d for %.0f s" % (SOAK_SEED, SOAK_SECONDS), flush=True)
    while time.monotonic() < deadline:
        failure, _ = run_case(SOAK_SEED + cases, SOAK_MAX_ROWS)
        cases += 1
        if failure:
            failures.append(failure)
            print(failure, flush=True)
    summary = "%d of %d soak cases failed (base seed %d)" % (len(failures), cases, SOAK_SEED)
    print(summary)
    if failures:
        pytest.fail(summary + "\n\n" + "\n\n".join(failures[:20]), pytrace=False)


if __name__ == "__main__":
    # CTest runs this file: 77 (skipped) without pytest or pyarrow.
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        print("pyarrow is missing: spillway sort property test skipped")
        sys.exit(77)
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__] + sys.argv[1:]))
