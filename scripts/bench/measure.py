#!/usr/bin/env python3
"""Run commands a few times each, report best wall time and peak RSS (from
wait4's rusage, so only the child is measured) and ratios to the baseline."""
import os
import subprocess
import sys
import time

meta, sp = sys.argv[1], sys.argv[2]
size = os.path.getsize(meta)
runs = [
    ("sha256sum", ["sha256sum", meta]),
    ("sp inspect", [sp, "inspect", meta]),
    ("sp inspect --json", [sp, "inspect", "--json", meta]),
]


def measure(cmd):
    best_t, best_rss = None, None
    for _ in range(3):
        devnull = open(os.devnull, "wb")
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=devnull)
        _, status, ru = os.wait4(p.pid, 0)
        t = time.perf_counter() - t0
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit("%s failed" % cmd)
        rss = ru.ru_maxrss * 1024
        best_t = t if best_t is None else min(best_t, t)
        best_rss = rss if best_rss is None else min(best_rss, rss)
    return best_t, best_rss


print("metadata file: %s (%.1f MB)" % (meta, size / 1e6))
base = None
results = {}
for name, cmd in runs:
    t, rss = measure(cmd)
    results[name] = (t, rss)
    if base is None:
        base = t
    print("%-20s %7.3f s  %6.2fx sha256sum   peak RSS %7.1f MB = %.2fx file" % (name, t, t / base, rss / 1e6, rss / size))
goals = [("sp inspect", 1.5), ("sp inspect --json", 3.0)]
ok = True
for name, goal in goals:
    r = results[name][0] / base
    mem = results[name][1] / size
    verdict = "meets" if r <= goal and mem < 3 else "MISSES"
    ok &= verdict == "meets"
    print("%-20s time goal <= %.1fx: %.2fx, memory goal < 3x: %.2fx -> %s" % (name, goal, r, mem, verdict))
sys.exit(0 if ok else 1)
