#!/bin/bash
# device-run.sh — run on the GPU machine, from the repository root, after
# `make device-bundle` here packed .device/ (programs, their libraries, the
# CUDA plugin and the fixtures). One command does the whole GPU check:
#
#   scripts/device-run.sh [tests|bench|lm|codec|serve|serve12|soak|all|cpu][,MODE...] [ARGS for bench...]
#
# tests: `gepard synth` writes the real-size synthetic checkpoint, then every
#        CUDA test runs (release build) against the fixtures and real size
#        (TESTS_FILTER="NAME ...": only the tests whose names start so).
# bench: `gepard bench --device cuda` on the real-size checkpoint.
# soak:  `gepard serve --device cuda` under `gepard loadtest --duration` for
#        SOAK_SECONDS (600) at SOAK_CONCURRENCY (256) requests of ~10 s of audio,
#        /metrics sampled every 10 s (resident memory, open files, streams; the
#        server's answered count against the client's) and nvidia-smi's memory
#        use every 10 s (soak.json, soak-gpu-memory.csv): issue 12's soak.
#        A call may run 10 minutes, start-up included: soak-start runs it in the
#        background and returns, soak-wait (the next call, while the machine is
#        still held) waits for it and brings its files back; a 600-s soak
#        outlasts one soak-wait (~585 s): call soak-wait again until it says
#        "soak: loadtest exit" (measured 2026-12-04: the machine kept it).
# lm:    `gepard bench --device cuda` for the language model's step, this
#        build with GEPARD_CUDA_DECODE1=0 (kernel by kernel) and as built,
#        alternating, twice (LM_ENV_VARIANTS="NAME:VAR=VALUE[+VAR=VALUE] ..."
#        replaces the variants; LM_STREAMS the batch sizes; LM_PROFILE=1 runs
#        all with GEPARD_CUDA_DECODE1_PROFILE=1 and prints the single-row
#        kernel's phase times; with .device/alt-plugin.xz the other plugin
#        runs as variant "alt", and each .device/alt-NAME.xz as variant NAME):
#        lm-*.json.
# codec: the codec's CUDA tests, then `gepard bench --codec-only` for f16 and
#        tf32 and the f16 tile/split variants (codec-*.json): the quick loop
#        for codec kernel work.
# serve: `gepard serve --device cuda` (backbone and codec on the GPU) driven
#        by `gepard loadtest` (1, 64 and 256 concurrent streaming requests of
#        100 frames).
# serve12: issue 12's load checks: `gepard serve --device cuda --max-streams
#        1024`, one streaming request at a time of a 12-word sentence (20
#        requests: TTFA p50), then 256, 512 and 1024 concurrent requests of
#        ~10 s of audio (215 frames) each (serve12-*.json). The codec's
#        precision is GEPARD_CUDA_CODEC_PRECISION's when set. serve12-chunk1:
#        the same with GEPARD_GPU_CHUNK_FRAMES=1 (every frame decoded at once),
#        serve12-chunk4 with 4 (light-load chunks before 16).
# lm-ncu: Nsight Compute's time of every kernel of two batched decode steps of
#        LM_NCU_ROWS (256) rows, inside `gepard bench --device cuda --streams ROWS`
#        (GEPARD_CUDA_PROFILE_STEPS=ROWS:2 brackets them with cudaProfilerStart/Stop):
#        ncu-lm-ROWS.csv and a per-kernel summary. That range has never opened
#        (the plugin's static runtime?): LM_NCU_LAUNCHES=N profiles the bench's first
#        N kernels from the start instead (`--frames 4`), summed per kernel and grid.
# attn-ncu: the backbone's batched step at ATTN_STREAMS (1024) rows over ATTN_FRAMES
#        (215) frames (a 10 s request's contexts), tiles against units and each
#        ATTN_ENV_VARIANTS setting (ATTN_UNITS=0: no units), then ncu's full set on
#        two launches of the tiled attention at ~200 positions (attn-ncu.txt; ATTN_NCU=0: none).
# engine-profile: the same bench once per ENGINE_STREAMS (256,1024) with
#        GEPARD_ENGINE_PROFILE=1: the step thread's time per part of its cycle.
# engine: `gepard bench --device cuda --frames 64 --streams 16,256,1024` (the
#        engine with the codec on the GPU: engine_audio), this build under
#        ENGINE_ENV_VARIANTS ("noprio:GEPARD_CUDA_PRIORITIES=0"; NAME:A=1+B=2 sets
#        two) and as built,
#        alternating, twice (engine-*.json; ENGINE_STREAMS, ENGINE_FRAMES).
#        serve12-alt: serve12 with .device/alt-plugin.xz (and SERVE12_ALT_ENV's
#        settings, "VAR=VALUE ..."), for an A/B of two plugins in one call.
#        serve12-nowarm: serve12 without the warm-up before ready (--warm-up 0);
#        serve12-noprio: serve12 with every CUDA stream at the same priority;
#        serve12-pow2 with the codec's graphs for power-of-two batches only;
#        SERVE12_WAVES=k sends k · c requests at each load c (c in flight).
#        serve12-ontop: a GPU step's prefill rows on top of its decode rows, the
#        burst not paced (GEPARD_ENGINE_PACE_BURSTS=0); serve12-paced: the burst
#        paced, the prefill rows in the budget (GEPARD_GPU_PREFILL_ON_TOP=0);
#        serve12-ontop-paced: the two together (the default since 2026-12-05);
#        serve12-old: neither (the default before).
#        serve12-noqueue: every codec call of a light load waited for
#        (GEPARD_ENGINE_QUEUE_CODEC=0). serve12-first1: a stream's first audio
#        at one frame under load (GEPARD_ENGINE_FIRST_AUDIO_FRAMES=1; the default holds 3).
#        serve12-noahead: each graph size captured at its first use (GEPARD_CUDA_GRAPHS_AHEAD=0).
#        serve12-gather: new streams' prefills gathered into every 4th cycle under
#        load (GEPARD_GPU_PREFILL_EVERY=SERVE12_PREFILL_EVERY, 4): decode-only steps
#        between, with their graphs and tiled attention. serve12-mixtiles: a
#        mixed step's decode rows attend by tiles (GEPARD_CUDA_MIXED_TILES=1);
#        serve12-both: the two together.
# lone:  a lone stream, each LONE_ENV_VARIANTS setting ("NAME:VAR=VALUE[+VAR=VALUE]
#        ...") and this build alternating, twice: the engine with audio (`gepard
#        bench --device cuda --streams 1 --frames LONE_FRAMES`, 128) and the
#        server's 20 lone 12-word requests (serve12 without its loads; RTF p50):
#        lone-*.json: issue 12's RTF 0.01. A variant
#        "NAME:GEPARD_CUDA_PLUGIN=/tmp/x.so" runs another plugin (unpack an
#        .device/alt-*.xz there first).
# codec-small: the codec's CUDA tests, then `bench --codec-only` for few streams
#        (CODEC_SMALL_STREAMS, "1,2,4,8,16"; 1 is one stream a frame per call) for
#        this build, .device/alt-plugin.xz as "alt" and each CODEC_ENV_VARIANTS
#        setting, alternating twice (~1 minute; the alternative plugin's tests
#        are not rerun): the loop for single-stream codec work.
# codec-per-call: `bench --codec-only` for each CODEC_PER_CALL "STREAMS:K" (K
#        frames per stream in one call; "256:1 128:2 ..."), twice: what decoding
#        each stream's frames in pairs or fours would buy the loaded engine.
# codec-cpu: the host CPU's codec paths at 2 cores: the tile tests (emulated and on
#        the AMX unit), then codec_bench 16 2 1 MIX for each CODEC_CPU_MIXES ("ttttt
#        wtttt": f32, mixed and the residual convs on AMX tiles, 't' per stage);
#        CODEC_CPU_ONEDNN=1 adds oneDNN's bf16 convolution ('ooooo', three and two
#        input terms; codec-cpu.log).
# codec-ab: every codec_bench build packed as .device/bin/codec_bench* (copy
#        other builds there by hand: codec_bench_old, codec_bench_nta, ...),
#        alternating twice, 2 cores, with GEPARD_KERNELS=avx2 and the best
#        kernels (CODEC_AB_KERNELS; CODEC_AB_ARGS: "16 2 1"): codec-ab.log.
#        CODEC_AB_EVICT="0 600" also runs each with 600 MB read before every
#        frame (GEPARD_CODEC_BENCH_EVICT_MB: the caches as the engine leaves them).
# cpu:   the host CPU alone (issue 15): the kernel and real-size CPU tests, then
#        prefill_bench (26 and 64 rows) and
#        `gepard bench --device cpu` on 2 cores (taskset -c 0,1, --threads 2)
#        and on all cores, at the best kernel level and with GEPARD_KERNELS=avx2,
#        each run interleaved with the previous build's programs when the bundle
#        has them (.device/base.tar.xz: `make device-bundle DEVICE_BASE_DIR=...`). Writes cpu.log and cpu-*.json. CPU_KERNELS
#        ("best avx2"), CPU_CORES ("2 <all>") and BENCH_FRAMES (64: the bench's own default, issue 15's protocol) narrow it;
#        CPU_NO_TESTS=1 skips the tests; CPU_NO_PREFILL=1 the prefill_bench runs;
#        CPU_ENV_VARIANTS="NAME:VAR=VALUE[+VAR=VALUE] ..." adds this build's bench
#        under each setting to every round (e.g. "pf4k:GEPARD_DECODE_PREFETCH=4096").
# prefill: the prefill choices on this CPU (issue 15): prefill_bench at
#        26 and 64 rows with GEPARD_PREFILL=native (with the load-time choice
#        of bf16 widening, and with GEPARD_PREFILL_WIDEN=1 and 0), onednn and
#        oneDNN with two activation terms (onednn2: GEPARD_ONEDNN_TERMS=2), our AMX
#        tile loop (tiles: GEPARD_PREFILL=tiles) and
#        the load-time choice, on 2 cores (taskset -c 0,1) and on all (ONEDNN_SLICES: the
#        oneDNN slice widths to try, "128"), then `gepard bench
#        --device cpu --threads 2` on 2 cores (prefill-bench.json: its
#        prefill_path and prefill_path_why say what the load chose).
# codec: CODEC_QUICK=1 benches f16 and tf32 only; CODEC_VARIANTS="" skips the
#        slice:split variants; CODEC_ENV_VARIANTS="NAME:VAR=VALUE[+VAR=VALUE] ..." adds
#        this build under an environment setting to the alternating runs
#        (with or without an old build); CODEC_NCU=1 adds scripts/ncu-codec.sh's
#        kernel times (256 frames) for the old build, this one, the alternative
#        and each environment variant; CODEC_NCU_STREAMS="256 …" those of one call
#        of that many one-frame streams (this build and each variant).
# Logs and JSON go to $OUT (the device tool brings that folder back) or
# ./.device/out when OUT is unset.
set -u
here=$(pwd)
. .device/env.sh
out=${OUT:-$here/.device/out}
mkdir -p "$out"
export GEPARD_FIXTURES=$here/.device/fixtures
bin=$here/.device/bin
[ -f "$bin/libgepard-cuda.so" ] || xz -dc .device/plugin.xz > "$bin/libgepard-cuda.so"
# The old build's programs (make device-bundle DEVICE_BASE_DIR=...), if packed:
# base/gepard finds the old CUDA plugin beside itself.
base=""
if [ -f .device/base.tar.xz ]; then
    mkdir -p .device/base && tar xJf .device/base.tar.xz -C .device/base && base=$here/.device/base
