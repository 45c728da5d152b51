#!/usr/bin/env python3
"""Hash-partition Parquet files written by other tools, file to file, with spillway and DuckDB.

The inputs are those of sort_vs_peers.py (written by DuckDB's COPY, or TPC-H lineitem by
`tpchgen-cli`), kept under --data-dir. Every engine reads the file, hash-partitions its rows by
one column into --partitions partitions and writes each partition as Parquet:

  spillway   spillway shuffle IN -o OUT --by KEY --partitions P --threads T, with --memory split
             into equal --device-memory and --host-memory (one rank, --tasks by default)
  duckdb     COPY (SELECT *, hash(KEY) % P AS part FROM read_parquet(IN)) TO OUT
             (FORMAT parquet, PARTITION_BY (part)), memory_limit --memory, threads T

Several spillway builds can run side by side (--spillway NAME=PATH, repeated: e.g. a build before
and after a change). Runs alternate between engines; each case's input is read once first so
that every run finds it in the page cache. The time is each engine's own (spillway's summary
`seconds`; DuckDB's COPY timed in its process), the peak RssAnon that of the whole process tree
(measure.py). Every output is checked with DuckDB: the same number of rows and the same sum of
row hashes as the input, and every key in one partition only.

  python3 bench/compare/shuffle_files.py --data-dir data/inputs --temp-root data \\
      --case uniform --case strings --case lineitem --by lineitem=l_orderkey \\
      --spillway before=/path/to/old/spillway --spillway after=build/release/apps/spillway
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

from measure import measure  # noqa: E402
from sort_vs_peers import parse_bytes, quote, warm_page_cache, write_input  # noqa: E402

DUCKDB_PARTITION = r"""
import duckdb, json, sys, time
source, target, threads, memory, temp, key, partitions = sys.argv[1:8]
connection = duckdb.connect()
connection.execute(f"SET threads={int(threads)}")
connection.execute(f"SET memory_limit='{int(memory) // 2**20}MiB'")
connection.execute(f"SET temp_directory='{temp}'")
connection.execute("SET preserve_insertion_order=false")
start = time.perf_counter()
connection.execute(
    f"COPY (SELECT *, hash(\"{key}\") % {int(partitions)} AS part FROM read_parquet('{source}')) "
    f"TO '{target}' (FORMAT parquet, PARTITION_BY (part))")
