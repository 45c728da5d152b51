#!/usr/bin/env python3
"""TPC-H lineitem, as `tpchgen-cli` writes it (decimal128(15, 2), date32, string_view, non-null
fields with PARQUET:field_id metadata), through `spillway sort` and `spillway shuffle`, checked
against DuckDB on the same file.

- sorted by l_shipdate, l_orderkey, and by l_comment descending, on a device that spills: the key
  columns equal DuckDB's ORDER BY, the rows are the input's (EXCEPT ALL both ways), and the output
  schema is the input's, metadata included;
- shuffled by l_orderkey into 4 partitions on 2 ranks: every row once, each order in one partition.

Skipped (77) without pyarrow, duckdb, pytest or tpchgen-cli.
"""
import glob
import os
import shutil
import subprocess
import sys

try:
    import duckdb
    import pyarrow.parquet as pq
    import pytest
except ImportError:  # pragma: no cover
    print("pyarrow, duckdb or pytest is missing: TPC-H lineitem test skipped")
    sys.exit(77)

SCALE = "0.01"  # 60175 rows, about 11 MiB in memory
RUN_TIMEOUT_S = 240


def spillway_exe():
    exe = os.environ.get("SPILLWAY_EXE")
    if not exe or not os.access(exe, os.X_OK):
        pytest.skip("no spillway program (set SPILLWAY_EXE)")
    return exe


def run(*args):
    done = subprocess.run([spillway_exe(), *args], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, "spillway %s exited %d: %s" % (args[0], done.returncode, done.stderr[:3000])
    return done


@pytest.fixture(scope="module")
def lineitem(tmp_path_factory):
    generator = shutil.which("tpchgen-cli")
    if generator is None:
        pytest.skip("tpchgen-cli is missing (pip install tpchgen-cli)")
    work = str(tmp_path_factory.mktemp("tpch"))
    subprocess.run(
        [generator, "parquet", "-s", SCALE, "--tables=lineitem", "--output-dir=" + work],
        check=True, capture_output=True, timeout=RUN_TIMEOUT_S,
    )
    [path] = glob.glob(os.path.join(work, "**", "lineitem*.parquet"), recursive=True)
    schema = pq.read_schema(path)
    assert str(schema.field("l_quantity").type) == "decimal128(15, 2)"
    assert str(schema.field("l_comment").type) == "string_view"
    assert str(schema.field("l_shipdate").type) == "date32[day]"
    return path


def same_rows(con, left, right):
    """Whether the two Parquet globs hold the same multiset of rows (DuckDB's EXCEPT ALL)."""
    for a, b in ((left, right), (right, left)):
        extra = con.sql(f"SELECT count(*) FROM (SELECT * FROM '{a}' EXCEPT ALL SELECT * FROM '{b}')")
        if extra.fetchall()[0][0] != 0:
            return False
    return True


@pytest.mark.parametrize(
    "by, order_by, keys",
    [
        ("l_shipdate,l_orderkey", "l_shipdate, l_orderkey", ["l_shipdate", "l_orderkey"]),
        ("l_comment:desc", "l_comment DESC", ["l_comment"]),
    ],
)
def test_sorted_as_duckdb_orders_it(lineitem, tmp_path, by, order_by, keys):
    output = str(tmp_path / "out")
    run("sort", lineitem, "-o", output, "--by", by, "--device-memory", "8MiB", "--host-memory", "4MiB",
        "--spill-dir", str(tmp_path))
    files = sorted(glob.glob(os.path.join(output, "*.parquet")))
    assert files
    for path in files:
        assert pq.read_schema(path).equals(pq.read_schema(lineitem), check_metadata=True)
    con = duckdb.connect()
    columns = ", ".join(keys)
    # Files in name order, rows in file order: the output's order.
    got = [row for path in files for row in pq.read_table(path, columns=keys).to_pylist()]
    want = con.sql(f"SELECT {columns} FROM '{lineitem}' ORDER BY {order_by}").to_arrow_table().to_pylist()
    assert got == want
    assert same_rows(con, lineitem, os.path.join(output, "*.parquet"))


def test_shuffled_by_orderkey_keeps_every_row(lineitem, tmp_path):
    output = str(tmp_path / "out")
    run("shuffle", lineitem, "-o", output, "--by", "l_orderkey", "--partitions", "4", "--ranks", "2",
        "--device-memory", "8MiB", "--host-memory", "8MiB", "--spill-dir", str(tmp_path))
    con = duckdb.connect()
    assert same_rows(con, lineitem, os.path.join(output, "*.parquet"))
    partitions_per_order = con.sql(
        f"SELECT max(n) FROM (SELECT l_orderkey, count(DISTINCT filename) AS n "
        f"FROM read_parquet('{output}/*.parquet', filename = true) GROUP BY l_orderkey)"
    ).fetchall()[0][0]
    assert partitions_per_order == 1
    for path in glob.glob(os.path.join(output, "*.parquet")):
        assert pq.read_schema(path).equals(pq.read_schema(lineitem), check_metadata=True)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
