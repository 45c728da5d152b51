"""`spillway sort` and `spillway shuffle` on binary, large, view and dictionary columns.

Parquet and Arrow IPC files made by pyarrow with binary, large_binary, fixed_size_binary,
large_string, string_view, binary_view and dictionary<string> columns (keys and payload, with
nulls), a non-nullable column with field metadata and schema metadata:

- sorted on a small device so that it spills, the output compared row by row with the input
  sorted in Python (bytes compare unsigned, a prefix first; a dictionary by its values);
- the output's Arrow schema equal to the input's (types, nullability, field and schema metadata)
  after sort and after shuffle, and the shuffle's partitions split by value (each key value in
  one partition);
- TPC-H lineitem from `tpchgen-cli` (string_view columns, PARQUET:field_id metadata, non-null
  fields; its decimals cast to float64 first) sorted by its string_view columns.

Environment: SPILLWAY_EXE, the `spillway` program (CTest passes the built one). Exits 77 (skip)
without pyarrow or pytest.
"""

import functools
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

try:
    import pyarrow as pa
    import pyarrow.compute  # noqa: F401 (pa.compute)
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq
    import pytest
except ImportError:  # pragma: no cover
    print("pyarrow or pytest is missing: binary types test skipped")
    sys.exit(77)

ROWS = 40000
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


def random_bytes(rng, most):
    # Zero bytes and bytes above 0x7F: they order unsigned, after 0x7F.
    return bytes(rng.choice((0x00, 0x01, 0x41, 0x7F, 0x80, 0xFF)) for _ in range(rng.randint(0, most)))


def maybe(rng, value, nulls=0.1):
    return None if rng.random() < nulls else value


def input_table(seed):
    rng = random.Random(seed)
    words = ["delta", "alpha", "charlie", "bravo", "alphabet", "", "\u00e9t\u00e9"]
    columns = {
        # Keys: a dictionary of strings and views of bytes (longer than a view's inline 12 bytes
        # now and then), with nulls.
        "d": pa.array([maybe(rng, rng.choice(words)) for _ in range(ROWS)]).dictionary_encode(),
        "bv": pa.array([maybe(rng, random_bytes(rng, 16)) for _ in range(ROWS)], pa.binary_view()),
        "b": pa.array([maybe(rng, random_bytes(rng, 5)) for _ in range(ROWS)], pa.binary()),
        "lb": pa.array([maybe(rng, random_bytes(rng, 3)) for _ in range(ROWS)], pa.large_binary()),
        "f": pa.array([maybe(rng, bytes(rng.randrange(256) for _ in range(4))) for _ in range(ROWS)], pa.binary(4)),
        "ls": pa.array([maybe(rng, "x" * rng.randint(0, 20)) for _ in range(ROWS)], pa.large_string()),
        "sv": pa.array([maybe(rng, rng.choice(words) * rng.randint(0, 3)) for _ in range(ROWS)], pa.string_view()),
        "id": pa.array(range(ROWS), pa.int64()),
    }
    schema = pa.schema(
        [pa.field(name, array.type) for name, array in columns.items() if name != "id"]
        + [pa.field("id", pa.int64(), nullable=False, metadata={"PARQUET:field_id": "8"})],
        metadata={"origin": "binary_types_test", "rows": str(ROWS)},
    )
    return pa.table(list(columns.values()), schema=schema)


def write_input(table, directory, kind):
    os.makedirs(directory)
    if kind == "parquet":
        pq.write_table(table, os.path.join(directory, "in.parquet"), row_group_size=5000)
        return os.path.join(directory, "in.parquet")
    path = os.path.join(directory, "in.arrow")
    with ipc.new_file(path, table.schema) as writer:
        # One dictionary per file, as the IPC file format has it.
        writer.write_table(table.unify_dictionaries(), max_chunksize=5000)
    return path


def read_file_schema(path):
    if path.endswith(".parquet"):
        return pq.read_schema(path)
    with ipc.open_file(path) as reader:
        return reader.schema


def read_output(directory):
    files = sorted(glob.glob(os.path.join(directory, "*.parquet")))
    assert files, "no output in %s" % directory
    return files, pa.concat_tables([pq.read_table(f) for f in files])


def compare_keys(left, right, keys):
    """Three-way comparison of two rows (dicts) under `keys`: (name, descending, nulls_first)."""
    for name, descending, nulls_first in keys:
        a, b = left[name], right[name]
        if a is None or b is None:
            if a is None and b is None:
                continue
            return (-1 if a is None else 1) * (1 if nulls_first else -1)
        if isinstance(a, str):
            a, b = a.encode(), b.encode()
        if a != b:
            result = -1 if a < b else 1  # bytes compare unsigned, a prefix first
            return -result if descending else result
    return 0


def expected_rows(table, keys):
    rows = table.to_pylist()
    return sorted(rows, key=functools.cmp_to_key(lambda x, y: compare_keys(x, y, keys)))


