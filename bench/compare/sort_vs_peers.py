#!/usr/bin/env python3
"""Sort the same Parquet file into a new Parquet file with `spillway sort`, DuckDB and Polars.

Every case runs file to file. The input is one Parquet file written once (untimed) by DuckDB's
COPY from SQL formulas of the row number i (or TPC-H lineitem written by `tpchgen-cli`); each
engine sorts it into new Parquet files, each in a process of its own:

  spillway            build/release/apps/spillway sort IN -o DIR --by SPEC --threads T
                      --device-memory M/2 --host-memory M/2 --spill-dir TEMP
  duckdb              COPY (SELECT * FROM read_parquet(IN) ORDER BY SPEC) TO OUT (FORMAT parquet),
                      SET threads = T, memory_limit = M, temp_directory = TEMP
  polars              pl.scan_parquet(IN).sort(SPEC).sink_parquet(OUT, compression="snappy"),
                      POLARS_MAX_THREADS = T, POLARS_TEMP_DIR = TEMP. Polars has no knob that
                      limits its memory: it runs with no limit, and its peak RssAnon says what
                      it took.
  spillway-presorted  the spillway command above on a copy of the input already sorted by SPEC
                      (written once, untimed, by DuckDB): the floor of reading, checking and
                      writing the same rows without reordering them.

M is --memory (default 512MiB), T is --threads (default 2); every engine writes snappy-compressed
Parquet and puts its temporary files in the same directory under --temp-root.

Cases (--case, any of them; default all):
  uniform   int64 key ((i * 6364136223846793005) mod 9223372036854775783), int64 payload
  strings   key of 10-30 letters (md5 digests of i), int64 payload
  two-key   key1: int64 of 1000 values, 10% null, ascending, nulls last; key2: 10-30 letters,
            descending; int64 payload
  skewed    90% of the keys 0, the others as in uniform; int64 payload
  equal     every key 42; int64 payload
  wide      20 columns: the uniform key, 5 strings of 16-64 characters, 14 numbers
  lineitem  TPC-H lineitem at --scale SF (default 1) written by `tpchgen-cli parquet` (16
            columns), sorted by l_shipdate, l_orderkey. `--dataset lineitem --scale SF` is the
            same as `--case lineitem --scale SF`. --rows (default 20000000) does not apply.

Measured, per case and engine: the time of the first run and the best of --runs runs (runs
alternate between the engines; each starts with its input read once, untimed, into the page
cache), and the peak RssAnon (anonymous resident memory, from /proc/<pid>/status every 10 ms,
summed over the process and its children; bench/compare/measure.py) over the runs. spillway is
timed from its process start to its exit; DuckDB and Polars from just before their statement to
its return, inside their process (the interpreter's start and imports not counted). After each
run (untimed), the output is verified: read in file order with pyarrow, its sort keys must be in
order per the sort spec, and DuckDB's count of rows and sum of row hashes (every column, cast to
VARCHAR) must equal the input's. The table: case | rows | engine | first s | best s | ratio to
DuckDB (best) | peak RssAnon MiB; then spillway's best over its floor's best per case. A run
that fails (or passes --timeout) marks its engine FAILED for the case; the script exits 1 when
any engine failed or any output was not verified.

  python3 bench/compare/sort_vs_peers.py --rows 20000000 --memory 512MiB --threads 2 --runs 2 \
      [--case uniform strings ...] [--scale 1] [--engines spillway,duckdb,polars,spillway-presorted]
      [--temp-root DIR] [--data-dir DIR] [--json results.json]

Inputs are written under --data-dir and kept there for later runs when it is given; otherwise in
a directory under --temp-root removed at the end. Needs duckdb, polars, pyarrow, numpy and, for
lineitem, tpchgen-cli (pip install tpchgen-cli).
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from measure import measure

MODULUS = 9223372036854775783
MULTIPLIER = 6364136223846793005
ENGINES = ["spillway", "duckdb", "polars", "spillway-presorted"]
CASES = ["uniform", "strings", "two-key", "skewed", "equal", "wide", "lineitem"]
HERE = os.path.dirname(os.path.abspath(__file__))


def parse_bytes(text):
    match = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]i?B?|B)?\s*", text, re.IGNORECASE)
    if not match:
        raise SystemExit(f"not a size: {text}")
    scale = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    unit = (match.group(2) or "").lower()[:1]
    return int(float(match.group(1)) * scale[unit])


def uniform_sql():
    return f"((i::HUGEINT * {MULTIPLIER}) % {MODULUS})::BIGINT"


def letters_sql(seed):
    """10-30 letters (16 of them) from md5 digests of `seed`, a length from `seed` too."""
    length = f"10 + (({seed})::HUGEINT * 2654435761 % 21)::INTEGER"
    digits = f"md5(({seed})::VARCHAR) || md5(({seed})::VARCHAR || 'x')"
    return f"left(translate({digits}, '0123456789abcdef', 'etaoinshrdlucmfw'), {length})"


def case_sql(case, rows):
    """The SELECT that makes the input of `case` (not lineitem) from range(rows)."""
    payload = "i::BIGINT AS payload"
    if case == "uniform":
        columns = [f"{uniform_sql()} AS key", payload]
    elif case == "strings":
        columns = [f"{letters_sql('i')} AS key", payload]
    elif case == "two-key":
        columns = [f"CASE WHEN i % 10 = 3 THEN NULL ELSE {uniform_sql()} % 1000 END AS key1",
                   f"{letters_sql('i * 3 + 1')} AS key2", payload]
    elif case == "skewed":
        columns = [f"CASE WHEN i % 10 = 0 THEN {uniform_sql()} ELSE 0 END AS key", payload]
    elif case == "equal":
        columns = ["42::BIGINT AS key", payload]
    elif case == "wide":
        columns = [f"{uniform_sql()} AS key"]
        for index in range(5):
            columns.append(f"left(repeat(md5((i * {index + 3})::VARCHAR), 2), "
                           f"16 + ((i * {index + 7}) % 49)::INTEGER) AS s{index}")
        for index in range(14):
            kind = ["BIGINT", "DOUBLE", "INTEGER"][index % 3]
            columns.append(f"((i * {index + 11}) % 1000003)::{kind} AS n{index}")
    else:
        raise SystemExit(f"unknown case {case}")
    return f"SELECT {', '.join(columns)} FROM range({rows}) r(i)"


def sort_spec(case):
    """(column, descending, nulls last) of each sort key of `case`."""
    if case == "two-key":
        return [("key1", False, True), ("key2", True, True)]
    if case == "lineitem":
        return [("l_shipdate", False, True), ("l_orderkey", False, True)]
    return [("key", False, True)]


def spillway_by(spec):
    return ",".join(f"{column}:{'desc' if desc else 'asc'}:"
                    f"{'nulls_last' if last else 'nulls_first'}" for column, desc, last in spec)


def duckdb_order(spec):
    return ", ".join(f'"{column}" {"DESC" if desc else "ASC"} NULLS {"LAST" if last else "FIRST"}'
                     for column, desc, last in spec)


def quote(path):
    return "'" + path.replace("'", "''") + "'"


def parquet_files(path):
    """The Parquet files of `path` (a file or a directory) in file order (by name)."""
    if os.path.isdir(path):
        return sorted(os.path.join(path, name) for name in os.listdir(path)
                      if name.endswith(".parquet"))
    return [path]


def write_input(args, case, data_dir):
    """Writes the input of `case` under `data_dir` once (untimed); returns its path."""
    import duckdb
    if case == "lineitem":
        name = f"lineitem-sf{args.scale}"
        path = os.path.join(data_dir, name + ".parquet")
        if not os.path.exists(path):
            staging = os.path.join(data_dir, name + ".partial")
            shutil.rmtree(staging, ignore_errors=True)
            try:
                subprocess.run(["tpchgen-cli", "parquet", "-s", str(args.scale),
                                "--tables=lineitem", f"--output-dir={staging}"], check=True,
                               capture_output=True, text=True)
            except FileNotFoundError:
                raise SystemExit("lineitem needs tpchgen-cli: pip install tpchgen-cli")
            except subprocess.CalledProcessError as error:
                raise SystemExit(f"tpchgen-cli failed: {error.stderr[-2000:]}")
            os.rename(os.path.join(staging, "lineitem.parquet"), path)
            shutil.rmtree(staging)
        return path
    sql = case_sql(case, args.rows)
    digest = hashlib.sha1(sql.encode()).hexdigest()[:8]
    path = os.path.join(data_dir, f"{case}-{args.rows}-{digest}.parquet")
    if not os.path.exists(path):
        connection = duckdb.connect()
        connection.execute(f"SET threads={args.threads}")
        connection.execute(f"SET temp_directory={quote(data_dir)}")
        connection.execute(f"COPY ({sql}) TO {quote(path + '.partial')} (FORMAT parquet)")
        connection.close()
        os.rename(path + ".partial", path)
    return path


def write_presorted(args, source, spec):
    """`source` sorted by `spec` (by DuckDB, untimed, with the same Parquet writer as the input),
    written once beside it; returns its path."""
    import duckdb
    path = source[: -len(".parquet")] + "-presorted.parquet"
    if not os.path.exists(path):
        connection = duckdb.connect()
        connection.execute(f"SET threads={args.threads}")
        connection.execute(f"SET temp_directory={quote(os.path.dirname(path))}")
        connection.execute(f"COPY (SELECT * FROM read_parquet({quote(source)}) ORDER BY "
                           f"{duckdb_order(spec)}) TO {quote(path + '.partial')} (FORMAT parquet)")
        connection.close()
        os.rename(path + ".partial", path)
    return path


def content(paths, threads):
    """(rows, sum of the hashes of every row, its columns cast to VARCHAR) of Parquet files."""
    import duckdb
    connection = duckdb.connect()
    connection.execute(f"SET threads={threads}")
    files = "[" + ", ".join(quote(path) for path in paths) + "]"
    names = [row[0] for row in connection.execute(
        f"DESCRIBE SELECT * FROM read_parquet({files})").fetchall()]
    row_hash = "hash(" + ", ".join(f'"{name}"::VARCHAR' for name in names) + ")::HUGEINT"
    rows, total = connection.execute(
        f"SELECT count(*), sum({row_hash}) FROM read_parquet({files})").fetchone()
    connection.close()
    return rows, int(total or 0)


def comparable(column):
    """`column` as one array pyarrow's comparison kernels take."""
    import pyarrow as pa
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_string_view(array.type):
        return array.cast(pa.large_string())
    if pa.types.is_binary_view(array.type):
        return array.cast(pa.large_binary())
    return array