fi
# A second CUDA plugin built from the same tree with one change (xz-compressed
# as .device/alt-plugin.xz by hand): the codec mode benches it too, through
# GEPARD_CUDA_PLUGIN, for an A/B of two kernel variants with one gepard.
alt=""
if [ -f .device/alt-plugin.xz ]; then
    mkdir -p .device/alt && xz -dc .device/alt-plugin.xz > .device/alt/libgepard-cuda.so &&
        alt=$here/.device/alt/libgepard-cuda.so
fi
what=${1:-all}
shift || true
# several modes in one call: codec,serve12
want() { case ",$what," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
# a mode name this script does not know would run nothing: refuse it before
# any device time goes to the checkpoint
known=" $(grep -o 'want [a-z0-9-]*' "$0" | awk '{print $2}' | sort -u | tr '\n' ' ') "
for m in $(echo "$what" | tr ',' ' '); do
    case "$known" in *" $m "*) ;; *)
        echo "device-run.sh: unknown mode \"$m\"; the modes are:$known" >&2
        exit 2 ;;
    esac
done
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv | tee "$out/gpu.txt"
nproc; grep -m1 "model name" /proc/cpuinfo
# which logical CPUs share a core (taskset -c 0,1 may pick two hyperthreads of one core)
lscpu -e=CPU,CORE,SOCKET,NODE 2>/dev/null | head -20 | tee "$out/cpu-topology.txt" | tr '\n' ';'; echo
grep -o -w -E "avx512f|avx512_bf16|avx512_vnni|amx_bf16|amx_tile" /proc/cpuinfo | sort -u | tr '\n' ' '; echo
if [ ! -f /tmp/rs/model/model.safetensors ]; then
    "$bin/gepard" synth --preset gepard-1.0 --seed 1 --out /tmp/rs > /dev/null || exit 1
