"""One memory budget a user can trust: `spillway sort` and `spillway shuffle` of 20M rows stay
within --device-memory + --host-memory (+ 64 MiB for the program, its libraries and stacks) of
anonymous resident memory, sampled from /proc while they run.

The budget covers everything spillway allocates: on the CPU backend the emulated device is host
memory (--device-memory of it); the spill store's host tier, the readers' decoded batches,
Arrow's decoding and encoding buffers and the writers' output share --host-memory; freed blocks
kept for reuse stay within the two. Each output is checked against numpy (row count, order, sums).

At small budgets a table shaped like TPC-H's lineitem (16 columns, 600,000 rows) checks what the
sort counts itself (`host_over_budget_peak` in its JSON summary): at 64 MiB + 64 MiB the readers
and the writer fit the host budget, and at 16 MiB, where one reader cannot, the sort says by how
much it went past the budget. Those outputs are checked against pyarrow's sort.

Not under the sanitizers (their shadow memory and allocators are not spillway's; CMake does not
register it there). Environment: SPILLWAY_EXE, the `spillway` program (CTest passes the built
one).
    SPILLWAY_EXE=build/release/apps/spillway python3 -m pytest -q tests/apps/memory_budget_test.py
"""
import json
import os
import re
import subprocess
import sys
import threading
import time

try:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pytest
except ImportError as error:  # pragma: no cover
    print("skipped: missing module: %s" % error)
    sys.exit(77)  # CTest's skip code; under pytest the module is skipped the same way

MIB = 1 << 20
ROWS = 20_000_000
SLACK = 64 * MIB
DEVICE = 256 * MIB
HOST = 256 * MIB


def spillway_exe():
    exe = os.environ.get("SPILLWAY_EXE", "")
    if not exe or not os.path.exists(exe):
        pytest.skip("no spillway program (set SPILLWAY_EXE)")
    return exe


