#!/bin/bash
# ncu-codec.sh — on the GPU machine (after `make device-bundle` here): the GPU
# time of every kernel of a real-size codec decode of N frames (one call),
# summed per kernel and grid shape. Usage: scripts/ncu-codec.sh [FRAMES] [tf32|f16|f32]
# NCU_STREAMS=N profiles N streams decoding a frame each per call instead.
# NCU_GEPARD=PROGRAM profiles another build's gepard (the old side of an
# old-vs-new comparison), NCU_TAG names the output (ncu-TAG.csv).
# NCU_DETAIL=REGEX adds ncu's full report of the fifth launch of the kernels
# whose name matches (occupancy, throughputs, stall reasons; ncu-detail.txt).
set -u
. .device/env.sh
b=.device/bin
[ -f "$b/libgepard-cuda.so" ] || xz -dc .device/plugin.xz > "$b/libgepard-cuda.so"
out=${OUT:-.device/out}
mkdir -p "$out"
[ -f /tmp/rs/codec/model_config.yaml ] || "$b/gepard" synth --preset gepard-1.0 --seed 1 --out /tmp/rs > /dev/null
frames=${1:-1}
python3 - "$frames" > /tmp/codes.json <<'PY'
import sys, random
random.seed(1)
T = int(sys.argv[1])
print('{"frames":%d,"codes":[%s]}' % (T, ",".join("[" + ",".join(str(random.randrange(5)) for _ in range(32)) + "]" for _ in range(T))))
PY
if [ -n "${NCU_STREAMS:-}" ]; then
    # the server's shape instead: NCU_STREAMS streams decoding one frame each
    # per call (`bench --codec-only --streams N --frames 2`: 2 warm-up calls
    # and 2 timed, so the sums are divided by 4; the GEMM-rate probes and the
    # first call's graph captures are separate rows)
    /usr/local/cuda/bin/ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
        --csv "${NCU_GEPARD:-$b/gepard}" bench --codec-only --device cuda --codec /tmp/rs/codec \
        --streams "$NCU_STREAMS" --frames 2 --gpu-precision "${2:-tf32}" \
        > "$out/ncu${NCU_TAG:+-$NCU_TAG}.csv" 2> "$out/ncu.err"
    python3 scripts/ncu-summary.py "$out/ncu${NCU_TAG:+-$NCU_TAG}.csv" 4
else
    /usr/local/cuda/bin/ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
        --csv "${NCU_GEPARD:-$b/gepard}" decode --codec /tmp/rs/codec --codes /tmp/codes.json --device cuda \
        --gpu-precision "${2:-tf32}" -o /tmp/o.f32 > "$out/ncu${NCU_TAG:+-$NCU_TAG}.csv" 2> "$out/ncu.err"
    python3 scripts/ncu-summary.py "$out/ncu${NCU_TAG:+-$NCU_TAG}.csv"
fi
if [ -n "${NCU_DETAIL:-}" ]; then
    /usr/local/cuda/bin/ncu --clock-control none --set full -k "regex:$NCU_DETAIL" --launch-skip 4 \
        --launch-count 1 "$b/gepard" decode --codec /tmp/rs/codec --codes /tmp/codes.json \
        --device cuda --gpu-precision "${2:-tf32}" -o /tmp/o.f32 > "$out/ncu-detail.txt" 2>&1
    grep -E "Duration|Throughput|Occupancy|Registers Per|Block Limit|Warp Cycles Per Issued|Issued Ipc|Stall|L2 Hit|Bank|One or More|No Eligible|Active Warps" \
        "$out/ncu-detail.txt" | head -45
fi
