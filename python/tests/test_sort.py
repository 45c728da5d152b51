"""spillway.sort against pyarrow's sort_by and DuckDB, from every kind of source."""

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
import spillway
from conftest import SUPPORTED_TYPES, check_sorted, random_table


@pytest.mark.parametrize("entry", SUPPORTED_TYPES, ids=[entry[0] for entry in SUPPORTED_TYPES])
def test_every_type_as_key_and_payload_round_trips(rng, entry, tmp_path):
    # The key of the type, and every supported type as payload.
    columns = {"key": entry}
    columns.update({f"p_{name}": e for name, *_ in SUPPORTED_TYPES for e in [(name, *_)]})
    table = random_table(rng, 3000, columns)
    for order in ("ascending", "descending"):
        result = spillway.sort(
            table, by=[("key", order)], device_memory="2MiB", host_memory="1MiB", spill_dir=tmp_path
        ).read_all()
        check_sorted(result, table, [("key", order)])


@pytest.mark.parametrize("null_placement", ["at_start", "at_end"])
def test_several_keys_descending_with_nulls(rng, null_placement, tmp_path):
    columns = {
        "k1": ("int16", pa.int16(), lambda r, n: r.integers(0, 20, n).astype(np.int16)),
        "k2": SUPPORTED_TYPES[13],  # string
        "k3": SUPPORTED_TYPES[10],  # float64
    }
    table = random_table(rng, 50_000, columns, null_fraction=0.2)
    sorting = [("k1", "descending"), ("k2", "ascending"), ("k3", "descending")]
    result = spillway.sort(
        table,
        by=[("k1", "descending"), "k2", ("k3", "descending")],
        null_placement=null_placement,
        device_memory="4MiB",
        host_memory="1MiB",
        spill_dir=tmp_path,
    ).read_all()
    check_sorted(result, table, sorting, null_placement)


def test_spills_to_host_and_disk_and_matches_duckdb(rng, tmp_path):
    rows = 400_000
    data = pa.table(
        {
            "id": pa.array(rng.integers(0, 1000, rows)),
            "name": pa.array([f"n{v}" for v in rng.integers(0, 50_000, rows)]),
            "x": pa.array(rng.standard_normal(rows)),
        }
    )
    env = spillway.Environment(device_memory="4MiB", host_memory="1MiB", spill_dir=tmp_path)
    result = spillway.sort(data, by=[("id", "descending"), "name"], env=env).read_all()
    expected = duckdb.sql("SELECT * FROM data ORDER BY id DESC NULLS LAST, name ASC NULLS LAST").arrow()
    if isinstance(expected, pa.RecordBatchReader):
        expected = expected.read_all()
    assert result.column("id").equals(expected.column("id"))
    assert result.column("name").equals(expected.column("name"))
    assert sorted(result.column("x").to_pylist()) == sorted(data.column("x").to_pylist())
    stats = env.statistics()
    spilled = stats["spill"]["transfers"]
    assert spilled["device_to_host"]["bytes"] + spilled["device_to_disk"]["bytes"] > 0
    assert spilled["device_to_disk"]["bytes"] + spilled["host_to_disk"]["bytes"] > 0
    assert stats["device"]["peak"] <= 4 << 20
    assert stats["last_sort"]["output_rows"] == rows
    assert stats["leases"]["grants"] > 0
    env.close()


def test_sources_of_every_kind(rng, tmp_path):
    table = data = random_table(rng, 5000, {"k": SUPPORTED_TYPES[4], "s": SUPPORTED_TYPES[13]})
    (tmp_path / "pq").mkdir()
    pq.write_table(table.slice(0, 2500), tmp_path / "pq" / "a.parquet")
    pq.write_table(table.slice(2500), tmp_path / "pq" / "b.parquet")
    feather.write_feather(table, tmp_path / "t.arrow")
    sources = {
        "table": table,
        "reader": table.to_reader(max_chunksize=700),
        "batch": table.combine_chunks().to_batches()[0],
        "dataset": ds.dataset(tmp_path / "pq", format="parquet"),
        "directory": tmp_path / "pq",
        "glob": str(tmp_path / "pq" / "*.parquet"),
        "file": str(tmp_path / "t.arrow"),
        "duckdb": duckdb.sql("SELECT * FROM data ORDER BY rid DESC"),
    }
    for name, source in sources.items():
        result = spillway.sort(source, by="k", device_memory="1MiB", host_memory="1MiB").read_all()
        check_sorted(result, table, [("k", "ascending")])


