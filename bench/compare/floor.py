#!/usr/bin/env python3
"""The bandwidth floor of an out-of-core sort on this machine, measured in the same run.

An external sort of INPUT bytes under a memory budget of BUDGET bytes must at least
  - move every byte once through memory (read the input, write the output): INPUT / memcpy,
  - write the bytes that do not fit to the disk and read them back once: SPILL = INPUT - BUDGET,
    SPILL / write + SPILL / read.
No sort does less; a sort's time beside this floor says how much of it is the algorithm.
A process that writes INPUT bytes into memory it has not used before also pays the kernel for
every fresh page (first_touch_GBps, one thread, against rewrite_GBps into the same pages): the
cost of a first run that later runs, reusing their memory, do not pay. --huge-pages also times
fresh transparent huge pages, written at once after the last mapping was freed and after an idle
pause (a virtual machine's host may take freed memory back meanwhile).

The disk is measured in the spill directory (--dir) two ways, since both happen in practice:
"durable" writes end with fdatasync and reads come from the disk (pages dropped with
posix_fadvise DONTNEED), "cached" writes and reads stay in the page cache.

  python3 bench/compare/floor.py --input-bytes 1600000000 --budget 512MiB --dir data
"""
import argparse
import json
import mmap
import os
import re
import tempfile
import time

import numpy as np

# As spillway maps its blocks (Python's default, a shared mapping, is backed by shared memory).
PRIVATE_ANONYMOUS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS

UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 10**3, "MB": 10**6,
         "GB": 10**9}


def parse_bytes(text):
    match = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2) not in UNITS:
        raise SystemExit(f"not a size: {text!r} (e.g. 512MiB, 1.6GB)")
    return int(float(match.group(1)) * UNITS[match.group(2)])


def memcpy_rate(size=1 << 30, repeats=3):
    source = np.ones(size // 8, dtype=np.int64)
    target = np.empty_like(source)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - start)
    return size / best


def touch_rates(size=1 << 30, repeats=3):
    """(fresh, warm) bytes per second of one thread writing `size` bytes: into memory just
    mapped, whose every page the kernel must hand out and clear first (what a process pays the
    first time it uses memory), and into the same memory again."""
    fresh = warm = float("inf")
    for _ in range(repeats):
        # A private anonymous mapping of its own, in pages of 4 KiB as spillway's blocks are (numpy's
        # own large arrays may get huge pages, and so may any mapping where THP is "always").
        memory = mmap.mmap(-1, size, flags=PRIVATE_ANONYMOUS)
        if hasattr(mmap, "MADV_NOHUGEPAGE"):
            memory.madvise(mmap.MADV_NOHUGEPAGE)
        target = np.frombuffer(memory, dtype=np.int64)
        start = time.perf_counter()
        target.fill(1)
        fresh = min(fresh, time.perf_counter() - start)
        start = time.perf_counter()
        target.fill(2)
        warm = min(warm, time.perf_counter() - start)
        del target
        memory.close()
    return size / fresh, size / warm


def huge_touch_rates(size=1 << 30, pauses=(0, 0, 5, 5)):
    """Bytes per second of one thread writing `size` bytes into a fresh mapping of transparent
    huge pages (2 MiB aligned, MADV_HUGEPAGE), after each pause in seconds since the last
    mapping was freed; None where the kernel has no MADV_HUGEPAGE."""
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        return None
    huge = 2 << 20
    rates = []
    for pause in pauses:
        time.sleep(pause)
        memory = mmap.mmap(-1, size + huge, flags=PRIVATE_ANONYMOUS)
        whole = np.frombuffer(memory, dtype=np.uint8)
        offset = -whole.ctypes.data % huge
        memory.madvise(mmap.MADV_HUGEPAGE, offset, size)
        target = whole[offset:offset + size].view(np.int64)
        start = time.perf_counter()
        target.fill(1)
        rates.append(size / (time.perf_counter() - start))
        del target, whole
        memory.close()
    return [{"pause_s": pause, "GBps": round(rate / 1e9, 2)} for pause, rate in zip(pauses, rates)]


def disk_rates(directory, size, durable, chunk=8 << 20):
    block = np.random.default_rng(1).integers(0, 1 << 62, chunk // 8, dtype=np.int64).tobytes()
    fd, path = tempfile.mkstemp(prefix="floor-", dir=directory)
    try:
        start = time.perf_counter()
        written = 0
        while written < size:
            written += os.write(fd, block[:min(chunk, size - written)])
        if durable:
            os.fdatasync(fd)
        write_seconds = time.perf_counter() - start
        if durable:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.lseek(fd, 0, os.SEEK_SET)
        buffer = bytearray(chunk)
        start = time.perf_counter()
        read = 0
        while True:
            got = os.readv(fd, [buffer])
            if got == 0:
                break
            read += got
        read_seconds = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return written / write_seconds, read / read_seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input-bytes", required=True, help="bytes sorted, e.g. 1.6GB")
    parser.add_argument("--budget", required=True, help="device + host budget, e.g. 512MiB")
    parser.add_argument("--dir", default=".", help="the spill directory's file system")
    parser.add_argument("--sample-bytes", default="1GiB", help="bytes written per disk test")
    parser.add_argument("--huge-pages", action="store_true",
                        help="also time fresh transparent huge pages, with and without a pause")
    args = parser.parse_args()

    input_bytes = parse_bytes(args.input_bytes)
    spill = max(0, input_bytes - parse_bytes(args.budget))
    sample = min(parse_bytes(args.sample_bytes), max(spill, 64 << 20))
    memory = memcpy_rate()
    fresh, warm = touch_rates()
    result = {"input_bytes": input_bytes, "spill_bytes": spill,
              "memcpy_GBps": round(memory / 1e9, 2),
              "first_touch_GBps": round(fresh / 1e9, 2), "rewrite_GBps": round(warm / 1e9, 2),
              "first_touch_seconds_of_input": round(input_bytes / fresh, 3)}
    if args.huge_pages:
        result["huge_first_touch"] = huge_touch_rates()
    for label, durable in (("durable", True), ("cached", False)):
        write, read = disk_rates(args.dir, sample, durable)
        floor = input_bytes / memory + spill / write + spill / read
        result[label] = {"write_GBps": round(write / 1e9, 2), "read_GBps": round(read / 1e9, 2),
                         "floor_seconds": round(floor, 2)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