fi
rc=0
if want tests || want all; then
    GEPARD_REALSIZE_DIR=/tmp/rs GEPARD_BIN=$bin/gepard GEPARD_RELEASE_BIN=$bin/gepard \
        "$bin/gepard-tests" ${TESTS_FILTER:-cuda} 2>&1 | tee "$out/tests.log"
    rc=${PIPESTATUS[0]}
fi
if want bench || want all; then
    "$bin/gepard" bench --device cuda --model /tmp/rs/model --codec /tmp/rs/codec "$@" \
        > "$out/bench.json" 2> "$out/bench.err"
    echo "bench exit $?"; tail -5 "$out/bench.err"; cat "$out/bench.json"
fi
if want lm; then # the language model's step, alternating LM_ENV_VARIANTS and this build, twice
    lm_variants="${LM_ENV_VARIANTS-kernels:GEPARD_CUDA_DECODE1=0}"
    [ -n "$alt" ] && lm_variants="alt:GEPARD_CUDA_PLUGIN=$alt $lm_variants"
    # more plugins built with one change each (.device/alt-NAME.xz): variant NAME
    for f in .device/alt-*.xz; do
        [ -f "$f" ] && [ "$f" != .device/alt-plugin.xz ] || continue
        name=${f#.device/alt-}
        name=${name%.xz}
        mkdir -p .device/alt && xz -dc "$f" > ".device/alt/$name.so" &&
            lm_variants="$name:GEPARD_CUDA_PLUGIN=$here/.device/alt/$name.so $lm_variants"
    done
    lm_prof=""
    [ "${LM_PROFILE:-0}" = 1 ] && lm_prof=GEPARD_CUDA_DECODE1_PROFILE=1
    for rep in 1 2; do
        for v in $lm_variants default:GEPARD_LM_DEFAULT=1; do
            env $lm_prof $(echo "${v#*:}" | tr '+' ' ') "$bin/gepard" bench --device cuda \
                --model /tmp/rs/model --codec /tmp/rs/codec --frames 128 \
                --streams ${LM_STREAMS:-1,8,64,256} > "$out/lm-${v%%:*}-$rep.json" \
                2> "$out/lm-${v%%:*}-$rep.err"
            [ -n "$lm_prof" ] && grep -E "single-row kernel|attention phase" "$out/lm-${v%%:*}-$rep.err"
            echo "lm ${v%%:*}-$rep: $(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print("1 stream %.3f ms/frame (median %.3f), ttfa %.2f ms;" % (d["backbone_ms_per_frame"],
      d["backbone_median_ms_per_frame"], d["ttfa_ms"]),
      " ".join("%d: step %.3f ms gpu %.3f (host: queue %.3f, wait %.3f, after %.3f), %.0f f/s" % (
               a["streams"], a["step_ms"], a["gpu_step_ms"], a.get("step_host_ms", {}).get("queue", 0),
               a.get("step_host_ms", {}).get("wait", 0), a.get("step_host_ms", {}).get("after", 0),
               a["frames_per_s"]) for a in d["aggregate"]))' "$out/lm-${v%%:*}-$rep.json" 2>&1)"
        done
    done
fi
if want lm-ncu && [ -n "${LM_NCU_LAUNCHES:-}" ]; then # the first N kernels from the start
    for rows in ${LM_NCU_ROWS:-256}; do
        /usr/local/cuda/bin/ncu --launch-count "$LM_NCU_LAUNCHES" --clock-control none \
            --cache-control none --metrics gpu__time_duration.sum --csv \
            "$bin/gepard" bench --device cuda --model /tmp/rs/model --codec /tmp/rs/codec \
            --frames 4 --streams $rows > "$out/ncu-lm-$rows.csv" 2> "$out/ncu-lm-$rows.err"
        echo "lm-ncu $rows rows (the first $LM_NCU_LAUNCHES kernels of the bench, summed):"
        python3 scripts/ncu-summary.py "$out/ncu-lm-$rows.csv" 1
    done
elif want lm-ncu; then # ncu's time of every kernel of two batched steps of LM_NCU_ROWS rows
    for rows in ${LM_NCU_ROWS:-256}; do
        GEPARD_CUDA_PROFILE_STEPS=$rows:2 /usr/local/cuda/bin/ncu --profile-from-start off \
            --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
            "$bin/gepard" bench --device cuda --model /tmp/rs/model --codec /tmp/rs/codec \
            --frames 8 --streams $rows > "$out/ncu-lm-$rows.csv" 2> "$out/ncu-lm-$rows.err"
        echo "lm-ncu $rows rows (two steps):"
        python3 scripts/ncu-summary.py "$out/ncu-lm-$rows.csv" 2
    done
