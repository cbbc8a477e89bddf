#!/usr/bin/env python3
# stream_capacity.py — how many concurrent streaming connections a
# `gepard serve` holds, and at what cost (docs/SERVER.md, "Connections").
#
#   scripts/stream_capacity.py BINARY N [--frames 40] [serve options...]
#
# Starts `BINARY serve` on the tiny test fixtures at 127.0.0.1 with room for
# N streams (--max-streams min(N, 4096) or --slots, a queue for the rest, N + 64
# connections, no per-client share), runs `BINARY loadtest` with N requests
# all in flight at once, and samples the server's threads and resident
# memory every 100 ms. Prints one JSON line: requests ok/failed, wall time,
# peak threads, peak RSS, server CPU seconds. Loopback only.
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


def proc_status(pid):
    threads = rss = 0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    threads = int(line.split()[1])
                elif line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) // 1024
    except OSError:
        pass
    return threads, rss


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("n", type=int)
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--slots", type=int, default=0, help="--max-streams (default min(N, 4096))")
    a, serve_args = ap.parse_known_args()  # the rest goes to `serve`
    n = a.n
    slots = a.slots if a.slots > 0 else min(n, 4096)
    args = [a.binary, "serve", "--model", os.path.join(FIXTURES, "model-tiny/model"), "--codec",
            os.path.join(FIXTURES, "codec-tiny/nano-tiny.nemo"), "--port", "0", "--threads", "1",
            "--max-streams", str(slots), "--max-queue", str(max(n - slots, 0) + 16),
            "--max-connections", str(n + 64), "--max-connections-per-client", "0"] + serve_args
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
    peak = {"threads": 0, "rss_mb": 0}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            t, r = proc_status(server.pid)
            peak["threads"] = max(peak["threads"], t)
            peak["rss_mb"] = max(peak["rss_mb"], r)
            stop.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cpu0 = cpu_seconds(server.pid)
    body = json.dumps({"max_frames": a.frames, "stop_threshold": 2, "top_k": 1})
    t0 = time.time()
    lt = subprocess.run([a.binary, "loadtest", "--url", f"http://127.0.0.1:{port}",
                         "--concurrency", str(n), "--requests", str(n), "--body", body,
                         "--timeout", "300"], capture_output=True, text=True)
    wall = time.time() - t0
    cpu = cpu_seconds(server.pid) - cpu0
    stop.set()
    sampler.join()
    server.terminate()
    server.wait(timeout=60)
    report = {}
    try:
        report = json.loads(lt.stdout)
    except ValueError:
        report = {"loadtest_error": (lt.stderr or lt.stdout)[-300:]}
    out = {"connections": n, "slots": slots, "frames": a.frames, "ok": report.get("ok"),
           "failed": report.get("failed"), "wall_s": round(wall, 1),
           "server_cpu_s": round(cpu, 1), "peak_threads": peak["threads"],
           "peak_rss_mb": peak["rss_mb"],
           "ttfa_p50_ms": (report.get("ttfa_ms") or {}).get("p50"),
           "errors": report.get("errors", [])[:2]}
    if "loadtest_error" in report:
        out["loadtest_error"] = report["loadtest_error"]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
