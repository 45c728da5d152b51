"""Out-of-memory injected at every device allocation of a small sort and a small shuffle, through
the Python API.

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
    swept = {}
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
        assert result["allocations"] >= (500 if name.startswith("sort") else 30), (name, result)
        assert result["not_counted"] == [], (name, result)


if __name__ == "__main__":
    print(json.dumps(_sweep()))