fi
if want attn-ncu; then # the tiled decode attention at serving contexts (issue 12's batched step)
    # the backbone's step at ATTN_STREAMS (1024) rows over ATTN_FRAMES (215) frames,
    # contexts growing as a 10 s request's: tiles (default), each ATTN_ENV_VARIANTS
    # setting, and the unit kernel (GEPARD_CUDA_ATTN_TILE_ROWS=0), alternating twice
    for rep in $(seq 1 ${ATTN_REPS:-2}); do
        units=units:GEPARD_CUDA_ATTN_TILE_ROWS=0
        [ "${ATTN_UNITS:-1}" = 0 ] && units=""
        for v in default:GEPARD_LM_DEFAULT=1 ${ATTN_ENV_VARIANTS:-} $units; do
            f="$out/attn-${v%%:*}-$rep.json"
            env $(echo "${v#*:}" | tr '+' ' ') "$bin/gepard" bench --device cuda \
                --model /tmp/rs/model --codec /tmp/rs/codec --frames ${ATTN_FRAMES:-215} \
                --streams ${ATTN_STREAMS:-1024} > "$f" 2> "$f.err"
            echo "attn ${v%%:*}-$rep: $(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join("%d: step %.3f ms gpu %.3f, %.0f f/s" % (a["streams"], a["step_ms"], a["gpu_step_ms"],
      a["frames_per_s"]) for a in d["aggregate"]))' "$f" 2>&1)"
        done
    done
    # Nsight Compute's full set on ATTN_NCU_COUNT (2) launches of the tiles kernel
    # after ATTN_NCU_SKIP (2400) of them: contexts of ~200 positions (ATTN_NCU=0: none)
    [ "${ATTN_NCU:-1}" = 0 ] || /usr/local/cuda/bin/ncu --kernel-name regex:k_decode_attention_tiles \
        --launch-skip ${ATTN_NCU_SKIP:-2400} --launch-count ${ATTN_NCU_COUNT:-2} --set full \
        --clock-control none "$bin/gepard" bench --device cuda --model /tmp/rs/model \
        --codec /tmp/rs/codec --frames ${ATTN_FRAMES:-215} --streams ${ATTN_STREAMS:-1024} \
        > "$out/attn-ncu.txt" 2> "$out/attn-ncu.err"
    echo "attn-ncu exit $?"
    grep -E "Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Achieved Occupancy|Registers Per|Issue Slots Busy|Executed Ipc A|No Eligible|Stall|Warp Cycles Per Issued|Compute \(SM\) Throughput|Block Limit" "$out/attn-ncu.txt" | head -60
fi
if want engine; then # the engine with the codec on the GPU (bench's engine_audio), alternating
    for rep in 1 2; do
        for v in ${ENGINE_ENV_VARIANTS:-noprio:GEPARD_CUDA_PRIORITIES=0} default:GEPARD_ENGINE_DEFAULT=1; do
            env $(echo "${v#*:}" | tr '+' ' ') "$bin/gepard" bench --device cuda --model /tmp/rs/model --codec /tmp/rs/codec \
                --frames ${ENGINE_FRAMES:-64} --streams ${ENGINE_STREAMS:-16,256,1024} \
                > "$out/engine-${v%%:*}-$rep.json" 2> /dev/null
            echo "engine ${v%%:*}-$rep: $(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for a in d["aggregate"]:
    e = a.get("engine_audio") or {}
    st = max(e.get("steps", 0), 1)
    print("%d: lm %.0f f/s, engine codes %.0f f/s, with audio %.0f f/s (%.0f x rt), per step: step %.2f ms (waiting %.2f), deliver %.2f ms, codec %.2f ms in %d calls;" % (
        a["streams"], a["frames_per_s"], a.get("engine_frames_per_s", 0), e.get("frames_per_s", 0),
        e.get("realtime_x", 0), 1e3 * e.get("step_seconds", 0) / st, 1e3 * e.get("step_wait_seconds", 0) / st,
        1e3 * e.get("deliver_seconds", 0) / st,
        1e3 * e.get("codec_seconds", 0) / st, e.get("codec_batches", 0)), end=" ")' "$out/engine-${v%%:*}-$rep.json" 2>&1)"
        done
    done
fi
if want engine-profile; then # where the step thread's cycle goes (GEPARD_ENGINE_PROFILE=1)
    for n in $(echo ${ENGINE_STREAMS:-256,1024} | tr ',' ' '); do
        GEPARD_ENGINE_PROFILE=1 "$bin/gepard" bench --device cuda --model /tmp/rs/model \
            --codec /tmp/rs/codec --frames ${ENGINE_FRAMES:-215} --streams $n \
            > "$out/engine-profile-$n.json" 2> "$out/engine-profile-$n.err"
        echo "engine-profile $n streams: $(python3 -c '
import json, sys
for a in json.load(open(sys.argv[1]))["aggregate"]:
    e = a.get("engine_audio") or {}
    print("lm %.0f f/s, engine codes %.0f f/s, with audio %.0f f/s (%.0f x rt)" % (a["frames_per_s"],
          a.get("engine_frames_per_s", 0), e.get("frames_per_s", 0), e.get("realtime_x", 0)))' "$out/engine-profile-$n.json" 2>&1)"
        grep "engine profile" "$out/engine-profile-$n.err"
    done