def order_violations(paths, spec):
    """Adjacent row pairs of the files `paths`, read in file order, that are out of order per
    `spec`: pairs equal on the keys before one key where the second row sorts before the first."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    columns = [column for column, _, _ in spec]
    previous = None
    violations = 0
    for path in paths:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=1 << 20, columns=columns):
            table = pa.Table.from_batches([batch])
            if previous is not None:
                table = pa.concat_tables([previous, table])
            pairs = table.num_rows - 1
            if pairs >= 1:
                tied = np.ones(pairs, dtype=bool)
                wrong = np.zeros(pairs, dtype=bool)
                for column, descending, nulls_last in spec:
                    values = comparable(table.column(column))
                    first, second = values.slice(0, pairs), values.slice(1)
                    first_null = first.is_null().to_numpy(zero_copy_only=False)
                    second_null = second.is_null().to_numpy(zero_copy_only=False)
                    smaller = pc.less(second, first).fill_null(False).to_numpy(
                        zero_copy_only=False)
                    larger = pc.greater(second, first).fill_null(False).to_numpy(
                        zero_copy_only=False)
                    before, after = (larger, smaller) if descending else (smaller, larger)
                    if nulls_last:
                        before = before | (first_null & ~second_null)
                        after = after | (~first_null & second_null)
                    else:
                        before = before | (~first_null & second_null)
                        after = after | (first_null & ~second_null)
                    wrong |= tied & before
                    tied &= ~(before | after)
                violations += int(wrong.sum())
            if table.num_rows:
                previous = table.slice(table.num_rows - 1)
    return violations


DUCKDB_SORT = """
import duckdb, json, sys, time
source, target, threads, memory, temp, order = sys.argv[1:7]
quote = lambda text: "'" + text.replace("'", "''") + "'"
connection = duckdb.connect()
connection.execute(f"SET threads={threads}")
connection.execute(f"SET memory_limit='{memory}B'")
connection.execute(f"SET temp_directory={quote(temp)}")
start = time.perf_counter()
connection.execute(f"COPY (SELECT * FROM read_parquet({quote(source)}) ORDER BY {order}) "
                   f"TO {quote(target)} (FORMAT parquet)")
