#!/bin/sh
# demo.sh — `make demo`: speak a sentence with the real Gepard-1.0 model.
#
# Downloads nineninesix/gepard-1.0 and NVIDIA's NanoCodec into the Hugging
# Face cache on first use, writes demo.wav and plays it when a sound server is
# available. MODEL=DIR / CODEC=FILE (make demo MODEL=... CODEC=...) point it
# at local files instead.
set -u
BIN=${1:-build/release/gepard}
TEXT="Hello! This is gepard dot c: the Gepard text to speech model, running in plain C."
OUT=demo.wav
set -- say --json -o "$OUT"
[ -n "${MODEL:-}" ] && set -- "$@" --model "$MODEL"
[ -n "${CODEC:-}" ] && set -- "$@" --codec "$CODEC"
echo "demo: speaking: $TEXT" >&2
if ! "$BIN" "$@" "$TEXT"; then
    cat >&2 <<'MSG'
demo: synthesis failed (see the message above).
demo: without network access, download these on a connected machine and copy them here:
demo:   https://huggingface.co/nineninesix/gepard-1.0  (gepard_config.json, model.safetensors, tokenizer.json)
demo:   https://huggingface.co/nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps (the .nemo file)
demo: then run:  make demo MODEL=/path/to/gepard-1.0 CODEC=/path/to/codec.nemo
demo: or copy a Hugging Face cache that holds them and set HF_HUB_OFFLINE=1.
MSG
    exit 1
fi
echo "demo: wrote $OUT" >&2
for player in paplay pw-play aplay; do
    if command -v "$player" >/dev/null 2>&1 && "$player" "$OUT" 2>/dev/null; then
        exit 0
    fi
done
echo "demo: no audio player or sound server here; listen to $OUT on another machine" >&2
