"""`spillway sort` and `spillway shuffle` on list, large_list, list_view, fixed_size_list, struct,
map and null columns, and dictionaries inside them.

Parquet and Arrow IPC files made by pyarrow with nested columns (nulls at the top, in elements,
in struct fields and in map items, nested three deep) and a null-type column:

- sorted on a small device so that it spills, by nested keys in both directions with nulls first
  and last, the output's row order compared with DuckDB's ORDER BY of the same file (a unique id
  as the last key, so that the order is one), and its values and Arrow schema with the input's;
- shuffled by a nested key: every row kept, the schema kept, each key value in one partition;
- sorted by lists and structs of dictionaries (by value) and by list views likewise, the schema
  (dictionaries, list views) kept;
- refused for CSV output before any file is made; an interval column refused for Parquet.

Environment: SPILLWAY_EXE, the `spillway` program (CTest passes the built one). Exits 77 (skip)
without pyarrow, duckdb or pytest.
"""

import glob
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

try:
    import duckdb
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq
    import pytest
except ImportError:  # pragma: no cover
    print("pyarrow, duckdb or pytest is missing: nested types test skipped")
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


def run(*args, expect_ok=True):
    done = subprocess.run([spillway_exe(), *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if expect_ok:
        assert done.returncode == 0, "spillway %s exited %d: %s" % (args[0], done.returncode, done.stderr[-3000:])
    return done


def maybe(rng, make, nulls=0.1):
    return None if rng.random() < nulls else make()


def input_table(seed):
    rng = random.Random(seed)
    words = ["", "a", "a\x00", "ab", "b", "\u00e9t\u00e9"]

    def small_list(make, most=3):
        return [maybe(rng, make) for _ in range(rng.randint(0, most))]

    def number():
        return rng.randint(-2, 2)

    def real():
        # No -0.0: DuckDB ties it with 0.0 and then orders by the next key, spillway by its sign.
        return rng.choice([-1.5, 0.0, 0.25, 2.0, float("inf"), float("nan")])

    point = pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string()), pa.field("c", pa.list_(pa.float64()))])
    inner = pa.struct([pa.field("x", pa.int8()), pa.field("y", pa.list_(pa.string()))])
    columns = {
        "l": pa.array([maybe(rng, lambda: small_list(number)) for _ in range(ROWS)], pa.list_(pa.int64())),
        "s": pa.array(
            [
                maybe(rng, lambda: {"a": maybe(rng, number), "b": maybe(rng, lambda: rng.choice(words)),
                                    "c": maybe(rng, lambda: small_list(real, 2))})
                for _ in range(ROWS)
            ],
            point,
        ),
        "m": pa.array(
            [
                maybe(rng, lambda: [(key, maybe(rng, number)) for key in rng.sample(["k", "j", "kk"], rng.randint(0, 2))])
                for _ in range(ROWS)
            ],
            pa.map_(pa.string(), pa.int32()),
        ),
        "ll": pa.array([maybe(rng, lambda: small_list(lambda: rng.choice(words))) for _ in range(ROWS)],
                       pa.large_list(pa.large_string())),
        "fl": pa.array([maybe(rng, lambda: [maybe(rng, number) for _ in range(2)]) for _ in range(ROWS)],
                       pa.list_(pa.int16(), 2)),
        "ls": pa.array(
            [
                maybe(rng, lambda: small_list(lambda: {"x": maybe(rng, number),
                                                       "y": maybe(rng, lambda: small_list(lambda: rng.choice(words), 2))}, 2))
                for _ in range(ROWS)
            ],
            pa.list_(inner),
        ),
        "n": pa.nulls(ROWS),
        "id": pa.array(range(ROWS), pa.int64()),
    }
    schema = pa.schema(
        [pa.field(name, array.type) for name, array in columns.items() if name not in ("id", "fl")]
        + [pa.field("fl", columns["fl"].type, metadata={"note": "pairs"}),
           pa.field("id", pa.int64(), nullable=False)],
        metadata={"origin": "nested_types_test"},
    )
    return pa.table([columns[field.name] for field in schema], schema=schema)


def write_input(table, directory, kind):
    os.makedirs(directory)
    if kind == "parquet":
        path = os.path.join(directory, "in.parquet")
        pq.write_table(table, path, row_group_size=4000)
        return path
    path = os.path.join(directory, "in.arrow")
    with ipc.new_file(path, table.schema) as writer:
        writer.write_table(table, max_chunksize=4000)
    return path


def read_file(path):
    if path.endswith(".parquet"):
        return pq.read_table(path)
    with ipc.open_file(path) as reader:
        return reader.read_all()


def expected_schema(source):
    """The Arrow schema of `source` as Parquet holds it (a list's items named "element", as the
    Parquet format has them, where an Arrow IPC file may say "item"): what pyarrow writes."""
    table = read_file(source)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return pq.read_schema(pa.BufferReader(sink.getvalue()))


