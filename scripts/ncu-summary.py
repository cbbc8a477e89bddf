#!/usr/bin/env python3
"""ncu-summary.py — sum an `ncu --csv --metrics gpu__time_duration.sum` report per
kernel name and grid shape (the GPU time of every launch it profiled).

Usage: scripts/ncu-summary.py REPORT.csv [DIVIDE]   (DIVIDE: e.g. the number of
steps profiled, to print the time per step)."""
import collections
import csv
import sys


def main():
    rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
    # the profiled program's own output (a bench's JSON) may come first
    while rows and "Kernel Name" not in rows[0]:
        rows.pop(0)
    if not rows:
        print("no kernels in %s (did the profiled range run?)" % sys.argv[1])
        return 1
    divide = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    head = rows[0]
    ki, gi, vi = head.index("Kernel Name"), head.index("Grid Size"), head.index("Metric Value")
    by = collections.defaultdict(lambda: [0, 0.0])
    total = 0.0
    for r in rows[1:]:
        us = float(r[vi].replace(",", "")) / 1e3  # ns -> us
        key = (r[ki].split("(")[0][:48], r[gi])
        by[key][0] += 1
        by[key][1] += us
        total += us
    print("kernels %d, total %.1f us (%.1f us per %s)" %
          (len(rows) - 1, total, total / divide, "step" if divide != 1 else "run"))
    for (name, grid), (n, us) in sorted(by.items(), key=lambda x: -x[1][1])[:30]:
        print("%9.1f us %4d x  %-48s grid %s" % (us / divide, n, name, grid))
    return 0


if __name__ == "__main__":
    sys.exit(main())
