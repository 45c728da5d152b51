#!/usr/bin/env python3
"""Sort the same timeseries Parquet dataset across workers with spillway and with dask.

spillway: `spillway sort` with --ranks in-process ranks and, with --mpi-ranks, under mpirun
(sample, splitters by one allgather, range shuffle in push or pull mode, local out-of-core
sort; rank r writes part-<r>-*). dask: `read_parquet(...).sort_values([...])` written back as
Parquet on a LocalCluster of --workers processes with one thread each, with its tasks and p2p
shuffles. Parquet to Parquet for every engine; spillway's time is the whole command, dask's
the script's inner time (cluster start-up excluded). Each output is checked: every row is
there and the keys are in order across the files, in the order the engine names them.

With --in-memory, the input is loaded first and only the sort is timed, --repeat times: spillway's
`spillway_shuffle_bench --sort` holds each rank's input in its spill store and lends it to the
distributed sort (each rank checks its sorted batches in order and counts them, and the ranks'
key ranges are checked in rank order); dask persists the input, then times
`sort_values([...]).map_partitions(len).compute()`; `duckdb-sort` (in-memory only) loads the
dataset into a DuckDB table, then times a sorted copy of it on 2 threads, the same sort done by
one machine's engine; `polars-sort` (in-memory only) the same with Polars (`read_parquet`, then
`DataFrame.sort` timed, POLARS_MAX_THREADS=2). Nothing is written.

  python3 bench/compare/dsort_vs_dask.py --data data/timeseries-1g --by id,timestamp \
      --ranks 2 --mpi-ranks 4 --device-memory 256MiB --host-memory 1GiB
  python3 bench/compare/dsort_vs_dask.py --data data/timeseries-31600000 --by id,timestamp \
      --ranks 2 --mpi-ranks 2 --device-memory 4GiB --host-memory 1GiB --in-memory --repeat 3
"""
import argparse
import glob
import json
import os
import re
import shutil
import sys
import tempfile

from shuffle_vs_dask import (ROOT, add_engine_arguments, add_in_memory_arguments, arrow_bytes,
                             engine_runs, print_table, run_dask_in_memory, run_dask_script,
                             run_spillway_in_memory, run_timed)


def keys_in_order(files, by):
    """Whether the `by` columns of `files`, read in this order, never descend."""
    import pyarrow.parquet as pq
    previous = None
    for path in files:
        table = pq.read_table(path, columns=by)
        if table.num_rows == 0:
            continue
        columns = [table.column(name).to_numpy() for name in by]
        # Row i is not before row i-1: from the last key to the first, greater, or equal and
        # not before on the later keys.
        ok = columns[-1][1:] >= columns[-1][:-1]
        for column in reversed(columns[:-1]):
            ok = (column[1:] > column[:-1]) | ((column[1:] == column[:-1]) & ok)
        if not ok.all():
            return False
        first = tuple(column[0] for column in columns)
        if previous is not None and first < previous:
            return False
        previous = tuple(column[-1] for column in columns)
    return True


def natural_key(path):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def run_spillway(args, mode, ranks, out_dir):
    command = [args.spillway, "sort", args.data, "-o", out_dir, "--by", args.by,
               "--device-memory", args.device_memory, "--host-memory", args.host_memory,
               "--spill-dir", args.temp, "--shuffle-mode", mode, "--json"]
    if ranks:
        command = [os.path.join(ROOT, "scripts", "mpirun.sh"), "-np", str(ranks)] + command
    else:
        command += ["--ranks", str(args.ranks)]
    seconds, _ = run_timed(command)
    return seconds, sorted(glob.glob(os.path.join(out_dir, "*.parquet")), key=natural_key)


def run_dask(args, method, out_dir):
    by = args.by.split(",")
    _, stdout = run_dask_script(args, f"""
    start = time.perf_counter()
    df = dd.read_parquet("{args.data}")
    out = df.sort_values({by!r}, shuffle_method="{method}")
    out.to_parquet("{out_dir}", write_index=False)
    print(time.perf_counter() - start)""")
    seconds = float(stdout.strip().splitlines()[-1])
    return seconds, sorted(glob.glob(os.path.join(out_dir, "*.parquet")), key=natural_key)


def run_duckdb_sort_in_memory(args):
    """DuckDB on 2 threads: the dataset loaded into a table (not timed), then a sorted copy of
    it made --repeat times; (seconds of each run, rows of the last)."""
    code = f"""
import duckdb, time
con = duckdb.connect()
con.execute("SET threads=2")
con.execute("SET enable_progress_bar=false")
con.execute("CREATE TABLE t AS SELECT * FROM read_parquet('{args.data}/*.parquet')")
for run in range({args.repeat}):
    start = time.perf_counter()
    con.execute("CREATE OR REPLACE TABLE s AS SELECT * FROM t ORDER BY {args.by}")
    seconds = time.perf_counter() - start
    ordered = con.execute(
        "SELECT count(*) FROM (SELECT ({args.by}) < lag(({args.by})) OVER (ORDER BY rowid) AS back"
        " FROM s) WHERE back").fetchone()[0] == 0
    print(seconds, con.execute("SELECT count(*) FROM s").fetchone()[0], ordered, flush=True)
"""
    _, stdout = run_timed([sys.executable, "-c", code])
    lines = [line.split() for line in stdout.strip().splitlines()[-args.repeat:]]
    if not all(line[2] == "True" for line in lines):
        raise SystemExit("duckdb-sort: rows out of order")
    return [float(line[0]) for line in lines], int(lines[-1][1])


