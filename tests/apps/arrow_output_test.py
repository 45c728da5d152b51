"""`spillway sort` and `spillway shuffle` with `--output-format arrow`: the columns that neither
Parquet nor CSV can hold, written as Arrow IPC files.

An Arrow IPC file made by pyarrow with a month_day_nano_interval column, a
dictionary<list<int32>> and a dictionary<struct<...>> column (nulls as rows, as dictionary values,
as list elements, as structs and as struct fields), a scalar key and a string with nulls, field
and schema metadata:

- sorted on a small device so that it spills, by the scalar key, by each dictionary column and by
  the interval, into `part-*.arrow` files of at most about `--file-size`; the row order compared
  with DuckDB's ORDER BY of the same rows, dictionaries decoded by pyarrow first (DuckDB cannot
  read a dictionary of structs), a unique id as the last key so that the order is one; every
  row's values compared with the input's row of that id, and every file's schema with the
  input's (dictionary index and value types, interval type, nullability, metadata);
- shuffled by each dictionary column: every row in exactly one `partition-*.arrow` file, equal
  keys in one partition, the schema kept.

Environment: SPILLWAY_EXE, the `spillway` program (CTest passes the built one). Exits 77 (skip)
without pyarrow, duckdb or pytest.
"""

import glob
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import duckdb
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pytest
except ImportError:  # pragma: no cover
    print("pyarrow, duckdb or pytest is missing: Arrow output test skipped")
    sys.exit(77)

ROWS = 20000
RUN_TIMEOUT_S = 240


def spillway_exe():
    exe = os.environ.get("SPILLWAY_EXE")
    if not exe:
        guess = os.path.join(os.path.dirname(__file__), "..", "..", "build", "release", "apps", "spillway")
        exe = guess if os.path.exists(guess) else None
    if not exe:
        pytest.skip("no spillway program (set SPILLWAY_EXE)")
    return exe


def run(*args):
    done = subprocess.run([spillway_exe(), *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, "spillway %s exited %d: %s" % (args[0], done.returncode, done.stderr[-3000:])
    return done


def maybe(rng, make, nulls=0.1):
    return None if rng.random() < nulls else make()


def input_table(seed):
    rng = random.Random(seed)
    # Intervals of non-negative parts, fewer than 30 days, less than a day of whole microseconds:
    # DuckDB's INTERVAL order (months, days, micros normalized) is then their length's, as
    # spillway orders them, and intervals of one length are equal (spillway orders `30 days`
    # after `1 month`, DuckDB ties them).
    iv = pa.array(
        [maybe(rng, lambda: pa.MonthDayNano([rng.randint(0, 2), rng.choice([0, 1, 15, 29]),
                                             rng.randint(0, 3) * 3600 * 10**9 + rng.randint(0, 5) * 1000]))
         for _ in range(ROWS)],
        pa.month_day_nano_interval(),
    )
    # A dictionary of lists: a null value, an empty list, null elements, a prefix of another.
    list_values = pa.array([[1, 2], None, [None, 3], [], [1], [1, 2, None], [-5], [3, None]], pa.list_(pa.int32()))
    dl = pa.DictionaryArray.from_arrays(
        pa.array([maybe(rng, lambda: rng.randrange(len(list_values)), 0.05) for _ in range(ROWS)], pa.int32()),
        list_values,
    )
    # A dictionary of structs: a null value, null fields.
    point = pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string())])
    struct_values = pa.array(
        [{"a": 1, "b": "x"}, None, {"a": None, "b": "y"}, {"a": 1, "b": None}, {"a": -2, "b": ""},
         {"a": 1, "b": "xa"}, {"a": None, "b": None}],
        point,
    )
    ds = pa.DictionaryArray.from_arrays(
        pa.array([maybe(rng, lambda: rng.randrange(len(struct_values)), 0.05) for _ in range(ROWS)], pa.int8()),
        struct_values,
    )
    columns = {
        "k": pa.array([maybe(rng, lambda: rng.randint(-50, 50)) for _ in range(ROWS)], pa.int32()),
        "iv": iv,
        "dl": dl,
        "ds": ds,
        "s": pa.array([maybe(rng, lambda: rng.choice(["", "a", "ab", "\u00e9t\u00e9"])) for _ in range(ROWS)],
                      pa.string()),
        "id": pa.array(range(ROWS), pa.int64()),
    }
    schema = pa.schema(
        [pa.field(name, array.type) for name, array in columns.items() if name not in ("ds", "id")]
        + [pa.field("ds", ds.type, metadata={"note": "points"}), pa.field("id", pa.int64(), nullable=False)],
        metadata={"origin": "arrow_output_test"},
    )
    return pa.table([columns[field.name] for field in schema], schema=schema)


def write_input(table, directory):
    os.makedirs(directory)
    path = os.path.join(directory, "in.arrow")
    with ipc.new_file(path, table.schema) as writer:
        writer.write_table(table, max_chunksize=4000)
    return path


