"""DuckDB's order of nested values, for tests/io/nested_encoding_test.cpp.

Usage: nested_order.py DIRECTORY

Reads DIRECTORY/values.arrow (an Arrow IPC file: nested columns, one value per row) and writes
DIRECTORY/ranks.arrow: for each column C and each ORDER BY direction D of ORDERS, an int64 column
"C|D" whose row i is the dense rank of row i's value of C when DuckDB sorts the column by D (equal
values share a rank). Exits 77 when pyarrow or duckdb is missing.
"""

import os
import sys

try:
    import duckdb
    import pyarrow as pa
    import pyarrow.ipc as ipc
except ImportError:  # pragma: no cover
    print("pyarrow or duckdb is missing")
    sys.exit(77)

ORDERS = ["ASC NULLS FIRST", "ASC NULLS LAST", "DESC NULLS FIRST", "DESC NULLS LAST"]


def main(directory):
    with ipc.open_file(os.path.join(directory, "values.arrow")) as reader:
        values = reader.read_all()
    values = values.append_column("row_id", pa.array(range(values.num_rows), pa.int64()))
    connection = duckdb.connect()
    connection.register("v", values)
    ranks = {}
    for name in values.column_names:
        if name == "row_id":
            continue
        for order in ORDERS:
            rows = connection.execute(
                'SELECT dense_rank() OVER (ORDER BY "%s" %s) FROM v ORDER BY row_id' % (name, order)
            ).fetchall()
            ranks["%s|%s" % (name, order)] = pa.array([row[0] for row in rows], pa.int64())
    table = pa.table(ranks)
    with ipc.new_file(os.path.join(directory, "ranks.arrow"), table.schema) as writer:
        writer.write_table(table)


if __name__ == "__main__":
    main(sys.argv[1])
