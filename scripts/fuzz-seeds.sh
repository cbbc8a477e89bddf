#!/bin/sh
# fuzz-seeds.sh OUT — seed corpora for the libFuzzer harnesses (fuzz/*.c)
# built from the shared fixtures at run time into OUT/<target>/ (git-ignored;
# the fixtures are only read). The checked-in hand-made seeds stay in
# fuzz/seeds/<target>/; scripts/fuzz-run.sh passes both directories.
# Large fixtures are cut down: the .nemo is rebuilt as small tar and tar.gz
# archives of its YAML and a short weights member.
set -e
out=${1:-build/fuzz/seeds}
fx=${GEPARD_FIXTURES:-../shared/fixtures}
[ -f "$out/.done" ] && [ "$out/.done" -nt "$0" ] && exit 0
if [ ! -d "$fx" ]; then
    echo "fuzz-seeds: $fx not found (set GEPARD_FIXTURES); using the checked-in seeds only"
    exit 0
fi
for t in safetensors config tokenizer nemo zip pickle torch yaml codes_json audio voice text \
         http_speech http_batch; do
    mkdir -p "$out/$t"
done
install -m 644 "$fx/model-tiny/lora_adapter.safetensors" "$out/safetensors/lora_adapter.safetensors"
install -m 644 "$fx/model-tiny/lora_adapter.safetensors" "$out/voice/lora_adapter.safetensors"
install -m 644 "$fx/model-tiny/lora_adapter.pt" "$out/voice/lora_adapter.pt"
install -m 644 "$fx/model-tiny/model/gepard_config.json" "$out/config/gepard_config.json"
install -m 644 "$fx/model-tiny/model/config.json" "$out/config/config.json"
install -m 644 "$fx/model-tiny/model/tokenizer.json" "$out/tokenizer/tokenizer.json"
install -m 644 "$fx/model-tiny/lora_adapter.pt" "$out/zip/lora_adapter.pt"
install -m 644 "$fx/model-tiny/lora_adapter.pt" "$out/torch/lora_adapter.pt"
install -m 644 "$fx/model-tiny/golden.json" "$out/http_speech/golden.json"
if command -v python3 >/dev/null 2>&1; then
    python3 - "$fx" "$out" <<'PY'
import io, sys, tarfile, gzip, zipfile, struct, json, wave, math
fx, out = sys.argv[1], sys.argv[2]
# data.pkl of the torch fixture for the unpickler
with zipfile.ZipFile(f"{fx}/model-tiny/lora_adapter.pt") as z:
    for n in z.namelist():
        if n.endswith("data.pkl"):
            open(f"{out}/pickle/data.pkl", "wb").write(z.read(n))
# the safetensors headers of the bigger fixtures, with a little data
for name in ("model-tiny/model/model.safetensors", "codec-tiny/golden.safetensors"):
    b = open(f"{fx}/{name}", "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    open(f"{out}/safetensors/{name.replace('/', '_')}.head", "wb").write(b[:8 + n + 64])
# the .nemo's members, then small archives of them
with tarfile.open(f"{fx}/codec-tiny/nano-tiny.nemo") as t:
    yaml = weights = None
    for m in t.getmembers():
        if m.name.endswith("model_config.yaml"):
            yaml = t.extractfile(m).read()
        elif m.name.endswith("model_weights.ckpt"):
            weights = t.extractfile(m).read()
open(f"{out}/yaml/model_config.yaml", "wb").write(yaml)
def tar_bytes(members, fmt):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()
small = [("./model_config.yaml", yaml[:600]), ("./model_weights.ckpt", weights[:300])]
plain = tar_bytes(small, tarfile.GNU_FORMAT)
open(f"{out}/nemo/small.nemo", "wb").write(plain)
open(f"{out}/nemo/small_pax.nemo", "wb").write(tar_bytes(small, tarfile.PAX_FORMAT))
open(f"{out}/nemo/small.nemo.gz", "wb").write(gzip.compress(plain))
# a short WAV (16-bit and float) for the audio decoder
for width, tag in ((2, "s16"), (1, "u8")):
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1); w.setsampwidth(width); w.setframerate(22050)
        if width == 2:
            w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(i / 5))) for i in range(200)))
        else:
            w.writeframes(bytes(128 + int(60 * math.sin(i / 5)) for i in range(200)))
    open(f"{out}/audio/tone_{tag}.wav", "wb").write(buf.getvalue())
PY
else
    echo "fuzz-seeds: python3 not found; the fixture-derived pickle, yaml, nemo and audio seeds are left out"
fi
touch "$out/.done"
