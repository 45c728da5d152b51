"""Property test of `spillway shuffle` as many tasks: random tables, random flags, output checked.

Every case is derived from one integer seed (the case seed = the base seed + the case's index): a
random table (one or two key columns and zero to two payload columns of the types the sort's
property test draws, nulls included; `sort_property_test.random_column`) written as Parquet (one
file or several, various row group sizes), then shuffled by `spillway shuffle` into 1-7
partitions on 1-3 ranks, push or pull, on devices from 1 MiB to ample, with 1-16 threads and 1-16
map tasks per rank of which 1-4 hold the device at once. Checked, independently of spillway's
hashing:

- the output holds the input's multiset of rows, bit for bit (Arrow reads both);
- rows of equal keys are in one partition, and each partition's files hold only its rows;
- the files are byte for byte those of the same shuffle with one task per rank and one device
  task (a partition's rows come in map order, which the read order fixes).

Environment:
  SPILLWAY_EXE                    the `spillway` program (CTest passes the built one)
  SPILLWAY_SHUFFLE_SEED           base seed (default fixed; `random` picks one)
  SPILLWAY_SHUFFLE_CASES          cases of the fast slice (default 12)
  SPILLWAY_SHUFFLE_SOAK_SECONDS   also run cases for this long, collecting every failure

A failing case prints its seed; rerun it alone with
  SPILLWAY_SHUFFLE_SEED=<case seed> SPILLWAY_SHUFFLE_CASES=1 python3 shuffle_property_test.py
"""
import filecmp
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

try:
    import pyarrow as pa
    import pyarrow.compute as pc  # noqa: F401
    import pyarrow.parquet as pq
except ImportError:  # run as a script: main() exits 77 (skipped)
    pa = None

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if pa is not None:
    import sort_property_test as tables  # the random columns and exact row images

FAST_CASES = int(os.environ.get("SPILLWAY_SHUFFLE_CASES", "12"))
SOAK_SECONDS = float(os.environ.get("SPILLWAY_SHUFFLE_SOAK_SECONDS", "0"))
MAX_ROWS = 200000


def base_seed(default):
    text = os.environ.get("SPILLWAY_SHUFFLE_SEED", "")
    if text == "random":
        return random.SystemRandom().randrange(1, 2**31)
    return int(text) if text else default


BASE_SEED = base_seed(7300)
SOAK_SEED = base_seed(random.SystemRandom().randrange(1, 2**31)) if SOAK_SECONDS > 0 else 0


def random_table(rng, rows, arrow_seed):
    names = tables.TYPE_NAMES
    keys = ["k%d" % index for index in range(rng.choice([1, 1, 2]))]
    payloads = ["p%d" % index for index in range(rng.choice([0, 1, 2]))]
    columns = {}
    for offset, name in enumerate(keys + payloads):
        columns[name] = tables.random_column(rng, rng.choice(names), rows, arrow_seed + 7 * offset)
    return pa.table(columns), keys


