#!/usr/bin/env python3
"""spillway.sort of an in-memory pyarrow Table beside pyarrow's Table.sort_by, Polars and DuckDB.

Each engine sorts the same generated table (same seed) in a process of its own, on --threads
threads, so that its peak RSS is its own; the time is that of the sort alone (the result as an
Arrow table, or for Polars a DataFrame over the same memory), the best of --repeat runs. Prints a
markdown table: engine, case, seconds, peak RSS, and the RSS before the sort (the table itself).

    python3 bench/compare/python_sort.py --rows 10000000 --threads 2

Needs pyarrow, duckdb and spillway (pip install --no-build-isolation ., or PYTHONPATH=
build/release/python); Polars is skipped when it is not installed.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

CASES = {
    "int64 key + int64 payload": "int",
    "string key + int64 payload": "string",
}


def make_table(kind, rows):
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(42)
    if kind == "int":
        key = pa.array(rng.integers(0, 2**62, rows))
    else:  # strings of 8 to 19 characters
        key = pa.array(rng.integers(10**7, 10**19, rows, dtype=np.uint64)).cast(pa.string())
    return pa.table({"k": key, "v": pa.array(np.arange(rows, dtype=np.int64))})


def peak_rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def current_rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_engine(engine, kind, rows, threads, repeat, device_memory, host_memory):
    """In the child: sorts once per repeat; prints a JSON line."""
    os.environ["POLARS_MAX_THREADS"] = str(threads)
    import pyarrow as pa

    pa.set_cpu_count(threads)
    pa.set_io_thread_count(threads)
    table = make_table(kind, rows)
    before = current_rss()
    if engine == "pyarrow":

        def sort():
            return table.sort_by("k")

    elif engine == "polars":
        import polars as pl

        def sort():
            return pl.from_arrow(table).sort("k")

    elif engine == "duckdb":
        import duckdb

        con = duckdb.connect()
        con.execute(f"SET threads={threads}")
        con.register("data", table)

        def sort():
            result = con.sql("SELECT * FROM data ORDER BY k")
            out = result.fetch_arrow_table() if hasattr(result, "fetch_arrow_table") else result.arrow()
            return out.read_all() if isinstance(out, pa.RecordBatchReader) else out

    elif engine.startswith("spillway"):
        import spillway

        env = spillway.Environment(device_memory=device_memory, host_memory=host_memory, threads=threads)

        def sort():
            return spillway.sort(table, by="k", env=env).read_all()

    else:
        raise SystemExit(f"unknown engine {engine}")
    best = None
    rows_out = 0
    for _ in range(repeat):
        start = time.perf_counter()
        result = sort()
        seconds = time.perf_counter() - start
        rows_out = len(result)
        del result
        best = seconds if best is None else min(best, seconds)
    assert rows_out == rows, (engine, rows_out)
    print(json.dumps({"seconds": best, "peak_rss": peak_rss(), "before_rss": before}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--device-memory", default="2GiB", help="spillway's device (in memory: no spill)")
    parser.add_argument("--small-device", default="256MiB", help="spillway's second run: a device that spills")
    parser.add_argument("--host-memory", default="2GiB")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        engine, kind = args.child
        device = args.small_device if engine == "spillway-small" else args.device_memory
        host = "128MiB" if engine == "spillway-small" else args.host_memory
        run_engine(engine, kind, args.rows, args.threads, args.repeat, device, host)
        return

    engines = [
        ("pyarrow", "pyarrow Table.sort_by"),
        ("polars", "Polars DataFrame.sort"),
        ("duckdb", "DuckDB ORDER BY"),
        ("spillway", f"spillway.sort ({args.device_memory} device)"),
        ("spillway-small", f"spillway.sort ({args.small_device} device, 128MiB host, spills)"),
    ]
    print(f"{args.rows:,} rows, {args.threads} threads, best of {args.repeat}; peak RSS of the process "
          "(the table included), RSS before the sort (the table)\n")
    print("| engine | case | seconds | peak RSS (MiB) | RSS before sort (MiB) |")
    print("|---|---|---:|---:|---:|")
    for case, kind in CASES.items():
        for engine, label in engines:
            child = subprocess.run(
                [sys.executable, __file__, "--child", engine, kind, "--rows", str(args.rows),
                 "--threads", str(args.threads), "--repeat", str(args.repeat),
                 "--device-memory", args.device_memory, "--small-device", args.small_device,
                 "--host-memory", args.host_memory],
                capture_output=True,
                text=True,
            )
            if child.returncode != 0:
                last = (child.stderr.strip().splitlines() or ["failed"])[-1]
                if "No module named 'polars'" in child.stderr:
                    last = "skipped: polars is not installed"
                print(f"| {label} | {case} | {last} | | |")
                continue
            result = json.loads(child.stdout.strip().splitlines()[-1])
            print(f"| {label} | {case} | {result['seconds']:.2f} | {result['peak_rss'] / 2**20:.0f} | "
                  f"{result['before_rss'] / 2**20:.0f} |", flush=True)


if __name__ == "__main__":
    main()
