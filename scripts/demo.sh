#!/bin/sh
# demo.sh — `make demo`: speak a sentence with the real Gepard-1.0 model.
#
# Downloads nineninesix/gepard-1.0 and NVIDIA's NanoCodec into the Hugging
# Face cache on first use, writes demo.wav and plays it when a sound server is
# available. MODEL=DIR / CODEC=FILE (make demo MODEL=... CODEC=...) point it
# at local files instead. SYNTHETIC=1 (make demo SYNTHETIC=1) needs no
# download: it writes a checkpoint of random weights (`gepard synth --preset
# tiny`, into build/demo-synth) and speaks with that — noise, but the whole
# program runs.
set -u
BIN=${1:-build/release/gepard}
TEXT="Hello! This is gepard dot c: the Gepard text to speech model, running in plain C."
OUT=demo.wav
CODEC_REPO=nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps
CODEC_FILE=nemo-nano-codec-22khz-1.89kbps-21.5fps.nemo
set -- say --json -o "$OUT"
if [ "${SYNTHETIC:-0}" = "1" ]; then
    SYNTH_DIR=${SYNTH_DIR:-build/demo-synth}
    if [ ! -f "$SYNTH_DIR/model/model.safetensors" ] || [ ! -d "$SYNTH_DIR/codec" ]; then
        echo "demo: writing a synthetic checkpoint (random weights) into $SYNTH_DIR" >&2
        "$BIN" synth --preset tiny --seed 1 --out "$SYNTH_DIR" >/dev/null || exit 1
    fi
    echo "demo: random weights: what you hear is noise, not speech" >&2
    # the tiny preset's stop head ends each sentence after ~1-5 s; the cap
    # (9 s a sentence) only bounds it
    set -- "$@" --model "$SYNTH_DIR/model" --codec "$SYNTH_DIR/codec" --max-frames 200
else
    [ -n "${MODEL:-}" ] && set -- "$@" --model "$MODEL"
    [ -n "${CODEC:-}" ] && set -- "$@" --codec "$CODEC"
fi
echo "demo: speaking: $TEXT" >&2
if ! "$BIN" "$@" "$TEXT"; then
    [ "${SYNTHETIC:-0}" = "1" ] && exit 1
    cat >&2 <<MSG
demo: synthesis failed (see the message above).
demo: without network access, download these on a connected machine and copy them here:
demo:   the model, https://huggingface.co/nineninesix/gepard-1.0:
demo:     gepard_config.json, model.safetensors, tokenizer.json
demo:   the codec, https://huggingface.co/$CODEC_REPO:
demo:     $CODEC_FILE
demo: then run:  make demo MODEL=/path/to/gepard-1.0 CODEC=/path/to/$CODEC_FILE
demo: or copy a Hugging Face cache that holds them and set HF_HUB_OFFLINE=1.
demo: to try the program now, without any download (random weights, so the audio is noise):
demo:   make demo SYNTHETIC=1
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