def run(exe, args):
    done = subprocess.run([exe] + args, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError("spillway %s failed (%d):\n%s" % (" ".join(args), done.returncode, done.stderr[-3000:]))
    return json.loads(done.stdout.strip().splitlines()[-1])


def partition_of(name):
    return int(name.split("-")[1])


def read_partitions(directory, schema):
    """{partition: table} of the output files, in name order within a partition."""
    names = sorted(name for name in os.listdir(directory) if name.endswith(".parquet"))
    found = {}
    for name in names:
        table = pq.read_table(os.path.join(directory, name)).cast(schema)
        found.setdefault(partition_of(name), []).append(table)
    return {partition: pa.concat_tables(parts) for partition, parts in found.items()}


def key_images(table):
    """Each row as a tuple of the exact images of its columns (equal rows, equal tuples)."""
    lists = []
    for name in table.column_names:
        lists.extend(part.to_pylist() for part in tables.exact_image(table.column(name)))
    return list(zip(*lists)) if lists else []


def same_files(left, right):
    names = sorted(os.listdir(left))
    if names != sorted(os.listdir(right)):
        return "files %s against %s" % (names, sorted(os.listdir(right)))
    _, mismatch, errors = filecmp.cmpfiles(left, right, names, shallow=False)
    return "other bytes in %s" % (mismatch + errors) if mismatch or errors else None


def run_case(seed, exe):
    """Runs one case; returns a failure text or None."""
    rng = random.Random(seed)
    rows = rng.choice([0, 1, 100, 5000, 40000, rng.randrange(1, MAX_ROWS)])
    table, keys = random_table(rng, rows, seed)
    flags = [
        "--partitions", str(rng.choice([1, 2, 3, 5, 7])),
        "--ranks", str(rng.choice([1, 1, 2, 3])),
        "--mode", rng.choice(["push", "pull"]),
        "--device-memory", rng.choice(["1MiB", "2MiB", "4MiB", "64MiB"]),
        "--host-memory", rng.choice(["4MiB", "16MiB", "256MiB"]),
        "--batch-size", rng.choice(["16KiB", "64KiB", "1MiB"]),
    ]
    tasks = ["--threads", str(rng.choice([1, 2, 3, 8, 16])), "--tasks", str(rng.choice([1, 2, 4, 16])),
             "--device-tasks", str(rng.choice([1, 2, 4]))]
    by = ",".join(keys)
    what = "case %d: %d rows, keys %s, %s %s" % (seed, rows, [str(table.schema.field(k).type) for k in keys],
                                                 " ".join(flags), " ".join(tasks))
    work = tempfile.mkdtemp(prefix="shuffle-case-")
    try:
        data = tables.write_input(table, work, rng.choice([1, 1, 3]), rng.choice([1000, 10000, 100000]))
        reference = os.path.join(work, "reference")
        out = os.path.join(work, "out")
        run(exe, ["shuffle", data, "-o", reference, "--by", by, "--json", "--tasks", "1", "--device-tasks", "1"]
            + flags)
        summary = run(exe, ["shuffle", data, "-o", out, "--by", by, "--json"] + flags + tasks)
        difference = same_files(out, reference)
        if difference:
            return "%s: not the files of one task: %s" % (what, difference)
        if summary["rows"] != rows:
            return "%s: %d rows shuffled of %d" % (what, summary["rows"], rows)
        partitions = read_partitions(out, table.schema)
        home = {}
        for partition, part in sorted(partitions.items()):
            for key in set(key_images(part.select(keys))):
                if home.setdefault(key, partition) != partition:
                    return "%s: key %r in partitions %d and %d" % (what, key, home[key], partition)
        got = pa.concat_tables(partitions.values()) if partitions else table.schema.empty_table()
        if not tables.canonical_rows(got).equals(tables.canonical_rows(table)):
            return "%s: the output's rows are not the input's" % what
        return None
    except AssertionError as error:
        return "%s: %s" % (what, error)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def spillway_exe():
    exe = os.environ.get("SPILLWAY_EXE", "")
    if not exe or not os.access(exe, os.X_OK):
        pytest.skip("no spillway program (set SPILLWAY_EXE)")
    return os.path.abspath(exe)


@pytest.mark.parametrize("index", range(FAST_CASES))
def test_fast_shuffle_case(index):
    failure = run_case(BASE_SEED + index, spillway_exe())
    if failure:
        pytest.fail(failure, pytrace=False)


@pytest.mark.skipif(SOAK_SECONDS <= 0, reason="set SPILLWAY_SHUFFLE_SOAK_SECONDS to soak")
def test_soak():
    exe = spillway_exe()
    deadline = time.monotonic() + SOAK_SECONDS
    failures, cases = [], 0
    print("\nspillway shuffle soak: base seed %d for %.0f s" % (SOAK_SEED, SOAK_SECONDS), flush=True)
    while time.monotonic() < deadline:
        failure = run_case(SOAK_SEED + cases, exe)
        cases += 1
        if failure:
            failures.append(failure)
            print(failure, flush=True)
    summary = "%d of %d soak cases failed (base seed %d)" % (len(failures), cases, SOAK_SEED)
    print(summary)
    if failures:
        pytest.fail(summary + "\n\n" + "\n\n".join(failures[:20]), pytrace=False)


if __name__ == "__main__":
    if pa is None:
        print("pyarrow is missing: spillway shuffle property test skipped")
        sys.exit(77)
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", __file__] + sys.argv[1:]))
