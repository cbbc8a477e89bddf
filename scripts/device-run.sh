#!/bin/bash
# device-run.sh — run on the GPU machine, from the repository root, after
# `make device-bundle` here packed .device/ (programs, their libraries, the
# CUDA plugin and the fixtures). One command does the whole GPU check:
#
#   scripts/device-run.sh [tests|bench|serve|all] [ARGS for bench...]
#
# tests: `gepard synth` writes the real-size synthetic checkpoint, then every
#        CUDA test runs (release build) against the fixtures and real size.
# bench: `gepard bench --device cuda` on the real-size checkpoint.
# serve: `gepard serve --device cuda` (backbone and codec on the GPU) driven
#        by `gepard loadtest` (1, 64 and 256 concurrent streaming requests of
#        100 frames).
# Logs and JSON go to $OUT (the device tool brings that folder back) or
# ./.device/out when OUT is unset.
set -u
here=$(pwd)
. .device/env.sh
out=${OUT:-$here/.device/out}
mkdir -p "$out"
export GEPARD_FIXTURES=$here/.device/fixtures
bin=$here/.device/bin
what=${1:-all}
shift || true
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
nproc; grep -m1 "model name" /proc/cpuinfo
if [ ! -f /tmp/rs/model/model.safetensors ]; then
    "$bin/gepard" synth --preset gepard-1.0 --seed 1 --out /tmp/rs > /dev/null || exit 1
fi
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
    GEPARD_REALSIZE_DIR=/tmp/rs GEPARD_BIN=$bin/gepard GEPARD_RELEASE_BIN=$bin/gepard \
        "$bin/gepard-tests" cuda 2>&1 | tee "$out/tests.log"
    rc=${PIPESTATUS[0]}
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
    "$bin/gepard" bench --device cuda --model /tmp/rs/model --codec /tmp/rs/codec "$@" \
        > "$out/bench.json" 2> "$out/bench.err"
    echo "bench exit $?"; tail -5 "$out/bench.err"; cat "$out/bench.json"
fi
if [ "$what" = serve ] || [ "$what" = all ]; then
    # The server on the GPU (backbone and codec): one stream, then 64 and 256 at once.
    "$bin/gepard" serve --device cuda --model /tmp/rs/model --codec /tmp/rs/codec \
        --port 18080 --max-streams 256 --max-queue 1024 --max-connections-per-client 4096 > "$out/serve.log" 2>&1 &
    pid=$!
    for i in $(seq 1 60); do env -u LD_LIBRARY_PATH curl -sf -o /dev/null http://127.0.0.1:18080/ready && break; sleep 0.5; done
    for c in 1 64 256; do
        "$bin/gepard" loadtest --url http://127.0.0.1:18080 -c $c -n $((c * 2)) \
            --body '{"max_frames":100,"stop_threshold":2,"seed":1}' > "$out/loadtest_$c.json"
        echo "loadtest -c $c: $(cat "$out/loadtest_$c.json")"
    done
    kill -TERM $pid; wait $pid
fi
exit $rc
