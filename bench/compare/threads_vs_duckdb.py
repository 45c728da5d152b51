#!/usr/bin/env python3
"""`spillway sort --threads T --tasks T` beside DuckDB at `threads=T`, file to file, on the same
Parquet files written by DuckDB, with the same memory: time (first run and best run) and peak
anonymous memory (RssAnon of the process, sampled every 10 ms from /proc by measure.py).

  python3 bench/compare/threads_vs_duckdb.py --rows 20000000 --threads 1,2 \
      --device-memory 256MiB --host-memory 256MiB [--runs 2] [--spillway build/release/apps/spillway]
      [--baseline path/to/an/earlier/spillway]

With --tpch-lineitem SF, the input is TPC-H's lineitem at scale factor SF as `tpchgen-cli` writes
it (16 columns: decimals, dates, string views), sorted by --by (default l_shipdate,l_orderkey).

With --baseline, an earlier build of spillway (one that may predate --threads and --tasks, run
with its defaults) sorts the same file in the same rounds, as "baseline".

The input is one int64 key (a multiplicative hash of the row number: every value distinct, no
order) and one int64 payload, written once by DuckDB's COPY (untimed). Each engine sorts it by
key into a new Parquet file; DuckDB gets memory_limit = device + host memory and the same temp
directory's disk. Runs alternate between the engines; each output is checked (row count, order)
after it is timed.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from measure import timed


def parse_size(text):
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    for unit, factor in units.items():
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * factor)
    return int(text)


DUCKDB_SORT = """
import duckdb, sys
source, target, threads, memory, temp, by = sys.argv[1:7]
con = duckdb.connect()
con.execute(f"SET threads={threads}")
con.execute(f"SET memory_limit='{memory}B'")
con.execute(f"SET temp_directory='{temp}'")
con.execute("SET preserve_insertion_order=true")
con.execute(f"COPY (SELECT * FROM read_parquet('{source}') ORDER BY {by}) TO '{target}' (FORMAT parquet)")
"""


def check(path, rows, keys):
    """Fails unless `path` holds `rows` rows in ascending order of `keys` (checked by DuckDB)."""
    import duckdb

    lags = ", ".join(f"lag({k}) OVER () AS prev_{k}" for k in keys)
    # Out of order: the first key that differs from the previous row's is smaller.
    later = " OR ".join(
        "(" + " AND ".join([f"{k} = prev_{k}" for k in keys[:i]] + [f"{keys[i]} < prev_{keys[i]}"]) + ")"
        for i in range(len(keys))
    )
    got, unordered = duckdb.connect().execute(
        f"SELECT count(*), count(*) FILTER (WHERE {later}) FROM (SELECT {', '.join(keys)}, {lags} "
        f"FROM read_parquet('{path}'))"
    ).fetchall()[0]
    if got != rows or unordered != 0:
        raise SystemExit(f"{path}: {got} rows of {rows}, {unordered} out of order")


def write_input(args, work):
    """Writes the input file; returns (path, rows, sort keys)."""
    import duckdb

    if args.tpch_lineitem:
        subprocess.run(["tpchgen-cli", "parquet", "-s", args.tpch_lineitem, "--tables=lineitem",
                        f"--output-dir={work}"], check=True, capture_output=True)
        source = os.path.join(work, "lineitem.parquet")
        keys = (args.by or "l_shipdate,l_orderkey").split(",")
        rows = duckdb.connect().execute(f"SELECT count(*) FROM read_parquet('{source}')").fetchall()[0][0]
        return source, rows, keys, f"TPC-H lineitem at scale factor {args.tpch_lineitem} (tpchgen-cli)"
    source = os.path.join(work, "input.parquet")
    duckdb.connect().execute(
        f"COPY (SELECT ((i::HUGEINT * 6364136223846793005) % 9223372036854775783)::BIGINT AS key, "
        f"i AS payload "
        f"FROM range({args.rows}) t(i)) TO '{source}' (FORMAT parquet)"
    )
    return source, args.rows, (args.by or "key").split(","), f"{args.rows} rows written by DuckDB"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--device-memory", default="256MiB")
    parser.add_argument("--host-memory", default="256MiB")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--spillway", default="build/release/apps/spillway")
    parser.add_argument("--temp-root", default=tempfile.gettempdir())
    parser.add_argument("--baseline", default=None, help="an earlier spillway, run with its defaults")
    parser.add_argument("--tpch-lineitem", default=None, metavar="SF", help="sort TPC-H lineitem at this scale")
    parser.add_argument("--by", default=None, help="sort keys, ascending (default: key)")
    args = parser.parse_args()
    memory = parse_size(args.device_memory) + parse_size(args.host_memory)
    work = tempfile.mkdtemp(prefix="spillway-threads-", dir=args.temp_root)
    try:
        source, rows, keys, what = write_input(args, work)
        by = ",".join(keys)
        print(f"{what}: {rows} rows, {os.path.getsize(source) / 2**20:.0f} MiB of Parquet, sorted by {by}; "
              f"memory {args.device_memory} + {args.host_memory} (DuckDB: memory_limit {memory >> 20} MiB)\n")
        print("| threads | engine | first run | best run | peak RssAnon |")
        print("|---|---|---|---|---|")
        for threads in [int(t) for t in args.threads.split(",")]:
            engines = ("spillway", "duckdb") + (("baseline",) if args.baseline else ())
            results = {engine: [] for engine in engines}
            for _ in range(args.runs):
                for engine in engines:
                    target = os.path.join(work, "out")
                    shutil.rmtree(target, ignore_errors=True)
                    temp = os.path.join(work, "temp")
                    os.makedirs(temp, exist_ok=True)
                    if engine == "spillway":
                        command = [args.spillway, "sort", source, "-o", target, "--by", by,
                                   "--threads", str(threads), "--tasks", str(threads),
                                   "--device-memory", args.device_memory,
                                   "--host-memory", args.host_memory, "--spill-dir", temp]
                        written = target
                    elif engine == "baseline":
                        command = [args.baseline, "sort", source, "-o", target, "--by", by,
                                   "--device-memory", args.device_memory,
                                   "--host-memory", args.host_memory, "--spill-dir", temp]
                        written = target
                    else:
                        os.makedirs(target)
                        written = os.path.join(target, "sorted.parquet")
                        command = [sys.executable, "-c", DUCKDB_SORT, source, written, str(threads),
                                   str(memory), temp, by]
                    results[engine].append(timed(command))
                    check(os.path.join(written, "*.parquet") if engine != "duckdb" else written, rows, keys)
                    shutil.rmtree(temp, ignore_errors=True)
            for engine, runs in results.items():
                best = min(seconds for seconds, _ in runs)
                peak = max(rss for _, rss in runs)
                print(f"| {threads} | {engine} | {runs[0][0]:.2f} s | {best:.2f} s | {peak:.0f} MiB |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