def rss_anon(pid):
    try:
        with open("/proc/%d/status" % pid) as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_sampled(command):
    """Runs `command`; returns (its stdout and stderr, peak RssAnon in bytes)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0]

    def sample():
        while process.poll() is None:
            peak[0] = max(peak[0], rss_anon(process.pid))
            time.sleep(0.003)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, err = process.communicate()
    sampler.join()
    assert process.returncode == 0, err
    return subprocess.CompletedProcess(command, 0, out, err), peak[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """20M rows, written by pyarrow in row groups of 1M: a 64-bit key of no order (a
    multiplicative hash of the row number, with repeats) and a 64-bit payload."""
    directory = tmp_path_factory.mktemp("budget")
    index = np.arange(ROWS, dtype=np.uint64)
    keys = ((index * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(24)).astype(np.int64)
    keys[::7] = keys[::7] % 1000  # repeats
    table = pa.table({"key": keys, "payload": index.astype(np.int64)})
    pq.write_table(table, directory / "in.parquet", row_group_size=1 << 20)
    return directory, keys


def read_column(files, name):
    return np.concatenate([pq.read_table(f, columns=[name]).column(name).to_numpy() for f in files])


def budget_flags(directory):
    return ["--device-memory", "%dMiB" % (DEVICE // MIB), "--host-memory", "%dMiB" % (HOST // MIB),
            "--spill-dir", str(directory), "--overwrite"]


@pytest.mark.parametrize("threads", [2, 4])
def test_sort_of_20m_rows_stays_within_the_budget(data, threads):
    directory, keys = data
    output = directory / ("sorted-%d" % threads)
    _, peak = run_sampled([spillway_exe(), "sort", str(directory / "in.parquet"), "-o", str(output),
                           "--by", "key", "--threads", str(threads)] + budget_flags(directory))
    files = sorted(output.glob("*.parquet"))
    ours = read_column(files, "key")
    assert len(ours) == ROWS
    assert np.array_equal(ours, np.sort(keys, kind="stable"))
    payload = read_column(files, "payload")
    assert int(payload.sum()) == ROWS * (ROWS - 1) // 2
    assert peak <= DEVICE + HOST + SLACK, "peak RssAnon %d MiB" % (peak // MIB)


WIDE_ROWS = 600_000
SMALL = 64 * MIB


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A table shaped like TPC-H's lineitem, written by pyarrow in row groups of 100,000 rows: 16
    columns (int64, decimal128(15, 2), date32, strings of 1 to 17 letters stored as dictionaries,
    comments of 10 to 43), 160 B a row once decoded against 85 B in the file's pages."""
    directory = tmp_path_factory.mktemp("wide")
    rng = np.random.default_rng(7)
    columns = {"orderkey": pa.array(rng.integers(0, 6_000_000, WIDE_ROWS))}
    for i in range(3):
        columns["int%d" % i] = pa.array(rng.integers(0, 200_000, WIDE_ROWS))
    for i in range(4):
        words = np.zeros((WIDE_ROWS, 2), dtype=np.int64)
        words[:, 0] = rng.integers(0, 10_000_000, WIDE_ROWS)
        columns["price%d" % i] = pa.Array.from_buffers(pa.decimal128(15, 2), WIDE_ROWS,
                                                       [None, pa.py_buffer(words.tobytes())])
    for i in range(3):
        days = rng.integers(8000, 10600, WIDE_ROWS).astype(np.int32)
        columns["date%d" % i] = pa.array(days).cast(pa.date32())
    for name, values in (("flag", ["A", "N", "R"]),
                         ("mode", ["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"]),
                         ("instruct", ["COLLECT COD", "DELIVER IN PERSON", "NONE",
                                       "TAKE BACK RETURN"])):
        columns[name] = pa.array(np.array(values)[rng.integers(0, len(values), WIDE_ROWS)])
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz ", dtype=np.uint8)
    lengths = rng.integers(10, 44, WIDE_ROWS)
    text = letters[rng.integers(0, len(letters), int(lengths.sum()))].tobytes()
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    columns["comment"] = pa.Array.from_buffers(
        pa.string(), WIDE_ROWS, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(text)])
    table = pa.table(columns)
    pq.write_table(table, directory / "wide.parquet", row_group_size=100_000)
    return directory, table