def run_polars_sort_in_memory(args):
    """Polars on 2 threads: the dataset read into a DataFrame (not timed), then sorted --repeat
    times; (seconds of each run, rows of the last)."""
    code = f"""
import time
import polars as pl
by = {args.by.split(",")!r}
df = pl.read_parquet('{args.data}/*.parquet')
for run in range({args.repeat}):
    start = time.perf_counter()
    s = df.sort(by)
    seconds = time.perf_counter() - start
    # In order: from the last key to the first, each row greater, or equal and not before on the
    # later keys, than the row before it.
    ok = pl.col(by[-1]) >= pl.col(by[-1]).shift(1)
    for name in reversed(by[:-1]):
        ok = (pl.col(name) > pl.col(name).shift(1)) | ((pl.col(name) == pl.col(name).shift(1)) & ok)
    ordered = s.select(ok.fill_null(True).all()).item()
    print(seconds, s.height, ordered, flush=True)
"""
    _, stdout = run_timed([sys.executable, "-c", code], env=dict(os.environ, POLARS_MAX_THREADS="2"))
    lines = [line.split() for line in stdout.strip().splitlines()[-args.repeat:]]
    if not all(line[2] == "True" for line in lines):
        raise SystemExit("polars-sort: rows out of order")
    return [float(line[0]) for line in lines], int(lines[-1][1])


def run_in_memory(args, rows, nbytes):
    """Each engine's sort of the loaded input, --repeat times; a table of first and best runs."""
    by = args.by.split(",")
    results = []
    for label, engine, mode, ranks in engine_runs(args.engines, args.ranks, args.mpi_ranks):
        if engine.startswith("spillway-"):
            options = ["--sort", "--by", args.by, "--mode", mode, "--device-memory",
                       args.device_memory, "--host-memory", args.host_memory]
            runs, extra = run_spillway_in_memory(args, mode, ranks, options)
            out_rows = json.loads(extra)["rows"]  # the bench fails on rows out of order
        elif engine.startswith("duckdb-"):
            runs, out_rows = run_duckdb_sort_in_memory(args)
            extra = ("table loaded first; CREATE TABLE AS ... ORDER BY timed, 2 threads "
                     "(one process: the sort a single machine's engine does)")
        elif engine.startswith("polars-"):
            runs, out_rows = run_polars_sort_in_memory(args)
            extra = "DataFrame read first; DataFrame.sort timed, 2 threads (one process)"
        else:
            try:
                runs, out_rows = run_dask_in_memory(
                    args, mode, f'source.sort_values({by!r}, shuffle_method="{mode}")')
            except SystemExit as failure:  # dask's workers killed at their memory limit, say
                print(json.dumps({"engine": label, "failed": str(failure)[-300:]}), flush=True)
                continue
            extra = "persisted first; sort_values and a count per partition timed"
        if out_rows != rows:
            raise SystemExit(f"{label}: {out_rows} rows out, expected {rows}")
        results.append((label, runs[0], nbytes / runs[0] / 1e6, runs))
        print(json.dumps({"engine": label, "runs": [round(run, 3) for run in runs],
                          "detail": extra}), flush=True)
    print_table(results, nbytes)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="Parquet dataset (spillway gen timeseries)")
    parser.add_argument("--by", default="id,timestamp")
    add_engine_arguments(parser, "spillway-push,spillway-pull,dask-tasks,dask-p2p")
    add_in_memory_arguments(parser, "sort")
    args = parser.parse_args()
    args.temp = args.temp or tempfile.mkdtemp(prefix="dsort-bench-", dir=os.path.join(ROOT, "data"))
    os.makedirs(args.temp, exist_ok=True)
    rows, nbytes = arrow_bytes(args.data)
    print(f"data: {args.data}: {rows} rows, {nbytes / 1e6:.1f} MB in memory; by {args.by}",
          flush=True)

    if args.in_memory:
        run_in_memory(args, rows, nbytes)
        return
    if "duckdb-" in args.engines or "polars-" in args.engines:
        raise SystemExit("duckdb-sort and polars-sort run with --in-memory only")
    results = []
    for label, engine, mode, ranks in engine_runs(args.engines, args.ranks, args.mpi_ranks):
        out_dir = os.path.join(args.temp, "out-" + re.sub(r"[^A-Za-z0-9_-]", "_", label))
        shutil.rmtree(out_dir, ignore_errors=True)
        if engine.startswith("spillway-"):
            seconds, files = run_spillway(args, mode, ranks, out_dir)
        else:
            seconds, files = run_dask(args, mode, out_dir)
        out_rows, _ = arrow_bytes(out_dir)
        ordered = keys_in_order(files, args.by.split(","))
        shutil.rmtree(out_dir, ignore_errors=True)
        if out_rows != rows or not ordered:
            raise SystemExit(f"{label}: {out_rows} rows out of {rows}, in order: {ordered}")
        rate = nbytes / seconds / 1e6
        results.append((label, seconds, rate))
        print(json.dumps({"engine": label, "seconds": round(seconds, 3),
                          "MB_per_s": round(rate, 1), "files": len(files)}), flush=True)

    print_table(results)


if __name__ == "__main__":
    main()
