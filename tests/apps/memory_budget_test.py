"""One memory budget a user can trust: `spillway sort` and `spillway shuffle` of 20M rows stay
within --device-memory + --host-memory (+ 64 MiB for the program, its libraries and stacks) of
anonymous resident memory, sampled from /proc while they run.

The budget covers everything spillway allocates: on the CPU backend the emulated device is host
memory (--device-memory of it); the spill store's host tier, the readers' decoded batches,
Arrow's decoding and encoding buffers and the writers' output share --host-memory; freed blocks
kept for reuse stay within the two. Each output is checked against numpy (row count, order, sums).

Not under the sanitizers (their shadow memory and allocators are not spillway's; CMake does not
register it there). Environment: SPILLWAY_EXE, the `spillway` program (CTest passes the built
one).
    SPILLWAY_EXE=build/release/apps/spillway python3 -m pytest -q tests/apps/memory_budget_test.py
"""
import os
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
    """Runs `command`; returns (completed process, peak RssAnon in bytes)."""
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
    return out, peak[0]


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
