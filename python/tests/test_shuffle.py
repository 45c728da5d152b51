"""spillway.shuffle: every row in exactly one partition, equal keys together."""

import collections

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import spillway
from conftest import SUPPORTED_TYPES, random_table


def _check_partitions(tables, table, keys):
    assert all(t.schema == table.schema for t in tables)
    rids = np.concatenate([t.column("rid").to_numpy() for t in tables])
    assert sorted(rids.tolist()) == list(range(table.num_rows))  # every row exactly once
    home = {}
    for index, part in enumerate(tables):
        assert table.take(part.column("rid")).equals(part)  # rows intact
        for key in zip(*(part.column(k).to_pylist() for k in keys)):
            assert home.setdefault(key, index) == index  # equal keys in one partition
    return home


def test_shuffle_into_readers(rng, tmp_path):
    table = random_table(
        rng,
        100_000,
        {"k": ("int32", pa.int32(), lambda r, n: r.integers(0, 500, n).astype(np.int32)), "s": SUPPORTED_TYPES[13]},
    )
    env = spillway.Environment(device_memory="2MiB", host_memory="1MiB", spill_dir=tmp_path)
    readers = spillway.shuffle(table, by="k", partitions=8, env=env)
    assert len(readers) == 8
    tables = [reader.read_all() for reader in readers]
    home = _check_partitions(tables, table, ["k"])
    used = collections.Counter(home.values())
    assert len(used) == 8  # 500 keys over 8 partitions: none empty
    spilled = env.statistics()["spill"]["transfers"]
    assert spilled["device_to_host"]["bytes"] + spilled["device_to_disk"]["bytes"] > 0


def test_shuffle_by_two_keys_into_files(rng, tmp_path):
    table = random_table(rng, 20_000, {"a": SUPPORTED_TYPES[13], "b": SUPPORTED_TYPES[1]})
    files = spillway.shuffle(table, by=["a", "b"], partitions=3, output=tmp_path / "out", seed=7)
    assert len(files) == 3
    tables = [pa.concat_tables(pq.read_table(f) for f in part) if part else table.slice(0, 0) for part in files]
    for index, part in enumerate(files):
        assert all(f"partition-{index:05d}" in f for f in part)
    _check_partitions(tables, table, ["a", "b"])
