"""Failures are Python exceptions of spillway's classes, with the library's clear messages."""

import os

import pyarrow as pa
import pytest
import spillway


def test_unknown_column_names_the_columns_there_are():
    table = pa.table({"a": [1, 2], "b": ["x", "y"]})
    with pytest.raises(spillway.InvalidArgumentError) as failure:
        spillway.sort(table, by="c")
    assert isinstance(failure.value, ValueError)
    assert str(failure.value) == "by: no column 'c' in pyarrow.Table (it has a: int64, b: string)"


def test_unsupported_type_names_the_column_and_type():
    either = pa.UnionArray.from_sparse(pa.array([0, 0], pa.int8()), [pa.array([1, 2])])
    table = pa.table({"a": [1, 2], "d": either})
    with pytest.raises(spillway.NotSupportedError) as failure:
        spillway.sort(table, by="a")
    assert isinstance(failure.value, (TypeError, NotImplementedError))
    message = str(failure.value)
    assert message.startswith("column 'd' of 'pyarrow.Table' has type sparse_union")
    assert "which spillway does not support" in message and "spillway failure at" not in message


def test_budgets_and_arguments():
    table = pa.table({"a": list(range(10))})
    with pytest.raises(spillway.InvalidArgumentError, match=r"device_memory .* is too small for pyarrow.Table"):
        spillway.sort(table, by="a", device_memory=1024)
    with pytest.raises(spillway.InvalidArgumentError, match="host_memory 1.00 KiB is too small"):
        spillway.sort(table, by="a", host_memory="1KiB")
    with pytest.raises(spillway.InvalidArgumentError, match="lots"):
        spillway.sort(table, by="a", device_memory="lots")
    with pytest.raises(spillway.InvalidArgumentError, match="'upwards'"):
        spillway.sort(table, by=[("a", "upwards")])
    with pytest.raises(spillway.InvalidArgumentError, match="named twice"):
        spillway.sort(table, by=["a", "a"])
    with pytest.raises(TypeError, match="not int"):
        spillway.sort(42, by="a")
    env = spillway.Environment()
    with pytest.raises(spillway.InvalidArgumentError, match="give them to the Environment"):
        spillway.sort(table, by="a", env=env, device_memory="1GiB")
    env.close()
    with pytest.raises(spillway.InvalidArgumentError, match="closed"):
        spillway.sort(table, by="a", env=env)


def test_missing_path_and_occupied_output(tmp_path):
    missing = str(tmp_path / "nothing.parquet")
    with pytest.raises(spillway.SpillwayIOError) as failure:
        spillway.sort(missing, by="a")
    assert isinstance(failure.value, OSError) and missing in str(failure.value)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("data")
    with pytest.raises(spillway.InvalidArgumentError, match="is not empty"):
        spillway.sort(pa.table({"a": [1]}), by="a", output=tmp_path / "out")
    assert os.listdir(tmp_path / "out") == ["keep.txt"]


def test_errors_of_the_stream_source_come_through():
    schema = pa.schema([("a", pa.int64())])

    def batches():
        yield pa.record_batch([pa.array([3, 1])], schema=schema)
        raise RuntimeError("the producer broke")

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    with pytest.raises(spillway.SpillwayError, match="the producer broke"):
        spillway.sort(reader, by="a")
