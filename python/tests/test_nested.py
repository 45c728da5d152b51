"""spillway.sort and spillway.shuffle of pyarrow Tables with list, struct, map, decimal list and null columns:
DuckDB's order, the table's own schema back."""

import decimal

import duckdb
import pyarrow as pa
import pytest
import spillway


def nested_table(rng, rows):
    def small_list(make):
        return [None if rng.random() < 0.1 else make() for _ in range(int(rng.integers(0, 3)))]

    def maybe(make):
        return None if rng.random() < 0.1 else make()

    point = pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string())])
    return pa.table(
        {
            "l": pa.array([maybe(lambda: small_list(lambda: int(rng.integers(-2, 3)))) for _ in range(rows)],
                          pa.large_list(pa.int64())),
            "s": pa.array(
                [maybe(lambda: {"a": maybe(lambda: int(rng.integers(0, 3))), "b": maybe(lambda: "ab"[: int(rng.integers(0, 3))])})
                 for _ in range(rows)],
                point,
            ),
            "m": pa.array([maybe(lambda: [("k", maybe(lambda: int(rng.integers(0, 2))))][: int(rng.integers(0, 2))])
                           for _ in range(rows)], pa.map_(pa.string(), pa.int8())),
            "f": pa.array([maybe(lambda: [float(rng.integers(0, 2)), None]) for _ in range(rows)], pa.list_(pa.float32(), 2)),
            "d": pa.array([maybe(lambda: small_list(lambda: decimal.Decimal(int(rng.integers(-10**6, 10**6))).scaleb(-2)))
                           for _ in range(rows)], pa.list_(pa.decimal128(20, 2))),
            "n": pa.nulls(rows),
            "id": pa.array(range(rows), pa.int64()),
        }
    )


@pytest.mark.parametrize("null_placement", ["at_start", "at_end"])
def test_sort_by_nested_keys_as_duckdb_orders(rng, null_placement, tmp_path):
    table = nested_table(rng, 5000)
    result = spillway.sort(
        table,
        by=[("l", "descending"), "s", ("m", "descending"), "f", ("d", "descending"), "id"],
        null_placement=null_placement,
        device_memory="1MiB",
        host_memory="1MiB",
        spill_dir=tmp_path,
    ).read_all()
    assert result.schema.equals(table.schema, check_metadata=True), result.schema
    nulls = "NULLS FIRST" if null_placement == "at_start" else "NULLS LAST"
    connection = duckdb.connect()
    connection.register("nested_input", table)
    want = [
        row[0]
        for row in connection.execute(
            f"SELECT id FROM nested_input ORDER BY l DESC {nulls}, s {nulls}, m DESC {nulls}, f {nulls}, d DESC {nulls}, id"
        ).fetchall()
    ]
    assert result.column("id").to_pylist() == want
    assert result.sort_by("id").equals(table)


def test_shuffle_keeps_nested_rows_and_schema(rng):
    table = nested_table(rng, 2000)
    parts = [part.read_all() for part in spillway.shuffle(table, by="s", partitions=3)]
    assert all(part.schema.equals(table.schema) for part in parts)
    assert pa.concat_tables(parts).sort_by("id").equals(table)


def test_sort_by_a_list_of_decimals_as_duckdb_orders(rng):
    table = nested_table(rng, 3000)
    result = spillway.sort(table, by=[("d", "descending"), "id"], device_memory="1MiB", host_memory="1MiB").read_all()
    connection = duckdb.connect()
    connection.register("nested_input", table)
    want = [row[0] for row in connection.execute("SELECT id FROM nested_input ORDER BY d DESC NULLS LAST, id").fetchall()]
    assert result.column("id").to_pylist() == want
    assert result.sort_by("id").equals(table)
