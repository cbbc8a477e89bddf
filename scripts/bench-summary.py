#!/usr/bin/env python3
# bench-summary.py — the figures issue 15 reports, from `gepard bench` JSON on stdin
# (prefill path and why, prefill tokens/s by path, TTFA, RTF, per-frame times).
import json, sys
d = json.load(sys.stdin)
want = {"prefill_path", "prefill_path_why", "prefill_tokens_per_s", "ttfa_ms", "rtf", "backbone_ms_per_frame", "codec_ms_per_frame", "prefill_by_level", "prefill_gflops", "prefill_fraction_of_fma_peak"}
def walk(o, path=""):
    if isinstance(o, dict):
        for k, v in o.items():
            if k in want: print(path + k, "=", json.dumps(v))
            elif isinstance(v, (dict, list)): walk(v, path + k + ".")
walk(d)