def sort_wide(wide, budget, name, device=None):
    """Sorts `wide` by date0, orderkey with `budget` bytes of host and of device (or `device`),
    4 threads; checks the output against pyarrow's sort; returns (stderr, JSON summary, peak
    RssAnon)."""
    directory, table = wide
    output = directory / name
    flags = ["--device-memory", "%dMiB" % ((device or budget) // MIB), "--host-memory",
             "%dMiB" % (budget // MIB), "--spill-dir", str(directory), "--overwrite"]
    process, peak = run_sampled([spillway_exe(), "sort", str(directory / "wide.parquet"), "-o",
                                 str(output), "--by", "date0,orderkey", "--threads", "4",
                                 "--json"] + flags)
    ours = pa.concat_tables([pq.read_table(f) for f in sorted(output.glob("*.parquet"))])
    assert ours.schema == table.schema
    expected = table.sort_by([("date0", "ascending"), ("orderkey", "ascending")])
    for name in ("date0", "orderkey"):
        assert ours.column(name).equals(expected.column(name))
    for name in ("int0", "price3"):
        assert pa.compute.sum(ours.column(name)) == pa.compute.sum(table.column(name))
    return process.stderr, json.loads(process.stdout), peak


def test_a_wide_sort_at_a_small_budget_counts_its_readers_and_writer_within_it(wide):
    # One reader of 64 MiB / 8 batches takes three of them, a quarter more decoded past the
    # batch, and a compressed and a decompressed page of each column: four readers (one per
    # thread, as before) held 44 MiB past the host budget.
    err, summary, peak = sort_wide(wide, SMALL, "small")
    assert summary["host_over_budget_peak"] == 0
    assert summary["readers"] == 1
    assert "warning" not in err
    assert peak <= 2 * SMALL + SLACK, "peak RssAnon %d MiB" % (peak // MIB)


def test_a_host_budget_too_small_for_one_reader_is_exceeded_and_said_so(wide):
    err, summary, _ = sort_wide(wide, 16 * MIB, "tiny")
    over = summary["host_over_budget_peak"]
    assert over > 0
    warning = [line for line in err.splitlines() if "warning" in line]
    assert len(warning) == 1, err
    said = re.search(r"held up to ([0-9.]+) (KiB|MiB) past --host-memory 16MiB", warning[0])
    assert said, warning[0]
    assert abs(float(said.group(1)) * (1024 if said.group(2) == "KiB" else MIB) - over) < 0.01 * MIB
    assert "try --host-memory %dMiB or more" % (-(-(16 * MIB + 2 * over) // MIB)) in warning[0]


def test_a_device_larger_than_the_host_reads_batches_the_host_budget_holds(wide):
    # A read batch was 1/8 of the device whatever the host: 128 MiB batches at 1 GiB of device
    # took one reader 300 MiB of a 64 MiB host budget (and output batches of 64 MiB two more).
    err, summary, peak = sort_wide(wide, SMALL, "large-device", device=1024 * MIB)
    assert summary["batch_bytes"] < 1024 * MIB // 8  # cut from the device's share
    assert summary["output_batch_bytes"] <= SMALL // 8
    assert summary["host_over_budget_peak"] == 0
    assert "warning" not in err
    # What the device held, the host budget and the program's own.
    assert peak <= summary["device_peak"] + SMALL + SLACK, "peak RssAnon %d MiB" % (peak // MIB)


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_a_shuffle_on_a_device_larger_than_the_host_stays_within_the_host_budget(wide, mode):
    directory, table = wide
    output = directory / ("large-device-%s" % mode)
    process, _ = run_sampled([spillway_exe(), "shuffle", str(directory / "wide.parquet"), "-o",
                              str(output), "--by", "orderkey", "--partitions", "4", "--mode", mode,
                              "--threads", "4", "--device-memory", "1GiB", "--host-memory",
                              "%dMiB" % (SMALL // MIB), "--spill-dir", str(directory),
                              "--overwrite", "--json"])
    summary = json.loads(process.stdout)
    assert summary["batch_bytes"] < 1024 * MIB // 8  # cut from the device's share
    assert summary["host_over_budget_peak_max"] == 0
    assert "warning" not in process.stderr
    ours = pa.concat_tables([pq.read_table(f) for f in sorted(output.rglob("*.parquet"))])
    assert ours.num_rows == table.num_rows
    key = pa.compute.sort_indices(table, [("orderkey", "ascending"), ("comment", "ascending")])
    key_ours = pa.compute.sort_indices(ours, [("orderkey", "ascending"), ("comment", "ascending")])
    for name in ("orderkey", "comment", "price0"):
        assert ours.column(name).take(key_ours).equals(table.column(name).take(key))


@pytest.mark.parametrize("mode,ranks", [("push", 1), ("pull", 1), ("push", 2)])
def test_shuffle_of_20m_rows_stays_within_the_budget(data, mode, ranks):
    directory, keys = data
    output = directory / ("shuffled-%s-%d" % (mode, ranks))
    _, peak = run_sampled([spillway_exe(), "shuffle", str(directory / "in.parquet"), "-o", str(output),
                           "--by", "key", "--partitions", "8", "--mode", mode, "--ranks", str(ranks)]
                          + budget_flags(directory))
    files = sorted(output.rglob("*.parquet"))
    ours = read_column(files, "key")
    assert len(ours) == ROWS
    assert np.array_equal(np.sort(ours), np.sort(keys))
    assert int(read_column(files, "payload").sum()) == ROWS * (ROWS - 1) // 2
    assert peak <= ranks * (DEVICE + HOST) + SLACK, "peak RssAnon %d MiB" % (peak // MIB)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