def test_per_key_null_placement(rng):
    table = random_table(rng, 5000, {"a": SUPPORTED_TYPES[2], "b": SUPPORTED_TYPES[13]}, null_fraction=0.3)
    by = [("a", "descending", "at_start"), ("b", "ascending", "at_end")]
    result = spillway.sort(table, by=by, device_memory="1MiB").read_all()
    expected = table.sort_by(by)
    assert result.column("a").equals(expected.column("a"))
    assert result.column("b").equals(expected.column("b"))


def test_polars_dataframe_source(rng):
    pl = pytest.importorskip("polars")
    frame = pl.DataFrame({"k": rng.integers(0, 100, 1000), "v": np.arange(1000)})
    result = spillway.sort(frame, by=[("k", "descending")]).read_all()
    assert result.column("k").to_pylist() == sorted(frame["k"].to_list(), reverse=True)


def test_csv_path_source_and_output_files(rng, tmp_path):
    table = pa.table({"k": pa.array(rng.integers(0, 1000, 20_000)), "v": pa.array(np.arange(20_000))})
    pacsv.write_csv(table, tmp_path / "in.csv")
    out = tmp_path / "sorted"
    files = spillway.sort(
        tmp_path / "in.csv", by=["k", "v"], output=out, file_size="64KiB", device_memory="1MiB"
    )
    assert len(files) > 1 and all(f.startswith(str(out)) for f in files)
    written = pa.concat_tables(pq.read_table(f) for f in files)
    assert written.equals(table.sort_by([("k", "ascending"), ("v", "ascending")]))


def test_written_row_groups_fit_half_the_host_budget(rng, tmp_path):
    # 3M rows of two int64 columns: 48 MB in memory. Within 16 MiB of host memory the writer
    # fills and encodes row groups in 8 MiB, one filled while one encodes, each about twice its
    # table in memory: 2 MiB each. With 2 GiB it takes whole batches (up to 64 MiB).
    n = 3_000_000
    table = pa.table({"k": rng.integers(0, 1 << 40, n), "v": np.arange(n)})
    sizes = {}
    for host in ("16MiB", "2GiB"):
        files = spillway.sort(
            table, by="k", output=tmp_path / host, host_memory=host, device_memory="256MiB",
            spill_dir=tmp_path, threads=4,
        )
        groups = [pq.ParquetFile(f).metadata.row_group(g) for f in files
                  for g in range(pq.ParquetFile(f).metadata.num_row_groups)]
        assert sum(group.num_rows for group in groups) == n
        sizes[host] = max(group.num_rows * 16 for group in groups)
    assert sizes["16MiB"] <= 2 << 20, sizes
    assert sizes["2GiB"] > 8 << 20, sizes


def test_empty_input_keeps_the_schema(tmp_path):
    table = pa.table({"k": pa.array([], pa.int32()), "s": pa.array([], pa.large_string())})
    result = spillway.sort(table, by="k").read_all()
    assert result.num_rows == 0 and result.schema == table.schema
    files = spillway.sort(table, by="k", output=tmp_path / "out")
    assert pq.read_table(files[0]).num_rows == 0


def test_the_result_outlives_the_environment_and_streams(rng):
    table = random_table(rng, 20_000, {"k": SUPPORTED_TYPES[4]})
    with spillway.Environment(device_memory="1MiB", host_memory="1MiB", threads=2) as env:
        reader = spillway.sort(table, by="k", env=env)
    batches = list(reader)
    assert len(batches) > 1
    check_sorted(pa.Table.from_batches(batches), table, [("k", "ascending")])


def test_run_report(rng, tmp_path):
    table = random_table(rng, 20_000, {"k": SUPPORTED_TYPES[4]})
    env = spillway.Environment(device_memory="1MiB", host_memory="1MiB", report=True)
    spillway.sort(table, by="k", env=env).read_all()
    report = env.report()
    assert report["samples"] and report["series"]
    env.write_report(tmp_path / "run.html")
    assert (tmp_path / "run.html").stat().st_size > 0 and (tmp_path / "run.json").exists()
