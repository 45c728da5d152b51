"""Interop checks for spillway's io layer: pyarrow and DuckDB read our files and write theirs.

usage: interop.py check DIR   -- verify DIR/ours.{parquet,arrow,arrows,csv} hold expected()
       interop.py write DIR   -- write expected() as DIR/{pyarrow.parquet,pyarrow.arrow,
                                 pyarrow.arrows,pyarrow.csv,duckdb.parquet,duckdb.csv}
Exit 77 when a module is missing (the C++ test skips then), 1 on a mismatch.
"""
import datetime
import sys

try:
    import duckdb
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq
except ImportError as error:  # pragma: no cover
    print(f"missing module: {error}")
    sys.exit(77)

ROWS = 1000


def expected():
    """The table both sides build: row i of each column is a formula of i."""
    i = list(range(ROWS))
    return {
        "id": [v * 3 - 7 for v in i],
        "small": [None if v % 7 == 0 else (v % 100) - 50 for v in i],
        "flag": [None if v % 11 == 0 else v % 2 == 0 for v in i],
        "ratio": [None if v % 13 == 0 else v / 4.0 for v in i],
        "name": [None if v % 5 == 0 else f"name {v}, \"q\"" for v in i],
        "at": [datetime.datetime(2024, 1, 1) + datetime.timedelta(milliseconds=v * 1234567)
               for v in i],
    }


def arrow_table():
    data = expected()
    return pa.table({
        "id": pa.array(data["id"], pa.int64()),
        "small": pa.array(data["small"], pa.int32()),
        "flag": pa.array(data["flag"], pa.bool_()),
        "ratio": pa.array(data["ratio"], pa.float64()),
        "name": pa.array(data["name"], pa.string()),
        "at": pa.array(data["at"], pa.timestamp("ms")),
    })


def compare(label, columns):
    data = expected()
    for name, values in data.items():
        got = columns[name]
        if len(got) != len(values):
            print(f"{label}: column {name} has {len(got)} rows, expected {len(values)}")
            sys.exit(1)
        for row, (a, b) in enumerate(zip(got, values)):
            if isinstance(a, datetime.datetime) and a.tzinfo is not None:
                a = a.replace(tzinfo=None)
            if a != b:
                print(f"{label}: column {name} row {row}: got {a!r}, expected {b!r}")
                sys.exit(1)


def check(directory):
    compare("pyarrow parquet", pq.read_table(f"{directory}/ours.parquet").to_pydict())
    with pa.memory_map(f"{directory}/ours.arrow") as source:
        compare("pyarrow ipc file", ipc.open_file(source).read_all().to_pydict())
    with pa.memory_map(f"{directory}/ours.arrows") as source:
        compare("pyarrow ipc stream", ipc.open_stream(source).read_all().to_pydict())
    csv_types = {"id": pa.int64(), "small": pa.int32(), "flag": pa.bool_(),
                 "ratio": pa.float64(), "name": pa.string(), "at": pa.timestamp("ms")}
    compare("pyarrow csv", pacsv.read_csv(
        f"{directory}/ours.csv",
        convert_options=pacsv.ConvertOptions(column_types=csv_types, strings_can_be_null=True,
                                             quoted_strings_can_be_null=False)).to_pydict())
    connection = duckdb.connect()
    for label, relation in [
            ("duckdb parquet", f"read_parquet('{directory}/ours.parquet')"),
            ("duckdb csv", f"read_csv('{directory}/ours.csv', header=true, columns={{"
                           "'id': 'BIGINT', 'small': 'INTEGER', 'flag': 'BOOLEAN', "
                           "'ratio': 'DOUBLE', 'name': 'VARCHAR', 'at': 'TIMESTAMP'})")]:
        cursor = connection.execute(f"SELECT * FROM {relation}")
        names = [column[0] for column in cursor.description]
        rows = cursor.fetchall()
        compare(label, {name: [row[i] for row in rows] for i, name in enumerate(names)})
    print("ok")


def write(directory):
    table = arrow_table()
    pq.write_table(table, f"{directory}/pyarrow.parquet", row_group_size=300)
    with ipc.new_file(f"{directory}/pyarrow.arrow", table.schema) as writer:
        writer.write_table(table, max_chunksize=250)
    with ipc.new_stream(f"{directory}/pyarrow.arrows", table.schema) as writer:
        writer.write_table(table, max_chunksize=250)
    pacsv.write_csv(table, f"{directory}/pyarrow.csv")
    connection = duckdb.connect()
    connection.register("t", table)
    connection.execute(f"COPY t TO '{directory}/duckdb.parquet' (FORMAT PARQUET)")
    connection.execute(f"COPY t TO '{directory}/duckdb.csv' (FORMAT CSV, HEADER)")
    print("ok")


if __name__ == "__main__":
    {"check": check, "write": write}[sys.argv[1]](sys.argv[2])
