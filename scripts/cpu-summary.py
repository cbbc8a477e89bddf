#!/usr/bin/env python3
"""cpu-summary.py — one line per `gepard bench --device cpu` JSON (the cpu mode of
scripts/device-run.sh writes them as cpu-BUILD-KERNELS-CORES-REP.json): backbone
and codec ms per frame, prefill tokens/s, TTFA and RTF, so a device call's output
stays short. Usage: scripts/cpu-summary.py FILE.json..."""
import json
import sys


def main():
    for path in sys.argv[1:]:
        try:
            d = json.load(open(path))
        except (OSError, ValueError) as e:
            print("%s: unreadable (%s)" % (path, e))
            continue
        print("%s: backbone %.1f ms (median %.1f, %.2f of bound), codec %.1f ms (%s), "
              "prefill %.0f tok/s (%s), ttfa %.0f ms, rtf %.2f" % (
                  path.rsplit("/", 1)[-1], d.get("backbone_ms_per_frame", 0),
                  d.get("backbone_median_ms_per_frame", 0), d.get("backbone_fraction_of_bound", 0),
                  d.get("codec_ms_per_frame", 0), d.get("codec_kernels", "?"),
                  d.get("prefill_tokens_per_s", 0), d.get("prefill_path", "?"),
                  d.get("ttfa_ms", 0), d.get("rtf", 0)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
