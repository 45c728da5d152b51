"""Time a command and sample its peak anonymous memory, shared by the bench/compare scripts.

Peak RssAnon: every 10 ms, the RssAnon lines of /proc/<pid>/status of the process and of every
process below it (found through /proc/<pid>/task/<tid>/children) are summed; the peak is the
largest sum seen. File-backed pages (the page cache, mapped files) are not counted.
"""
import os
import subprocess
import threading
import time


def rss_anon_kib(pid):
    """RssAnon of `pid` in KiB; 0 once it has gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def process_tree(pid):
    """`pid` and every process below it that is alive now."""
    found = [pid]
    index = 0
    while index < len(found):
        try:
            tasks = os.listdir(f"/proc/{found[index]}/task")
        except OSError:
            tasks = []
        for task in tasks:
            try:
                with open(f"/proc/{found[index]}/task/{task}/children") as children:
                    found.extend(int(child) for child in children.read().split())
            except OSError:
                pass
        index += 1
    return found


def tree_rss_anon_kib(pid):
    """RssAnon of `pid` and of the processes below it, summed, in KiB."""
    return sum(rss_anon_kib(member) for member in process_tree(pid))


def measure(command, env=None, timeout=None, interval=0.01):
    """Runs `command` to its end while sampling the RssAnon of its process tree every `interval`
    seconds. Returns a dict: seconds (wall time from start to exit), peak_rss_anon_mib,
    returncode (None when killed at `timeout` seconds), stdout and stderr (text)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                               text=True)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set() and process.poll() is None:
            peak[0] = max(peak[0], tree_rss_anon_kib(process.pid))
            done.wait(interval)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = process.communicate(timeout=timeout)
        returncode = process.returncode
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        returncode = None
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    return {"seconds": seconds, "peak_rss_anon_mib": peak[0] / 1024, "returncode": returncode,
            "stdout": out, "stderr": err}


def timed(command, env=None):
    """Runs `command`; returns (seconds, peak RssAnon in MiB). Exits with its error output when it
    fails."""
    result = measure(command, env=env)
    if result["returncode"] != 0:
        raise SystemExit(f"{command[0]} failed: {result['stderr'][-2000:]}")
    return result["seconds"], result["peak_rss_anon_mib"]