@pytest.fixture
def work():
    directory = tempfile.mkdtemp(prefix="spillway-binary-")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def spilled_bytes(done):
    """The bytes a `--json` run spilled out of the device (to host and to disk)."""
    spilled = json.loads(done.stdout.strip().splitlines()[-1])["spilled"]
    return spilled["device_to_host"]["bytes"] + spilled["device_to_disk"]["bytes"]


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
def test_sort_spills_orders_by_value_and_keeps_the_schema(work, kind):
    table = input_table(7)
    source = write_input(table, os.path.join(work, "in"), kind)
    output = os.path.join(work, "out")
    done = run(
        "sort", source, "-o", output, "--by", "d,bv:desc:nulls_last,id",
        "--device-memory", "2MiB", "--host-memory", "1MiB", "--batch-size", "256KiB",
        "--spill-dir", work, "--json",
    )
    assert spilled_bytes(done) > 0, done.stdout
    files, result = read_output(output)
    for path in files:
        schema = pq.read_schema(path)
        assert schema.equals(read_file_schema(source), check_metadata=True), "%s\nand not\n%s" % (
            schema,
            read_file_schema(source),
        )
    keys = [("d", False, True), ("bv", True, False), ("id", False, True)]
    want = expected_rows(table, keys)
    got = result.to_pylist()
    assert len(got) == len(want)
    for index, (a, b) in enumerate(zip(got, want)):
        assert a == b, "row %d: %r and not %r" % (index, a, b)


def test_sort_by_binary_keys_of_every_width(work):
    table = input_table(8)
    source = write_input(table, os.path.join(work, "in"), "parquet")
    done = run(
        "sort", source, "-o", os.path.join(work, "out"), "--by", "b:desc,lb:asc:nulls_last,f,id",
        "--device-memory", "2MiB", "--host-memory", "1MiB", "--batch-size", "256KiB",
        "--spill-dir", work, "--json",
    )
    assert spilled_bytes(done) > 0, done.stdout
    _, result = read_output(os.path.join(work, "out"))
    keys = [("b", True, True), ("lb", False, False), ("f", False, True), ("id", False, True)]
    want = expected_rows(table, keys)
    got = result.to_pylist()
    assert len(got) == len(want)
    for index, (a, b) in enumerate(zip(got, want)):
        assert a == b, "row %d: %r and not %r" % (index, a, b)


@pytest.mark.parametrize("kind", ["parquet", "arrow"])
def test_shuffle_partitions_by_value_and_keeps_the_schema(work, kind):
    table = input_table(9)
    source = write_input(table, os.path.join(work, "in"), kind)
    output = os.path.join(work, "out")
    run("shuffle", source, "-o", output, "--by", "d", "--partitions", "4")
    files = sorted(glob.glob(os.path.join(output, "**", "*.parquet"), recursive=True))
    assert files
    seen = {}
    ids = []
    for path in files:
        schema = pq.read_schema(path)
        assert schema.equals(read_file_schema(source), check_metadata=True), "%s\nand not\n%s" % (
            schema,
            read_file_schema(source),
        )
        part = pq.read_table(path)
        ids.extend(part.column("id").to_pylist())
        for value in set(part.column("d").to_pylist()):
            seen.setdefault(value, set()).add(os.path.basename(path).split("-")[1])
    assert sorted(ids) == list(range(ROWS))
    # A value goes to one partition, whichever file of it holds it.
    assert all(len(where) == 1 for where in seen.values()), seen


def test_tpch_lineitem_sorted_by_its_string_views(work):
    generator = shutil.which("tpchgen-cli")
    if generator is None:
        pytest.skip("tpchgen-cli is missing")
    subprocess.run(
        [generator, "parquet", "-s", "0.01", "--tables=lineitem", "--output-dir=" + work],
        check=True, capture_output=True, timeout=RUN_TIMEOUT_S,
    )
    [generated] = glob.glob(os.path.join(work, "**", "lineitem*.parquet"), recursive=True)
    lineitem = pq.read_table(generated)
    # Decimals are cast to float64 (fields, nullability and metadata kept).
    fields = [
        field.with_type(pa.float64()) if pa.types.is_decimal(field.type) else field for field in lineitem.schema
    ]
    lineitem = lineitem.cast(pa.schema(fields, metadata=lineitem.schema.metadata))
    assert pa.types.is_string_view(lineitem.schema.field("l_shipmode").type)
    source = os.path.join(work, "lineitem.parquet")
    pq.write_table(lineitem, source)
    output = os.path.join(work, "out")
    run(
        "sort", source, "-o", output, "--by", "l_shipmode:desc,l_comment,l_orderkey,l_linenumber",
        "--device-memory", "8MiB", "--spill-dir", work,
    )
    files, result = read_output(output)
    for path in files:
        assert pq.read_schema(path).equals(pq.read_schema(source), check_metadata=True)
    # Arrow neither sorts nor takes views: its order of their values as large strings.
    plain = pa.schema(
        [field.with_type(pa.large_string()) if pa.types.is_string_view(field.type) else field for field in lineitem.schema]
    )
    plain_lineitem = lineitem.cast(plain)
    indices = pa.compute.sort_indices(
        plain_lineitem,
        sort_keys=[("l_shipmode", "descending"), ("l_comment", "ascending"), ("l_orderkey", "ascending"),
                   ("l_linenumber", "ascending")],
    )
    want = plain_lineitem.take(indices)
    got = result.cast(plain)
    assert got.num_rows == want.num_rows
    assert got.equals(want)

if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