print(json.dumps({"seconds": time.perf_counter() - start, "version": duckdb.__version__}))
"""

POLARS_SORT = """
import json, sys, time
import polars as pl
source, target, spec = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
start = time.perf_counter()
pl.scan_parquet(source).sort([key[0] for key in spec], descending=[key[1] for key in spec],
                             nulls_last=[key[2] for key in spec]).sink_parquet(
    target, compression="snappy")
print(json.dumps({"seconds": time.perf_counter() - start, "version": pl.__version__,
                  "threads": pl.thread_pool_size()}))
"""


def engine_command(args, engine, source, presorted, spec, target, temp, memory):
    """(command, environment, the output's path) of one run of `engine`."""
    env = dict(os.environ)
    if engine in ("spillway", "spillway-presorted"):
        command = [args.spillway, "sort", presorted if engine == "spillway-presorted" else source,
                   "-o", target, "--by", spillway_by(spec), "--threads", str(args.threads),
                   "--device-memory", str(memory // 2), "--host-memory",
                   str(memory - memory // 2), "--spill-dir", temp]
        return command, env, target
    os.makedirs(target)
    written = os.path.join(target, "sorted.parquet")
    if engine == "duckdb":
        return ([sys.executable, "-c", DUCKDB_SORT, source, written, str(args.threads),
                 str(memory), temp, duckdb_order(spec)], env, written)
    env["POLARS_MAX_THREADS"] = str(args.threads)
    env["POLARS_TEMP_DIR"] = temp
    return [sys.executable, "-c", POLARS_SORT, source, written, json.dumps(spec)], env, written


def warm_page_cache(path):
    """Reads `path` once, untimed, so that every run starts with its input cached."""
    with open(path, "rb") as file:
        while file.read(8 << 20):
            pass


def run_case(args, case, data_dir, work, engines, memory):
    """Runs every engine on `case` --runs times, alternating; returns its result rows."""
    source = write_input(args, case, data_dir)
    spec = sort_spec(case)
    presorted = write_presorted(args, source, spec) if "spillway-presorted" in engines else None
    expected = content([source], args.threads)
    rows = expected[0]
    print(f"# {case}: {rows} rows, {os.path.getsize(source) / 2**20:.1f} MiB of Parquet, "
          f"by {spillway_by(spec)}", file=sys.stderr, flush=True)
    runs = {engine: [] for engine in engines}
    failures = {}
    versions = {}
    for run in range(args.runs):
        for engine in engines:
            if engine in failures:
                continue
            target = os.path.join(work, f"out-{engine}")
            temp = os.path.join(work, f"temp-{engine}")
            shutil.rmtree(target, ignore_errors=True)
            shutil.rmtree(temp, ignore_errors=True)
            os.makedirs(temp)
            command, env, written = engine_command(args, engine, source, presorted, spec, target,
                                                   temp, memory)
            warm_page_cache(presorted if engine == "spillway-presorted" else source)
            result = measure(command, env=env, timeout=args.timeout)
            if result["returncode"] != 0:
                why = ("timed out" if result["returncode"] is None
                       else f"exit {result['returncode']}")
                failures[engine] = f"{why}: {result['stderr'].strip()[-2000:]}"
                print(f"# {case} {engine} run {run + 1} failed ({failures[engine]})",
                      file=sys.stderr, flush=True)
                continue
            seconds = result["seconds"]
            if engine in ("duckdb", "polars"):
                reported = json.loads(result["stdout"].strip().splitlines()[-1])
                seconds = reported["seconds"]
                versions[engine] = reported["version"]
            files = parquet_files(written)
            got = content(files, args.threads)
            violations = order_violations(files, spec)
            verified = got == expected and violations == 0
            runs[engine].append({"seconds": seconds, "process_seconds": result["seconds"],
                                 "peak_rss_anon_mib": result["peak_rss_anon_mib"],
                                 "verified": verified, "rows": got[0],
                                 "out_of_order": violations})
            print(f"# {case} {engine} run {run + 1}: {seconds:.3f} s, peak RssAnon "
                  f"{result['peak_rss_anon_mib']:.0f} MiB, {got[0]} rows, {violations} out of "
                  f"order, {'verified' if verified else 'NOT VERIFIED'}", file=sys.stderr,
                  flush=True)
            shutil.rmtree(target, ignore_errors=True)
            shutil.rmtree(temp, ignore_errors=True)
    results = []
    for engine in engines:
        done = runs[engine]
        row = {"case": case, "rows": rows, "engine": engine, "by": spillway_by(spec),
               "version": versions.get(engine), "runs_s": [r["seconds"] for r in done],
               "process_runs_s": [r["process_seconds"] for r in done],
               "first_s": done[0]["seconds"] if done else None,
               "best_s": min(r["seconds"] for r in done) if done else None,
               "peak_rss_anon_mib": max(r["peak_rss_anon_mib"] for r in done) if done else None,
               "verified": bool(done) and all(r["verified"] for r in done),
               "error": failures.get(engine)}
        results.append(row)
    best = {row["engine"]: row["best_s"] for row in results}
    for row in results:
        duckdb_best = best.get("duckdb")
        row["ratio_to_duckdb"] = (row["best_s"] / duckdb_best
                                  if row["best_s"] is not None and duckdb_best else None)
    if best.get("spillway") is not None and best.get("spillway-presorted"):
        for row in results:
            if row["engine"] == "spillway":
                row["ratio_to_floor"] = best["spillway"] / best["spillway-presorted"]
    return results


def number(value, digits):
    return "-" if value is None else f"{value:.{digits}f}"


def error_line(text):
    """The line of an engine's error output that names the error (else its last line)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    named = [line for line in lines if re.search(r"error|exception|killed", line, re.IGNORECASE)]
    return (named or lines or [""])[-1]


def print_table(results):
    print("| case | rows | engine | first s | best s | ratio to DuckDB (best) | peak RssAnon MiB |")
    print("|---|---|---|---|---|---|---|")
    for row in results:
        name = row["engine"] + (f" {row['version']}" if row["version"] else "")
        if row["error"]:
            name += f" (FAILED: {error_line(row['error'])[:100]})"
        elif not row["verified"]:
            name += " (NOT VERIFIED)"
        print(f"| {row['case']} | {row['rows']:,} | {name} | {number(row['first_s'], 2)} | "
              f"{number(row['best_s'], 2)} | {number(row['ratio_to_duckdb'], 2)} | "
              f"{number(row['peak_rss_anon_mib'], 0)} |")
    floors = [row for row in results if row.get("ratio_to_floor") is not None]
    if floors:
        print()
        for row in floors:
            print(f"{row['case']}: spillway / spillway-presorted (best) = "
                  f"{row['ratio_to_floor']:.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", "--dataset", dest="cases", nargs="+", choices=CASES,
                        default=None, help="cases to run (default: all)")
    parser.add_argument("--rows", type=int, default=20_000_000,
                        help="rows of every case but lineitem")
    parser.add_argument("--scale", default="1", help="TPC-H scale factor of lineitem")
    parser.add_argument("--memory", default="512MiB",
                        help="memory of every engine: spillway gets half as device and half as "
                             "host memory, DuckDB memory_limit; Polars has no limit")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2, help="runs of every engine per case")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds after which a run is killed and its engine counted failed")
    parser.add_argument("--spillway",
                        default=os.path.join(HERE, "..", "..", "build", "release", "apps",
                                             "spillway"))
    parser.add_argument("--temp-root", default=tempfile.gettempdir(),
                        help="where the engines' outputs and temporary files go (one disk)")
    parser.add_argument("--data-dir", default=None,
                        help="where the inputs are written and kept for later runs")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the rows as JSON")
    args = parser.parse_args()
    cases = args.cases or CASES
    engines = args.engines.split(",")
    for engine in engines:
        if engine not in ENGINES:
            raise SystemExit(f"unknown engine {engine} (one of {', '.join(ENGINES)})")
    if args.runs < 1 or args.threads < 1 or args.rows < 1:
        raise SystemExit("--runs, --threads and --rows must be at least 1")
    if "spillway" in engines or "spillway-presorted" in engines:
        if not os.access(args.spillway, os.X_OK):
            raise SystemExit(f"no spillway binary at {args.spillway} (cmake --build --preset "
                             "release --target spillway, or --spillway PATH)")
    memory = parse_bytes(args.memory)
    work = tempfile.mkdtemp(prefix="spillway-peers-", dir=args.temp_root)
    data_dir = args.data_dir or os.path.join(work, "data")
    os.makedirs(data_dir, exist_ok=True)
    settings = {"memory_bytes": memory, "threads": args.threads, "runs": args.runs,
                "rows": args.rows, "scale": args.scale, "temp_root": args.temp_root,
                "spillway_device_memory": memory // 2,
                "spillway_host_memory": memory - memory // 2,
                "duckdb_memory_limit": memory, "polars_memory_limit": None,
                "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    print(f"memory {memory / 2**20:.0f} MiB (spillway: {memory // 2 / 2**20:.0f} MiB device + "
          f"{(memory - memory // 2) / 2**20:.0f} MiB host; DuckDB: memory_limit; Polars: no "
          f"memory limit, it has no such knob), {args.threads} threads, best of {args.runs} "
          f"runs, temp files under {args.temp_root}\n", flush=True)
    results = []
    try:
        for case in cases:
            results.extend(run_case(args, case, data_dir, work, engines, memory))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_table(results)
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"settings": settings, "rows": results}, file, indent=1)
    return 0 if all(row["verified"] for row in results) else 1


if __name__ == "__main__":
    sys.exit(main())
