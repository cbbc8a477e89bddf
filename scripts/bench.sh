#!/bin/sh
# bench.sh — `make bench`: benchmark on synthetic real-size weights.
#
# Writes a synthetic Gepard-1.0-sized checkpoint (random weights, real shapes)
# into build/synth once, then runs `gepard bench` on it and prints its JSON.
set -eu
BIN=${1:-build/release/gepard}
DIR=${SYNTH_DIR:-build/synth}
if [ ! -f "$DIR/model/model.safetensors" ] || [ ! -d "$DIR/codec" ]; then
    echo "bench: writing a synthetic real-size checkpoint into $DIR (once)" >&2
    "$BIN" synth --preset gepard-1.0 --out "$DIR" >/dev/null
fi
exec "$BIN" bench --model "$DIR/model" --codec "$DIR/codec" ${BENCH_ARGS:-}
