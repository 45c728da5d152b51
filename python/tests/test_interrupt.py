"""Ctrl-C stops a sort cleanly: KeyboardInterrupt, and no spill file left behind."""

import _thread
import os
import threading
import time

import numpy as np
import pyarrow as pa
import pytest
import spillway


def _files_under(path):
    return [os.path.join(root, name) for root, _, names in os.walk(path) for name in names]


def _interrupt_once_spilled(spill_dir, seen, deadline=60.0):
    """Interrupts the main thread as soon as a spill file exists under `spill_dir`."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if _files_under(spill_dir):
            seen.set()
            _thread.interrupt_main()
            return
        time.sleep(0.005)


@pytest.mark.parametrize("shared_environment", [False, True])
def test_keyboard_interrupt_stops_the_sort_and_removes_its_spill_files(tmp_path, shared_environment):
    rows = 6_000_000
    rng = np.random.default_rng(1)
    table = pa.table({"k": rng.integers(0, 2**62, rows), "v": np.arange(rows)})
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    seen = threading.Event()
    timer = threading.Thread(target=_interrupt_once_spilled, args=(spill_dir, seen), daemon=True)
    budgets = dict(device_memory="8MiB", host_memory="1MiB", spill_dir=spill_dir)
    env = spillway.Environment(**budgets) if shared_environment else None
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        if env is None:
            spillway.sort(table, by="k", **budgets).read_all()
        else:
            spillway.sort(table, by="k", env=env).read_all()
        time.sleep(30)  # the sort ended before the interrupt came: fails below
    timer.join()
    assert seen.is_set(), "the sort wrote no spill file"
    assert time.monotonic() - started < 30
    assert _files_under(spill_dir) == []
    if env is None:
        assert os.listdir(spill_dir) == []  # the store's directory went with the sort
    else:
        stats = env.statistics()["spill"]
        assert stats["bytes_on"]["disk"] == 0 and stats["bytes_on"]["host"] == 0
        env.close()
        assert os.listdir(spill_dir) == []
