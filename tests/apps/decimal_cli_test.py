"""`spillway sort` and `spillway shuffle` of decimal columns, end to end, against DuckDB.

A pyarrow-made Parquet file holds decimal32, decimal64, decimal128 and decimal256 columns (keys
and payloads; nulls, negative values, and values beyond 64 bits in the wide ones). `spillway
sort` under a small device and host budget (so it spills to disk) must give DuckDB's ORDER BY
row by row, with every decimal's type kept; the same through CSV with --csv-types; and `spillway
shuffle` must keep every row.

Environment: SPILLWAY_EXE, the `spillway` program (CTest passes the built one).
    SPILLWAY_EXE=build/release/apps/spillway python3 -m pytest -q tests/apps/decimal_cli_test.py
"""
import decimal
import json
import os
import random
import subprocess
import sys

try:
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pytest
except ImportError as error:  # pragma: no cover
    print("skipped: missing module: %s" % error)
    sys.exit(77)  # CTest's skip code; under pytest the module is skipped the same way

ROWS = 20000
EXACT = decimal.Context(prec=100)
# DuckDB holds decimals of up to 38 digits exactly: so do these columns (decimal256 included).
COLUMNS = {
    "k128": pa.decimal128(38, 2),
    "k32": pa.decimal32(9, 2),
    "k256": pa.decimal256(38, 4),
    "p64": pa.decimal64(18, 3),
    "p128": pa.decimal128(15, 2),
    "p256": pa.decimal256(30, 0),
}
BY = "k128:desc:nulls_last,k32:asc:nulls_first,k256:desc,id"
ORDER_BY = "k128 DESC NULLS LAST, k32 ASC NULLS FIRST, k256 DESC NULLS FIRST, id ASC NULLS FIRST"


def spillway_exe():
    exe = os.environ.get("SPILLWAY_EXE", "")
    if not exe or not os.path.exists(exe):
        pytest.skip("no spillway program (set SPILLWAY_EXE)")
    return exe


def random_value(rng, precision, scale, pool):
    """An unscaled integer of at most `precision` digits as a Decimal: few distinct small values
    (ties), 64-bit edges, and values of any width the precision holds."""
    most = 10**precision - 1
    pick = rng.random()
    if pick < 0.08:
        return None
    if pick < 0.4:
        unscaled = rng.choice(pool)
    elif pick < 0.5:
        unscaled = rng.choice([v for v in (2**63, -(2**63) - 1, 2**64, -(2**64), 2**100, -(2**100), most, -most)
                               if -most <= v <= most])
    else:
        unscaled = rng.randint(-most, most)
    return decimal.Decimal(unscaled).scaleb(-scale, context=EXACT)


def make_table(seed):
    rng = random.Random(seed)
    data = {"id": pa.array(rng.sample(range(10 * ROWS), ROWS), pa.int64())}
    for name, kind in COLUMNS.items():
        pool = [rng.randint(-50, 50) for _ in range(5)]
        data[name] = pa.array([random_value(rng, kind.precision, kind.scale, pool) for _ in range(ROWS)], kind)
    names = ["p64", "k32", "id", "p256", "k128", "p128", "k256"]  # keys not first
    return pa.table({name: data[name] for name in names})