def read_output(directory):
    files = sorted(glob.glob(os.path.join(directory, "**", "*.parquet"), recursive=True))
    assert files, "no output in %s" % directory
    return files, pa.concat_tables([pq.read_table(f) for f in files])


def spilled_bytes(done):
    spilled = json.loads(done.stdout.strip().splitlines()[-1])["spilled"]
    return spilled["device_to_host"]["bytes"] + spilled["device_to_disk"]["bytes"]


def duckdb_ids(source, order_by):
    """The ids of `source`'s rows in DuckDB's ORDER BY `order_by`."""
    connection = duckdb.connect()
    connection.register("nested_input", read_file(source))
    return [row[0] for row in connection.execute("SELECT id FROM nested_input ORDER BY " + order_by).fetchall()]


def same_values(got, want):
    """Whether two tables hold the same rows, NaNs equal (by id)."""
    got = got.sort_by("id")
    want = want.sort_by("id")
    if got.equals(want):
        return True
    # NaN != NaN for Table.equals: compare the Python values, NaN as a string.
    def plain(value):
        if isinstance(value, float) and value != value:
            return "nan"
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value
    return plain(got.to_pylist()) == plain(want.to_pylist())


@pytest.fixture
def work():
    directory = tempfile.mkdtemp(prefix="spillway-nested-")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


SORTS = [
    ("l:asc:nulls_first,s:desc:nulls_last,id", "l ASC NULLS FIRST, s DESC NULLS LAST, id"),
    ("m:desc:nulls_first,ls:asc:nulls_last,fl:desc:nulls_last,ll:asc:nulls_first,id",
     "m DESC NULLS FIRST, ls ASC NULLS LAST, fl DESC NULLS LAST, ll ASC NULLS FIRST, id"),
    ("n,s:asc:nulls_first,ll:desc:nulls_first,id", "n, s ASC NULLS FIRST, ll DESC NULLS FIRST, id"),
]


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
@pytest.mark.parametrize("sort", range(len(SORTS)))
def test_sort_by_nested_keys_orders_as_duckdb_and_keeps_values_and_schema(work, kind, sort):
    by, order_by = SORTS[sort]
    table = input_table(17 + sort)
    source = write_input(table, os.path.join(work, "in"), kind)
    output = os.path.join(work, "out")
    done = run(
        "sort", source, "-o", output, "--by", by,
        "--device-memory", "2MiB", "--host-memory", "1MiB", "--batch-size", "256KiB",
        "--spill-dir", work, "--json",
    )
    assert spilled_bytes(done) > 0, done.stdout
    files, result = read_output(output)
    want_schema = expected_schema(source)
    for path in files:
        schema = pq.read_schema(path)
        assert schema.equals(want_schema, check_metadata=True), "%s\nand not\n%s" % (schema, want_schema)
    got = result.column("id").to_pylist()
    want = duckdb_ids(source, order_by)
    assert len(got) == len(want) == ROWS
    for index, (a, b) in enumerate(zip(got, want)):
        if a != b:
            rows = {row["id"]: row for row in table.to_pylist() if row["id"] in (a, b)}
            raise AssertionError("row %d: id %d (%r) and not id %d (%r), DuckDB's" % (index, a, rows[a], b, rows[b]))
    assert same_values(result, table)


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
def test_shuffle_by_a_nested_key_keeps_rows_and_schema(work, kind):
    table = input_table(5)
    source = write_input(table, os.path.join(work, "in"), kind)
    output = os.path.join(work, "out")
    run("shuffle", source, "-o", output, "--by", "ls", "--partitions", "4", "--device-memory", "4MiB")
    files, result = read_output(output)
    want_schema = expected_schema(source)
    seen = {}
    for path in files:
        schema = pq.read_schema(path)
        assert schema.equals(want_schema, check_metadata=True), "%s\nand not\n%s" % (schema, want_schema)
        part = pq.read_table(path)
        for value in part.column("ls").to_pylist():
            seen.setdefault(repr(value), set()).add(os.path.basename(path).split("-")[1])
    assert sorted(result.column("id").to_pylist()) == list(range(ROWS))
    assert same_values(result, table)
    # A value goes to one partition, whichever file of it holds it; there are many values.
    assert len(seen) > 100
    assert all(len(where) == 1 for where in seen.values()), [v for v, w in seen.items() if len(w) > 1][:5]


def test_csv_output_of_a_nested_column_is_refused_before_any_file(work):
    source = write_input(input_table(3), os.path.join(work, "in"), "parquet")
    output = os.path.join(work, "out")
    done = run("sort", source, "-o", output, "--by", "id", "--output-format", "csv", expect_ok=False)
    assert done.returncode != 0
    assert "which CSV cannot hold; write it as Parquet or Arrow IPC" in done.stderr, done.stderr
    assert "column 'l' is list<" in done.stderr, done.stderr
    assert not glob.glob(os.path.join(output, "**", "*.*"), recursive=True)


