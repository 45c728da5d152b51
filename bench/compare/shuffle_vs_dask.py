#!/usr/bin/env python3
"""Shuffle the same timeseries Parquet dataset with spillway and with dask's two shuffles.

The data is what `spillway gen timeseries` writes (the columns of dask.datasets.timeseries:
timestamp, id, name, x, y); it is generated once when --data does not exist. Every engine reads
the dataset, hash-partitions it by --by into --partitions partitions and writes the partitions
as Parquet; the time is that of the whole command (read, shuffle, write), measured the same way
for every engine. Throughput is the dataset's in-memory (Arrow) size divided by that time.

dask runs a LocalCluster of --workers processes with one thread each (by default 2, the cores
of this machine), its "tasks" shuffle and its "p2p" shuffle (which uses pyarrow).
spillway runs `spillway shuffle` in one process (in-process ranks) and, with --mpi-ranks, under
mpirun, in pull and push modes.

With --in-memory, the input is loaded first and only the shuffle is timed: spillway's
`spillway_shuffle_bench` holds each rank's input in its spill store, then times the map tasks,
the exchange and reading every partition; dask persists the dataset on its workers, then times
`df.shuffle(...).map_partitions(len).compute()`. Nothing is written.

  python3 bench/compare/shuffle_vs_dask.py --rows 31600000 --partitions 64 \
      [--engines spillway-pull,spillway-push,dask-tasks,dask-p2p] [--mpi-ranks 2,4]
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


def run_spillway_in_memory(args, mode, ranks):
    command = [args.shuffle_bench, args.data] + spillway_options(args, mode)
    _, stdout = run_timed(on_ranks(args, command, ranks))
    summary = json.loads(stdout.strip().splitlines()[-1])
    return summary["seconds"], json.dumps(summary)


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


def run_dask_in_memory(args, method):
    _, stdout = run_dask_script(args, f"""
    df = dd.read_parquet("{args.data}").persist()
    wait(df)
    start = time.perf_counter()
    counts = df.shuffle("{args.by}", npartitions={args.partitions},
                        shuffle_method="{method}").map_partitions(len).compute()
    print(time.perf_counter() - start, int(counts.sum()))""")
    seconds, rows = stdout.strip().splitlines()[-1].split()
    return float(seconds), int(rows)


def run_dask(args, method, out_dir):
    seconds, stdout = run_dask_script(args, f"""
    start = time.perf_counter()
    df = dd.read_parquet("{args.data}")
    out = df.shuffle("{args.by}", npartitions={args.partitions}, shuffle_method="{method}")
    out.to_parquet("{out_dir}", write_index=False)
    print(time.perf_counter() - start)""")
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


def print_table(results):
    """A Markdown table of (label, seconds, MB/s) with each run's speed-up over the best dask."""
    best_dask = min((s for label, s, _ in results if label.startswith("dask")), default=None)
    print()
    print("| engine | seconds | MB/s | vs best dask |")
    print("|---|---|---|---|")
    for label, seconds, rate in results:
        ratio = f"{best_dask / seconds:.1f}x" if best_dask else "-"
        print(f"| {label} | {seconds:.2f} | {rate:.0f} | {ratio} |")


def add_engine_arguments(parser, engines):
    """The options of every spillway-beside-dask script: ranks, budgets, workers, engines."""
    parser.add_argument("--ranks", type=int, default=2, help="in-process ranks of spillway")
    parser.add_argument("--mpi-ranks", default="", help="e.g. 2,4: also run under mpirun")
    parser.add_argument("--device-memory", default="256MiB", help="per rank")
    parser.add_argument("--host-memory", default="1GiB", help="per rank")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dask-memory", default="4GiB", help="memory limit per dask worker")
    parser.add_argument("--engines", default=engines)
    parser.add_argument("--spillway", default=os.path.join(ROOT, "build", "release", "apps",
                                                           "spillway"))
    parser.add_argument("--temp", default=None, help="directory for outputs and spills")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=31_600_000)
    parser.add_argument("--data", default=None, help="Parquet dataset (default: generated)")
    parser.add_argument("--by", default="id")
    parser.add_argument("--partitions", type=int, default=64)
    add_engine_arguments(parser, "spillway-pull,spillway-push,dask-tasks,dask-p2p")
    parser.add_argument("--in-memory", action="store_true",
                        help="time the shuffle alone, its input already loaded")
    parser.add_argument("--shuffle-bench", default=os.path.join(ROOT, "build", "release", "bench",
                                                                "spillway_shuffle_bench"))
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

    results = []
    for label, engine, mode, ranks in engine_runs(args.engines, args.ranks, args.mpi_ranks):
        out_dir = os.path.join(args.temp, "out-" + label.replace(" ", "_").replace("(", "")
                               .replace(")", ""))
        shutil.rmtree(out_dir, ignore_errors=True)
        if args.in_memory:
            if engine.startswith("spillway-"):
                seconds, extra = run_spillway_in_memory(args, mode, ranks)
                out_rows = json.loads(extra)["rows"]
            else:
                seconds, out_rows = run_dask_in_memory(args, mode)
                extra = "persisted first; shuffle and a count per partition timed"
        else:
            if engine.startswith("spillway-"):
                seconds, extra = run_spillway(args, mode, ranks, out_dir)
            else:
                inner, seconds = run_dask(args, mode, out_dir)
                extra = f"cluster start-up excluded: {inner:.2f} s inside, {seconds:.2f} s in all"
                seconds = inner
            out_rows, _ = arrow_bytes(out_dir)
            shutil.rmtree(out_dir, ignore_errors=True)
        if out_rows != rows:
            raise SystemExit(f"{label}: {out_rows} rows out, expected {rows}")
        rate = nbytes / seconds / 1e6
        results.append((label, seconds, rate))
        print(json.dumps({"engine": label, "seconds": round(seconds, 3),
                          "MB_per_s": round(rate, 1), "detail": extra}), flush=True)

    print_table(results)


if __name__ == "__main__":
    main()