def read_file(path):
    with ipc.open_file(path) as reader:
        return reader.read_all()


def output_files(directory, pattern):
    """The dataset files of `directory`, in name order, each named as `pattern` says; nothing else
    visible (no Parquet file, no temporary)."""
    names = sorted(name for name in os.listdir(directory) if not name.startswith("."))
    assert names, "no output in %s" % directory
    for name in names:
        assert re.fullmatch(pattern, name), "%s in %s" % (name, names)
    return [os.path.join(directory, name) for name in names]


def decoded(table):
    """`table` with every dictionary column decoded to its values (pyarrow's own decoding)."""
    columns = []
    for column in table.columns:
        if pa.types.is_dictionary(column.type):
            column = pa.chunked_array([chunk.dictionary_decode() for chunk in column.chunks], column.type.value_type)
        columns.append(column)
    return pa.table(columns, names=table.column_names)


def duckdb_ids(table, order_by):
    """The ids of `table`'s rows in DuckDB's ORDER BY `order_by`."""
    connection = duckdb.connect()
    connection.register("arrow_input", decoded(table))
    return [row[0] for row in connection.execute("SELECT id FROM arrow_input ORDER BY " + order_by).fetchall()]


@pytest.fixture
def work():
    directory = tempfile.mkdtemp(prefix="spillway-arrow-output-")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


SORTS = [
    ("k:asc:nulls_first,id", "k ASC NULLS FIRST, id"),
    ("k:desc:nulls_last,s:asc:nulls_first,id", "k DESC NULLS LAST, s ASC NULLS FIRST, id"),
    ("dl:asc:nulls_first,id", "dl ASC NULLS FIRST, id"),
    ("dl:desc:nulls_last,ds:asc:nulls_first,id", "dl DESC NULLS LAST, ds ASC NULLS FIRST, id"),
    ("ds:desc:nulls_first,iv:asc:nulls_last,id", "ds DESC NULLS FIRST, iv ASC NULLS LAST, id"),
    ("iv:desc:nulls_first,id", "iv DESC NULLS FIRST, id"),
]


@pytest.mark.parametrize("sort", range(len(SORTS)))
def test_sort_writes_intervals_and_dictionaries_of_nested_values_as_arrow_ipc(work, sort):
    by, order_by = SORTS[sort]
    table = input_table(23 + sort)
    source = write_input(table, os.path.join(work, "in"))
    output = os.path.join(work, "out")
    run(
        "sort", source, "-o", output, "--by", by, "--output-format", "arrow", "--file-size", "64KiB",
        "--device-memory", "2MiB", "--host-memory", "1MiB", "--batch-size", "128KiB", "--spill-dir", work,
    )
    files = output_files(output, r"part-\d{5}\.arrow")
    assert len(files) > 1, files  # split by --file-size
    for path in files:
        schema = read_file(path).schema
        assert schema.equals(table.schema, check_metadata=True), "%s\nand not\n%s" % (schema, table.schema)
    result = pa.concat_tables([read_file(path) for path in files])
    got = result.column("id").to_pylist()
    want = duckdb_ids(table, order_by)
    assert len(got) == len(want) == ROWS
    rows = table.to_pylist()
    for index, (a, b) in enumerate(zip(got, want)):
        if a != b:
            raise AssertionError("row %d: id %d (%r) and not id %d (%r), DuckDB's" % (index, a, rows[a], b, rows[b]))
    for index, row in enumerate(result.to_pylist()):
        assert row == rows[row["id"]], "row %d: %r and not %r" % (index, row, rows[row["id"]])


@pytest.mark.parametrize("key", ["dl", "ds"])
def test_shuffle_writes_every_row_once_with_equal_keys_together_as_arrow_ipc(work, key):
    table = input_table(7)
    source = write_input(table, os.path.join(work, "in"))
    output = os.path.join(work, "out")
    run("shuffle", source, "-o", output, "--by", key, "--partitions", "4", "--device-memory", "4MiB",
        "--output-format", "arrow")
    files = output_files(output, r"partition-\d{5}-\d{5}\.arrow")
    rows = table.to_pylist()
    seen_ids = []
    partitions_of = {}
    for path in files:
        part = read_file(path)
        assert part.schema.equals(table.schema, check_metadata=True), "%s\nand not\n%s" % (part.schema, table.schema)
        partition = os.path.basename(path).split("-")[1]
        for row in part.to_pylist():
            assert row == rows[row["id"]], "%s: %r and not %r" % (path, row, rows[row["id"]])
            seen_ids.append(row["id"])
            partitions_of.setdefault(repr(row[key]), set()).add(partition)
    assert sorted(seen_ids) == list(range(ROWS))
    # Every value of the dictionary (and null) is there, each in one partition.
    assert len(partitions_of) >= 7, partitions_of.keys()
    assert all(len(where) == 1 for where in partitions_of.values()), partitions_of
    assert len(set.union(*partitions_of.values())) > 1


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