def run(*args):
    result = subprocess.run([spillway_exe(), *args], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, "spillway %s failed:\n%s%s" % (" ".join(args), result.stdout, result.stderr)
    return result.stdout


def read_output(directory):
    files = sorted(os.path.join(directory, name) for name in os.listdir(directory) if not name.startswith("."))
    assert files, "no output files in %s" % directory
    return files


def duckdb_rows(query):
    return duckdb.sql(query).fetchall()


def check_types(table):
    for name, kind in COLUMNS.items():
        assert table.schema.field(name).type == kind, "%s came back as %s" % (name, table.schema.field(name).type)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    directory = tmp_path_factory.mktemp("decimals")
    table = make_table(20260)
    pq.write_table(table, str(directory / "in.parquet"), row_group_size=2000)
    return directory, table


def test_sort_spills_and_equals_duckdb_row_by_row(work):
    directory, table = work
    out = str(directory / "sorted")
    summary = json.loads(
        run("sort", str(directory / "in.parquet"), "-o", out, "--by", BY, "--device-memory", "1MiB",
            "--host-memory", "1MiB", "--spill-dir", str(directory), "--json"))
    spilled = summary["spilled"]
    assert spilled["host_to_disk"]["bytes"] + spilled["device_to_disk"]["bytes"] > 0, "nothing spilled to disk"
    files = read_output(out)
    ours = pa.concat_tables(pq.read_table(name) for name in files)
    check_types(ours)
    assert ours.num_rows == ROWS
    expected = duckdb_rows("SELECT * FROM '%s' ORDER BY %s" % (directory / "in.parquet", ORDER_BY))
    columns = ", ".join(table.column_names)
    got = duckdb_rows("SELECT %s FROM read_parquet([%s])" % (columns, ", ".join("'%s'" % f for f in files)))
    # read_parquet of a list reads the files in order, and each file in row order.
    assert len(got) == len(expected)
    for row, (a, b) in enumerate(zip(got, expected)):
        assert a == b, "row %d: spillway %s, DuckDB %s" % (row, a, b)


def test_sort_csv_with_csv_types_equals_duckdb(work):
    directory, table = work
    csv_in = str(directory / "in.csv")
    duckdb.sql("COPY (SELECT * FROM '%s') TO '%s' (HEADER, DELIMITER ',')" % (directory / "in.parquet", csv_in))
    types = ",".join("%s:decimal%d(%d,%d)" % (name, kind.bit_width, kind.precision, kind.scale)
                     for name, kind in COLUMNS.items())
    out = str(directory / "sorted_csv")
    run("sort", csv_in, "-o", out, "--by", BY, "--csv-types", types + ",id:int64", "--output-format", "csv",
        "--device-memory", "2MiB")
    files = read_output(out)
    text = "".join(open(name).read().split("\n", 1)[1] for name in files)
    # Plain decimal text with exactly `scale` digits after the point, as DuckDB writes them.
    expected_text = "".join(
        ",".join("" if value is None else str(value) for value in row) + "\n"
        for row in duckdb_rows("SELECT %s FROM '%s' ORDER BY %s"
                               % (", ".join(table.column_names), directory / "in.parquet", ORDER_BY)))
    assert text.count("\n") == ROWS
    for row, (a, b) in enumerate(zip(text.splitlines(), expected_text.splitlines())):
        assert a == b, "row %d: spillway %r, DuckDB %r" % (row, a, b)


def test_shuffle_keeps_every_row_and_groups_equal_keys(work):
    directory, table = work
    out = str(directory / "shuffled")
    run("shuffle", str(directory / "in.parquet"), "-o", out, "--by", "k128,k256", "--partitions", "7",
        "--ranks", "3", "--device-memory", "1MiB", "--host-memory", "1MiB", "--spill-dir", str(directory))
    files = read_output(out)
    ours = pa.concat_tables(pq.read_table(name) for name in files)
    check_types(ours)
    columns = ", ".join(table.column_names)
    sources = ", ".join("'%s'" % f for f in files)
    missing = duckdb_rows("SELECT count(*) FROM (SELECT %s FROM '%s' EXCEPT ALL SELECT %s FROM read_parquet([%s]))"
                          % (columns, directory / "in.parquet", columns, sources))
    extra = duckdb_rows("SELECT count(*) FROM (SELECT %s FROM read_parquet([%s]) EXCEPT ALL SELECT %s FROM '%s')"
                        % (columns, sources, columns, directory / "in.parquet"))
    assert ours.num_rows == ROWS and missing == [(0,)] and extra == [(0,)]
    # Equal keys land in one partition (one output file per partition).
    spread = duckdb_rows("SELECT max(files) FROM (SELECT k128, k256, count(DISTINCT filename) AS files "
                         "FROM read_parquet([%s], filename=true) GROUP BY k128, k256)" % sources)
    assert spread == [(1,)]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
