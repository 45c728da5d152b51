"""Out-of-memory injected at every device allocation of a small sort and a small shuffle, through
the Python API, and at a sample of those of a table of every supported type.

For each job and each kind (retry, split, and oom: the upstream allocation fails, so that the
whole failure path runs), the job with SPILLWAY_INJECT_OOM=...,skip=k,count=1
(the k-th device allocation fails) must succeed with the rows of the oracle (pyarrow's sort, or the
run without injection for the shuffle), for every k from 0 until a run reports that nothing was
injected. Every run also counts the device allocations made outside every retry block
(SPILLWAY_RETRY_COVERAGE=1), and there must be none. The sweep runs in a process of its own: both
variables are read by the library, the coverage switch once per process.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

ROWS = 1200
MOST_ALLOCATIONS = 5000  # a guard against a run that never stops injecting


def _table():
    rng = np.random.default_rng(5)
    keys = ["".join(chr(97 + int(c)) for c in rng.integers(0, 4, int(k))) for k in rng.integers(0, 12, ROWS)]
    return pa.table({"key": keys, "v": np.arange(ROWS)})


def _by_key_then_v(table):
    return table.sort_by([("key", "ascending"), ("v", "ascending")])


def _sort(spillway, table, kind, k):
    """Sorts on a device that must merge in rounds; returns the statistics."""
    os.environ["SPILLWAY_INJECT_OOM"] = f"task=*,kind={kind},skip={k},count=1"
    with spillway.Environment(device_memory="128KiB", host_memory="8MiB") as env:
        out = spillway.sort(table, "key", env=env, batch_size="4KiB").read_all()
        statistics = env.statistics()
    expected = _by_key_then_v(table)
    assert out.column("key").equals(expected.column("key")), f"{kind} at {k}: keys out of order"
    assert _by_key_then_v(out).equals(expected), f"{kind} at {k}: other rows"
    return statistics


def _shuffle(spillway, table, kind, k, reference):
    """Partitions in many map tasks; checks each partition against `reference`."""
    os.environ["SPILLWAY_INJECT_OOM"] = f"task=*,kind={kind},skip={k},count=1"
    with spillway.Environment(device_memory="32KiB", host_memory="8MiB") as env:
        out = [reader.read_all() for reader in spillway.shuffle(table, "key", 3, env=env)]
        statistics = env.statistics()
    for got, want in zip(out, reference):
        assert got.sort_by("v").equals(want.sort_by("v")), f"{kind} at {k}: another partition"
    return statistics


EVERY_TYPE_ROWS = 300
EVERY_TYPE_SORTING = [("decimal128", "ascending"), ("string_view", "descending"), ("int32", "ascending")]
# The sort of every type makes some 13,000 device allocations (40-odd columns of 64 chunks per
# batch): every EVERY_TYPE_STRIDE-th of them fails. (A sweep of every 7th, of each kind, found
# nothing more.)
EVERY_TYPE_STRIDE = 131


def _sweep_every_type(spillway):
    """A table of every supported type, nested ones and nulls included: the sort (every
    EVERY_TYPE_STRIDE-th allocation fails, kind oom) against pyarrow's order, and the shuffle
    (every allocation, each kind) against the run without injection."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import conftest
    import test_nested

    rng = np.random.default_rng(7)
    table = conftest.random_table(rng, EVERY_TYPE_ROWS, {entry[0]: entry for entry in conftest.SUPPORTED_TYPES})
    nested = test_nested.nested_table(rng, EVERY_TYPE_ROWS).drop_columns(["id"])
    for name in nested.column_names:
        table = table.append_column("nested_" + name, nested.column(name))

    def sort(k, kind):
        os.environ["SPILLWAY_INJECT_OOM"] = f"task=*,kind={kind},skip={k},count=1"
        with spillway.Environment(device_memory="1MiB", host_memory="8MiB") as env:
            out = spillway.sort(table, EVERY_TYPE_SORTING, env=env, batch_size="16KiB").read_all()
            statistics = env.statistics()
        conftest.check_sorted(out, table, EVERY_TYPE_SORTING)
        return statistics

    def comparable(part):
        return conftest._comparable(part).sort_by("rid")

    def shuffle(k, kind):
        os.environ["SPILLWAY_INJECT_OOM"] = f"task=*,kind={kind},skip={k},count=1"
        with spillway.Environment(device_memory="1MiB", host_memory="8MiB") as env:
            out = [comparable(reader.read_all()) for reader in spillway.shuffle(table, ["int32", "string"], 3, env=env)]
            statistics = env.statistics()
        for got, want in zip(out, reference):
            assert got.equals(want), f"every type, shuffle, {kind} at {k}: another partition"
        return statistics

    os.environ.pop("SPILLWAY_INJECT_OOM", None)
    with spillway.Environment(device_memory="1MiB", host_memory="8MiB") as env:
        reference = [comparable(reader.read_all()) for reader in spillway.shuffle(table, ["int32", "string"], 3, env=env)]
    swept = {}
    for job, run, kinds, stride in (("sort", sort, ("oom",), EVERY_TYPE_STRIDE), ("shuffle", shuffle, ("retry", "split", "oom"), 1)):
        for kind in kinds:
            k = 0
            while True:
                statistics = run(k, kind)
                assert statistics["unprotected_allocations"] == 0, (job, kind, k)
                if statistics["device"]["oom_injected"] == 0:
                    break
                k += stride
                assert k < 50 * MOST_ALLOCATIONS, f"every type, {job} still injecting at allocation {k}"
            swept[f"every type {job} {kind}"] = {"allocations": k, "not_counted": []}
    return swept


