#!/usr/bin/env python3
"""Out-of-memory injected at every device allocation of a small sort and a small shuffle.

For each command and 1 and 4 tasks, each kind (retry, split, and oom: the upstream allocation
fails, so that the whole failure path runs), and for the sort across 2 ranks retry and oom (its
splitters are a step of one row, which a split request ends by design), the run with
SPILLWAY_INJECT_OOM=task=*,...,skip=k,count=1 (every task's k-th allocation fails) must succeed and
write byte for byte the files of the run without injection, for every k from 0 until a run reports
that nothing was injected (k is then past every task's last allocation). Every run also has
SPILLWAY_RETRY_COVERAGE=1 and must report no allocation outside a retry block.

  SPILLWAY_EXE          the `spillway` program (CTest passes the built one)
  SPILLWAY_SWEEP_STRIDE test every n-th allocation only (sanitizer builds; default 1)
"""
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile

# A few batches of strings keys, on a device that must spill: a few dozen allocations each.
ROWS = 300
COMMON = ["--device-memory", "1MiB", "--host-memory", "8MiB", "--batch-size", "4KiB", "--json"]
COMMANDS = {
    "sort": ["sort", "--by", "key", "--tasks", "1"],
    "sort, 4 tasks": ["sort", "--by", "key", "--tasks", "4"],
    "shuffle": ["shuffle", "--by", "key", "--partitions", "3", "--tasks", "1"],
    "shuffle, 4 tasks": ["shuffle", "--by", "key", "--partitions", "3", "--tasks", "4"],
    "sort, 2 ranks": ["sort", "--by", "key", "--ranks", "2"],
}
KINDS = {"sort, 2 ranks": ("retry", "oom")}
MOST_ALLOCATIONS = 5000  # a guard against a run that never stops injecting


def run(exe, args, env_extra):
    env = dict(os.environ, SPILLWAY_RETRY_COVERAGE="1", **env_extra)
    done = subprocess.run([exe] + args, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} with {env_extra} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def same_files(left, right):
    names = sorted(os.listdir(left))
    if names != sorted(os.listdir(right)):
        return False
    match, mismatch, errors = filecmp.cmpfiles(left, right, names, shallow=False)
    return not mismatch and not errors


def sweep(exe, work, data, command, kind, stride):
    ranks = "-ranks" if "--ranks" in COMMANDS[command] else ""
    reference = os.path.join(work, COMMANDS[command][0] + ranks + "-reference")
    if not os.path.exists(reference):
        summary = run(exe, [COMMANDS[command][0], data, "-o", reference] + COMMANDS[command][1:]
                      + COMMON, {})
        assert summary["unprotected_allocations"] == 0, summary
    k = 0
    while True:
        out = os.path.join(work, "out")
        shutil.rmtree(out, ignore_errors=True)
        injection = f"task=*,kind={kind},skip={k},count=1"
        summary = run(exe, [COMMANDS[command][0], data, "-o", out] + COMMANDS[command][1:]
                      + COMMON, {"SPILLWAY_INJECT_OOM": injection})
        assert summary["unprotected_allocations"] == 0, (injection, summary)
        assert same_files(out, reference), f"{command} with {injection} wrote other files"
        if summary["oom_injected"] == 0:
            return k
        k += stride
        assert k < MOST_ALLOCATIONS, f"{command} still injecting at allocation {k}"


def main():
    exe = os.environ.get("SPILLWAY_EXE", "")
    if not exe or not os.access(exe, os.X_OK):
        print("SPILLWAY_EXE is not set to the spillway program; skipping")
        return 77
    stride = max(1, int(os.environ.get("SPILLWAY_SWEEP_STRIDE", "1")))
    with tempfile.TemporaryDirectory() as work:
        data = os.path.join(work, "data")
        subprocess.run([exe, "gen", "strings", "-o", data, "--rows", str(ROWS), "--seed", "5"],
                       check=True, capture_output=True)
        for command in COMMANDS:
            for kind in KINDS.get(command, ("retry", "split", "oom")):
                allocations = sweep(exe, work, data, command, kind, stride)
                print(f"{command}, {kind}: every {stride} of {allocations} allocations: "
                      "the same files", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
