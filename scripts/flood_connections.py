#!/usr/bin/env python3
# flood_connections.py — measure whether idle or trickling connections lock
# a `gepard serve` out (docs/SERVER.md, "Connections").
#
#   scripts/flood_connections.py BINARY [--idle 300] [--trickle 20] [--watch 40] [serve options]
#
# Starts `BINARY serve` on the tiny test fixtures at 127.0.0.1 (a free
# port), opens --idle connections that send nothing and --trickle
# connections that send one header byte a second, then times GET /health
# (1 s limit) and reports how long the trickling connections stay open
# (watched for at most --watch seconds). Loopback only; prints one JSON line.
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.environ.get("GEPARD_FIXTURES", os.path.join(ROOT, "..", "shared", "fixtures"))


def start_server(binary, extra):
    args = [binary, "serve", "--model", os.path.join(FIXTURES, "model-tiny/model"), "--codec",
            os.path.join(FIXTURES, "codec-tiny/nano-tiny.nemo"), "--port", "0", "--threads", "1"]
    proc = subprocess.Popen(args + extra, stderr=subprocess.PIPE, text=True)
    port = None
    deadline = time.time() + 30
    while time.time() < deadline:
        line = proc.stderr.readline()
        m = re.search(r"127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
        if "ready" in line:
            break
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc, port


def health(port, timeout):
    t0 = time.time()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = s.recv(64)
            status = int(data.split()[1]) if data.startswith(b"HTTP/1.") else None
    except OSError as e:
        status = type(e).__name__
    return status, round((time.time() - t0) * 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--idle", type=int, default=300)
    ap.add_argument("--trickle", type=int, default=20)
    ap.add_argument("--watch", type=float, default=40)
    a, serve_args = ap.parse_known_args()  # the rest goes to `serve`
    proc, port = start_server(a.binary, serve_args)
    if not port:
        print("the server did not start", file=sys.stderr)
        proc.kill()
        return 1
    result = {"binary": a.binary, "idle": a.idle, "trickle": a.trickle}
    result["health_before_ms"] = health(port, 1.0)
    idle = []
    for _ in range(a.idle):
        try:
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            break
    trickle = [socket.create_connection(("127.0.0.1", port), timeout=2) for _ in range(a.trickle)]
    closed_at = [None] * len(trickle)
    t0 = time.time()
    stop = threading.Event()

    def drip():
        text = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 1000
        i = 0
        while not stop.is_set():
            for k, s in enumerate(trickle):
                if closed_at[k] is None:
                    try:
                        s.send(text[i % len(text):i % len(text) + 1])
                    except OSError:
                        closed_at[k] = time.time() - t0
            i += 1
            stop.wait(1.0)

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    time.sleep(1.5)
    result["health_under_flood"] = health(port, 1.0)
    while time.time() - t0 < a.watch and any(c is None for c in closed_at):
        time.sleep(0.2)
    stop.set()
    thread.join()
    open_left = sum(c is None for c in closed_at)
    result["trickling_closed_after_s"] = sorted(round(c, 1) for c in closed_at if c is not None)[:3]
    result["trickling_still_open_after_watch"] = open_left
    result["watch_s"] = a.watch
    for s in idle + trickle:
        s.close()
    proc.terminate()
    proc.wait(timeout=30)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