def _sweep():
    import spillway

    table = _table()
    with spillway.Environment(device_memory="32KiB", host_memory="8MiB") as env:
        reference = [reader.read_all() for reader in spillway.shuffle(table, "key", 3, env=env)]
    assert sum(part.num_rows for part in reference) == ROWS
    jobs = {
        "sort": lambda kind, k: _sort(spillway, table, kind, k),
        "shuffle": lambda kind, k: _shuffle(spillway, table, kind, k, reference),
    }
    swept = _sweep_every_type(spillway)
    for job, run in jobs.items():
        for kind in ("retry", "split", "oom"):
            k = 0
            not_counted = []
            while True:
                statistics = run(kind, k)
                assert statistics["unprotected_allocations"] == 0, (job, kind, k)
                if statistics["device"]["oom_injected"] == 0:
                    break
                # The sort counts the attempt it rolled back, as a retry or (where the protocol
                # chose to split, e.g. a task that holds nothing to wait for) as a split. (A
                # failure of the upstream allocation is mostly ended by a spill, with no roll back.)
                sorted_ = statistics["last_sort"]
                if job == "sort" and kind != "oom" and sorted_["retries"] + sorted_["splits"] < 1:
                    not_counted.append(k)
                k += 1
                assert k < MOST_ALLOCATIONS, f"{job} still injecting at allocation {k}"
            swept[f"{job} {kind}"] = {"allocations": k, "not_counted": not_counted}
    return swept


def test_every_device_allocation_of_a_sort_and_a_shuffle_recovers_from_an_injected_oom():
    env = dict(os.environ, SPILLWAY_RETRY_COVERAGE="1")
    env.pop("SPILLWAY_INJECT_OOM", None)
    done = subprocess.run([sys.executable, __file__], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-4000:]
    swept = json.loads(done.stdout.strip().splitlines()[-1])
    for name, result in swept.items():
        # Many allocations were swept: the merge rounds of the sort, the map tasks of the shuffle.
        least = 5000 if name.startswith("every type sort") else 500 if name.startswith("sort") else 30
        assert result["allocations"] >= least, (name, result)
        assert result["not_counted"] == [], (name, result)


if __name__ == "__main__":
    print(json.dumps(_sweep()))