print(json.dumps({"seconds": time.perf_counter() - start, "version": duckdb.__version__}))
"""


def fingerprint(connection, files, columns):
    """(rows, sum of row hashes) of `files`, over `columns` only."""
    listed = ", ".join(quote(f) for f in files)
    row = ", ".join(f'"{c}"' for c in columns)
    return connection.execute(
        f"SELECT count(*), sum(hash(struct_pack({row}))) FROM read_parquet([{listed}], "
        f"union_by_name=true)").fetchone()


def check(connection, source, target, key, columns):
    """None when `target` holds the rows of `source`, each key in one partition; else why not."""
    files = sorted(os.path.join(directory, name) for directory, _, names in os.walk(target)
                   for name in names if name.endswith(".parquet"))
    if not files:
        return "no files"
    if fingerprint(connection, files, columns) != fingerprint(connection, [source], columns):
        return "other rows than the input's"
    # The partition of a file: spillway's partition-NNNNN, DuckDB's part=N directory.
    listed = ", ".join(quote(f) for f in files)
    part = ("coalesce(nullif(regexp_extract(filename, 'partition-([0-9]+)', 1), ''), "
            "regexp_extract(filename, 'part=([0-9]+)', 1))")
    (split,) = connection.execute(
        f'SELECT count(*) FROM (SELECT "{key}" FROM read_parquet([{listed}], filename=true, '
        f'hive_partitioning=false) GROUP BY "{key}" HAVING count(DISTINCT {part}) > 1)').fetchone()
    return f"{split} keys in more than one partition" if split else None


def engine_command(args, engine, path, source, target, temp, key):
    if engine == "duckdb":
        os.makedirs(target)
        return [sys.executable, "-c", DUCKDB_PARTITION, source, target, str(args.threads),
                str(args.memory), temp, key, str(args.partitions)]
    half = args.memory // 2
    return [path, "shuffle", source, "-o", target, "--by", key, "--partitions",
            str(args.partitions), "--threads", str(args.threads), "--device-memory", str(half),
            "--host-memory", str(args.memory - half), "--spill-dir", temp, "--json"]


def run_case(args, case, work, engines):
    import duckdb
    source = write_input(types.SimpleNamespace(rows=args.rows, threads=args.threads,
                                               scale=args.scale), case, args.data_dir)
    key = args.keys.get(case, "key")
    connection = duckdb.connect()
    columns = [row[0] for row in connection.execute(
        f"DESCRIBE SELECT * FROM read_parquet({quote(source)})").fetchall()]
    results = {name: [] for name, _ in engines}
    for run in range(args.runs):
        for name, path in engines:
            target = os.path.join(work, f"out-{name}")
            temp = os.path.join(work, f"temp-{name}")
            shutil.rmtree(target, ignore_errors=True)
            shutil.rmtree(temp, ignore_errors=True)
            os.makedirs(temp)
            warm_page_cache(source)
            result = measure(engine_command(args, name if name == "duckdb" else "spillway", path,
                                            source, target, temp, key), timeout=args.timeout)
            if result["returncode"] != 0:
                raise SystemExit(f"{case} {name} failed: {result['stderr'][-2000:]}")
            reported = json.loads(result["stdout"].strip().splitlines()[-1])
            problem = check(connection, source, target, key, columns)
            if problem:
                raise SystemExit(f"{case} {name} run {run + 1}: {problem}")
            results[name].append((reported["seconds"], result["peak_rss_anon_mib"]))
            print(f"# {case} {name} run {run + 1}: {reported['seconds']:.2f} s, peak RssAnon "
                  f"{result['peak_rss_anon_mib']:.0f} MiB, checked", file=sys.stderr, flush=True)
            shutil.rmtree(target, ignore_errors=True)
            shutil.rmtree(temp, ignore_errors=True)
    duckdb_best = min(s for s, _ in results["duckdb"]) if results.get("duckdb") else None
    for name, _ in engines:
        runs = results[name]
        best = min(s for s, _ in runs)
        ratio = f"{best / duckdb_best:.2f}" if duckdb_best else ""
        print(f"| {case} by {key} | {name} | {', '.join(f'{s:.2f}' for s, _ in runs)} | "
              f"{runs[0][0]:.2f} | {best:.2f} | {ratio} | {max(m for _, m in runs):.0f} |",
              flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", action="append", default=None,
                        help="uniform, strings, two-key, skewed, equal, wide, lineitem")
    parser.add_argument("--by", action="append", default=[],
                        help="CASE=COLUMN: the key of a case (default: key)")
    parser.add_argument("--spillway", action="append", default=[],
                        help="NAME=PATH of a spillway build (default: spillway=build/release)")
    parser.add_argument("--no-duckdb", action="store_true")
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--scale", default="1", help="TPC-H scale factor of lineitem")
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory", default="512MiB", help="each engine's, all of it")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--temp-root", default=None)
    args = parser.parse_args()
    args.memory = parse_bytes(args.memory)
    args.keys = dict(entry.split("=", 1) for entry in args.by)
    engines = [tuple(entry.split("=", 1)) for entry in args.spillway] or [
        ("spillway", os.path.join(ROOT, "build", "release", "apps", "spillway"))]
    if not args.no_duckdb:
        engines.append(("duckdb", None))
    with tempfile.TemporaryDirectory(dir=args.temp_root) as work:
        args.data_dir = args.data_dir or os.path.join(work, "inputs")
        os.makedirs(args.data_dir, exist_ok=True)
        print(f"| case | engine | runs s | first s | best s | best vs DuckDB | peak RssAnon MiB |")
        print("|---|---|---|---|---|---|---|")
        for case in args.case or ["uniform", "strings", "lineitem"]:
            run_case(args, case, work, engines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
