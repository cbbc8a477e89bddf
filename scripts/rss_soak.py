#!/usr/bin/env python3
# rss_soak.py — a bounded soak of `gepard serve` on the tiny test model: the
# server's resident memory after each round of requests and after it has
# been idle (docs/SERVER.md, "Memory").
#
#   scripts/rss_soak.py BINARY [--rounds 10] [--requests 100] [--concurrency 16]
#                       [--frames 40] [--idle 3] [serve options...]
#
# Each round runs `BINARY loadtest` with --requests requests, --concurrency
# at a time (--frames frames each, alternating pcm, wav and f32, the formats
# loadtest can time); after each round the server's VmRSS is read at once and
# again after --idle seconds without requests. Loopback only; prints JSON.
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.environ.get("GEPARD_FIXTURES", os.path.join(ROOT, "..", "shared", "fixtures"))


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--idle", type=float, default=3)
    a, serve_args = ap.parse_known_args()  # the rest goes to `serve`
    args = [a.binary, "serve", "--model", os.path.join(FIXTURES, "model-tiny/model"), "--codec",
            os.path.join(FIXTURES, "codec-tiny/nano-tiny.nemo"), "--port", "0",
            "--threads", "1"] + serve_args
    server = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    port = None
    deadline = time.time() + 60
    while time.time() < deadline:
        line = server.stderr.readline()
        m = re.search(r"127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
        if "ready" in line or not line:
            break
    threading.Thread(target=lambda: [None for _ in server.stderr], daemon=True).start()
    if not port:
        server.kill()
        print("the server did not start", file=sys.stderr)
        return 1
    out = {"binary": a.binary, "serve_args": serve_args, "rss_start_mb": rss_mb(server.pid),
           "rounds": []}
    formats = ["pcm", "wav", "f32"]
    for r in range(a.rounds):
        body = json.dumps({"max_frames": a.frames, "stop_threshold": 2, "seed": r})
        lt = subprocess.run([a.binary, "loadtest", "--url", f"http://127.0.0.1:{port}",
                             "--concurrency", str(a.concurrency), "--requests", str(a.requests),
                             "--format", formats[r % len(formats)], "--body", body],
                            capture_output=True, text=True)
        busy = rss_mb(server.pid)
        time.sleep(a.idle)
        idle = rss_mb(server.pid)
        ok = None
        try:
            ok = json.loads(lt.stdout).get("ok")
        except ValueError:
            pass
        out["rounds"].append({"ok": ok, "rss_after_round_mb": busy, "rss_after_idle_mb": idle})
    server.terminate()
    server.wait(timeout=60)
    out["requests"] = a.rounds * a.requests
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
