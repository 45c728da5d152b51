#!/usr/bin/env python3
"""Shuffle the same timeseries Parquet dataset with spillway and with dask's two shuffles.

The data is what `spillway gen timeseries` writes (the columns of dask.datasets.timeseries:
timestamp, id, name, x, y); it is generated once when --data does not exist. Every engine reads
the dataset, hash-partitions it by --by into --partitions partitions and writes the partitions
as Parquet; the time is that of the whole command (read, shuffle, write), measured the same way
for every engine. Throughput is the dataset's in-memory (Arrow) size divided by that time.

dask runs a LocalCluster of --workers processes with one thread each (by default 2, the cores
of this machine), its "tasks" shuffle and its "p2p" shuffle (which uses pyarrow). DuckDB
(`duckdb-copy`, `duckdb-partition`; Parquet to Parquet only) runs on 2 threads: its COPY of the
same files without partitioning is the floor of reading and writing them, and its COPY with
PARTITION_BY a hash of --by is a one-process hash partitioning into files.
spillway runs `spillway shuffle` in one process (in-process ranks) and, with --mpi-ranks, under
mpirun, in pull and push modes.

With --in-memory, the input is loaded first and only the shuffle is timed: spillway's
`spillway_shuffle_bench` holds each rank's input in its spill store, then times the map tasks,
the exchange and reading every partition; dask persists the dataset on its workers, then times
`df.shuffle(...).map_partitions(len).compute()`. Nothing is written. With --repeat N, every
engine repeats the timed part N times in the same process (spillway) or on the same cluster
(dask), and the table shows the first run and the best one: the first pays for memory the
process has not touched yet, the later ones show a long-lived worker.

  python3 bench/compare/shuffle_vs_dask.py --rows 31600000 --partitions 64 \
      [--engines spillway-pull,spillway-push,dask-tasks,dask-p2p,duckdb-copy,duckdb-partition]
      [--mpi-ranks 2,4]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def arrow_bytes(path):
    import pyarrow.dataset as ds
    table = ds.dataset(path, format="parquet").to_table()
    return table.num_rows, table.nbytes


def run_timed(command, env=None):
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"failed: {' '.join(command)}\n{result.stderr[-4000:]}")
    return seconds, result.stdout


def on_ranks(args, command, ranks):
    """`command` under mpirun with `ranks` processes, or on --ranks in-process ranks."""
    if ranks:
        return [os.path.join(ROOT, "scripts", "mpirun.sh"), "-np", str(ranks)] + command
    return command + ["--ranks", str(args.ranks)]


def spillway_options(args, mode):
    return ["--by", args.by, "--partitions", str(args.partitions), "--mode", mode,
            "--device-memory", args.device_memory, "--host-memory", args.host_memory]


def run_spillway(args, mode, ranks, out_dir):
    command = [args.spillway, "shuffle", args.data, "-o", out_dir] + \
        spillway_options(args, mode) + ["--spill-dir", args.temp, "--overwrite", "--json"]
    seconds, stdout = run_timed(on_ranks(args, command, ranks))
    return seconds, stdout.strip().splitlines()[-1] if stdout.strip() else ""


def run_spillway_in_memory(args, mode, ranks, options=None):
    """(seconds of each timed run, the bench's summary); `options`: the bench's flags (default:
    the shuffle's)."""
    command = [args.shuffle_bench, args.data] + (options or spillway_options(args, mode)) + \
        ["--repeat", str(args.repeat)]
    _, stdout = run_timed(on_ranks(args, command, ranks))
    summary = json.loads(stdout.strip().splitlines()[-1])
    return summary["runs"], json.dumps(summary)


def run_dask_script(args, body):
    """Runs `body` (Python, indented by 4) with `client` on a LocalCluster; returns its stdout."""
    code = f"""
import time, dask, dask.dataframe as dd
from distributed import Client, LocalCluster, wait
if __name__ == "__main__":
    cluster = LocalCluster(n_workers={args.workers}, threads_per_worker=1,
                           memory_limit="{args.dask_memory}", dashboard_address=None,
                           local_directory="{args.temp}")
    client = Client(cluster)
{body}
    client.close(); cluster.close()
"""
    return run_timed([sys.executable, "-c", code])


def run_dask_in_memory(args, method, operation=None):
    """(seconds of each timed run, rows of the last); `operation`: a Python expression of
    `source` (the persisted input) that gives the dask DataFrame to count (default: the
    shuffle)."""
    operation = operation or (f'source.shuffle("{args.by}", npartitions={args.partitions}, '
                              f'shuffle_method="{method}")')
    _, stdout = run_dask_script(args, f"""
    df = dd.read_parquet("{args.data}").persist()
    wait(df)
    for run in range({args.repeat}):
        # Each run gets keys of its own (an identity step named per run): a repeated graph could
        # be answered from results the scheduler still holds.
        start = time.perf_counter()
        source = df.map_partitions(lambda part: part, meta=df._meta, token=f"run-{{run}}")
        counts = ({operation}).map_partitions(len).compute()
        print(time.perf_counter() - start, int(counts.sum()), flush=True)""")
    lines = [line.split() for line in stdout.strip().splitlines()[-args.repeat:]]
    return [float(seconds) for seconds, _ in lines], int(lines[-1][1])


def run_dask(args, method, out_dir):
    seconds, stdout = run_dask_script(args, f"""
    start = time.perf_counter()
    df = dd.read_parquet("{args.data}")
    out = df.shuffle("{args.by}", npartitions={args.partitions}, shuffle_method="{method}")
    out.to_parquet("{out_dir}", write_index=False)
    print(time.perf_counter() - start)""")
    return float(stdout.strip().splitlines()[-1]), seconds


def run_duckdb(args, mode, out_dir):
    """DuckDB (2 threads) from the same Parquet files to Parquet, snappy as spillway writes:
    `copy` reads and writes every row once, without partitioning (the floor of any Parquet to
    Parquet shuffle on this machine); `partition` writes --partitions hash partitions by --by
    (COPY ... PARTITION_BY, one process). (seconds inside, seconds in all)."""
    select = f"SELECT * FROM read_parquet('{args.data}/*.parquet')"
    if mode == "partition":
        select = (f"SELECT *, hash({args.by}) % {args.partitions} AS spillway_partition "
                  f"FROM read_parquet('{args.data}/*.parquet')")
        target = f"'{out_dir}' (FORMAT parquet, COMPRESSION snappy, PARTITION_BY (spillway_partition))"
    else:
        target = f"'{out_dir}' (FORMAT parquet, COMPRESSION snappy, PER_THREAD_OUTPUT true)"
    code = f"""
import duckdb, time
con = duckdb.connect()
con.execute("SET threads=2")
con.execute("SET enable_progress_bar=false")
start = time.perf_counter()
con.execute(\"\"\"COPY ({select}) TO {target}\"\"\")
print(time.perf_counter() - start)
"""
    seconds, stdout = run_timed([sys.executable, "-c", code])
    return float(stdout.strip().splitlines()[-1]), seconds


def engine_runs(engines, ranks, mpi_ranks):
    """(label, engine, mode, mpi ranks or 0) for each run of `engines` (comma-separated): a
    spillway engine once on `ranks` in-process ranks and once per entry of `mpi_ranks`."""
    runs = []
    for engine in engines.split(","):
        mode = engine.split("-", 1)[1]
        if engine.startswith("spillway-"):
            runs.append((f"{engine} ({ranks} in-process ranks)", engine, mode, 0))
            for count in filter(None, mpi_ranks.split(",")):
                runs.append((f"{engine} (mpirun -np {count})", engine, mode, int(count)))
        else:
            runs.append((engine, engine, mode, 0))
    return runs


def print_table(results, nbytes=None):
    """A Markdown table of (label, seconds, MB/s) with each run's speed-up over the best dask.

    A result may also carry the seconds of every run (`repeat` > 1, `nbytes` given): then the
    first run and the best run get a column each, each compared with dask's same run."""
    if nbytes is None or all(len(result) < 4 or len(result[3]) < 2 for result in results):
        best_dask = min((s for label, s, *_ in results if label.startswith("dask")), default=None)
        print()
        print("| engine | seconds | MB/s | vs best dask |")
        print("|---|---|---|---|")
        for label, seconds, rate, *_ in results:
            ratio = f"{best_dask / seconds:.1f}x" if best_dask else "-"
            print(f"| {label} | {seconds:.2f} | {rate:.0f} | {ratio} |")
        return
    dask = [runs for label, _, _, runs in results if label.startswith("dask")]
    first_dask = min((runs[0] for runs in dask), default=None)
    best_dask = min((min(runs) for runs in dask), default=None)
    print()
    print("| engine | first run s | MB/s | vs best dask first | best run s | MB/s "
          "| vs best dask best |")
    print("|---|---|---|---|---|---|---|")
    for label, _, _, runs in results:
        first, best = runs[0], min(runs)
        first_ratio = f"{first_dask / first:.1f}x" if first_dask else "-"
        best_ratio = f"{best_dask / best:.1f}x" if best_dask else "-"
        print(f"| {label} | {first:.2f} | {nbytes / first / 1e6:.0f} | {first_ratio} "
              f"| {best:.2f} | {nbytes / best / 1e6:.0f} | {best_ratio} |")


def add_engine_arguments(parser, engines):
    """The options of every spillway-beside-dask script: ranks, budgets, workers, engines."""
    parser.add_argument("--ranks", type=int, default=2, help="in-process ranks of spillway")
    parser.add_argument("--mpi-ranks", default="", help="e.g. 2,4: also run under mpirun")
    parser.add_argument("--device-memory", default="256MiB", help="per rank")
    parser.add_argument("--host-memory", default="1GiB", help="per rank")
    parser.add_argument("--workers", type=int, default=2)
    # 8 GiB: with 4 GiB its p2p shuffle of the 31.6M-row timeseries lost its workers in every
    # run on this machine, and its tasks shuffle's first runs were slower: 8.95-10.61 s against
    # 7.29 s with 8 GiB (7843efc:docs/BENCHMARKS.md, "One cache of freed blocks behind the
    # emulated device and the host").
    parser.add_argument("--dask-memory", default="8GiB", help="memory limit per dask worker")
    parser.add_argument("--engines", default=engines)
    parser.add_argument("--spillway", default=os.path.join(ROOT, "build", "release", "apps",
                                                           "spillway"))
    parser.add_argument("--temp", default=None, help="directory for outputs and spills")


def add_in_memory_arguments(parser, operation):
    """--in-memory, --repeat and --shuffle-bench: timing `operation` alone, its input loaded."""
    parser.add_argument("--in-memory", action="store_true",
                        help=f"time the {operation} alone, its input already loaded")
    parser.add_argument("--repeat", type=int, default=1,
                        help="with --in-memory: timed runs per engine (first and best shown)")
    parser.add_argument("--shuffle-bench", default=os.path.join(ROOT, "build", "release", "bench",
                                                                "spillway_shuffle_bench"))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=31_600_000)
    parser.add_argument("--data", default=None, help="Parquet dataset (default: generated)")
    parser.add_argument("--by", default="id")
    parser.add_argument("--partitions", type=int, default=64)
    add_engine_arguments(parser, "spillway-pull,spillway-push,dask-tasks,dask-p2p")
    add_in_memory_arguments(parser, "shuffle")
    args = parser.parse_args()

    os.makedirs(os.path.join(ROOT, "data"), exist_ok=True)
    args.temp = args.temp or tempfile.mkdtemp(prefix="shuffle-bench-",
                                              dir=os.path.join(ROOT, "data"))
    os.makedirs(args.temp, exist_ok=True)
    if args.data is None:
        args.data = os.path.join(ROOT, "data", f"timeseries-{args.rows}")
    if not os.path.exists(args.data):
        subprocess.run([args.spillway, "gen", "timeseries", "--rows", str(args.rows), "-o",
                        args.data], check=True)
    rows, nbytes = arrow_bytes(args.data)
    print(f"data: {args.data}: {rows} rows, {nbytes / 1e6:.1f} MB in memory; "
          f"{args.partitions} partitions by {args.by}", flush=True)

    if args.in_memory and "duckdb-" in args.engines:
        raise SystemExit("the duckdb engines run Parquet to Parquet only (without --in-memory)")
    results = []
    for label, engine, mode, ranks in engine_runs(args.engines, args.ranks, args.mpi_ranks):
        out_dir = os.path.join(args.temp, "out-" + label.replace(" ", "_").replace("(", "")
                               .replace(")", ""))
        shutil.rmtree(out_dir, ignore_errors=True)
        runs = None
        if args.in_memory:
            if engine.startswith("spillway-"):
                runs, extra = run_spillway_in_memory(args, mode, ranks)
                out_rows = json.loads(extra)["rows"]
            else:
                try:
                    runs, out_rows = run_dask_in_memory(args, mode)
                except SystemExit as failure:  # dask's workers killed at their memory limit
                    print(json.dumps({"engine": label, "failed": str(failure)[-300:]}), flush=True)
                    continue
                extra = "persisted first; shuffle and a count per partition timed"
            seconds = runs[0]
        else:
            if engine.startswith("spillway-"):
                seconds, extra = run_spillway(args, mode, ranks, out_dir)
            elif engine.startswith("duckdb-"):
                inner, seconds = run_duckdb(args, mode, out_dir)
                extra = f"connection excluded: {inner:.2f} s inside, {seconds:.2f} s in all"
                seconds = inner
            else:
                try:
                    inner, seconds = run_dask(args, mode, out_dir)
                except SystemExit as failure:
                    print(json.dumps({"engine": label, "failed": str(failure)[-300:]}), flush=True)
                    continue
                extra = f"cluster start-up excluded: {inner:.2f} s inside, {seconds:.2f} s in all"
                seconds = inner
            out_rows, _ = arrow_bytes(out_dir)
            shutil.rmtree(out_dir, ignore_errors=True)
        if out_rows != rows:
            raise SystemExit(f"{label}: {out_rows} rows out, expected {rows}")
        rate = nbytes / seconds / 1e6
        results.append((label, seconds, rate, runs or [seconds]))
        print(json.dumps({"engine": label, "seconds": round(seconds, 3),
                          "runs": [round(run, 3) for run in runs or [seconds]],
                          "MB_per_s": round(rate, 1), "detail": extra}), flush=True)

    print_table(results, nbytes)


if __name__ == "__main__":
    main()