def dictionary_table(seed):
    """Dictionaries inside nested types (nulls as list, element, struct and field), and a list
    view, with an id."""
    rng = random.Random(seed)
    words = ["", "a", "a\x00", "ab", "b", "\u00e9t\u00e9", "zz"]
    lists = [maybe(rng, lambda: [maybe(rng, lambda: rng.choice(words)) for _ in range(rng.randint(0, 3))])
             for _ in range(ROWS)]
    plain = pa.array(lists, pa.list_(pa.string()))
    offsets = pa.array([0 if o is None else o.as_py() for o in plain.offsets], pa.int32())
    ld = pa.ListArray.from_arrays(offsets, plain.values.dictionary_encode(), mask=plain.is_null())
    names = pa.array([maybe(rng, lambda: rng.choice(words)) for _ in range(ROWS)]).dictionary_encode()
    names = names.cast(pa.dictionary(pa.int16(), pa.string()))
    numbers = pa.array([maybe(rng, lambda: rng.randint(-2, 2)) for _ in range(ROWS)], pa.int32())
    sd = pa.StructArray.from_arrays([names, numbers], names=["a", "b"],
                                    mask=pa.array([rng.random() < 0.1 for _ in range(ROWS)]))
    lv = pa.array([maybe(rng, lambda: [maybe(rng, lambda: rng.randint(-2, 2)) for _ in range(rng.randint(0, 3))])
                   for _ in range(ROWS)], pa.list_view(pa.int64()))
    return pa.table({"ld": ld, "sd": sd, "lv": lv, "id": pa.array(range(ROWS), pa.int64())})


DICTIONARY_SORTS = [
    ("ld:asc:nulls_first,id", "ld ASC NULLS FIRST, id"),
    ("ld:desc:nulls_last,id", "ld DESC NULLS LAST, id"),
    ("sd:desc:nulls_first,ld:asc:nulls_last,id", "sd DESC NULLS FIRST, ld ASC NULLS LAST, id"),
    ("lv:asc:nulls_last,sd:asc:nulls_first,id", "lv ASC NULLS LAST, sd ASC NULLS FIRST, id"),
    ("lv:desc:nulls_first,id", "lv DESC NULLS FIRST, id"),
]


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
@pytest.mark.parametrize("sort", range(len(DICTIONARY_SORTS)))
def test_sort_by_dictionaries_inside_nested_keys_and_list_views_as_duckdb(work, kind, sort):
    by, order_by = DICTIONARY_SORTS[sort]
    table = dictionary_table(41 + sort)
    source = write_input(table, os.path.join(work, "in"), kind)
    output = os.path.join(work, "out")
    # Sorted in runs and merged (a small device), the dictionaries of each batch written as such.
    run(
        "sort", source, "-o", output, "--by", by,
        "--device-memory", "2MiB", "--host-memory", "1MiB", "--batch-size", "128KiB",
        "--spill-dir", work,
    )
    files, result = read_output(output)
    want_schema = expected_schema(source)
    assert str(want_schema.field("ld").type) == "list<element: dictionary<values=string, indices=int32, ordered=0>>"
    assert str(want_schema.field("lv").type) == "list_view<element: int64>"
    for path in files:
        schema = pq.read_schema(path)
        assert schema.equals(want_schema, check_metadata=True), "%s\nand not\n%s" % (schema, want_schema)
    got = result.column("id").to_pylist()
    want = duckdb_ids(source, order_by)
    assert len(got) == len(want) == ROWS
    for index, (a, b) in enumerate(zip(got, want)):
        if a != b:
            rows = {row["id"]: row for row in table.to_pylist() if row["id"] in (a, b)}
            raise AssertionError("row %d: id %d (%r) and not id %d (%r), DuckDB's" % (index, a, rows[a], b, rows[b]))
    assert same_values(result, table)


def test_parquet_output_of_an_interval_column_is_refused_by_name(work):
    # Intervals have no Parquet type; spillway's Parquet output says so.
    rng = random.Random(9)
    table = pa.table({
        "i": pa.array([pa.MonthDayNano([rng.randint(-3, 3), rng.randint(-40, 40), rng.randint(-10**12, 10**12)])
                       for _ in range(100)], pa.month_day_nano_interval()),
        "id": pa.array(range(100), pa.int64()),
    })
    source = write_input(table, os.path.join(work, "in"), "arrow")
    output = os.path.join(work, "out")
    done = run("sort", source, "-o", output, "--by", "i", expect_ok=False)
    assert done.returncode != 0
    assert "column 'i' is month_day_nano_interval, which Parquet cannot hold" in done.stderr, done.stderr
    assert not glob.glob(os.path.join(output, "**", "*.parquet"), recursive=True)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