fi
if want codec; then
    GEPARD_REALSIZE_DIR=/tmp/rs GEPARD_BIN=$bin/gepard GEPARD_RELEASE_BIN=$bin/gepard \
        "$bin/gepard-tests" cuda_codec 2>&1 | tee "$out/codec-tests.log" | grep -E "^ok|FAIL|passed"
    rc=${PIPESTATUS[0]}
    codec_bench() { # NAME PRECISION [VAR=VALUE ...]; CODEC_GEPARD: the program
        local name=$1 prec=$2
        shift 2
        env "$@" "${CODEC_GEPARD:-$bin/gepard}" bench --codec-only --device cuda --codec /tmp/rs/codec \
            --frames 32 --gpu-precision "$prec" > "$out/codec-$name.json" 2> /dev/null
        echo "codec $name: $(python3 -c '
import json, sys
g = json.load(open(sys.argv[1]))["gpu_codec"]
for k, v in g.items():
    if isinstance(v, dict):
        print(k, "1 stream %.2f ms/frame (GPU %.2f);" % (v["single_stream_ms_per_frame"],
                                                        v.get("single_stream_gpu_ms_per_frame", 0)),
              " ".join("%d: %.0f f/s %.0f TF (GPU %.2f of %.2f ms)" % (b["streams"], b["frames_per_s"], b["tflops"],
                                                            b.get("gpu_ms_per_step", 0), b["ms_per_step"])
                       for b in v["batches"]))' "$out/codec-$name.json" 2>&1)"
    }
    if [ -n "$base$alt${CODEC_ENV_VARIANTS:-}" ]; then # old, new and variants alternate, twice
        for rep in 1 2; do
            [ -z "$base" ] || CODEC_GEPARD=$base/gepard codec_bench "f16-base-$rep" f16
            codec_bench "f16-new-$rep" f16
            [ -z "$alt" ] || codec_bench "f16-alt-$rep" f16 GEPARD_CUDA_PLUGIN=$alt
            for v in ${CODEC_ENV_VARIANTS:-}; do # NAME:VAR=VALUE of this build
                codec_bench "f16-new-${v%%:*}-$rep" f16 $(echo "${v#*:}" | tr '+' ' ')
            done
        done
    fi
    if [ -n "$alt" ]; then # the variant must pass the codec tests too
        GEPARD_CUDA_PLUGIN=$alt GEPARD_REALSIZE_DIR=/tmp/rs GEPARD_BIN=$bin/gepard \
            GEPARD_RELEASE_BIN=$bin/gepard "$bin/gepard-tests" cuda_codec 2>&1 |
            sed 's/^/alt: /' | grep -E "ok|FAIL|passed"
    fi
    if [ -n "${CODEC_NCU:-}" ]; then # kernel times of one 256-frame decode, each build
        [ -z "$base" ] || NCU_TAG=base NCU_GEPARD=$base/gepard scripts/ncu-codec.sh 256 f16
        NCU_TAG=new scripts/ncu-codec.sh 256 f16
        [ -z "$alt" ] || NCU_TAG=alt GEPARD_CUDA_PLUGIN=$alt scripts/ncu-codec.sh 256 f16
        for v in ${CODEC_ENV_VARIANTS:-}; do
            env $(echo "${v#*:}" | tr '+' ' ') NCU_TAG="new-${v%%:*}" scripts/ncu-codec.sh 256 f16
        done
    fi
    for n in ${CODEC_NCU_STREAMS:-}; do # kernel times of one call of n one-frame streams
        echo "ncu: $n streams, one frame each (this build)"
        NCU_STREAMS=$n NCU_TAG="streams-$n" scripts/ncu-codec.sh 1 f16
        for v in ${CODEC_ENV_VARIANTS:-}; do
            echo "ncu: $n streams, variant ${v%%:*}"
            env $(echo "${v#*:}" | tr '+' ' ') NCU_STREAMS=$n NCU_TAG="streams-$n-${v%%:*}" \
                scripts/ncu-codec.sh 1 f16
        done
    done
    codec_bench f16 f16
    codec_bench tf32 tf32
    [ -n "${CODEC_QUICK:-}" ] || codec_bench f16-tile128 f16 GEPARD_CUDA_CODEC_TILE=128
    [ -n "${CODEC_QUICK:-}" ] || codec_bench f16-split32 f16 GEPARD_CUDA_CODEC_SPLIT_CHUNKS=32
    for v in ${CODEC_VARIANTS-64:32 64:64 64:128 32:64}; do # slice:split-chunks ("": none)
        codec_bench "f16-slice${v%:*}-split${v#*:}" f16 GEPARD_CUDA_CODEC_SLICE=${v%:*} \
            GEPARD_CUDA_CODEC_SPLIT_CHUNKS=${v#*:}
        # every staging and cut must give the same samples in any chunking
        GEPARD_CUDA_CODEC_SLICE=${v%:*} GEPARD_CUDA_CODEC_SPLIT_CHUNKS=${v#*:} \
            GEPARD_REALSIZE_DIR=/tmp/rs GEPARD_BIN=$bin/gepard GEPARD_RELEASE_BIN=$bin/gepard \
            "$bin/gepard-tests" cuda_codec_real cuda_codec_stream 2>&1 | grep -E "^ok|FAIL|passed"
    done
fi
if want codec-small; then # small calls: the codec tests, then few-stream batches, A/B alternating
    GEPARD_REALSIZE_DIR=/tmp/rs GEPARD_BIN=$bin/gepard GEPARD_RELEASE_BIN=$bin/gepard \
        "$bin/gepard-tests" cuda_codec 2>&1 | tee "$out/codec-tests.log" | grep -E "FAIL|passed"
    rc=${PIPESTATUS[0]}
    small_bench() { # NAME [VAR=VALUE ...]
        local name=$1
        shift
        env "$@" "$bin/gepard" bench --codec-only --device cuda --codec /tmp/rs/codec \
            --streams "${CODEC_SMALL_STREAMS:-1,2,4,8,16}" --frames 64 --gpu-precision f16 \
            > "$out/codec-small-$name.json" 2> /dev/null
        echo "codec-small $name: $(python3 -c '
import json, sys
g = json.load(open(sys.argv[1]))["gpu_codec"]["f16"]
print("1 stream %.3f ms (GPU %.3f);" % (g.get("single_stream_ms_per_frame", 0),
                                        g.get("single_stream_gpu_ms_per_frame", 0)),
      " ".join("%d: %.0f f/s" % (b["streams"], b["frames_per_s"]) for b in g["batches"]))' \
            "$out/codec-small-$name.json" 2>&1)"
    }
    for rep in 1 2; do
        small_bench "new-$rep"
        [ -z "$alt" ] || small_bench "alt-$rep" GEPARD_CUDA_PLUGIN=$alt
        for v in ${CODEC_ENV_VARIANTS:-}; do
            small_bench "${v%%:*}-$rep" $(echo "${v#*:}" | tr '+' ' ')
        done
    done
fi
if want codec-per-call; then # streams x frames per call: what batching a stream's frames buys
    for rep in 1 2; do
        for v in ${CODEC_PER_CALL:-256:1 128:2 256:2 64:4 128:4 512:1 256:4 1024:1 512:2}; do
            "$bin/gepard" bench --codec-only --device cuda --codec /tmp/rs/codec --gpu-precision f16 \
                --streams "${v%:*}" --frames 32 --frames-per-call "${v#*:}" \
                > "$out/codec-per-call-${v%:*}x${v#*:}-$rep.json" 2> /dev/null
            echo "codec-per-call ${v%:*} streams x ${v#*:} frames: $(python3 -c '
import json, sys
b = json.load(open(sys.argv[1]))["gpu_codec"]["f16"]["batches"][0]
print("%.0f f/s, %.3f ms per call (GPU %.3f)" % (b["frames_per_s"], b["ms_per_step"], b["gpu_ms_per_step"]))' \
                "$out/codec-per-call-${v%:*}x${v#*:}-$rep.json" 2>&1)"
        done
    done
fi
if want soak; then
    "$bin/gepard" serve --device cuda --model /tmp/rs/model --codec /tmp/rs/codec \
        --port 18080 --max-streams 1024 --max-queue 4096 --max-connections 8192 \
        --max-connections-per-client 8192 > "$out/soak-serve.log" 2>&1 &
    pid=$!
    for i in $(seq 1 60); do env -u LD_LIBRARY_PATH curl -sf -o /dev/null http://127.0.0.1:18080/ready && break; sleep 0.5; done
    nvidia-smi --query-gpu=timestamp,memory.used --format=csv -l 10 > "$out/soak-gpu-memory.csv" &
    smi=$!
    "$bin/gepard" loadtest --url http://127.0.0.1:18080 -c "${SOAK_CONCURRENCY:-256}" \
        --duration "${SOAK_SECONDS:-600}" --sample 10 --prebuffer-ms "${SOAK_PREBUFFER_MS:-0}" \
        --body '{"max_frames":215,"stop_threshold":2,"seed":1}' > "$out/soak.json"
    echo "soak: loadtest exit $?"
    kill $smi
    python3 - "$out/soak.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = d.get("server", {})
print({k: d.get(k) for k in ("requests", "ok", "failed", "audio_seconds_per_second", "max_gap_ms", "underruns")},
      {k: s.get(k) for k in ("rss_mb", "open_fds", "speech_200_answered", "client_ok", "counts_match")})
PY
    kill -TERM $pid; wait $pid
fi
if want soak-start; then # the soak in the background, to outlive this call's 10 minutes
    rm -rf /tmp/soak && mkdir -p /tmp/soak
    # (no archive at its end: that emptied /tmp/soak into a results.tgz there)
    DEVICE_RUN_NO_ARCHIVE=1 OUT=/tmp/soak setsid nohup scripts/device-run.sh soak \
        > /tmp/soak/run.log 2>&1 < /dev/null &
    echo "soak-start: running as $! (SOAK_SECONDS=${SOAK_SECONDS:-600}); call soak-wait next"
fi
if want soak-wait; then # soak-start's run: wait for it (at most SOAK_WAIT_SECONDS), then its files
    for i in $(seq 1 "${SOAK_WAIT_SECONDS:-580}"); do
        grep -q "^soak: loadtest exit" /tmp/soak/run.log 2> /dev/null && break
        if ! pgrep -f "device-run.sh soak$" > /dev/null; then
            echo "soak-wait: soak-start's run is gone (the machine was not kept between calls?)"
            break
        fi
        sleep 1
    done
    sleep 5 # the summary and the server's exit
    cp /tmp/soak/* "$out/" 2> /dev/null
    tail -4 /tmp/soak/run.log 2> /dev/null
fi
if want serve || want all; then
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
serve12() { # NAME [serve options...]
    local name=$1
    shift
    GEPARD_CUDA_GRAPH_LOG=1 "$bin/gepard" serve --device cuda --model /tmp/rs/model \
        --codec /tmp/rs/codec --port 18080 --max-streams 1024 --max-queue 4096 \
        --max-connections 8192 --max-connections-per-client 8192 "$@" > "$out/$name.log" 2>&1 &
    pid=$!
    for i in $(seq 1 240); do
        env -u LD_LIBRARY_PATH curl -sf -o /dev/null http://127.0.0.1:18080/ready && break
        kill -0 $pid 2>/dev/null || { echo "$name: the server exited: $(tail -3 "$out/$name.log")"; return; }
        sleep 0.5
    done
    grep "warm" "$out/$name.log"
    twelve="Please remember to bring your umbrella tomorrow because the forecast says rain."
    # --timeout: a stalled stream must not hold the call to its 600 s
    "$bin/gepard" loadtest --url http://127.0.0.1:18080 -c 1 -n 20 --text "$twelve" --timeout 60 \
        --body '{"max_frames":86,"stop_threshold":2,"seed":1}' > "$out/$name-1.json"
    echo "$name -c 1: $(summary "$out/$name-1.json")"
    for c in ${SERVE12_LOADS:-256 512 1024}; do
        [ "$c" = none ] && continue # the lone requests only
        "$bin/gepard" loadtest --url http://127.0.0.1:18080 -c $c -n $((c * ${SERVE12_WAVES:-1})) \
            --timeout 60 --body '{"max_frames":215,"stop_threshold":2,"seed":1}' > "$out/$name-$c.json"
        echo "$name -c $c: $(summary "$out/$name-$c.json")"
        env -u LD_LIBRARY_PATH curl -s http://127.0.0.1:18080/metrics > "$out/$name-$c.metrics"
        grep -E "^gepard_(engine|realtime|batch|streams_total)" "$out/$name-$c.metrics" | tr '\n' ' '
        echo
    done
    kill -TERM $pid; wait $pid
    grep "engine profile" "$out/$name.log" # with GEPARD_ENGINE_PROFILE=1
    # graphs captured in the warm-up and after it (GEPARD_CUDA_GRAPH_LOG=1)
    awk '/captured the/ { if (ready) after[$5]++; else before[$5]++ } /: ready/ { ready = 1 }
         END { printf "%s graphs captured: warm-up step %d codec %d; in service step %d codec %d\n",
               name, before["step"], before["codec"], after["step"], after["codec"] }' \
        name="$name" "$out/$name.log"
}
summary() { # the loadtest figures issue 12 asks for, on one line
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d.get("ttfa_ms") or {}  # null when no request succeeded
u = d.get("underrun_at_audio_ms") or {}
f = d.get("full_load") or {}
full = ("%.0f s/s at full load (%.2f s)" % (f["audio_seconds_per_second"], f["seconds"])
        if f else "no full-load window")
print("ok %s/%s, %.0f s/s, %s, ttfa p50 %s p99 %s ms, max gap %s ms, underruns %s (worst %s ms, after %s-%s ms of audio), rtf p50 %s"
      % (d.get("ok"), d.get("requests"), d.get("audio_seconds_per_second", 0), full, t.get("p50"),
         t.get("p99"), d.get("max_gap_ms"), d.get("underruns"), d.get("worst_underrun_ms"),
         u.get("min"), u.get("max"), (d.get("rtf") or {}).get("p50")))
PY
}
if want serve12; then
    serve12 serve12
fi
if want lone; then # a lone stream under each LONE_ENV_VARIANTS setting and as built, twice
    for rep in 1 2; do
        for v in ${LONE_ENV_VARIANTS:-} default:GEPARD_LONE_DEFAULT=1; do
            name=${v%%:*}
            env $(echo "${v#*:}" | tr '+' ' ') "$bin/gepard" bench --device cuda \
                --model /tmp/rs/model --codec /tmp/rs/codec --frames ${LONE_FRAMES:-128} \
                --streams 1 > "$out/lone-$name-$rep.json" 2> "$out/lone-$name-$rep.err"
            echo "lone $name-$rep: $(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for a in d["aggregate"]:
    e = a.get("engine_audio") or {}
    st = max(e.get("steps", 0), 1)
    print("lm %.0f f/s, with audio %.0f f/s, per step: step %.3f ms (waiting %.3f), deliver %.3f ms, codec %.3f ms" % (
        a["frames_per_s"], e.get("frames_per_s", 0), 1e3 * e.get("step_seconds", 0) / st,
        1e3 * e.get("step_wait_seconds", 0) / st, 1e3 * e.get("deliver_seconds", 0) / st,
        1e3 * e.get("codec_seconds", 0) / st), end=" ")' "$out/lone-$name-$rep.json" 2>&1)"
            grep "gepard cuda:" "$out/lone-$name-$rep.err" | sort -u
            (export $(echo "${v#*:}" | tr '+' ' '); SERVE12_LOADS=none serve12 lone-$name-$rep --warm-up 4)
        done
    done
fi
if want serve12-alt; then # the alternative plugin (.device/alt-plugin.xz), SERVE12_ALT_ENV set
    if [ -n "$alt" ]; then
        (export GEPARD_CUDA_PLUGIN="$alt" ${SERVE12_ALT_ENV:-}; serve12 serve12-alt)
    else
        echo "serve12-alt: no .device/alt-plugin.xz"
    fi
fi
if want serve12-nowarm; then # no warm-up before ready (before 2026-12-04)
    serve12 serve12-nowarm --warm-up 0
fi
if want serve12-noprio; then # every CUDA stream at the default priority (before 2026-12-02, fourth part)
    GEPARD_CUDA_PRIORITIES=0 serve12 serve12-noprio
fi
if want serve12-pow2; then # codec graphs for power-of-two batches only (before 2026-12-02, fourth part)
    GEPARD_CUDA_CODEC_GRAPH_POW2=1 serve12 serve12-pow2
fi
if want serve12-chunk4; then # light-load GPU chunks of 4 (the two sessions before this one)
    GEPARD_GPU_CHUNK_FRAMES=4 serve12 serve12-chunk4
fi
if want serve12-chunk1; then # the GPU chunk of one frame (before 2026-12-02), for A/B
    GEPARD_GPU_CHUNK_FRAMES=1 serve12 serve12-chunk1
fi
if want serve12-qlight; then # the codec queued only under a light load (before 2026-12-04, fourth part)
    GEPARD_ENGINE_QUEUE_CODEC=light serve12 serve12-qlight
fi
if want serve12-noqueue; then # every codec call waited for (before 2026-12-04, fourth part)
    GEPARD_ENGINE_QUEUE_CODEC=0 serve12 serve12-noqueue
fi
if want serve12-noahead; then # each graph size captured at its first use (before 2026-12-04, sixth part)
    GEPARD_CUDA_GRAPHS_AHEAD=0 serve12 serve12-noahead
fi
if want serve12-gather; then # new streams' prefills gathered into every 4th cycle under load
    GEPARD_GPU_PREFILL_EVERY=${SERVE12_PREFILL_EVERY:-4} serve12 serve12-gather
fi
if want serve12-mixtiles; then # a mixed step's decode rows attend by tiles
    GEPARD_CUDA_MIXED_TILES=1 serve12 serve12-mixtiles
fi
if want serve12-both; then # gathered prefills and tiles in the mixed steps
    GEPARD_CUDA_MIXED_TILES=1 GEPARD_GPU_PREFILL_EVERY=${SERVE12_PREFILL_EVERY:-4} serve12 serve12-both
fi
if want serve12-first1; then # a stream's first audio at one frame under load (before 2026-12-04, sixth part)
    GEPARD_ENGINE_FIRST_AUDIO_FRAMES=1 serve12 serve12-first1
fi
if want serve12-ontop; then # prefill rows on top of the decode rows, the burst not paced
    GEPARD_GPU_PREFILL_ON_TOP=1 GEPARD_ENGINE_PACE_BURSTS=0 serve12 serve12-ontop
fi
if want serve12-paced; then # the admission pacing a burst, prefill rows in the budget
    GEPARD_GPU_PREFILL_ON_TOP=0 GEPARD_ENGINE_PACE_BURSTS=1 serve12 serve12-paced
fi
if want serve12-ontop-paced; then # prefill on top with the burst paced
    GEPARD_GPU_PREFILL_ON_TOP=1 GEPARD_ENGINE_PACE_BURSTS=1 serve12 serve12-ontop-paced
fi
if want serve12-old; then # neither (the defaults before 2026-12-05)
    GEPARD_GPU_PREFILL_ON_TOP=0 GEPARD_ENGINE_PACE_BURSTS=0 serve12 serve12-old
fi
if want serve12-margins; then # serve12 at each of SERVE12_MARGINS (--realtime-margin)
    for m in ${SERVE12_MARGINS:-0.7 0.6}; do serve12 serve12-m$m --realtime-margin $m; done
fi
if want serve12-nomargin; then
    serve12 serve12-nomargin --realtime-margin 0
fi
if want prefill; then
    all=$(nproc)
    {
        for cores in 2 $all; do
            for rows in 26 64; do
                for path in native widen nowiden $(for w in ${ONEDNN_SLICES:-128}; do echo onednn:$w; done) onednn2 tiles auto; do
                    penv=""
                    case $path in
                    native) penv=GEPARD_PREFILL=native ;;
                    widen) penv="GEPARD_PREFILL=native GEPARD_PREFILL_WIDEN=1" ;;
                    nowiden) penv="GEPARD_PREFILL=native GEPARD_PREFILL_WIDEN=0" ;;
                    onednn:*) penv="GEPARD_PREFILL=onednn GEPARD_ONEDNN_SLICE=${path#onednn:}" ;;
                    onednn2) penv="GEPARD_PREFILL=onednn GEPARD_ONEDNN_TERMS=2" ;;
                    tiles) penv=GEPARD_PREFILL=tiles ;;
                    esac
                    echo "prefill $path cores=$cores rows=$rows: $(env $penv taskset -c 0-$((cores - 1)) \
                        "$bin/prefill_bench" /tmp/rs/model $rows $cores 5 2>&1 | tr '\n' ' ')"
                done
            done
        done
        taskset -c 0,1 "$bin/gepard" bench --device cpu --model /tmp/rs/model --codec /tmp/rs/codec \
            --threads 2 --frames 16 > "$out/prefill-bench.json" 2> "$out/prefill-bench.err"
        python3 scripts/bench-summary.py < "$out/prefill-bench.json"
    } 2>&1 | tee "$out/prefill.log"
fi
if want codec-cpu; then # the host CPU's codec paths: AMX tiles (ours) and oneDNN's bf16 convolution
    {
        GEPARD_REALSIZE_DIR=/tmp/rs "$bin/gepard-tests" conv_tiles codec_tiles 2>&1 |
            grep -E "^ok|FAIL|passed|note|tests/"
        for mix in ${CODEC_CPU_MIXES:-ttttt wtttt}; do
            echo "codec_bench, 2 cores, residual convs $mix:"
            taskset -c 0,1 "$bin/codec_bench" 16 2 1 $mix 2>&1
        done
        if [ -n "${CODEC_CPU_ONEDNN:-}" ]; then
            for terms in 3 2; do
                echo "codec_bench, 2 cores, oneDNN terms $terms:"
                GEPARD_ONEDNN_TERMS=$terms taskset -c 0,1 "$bin/codec_bench" 16 2 1 ooooo 2>&1
            done
        fi
    } 2>&1 | tee "$out/codec-cpu.log"
fi
if want codec-ab; then # every packed codec_bench build (.device/bin/codec_bench*) alternating
    for rep in 1 2; do
        for b in "$bin"/codec_bench*; do
            for kernels in ${CODEC_AB_KERNELS:-avx2 best}; do
                for evict in ${CODEC_AB_EVICT:-0}; do
                    kenv="GEPARD_CODEC_BENCH_EVICT_MB=$evict"
                    [ "$kernels" = avx2 ] && kenv="$kenv GEPARD_KERNELS=avx2"
                    echo "$(basename "$b") kernels=$kernels evict=${evict}MB rep=$rep: $(env $kenv \
                        taskset -c 0,1 "$b" ${CODEC_AB_ARGS:-16 2 1} 2>&1 |
                        grep -E "FMA peak|^(f32|mixed) +[12] |stream-frame" | tr -s ' ' | tr '\n' '|')"
                done
            done
        done
    done 2>&1 | tee "$out/codec-ab.log"
fi
if want cpu; then
    # The matrix kernels (bitwise batch invariance of the blocked prefill kernels) and the
    # real-size goldens on this CPU first.
    [ -n "${CPU_NO_TESTS:-}" ] || GEPARD_REALSIZE_DIR=/tmp/rs GEPARD_BIN=$bin/gepard \
        GEPARD_RELEASE_BIN=$bin/gepard "$bin/gepard-tests" kernels real_size_cpu 2>&1 |
        tee "$out/cpu-tests.log" | tail -3
    # Old (bin/*-base) and new programs alternate, so both see the same load.
    builds="new"
    [ -n "$base" ] && builds="base new"
    prog() { if [ "$1" = base ]; then echo "$base/$2"; else echo "$bin/$(basename "$2")"; fi; }
    all=$(nproc)
    {
        for kernels in ${CPU_KERNELS:-best avx2}; do
            kenv=""
            [ "$kernels" = avx2 ] && kenv=GEPARD_KERNELS=avx2
            for cores in $(echo ${CPU_CORES:-2 $all} | tr ' ' '\n' | sort -un); do
                cpus=0-$((cores - 1))
                for rep in 1 2; do
                    [ -z "${CPU_NO_PREFILL:-}" ] || break
                    for b in $builds; do
                        for rows in 26 64; do
                            echo "prefill $b kernels=$kernels cores=$cores rep=$rep: $(env $kenv \
                                taskset -c $cpus "$(prog $b bench/prefill_bench)" /tmp/rs/model \
                                $rows $cores 5)"
                        done
                    done
                done
                for rep in 1 2; do
                    for b in $builds; do
                        f="$out/cpu-$b-$kernels-$cores-$rep.json"
                        env $kenv taskset -c $cpus "$(prog $b gepard)" bench --device cpu \
                            --model /tmp/rs/model --codec /tmp/rs/codec --threads $cores \
                            --frames "${BENCH_FRAMES:-64}" "$@" > "$f" 2> "$f.err"
                        echo "bench $b kernels=$kernels cores=$cores rep=$rep: $(python3 scripts/cpu-summary.py "$f")"
                    done
                    for v in ${CPU_ENV_VARIANTS:-}; do # NAME:VAR=VALUE[+VAR=VALUE] of this build
                        f="$out/cpu-${v%%:*}-$kernels-$cores-$rep.json"
                        env $kenv $(echo "${v#*:}" | tr '+' ' ') taskset -c $cpus "$bin/gepard" \
                            bench --device cpu --model /tmp/rs/model --codec /tmp/rs/codec \
                            --threads $cores --frames "${BENCH_FRAMES:-64}" "$@" > "$f" 2> "$f.err"
                        echo "bench ${v%%:*} kernels=$kernels cores=$cores rep=$rep: $(python3 scripts/cpu-summary.py "$f")"
                    done
                done
            done
        done
    } 2>&1 | tee "$out/cpu.log"
fi
# The device tool brings back 8 files at most: everything in one archive.
if [ -n "${OUT:-}" ] && [ -z "${DEVICE_RUN_NO_ARCHIVE:-}" ]; then
    tar czf /tmp/results.tgz -C "$out" . && rm -rf "${out:?}"/* && mv /tmp/results.tgz "$out/"
fi
exit $rc
