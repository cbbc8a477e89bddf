/* gepard.h — the public C API of libgepard, the Gepard text-to-speech engine.
 *
 * Shape (after whisper.h): opaque handles, parameter structs with a
 * *_default_params() function, functions returning a gepard_status and leaving
 * a human-readable message retrievable with gepard_last_error() (per thread).
 * The `gepard` command line tool and the HTTP server use only this header.
 *
 * Threads: a loaded gepard_model, gepard_codec and gepard_tokenizer may be
 * used by any number of threads at once (tokenizing, generating codes,
 * decoding), except gepard_lora_merge, which changes the model and must not
 * run concurrently with anything else on it. A gepard_engine accepts
 * gepard_stream_start / wait / cancel / free from any thread; its callbacks
 * run on the engine's own step thread. A gepard_codec_stream and a
 * gepard_voice belong to one thread at a time. gepard_last_error() is per
 * thread.
 *
 * Typical use:
 *
 *     gepard_model *model;  gepard_codec *codec;  gepard_engine *engine;
 *     gepard_model_load("nineninesix/gepard-1.0", NULL, &model);
 *     gepard_codec_load("nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps", &codec);
 *     gepard_engine_create(model, codec, NULL, &engine);
 *     gepard_stream_callbacks cb = {.on_audio = my_audio_fn, .user = my_state};
 *     gepard_synthesize(engine, "Hello!", NULL, &cb, NULL);   // audio arrives frame by frame
 *
 * (see examples/speak.c for the complete program with error handling).
 */
#ifndef GEPARD_H
#define GEPARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GEPARD_VERSION "0.1.0"

typedef enum gepard_status {
    GEPARD_OK = 0,
    GEPARD_ERR_INVALID_ARGUMENT = 1, /* a parameter or the input text is unusable */
    GEPARD_ERR_IO = 2,               /* a file could not be read or written */
    GEPARD_ERR_FORMAT = 3,           /* a file is malformed or not what was expected */
    GEPARD_ERR_UNSUPPORTED = 4,      /* valid, but something this engine cannot run */
    GEPARD_ERR_NOMEM = 5,            /* an allocation failed */
    GEPARD_ERR_NETWORK = 6,          /* a download failed or the network is unreachable */
    GEPARD_ERR_NOT_FOUND = 7,        /* a file, tensor, repo or voice does not exist */
    GEPARD_ERR_CANCELLED = 8,        /* the caller cancelled the operation */
    GEPARD_ERR_AUTH = 9,             /* the server refused our credentials */
    GEPARD_ERR_BUSY = 10,            /* no capacity right now; try again later */
    GEPARD_ERR_INTERNAL = 11         /* a bug: please report it */
} gepard_status;

/* The library version string, e.g. "0.1.0". */
const char *gepard_version(void);

/* The message of the last failing call made by this thread ("" if none). */
const char *gepard_last_error(void);

/* Release memory returned by any gepard_* function (ids, codes, samples). */
void gepard_free(void *p);

/* ======================================================================
 * Tokenizer (text → ids) — loads only tokenizer.json and gepard_config.json.
 * ====================================================================== */

typedef struct gepard_tokenizer gepard_tokenizer;

/* `model_dir` is a Gepard checkpoint directory (a directory with only a
 * tokenizer.json, or the path of a tokenizer.json, also works; layouts then
 * need the directory's gepard_config.json and fail with a message). */
gepard_status gepard_tokenizer_load(const char *model_dir, gepard_tokenizer **out);
void gepard_tokenizer_free(gepard_tokenizer *tok);
/* Encode UTF-8 text without special tokens; *ids is freed with gepard_free. */
gepard_status gepard_tokenize(gepard_tokenizer *tok, const char *text, int32_t **ids,
                              size_t *n_ids);
/* The model's input layout for already tokenized text: text repetition
 * (per gepard_config.json) with start/end-of-text markers and the final
 * start-of-speech id. */
gepard_status gepard_text_layout(const gepard_tokenizer *tok, const int32_t *ids, size_t n_ids,
                                 int32_t **layout, size_t *n_layout);
/* Decode ids back to UTF-8 text (freed with gepard_free). */
gepard_status gepard_detokenize(const gepard_tokenizer *tok, const int32_t *ids, size_t n_ids,
                                char **text);

/* ======================================================================
 * Model
 * ====================================================================== */

typedef struct gepard_model gepard_model;

typedef enum gepard_weight_format {
    GEPARD_WEIGHTS_NONE = -2,    /* "no format" (e.g. no --compare) */
    GEPARD_WEIGHTS_DEFAULT = -1, /* bf16 */
    GEPARD_WEIGHTS_F32 = 0,      /* the reference */
    GEPARD_WEIGHTS_BF16 = 1,
    GEPARD_WEIGHTS_INT8 = 2,
    GEPARD_WEIGHTS_Q4 = 3
} gepard_weight_format;

/* Progress of long operations (download, load): `done` of `total` units
 * (bytes or steps; total 0 = unknown). */
typedef void (*gepard_progress_fn)(const char *what, uint64_t done, uint64_t total, void *user);

typedef struct gepard_load_params {
    gepard_weight_format weights; /* matrix format of the backbone */
    const char *revision;         /* Hub revision (branch, tag or commit); NULL = "main" */
    int offline;                  /* 1: never use the network (also HF_HUB_OFFLINE=1) */
    const char *token;            /* Hub token; NULL = $HF_TOKEN or the token file */
    gepard_progress_fn progress;
    void *progress_user;
    /* Where the backbone runs: NULL or "auto" (a CUDA GPU when the CUDA
     * backend is installed and a GPU is usable, else the CPU; GEPARD_DEVICE
     * in the environment overrides auto), "cpu", "cuda" or "cuda:N". */
    const char *device;
    /* GPU arithmetic: NULL or "bf16" (bf16 weights and GEMM inputs, f32
     * accumulation, norms, softmax and residual stream; bf16 KV cache) or
     * "f32" (f32 everywhere, no TF32: the path that reproduces the CPU). */
    const char *gpu_precision;
    /* CPU, bf16 weights: whether the decode step may read a lossless 12-bit
     * copy of the backbone (the same values from 0.76 of the bytes; faster
     * where memory bandwidth per core is short). 0, the default: where a timed
     * pass at load finds it faster; it costs ~0.4 GB and some loading time
     * (0.3-0.8 s), which a short one-off synthesis may not win back: -1
     * never, 1 always. GEPARD_BF16_PACKED=0|1 in the environment decides
     * instead. */
    int packed_weights;
} gepard_load_params;

gepard_load_params gepard_load_default_params(void);

/* Load a Gepard checkpoint from a directory (gepard_config.json,
 * model.safetensors, tokenizer.json) or a Hugging Face repo id such as
 * "nineninesix/gepard-1.0" (downloaded into the standard HF cache). */
gepard_status gepard_model_load(const char *path_or_repo, const gepard_load_params *params,
                                gepard_model **out);
void gepard_model_free(gepard_model *model);
/* The model's tokenizer (owned by the model). */
gepard_tokenizer *gepard_model_tokenizer(gepard_model *model);
/* Where the model runs: "cpu" or e.g. "cuda:0 (NVIDIA H200, 150.1 GB, bf16)". */
const char *gepard_model_device(const gepard_model *model);
/* Number of audio channels (codes per frame; 32 for Gepard-1.0). */
int gepard_model_channels(const gepard_model *model);
/* Vocabulary size of channel c. */
int gepard_model_channel_vocab(const gepard_model *model, int channel);
int gepard_model_supports_voices(const gepard_model *model);

/* ======================================================================
 * Synthesis parameters, voices and LoRA adapters
 * ====================================================================== */

typedef enum gepard_cfg_uncond {
    GEPARD_CFG_EMPTY_TEXT = 0,
    GEPARD_CFG_AUDIO_ONLY = 1
} gepard_cfg_uncond;

typedef struct gepard_voice gepard_voice;
typedef struct gepard_lora gepard_lora;
typedef struct gepard_codec gepard_codec;

typedef struct gepard_synth_params {
    float temperature;        /* 1.0; <= 0 means greedy */
    int top_k;                /* 0 = off */
    float stop_threshold;     /* 0.5 */
    int max_frames;           /* 2000 (per sentence when text is split) */
    float repetition_penalty; /* 1.0 = off */
    int repetition_window;    /* 32; 0 = the whole history */
    float cfg_scale;          /* 1.0 = off */
    int cfg_frames;           /* -1 = guide every frame */
    gepard_cfg_uncond cfg_uncond;
    int force_stop_frames; /* -1 = off */
    uint64_t seed;
    int random_seed;           /* 1 (default): draw a seed from the OS; 0: use `seed` */
    const gepard_voice *voice; /* speaker prefix, or NULL */
    const gepard_lora *lora;   /* run-time adapter, or NULL */
    int split_text;            /* 1 (default): split long text into sentences */
    size_t max_text_bytes;     /* refuse longer input; 0 = no limit (default 1 MiB) */
} gepard_synth_params;

gepard_synth_params gepard_synth_default_params(void);

/* A speaker prefix from reference codes [n_frames][channels] (frame-major). */
gepard_status gepard_voice_from_codes(gepard_model *model, const int32_t *codes, size_t n_frames,
                                      gepard_voice **out);
/* A speaker prefix from a reference recording: interleaved float samples of
 * any rate and channel count are mixed to mono, resampled to the codec's
 * rate, trimmed of leading/trailing silence and to at most max_seconds
 * (0 = 15 s, the longest the model was trained on), encoded by the codec and
 * compressed by the model's voice compressor. */
gepard_status gepard_voice_from_audio(gepard_model *model, const gepard_codec *codec,
                                      const float *samples, size_t frames, int channels,
                                      int sample_rate, double max_seconds, gepard_voice **out);
/* gepard_voice_from_audio on an audio file (WAV, FLAC, Ogg, MP3, ... via
 * libsndfile), or gepard_voice_load when `path` is a saved voice
 * (.safetensors). `codec` may be NULL for saved voices. */
gepard_status gepard_voice_from_file(gepard_model *model, const gepard_codec *codec,
                                     const char *path, gepard_voice **out);
/* The model's learned "no particular speaker" prefix, if it has one. */
gepard_status gepard_voice_null(gepard_model *model, gepard_voice **out);
/* Save / load a computed speaker prefix (a small .safetensors file). */
gepard_status gepard_voice_save(const gepard_voice *voice, const char *path);
gepard_status gepard_voice_load(gepard_model *model, const char *path, gepard_voice **out);
void gepard_voice_free(gepard_voice *voice);

/* alpha <= 0: from the file's metadata, else 2 x rank. */
gepard_status gepard_lora_load(gepard_model *model, const char *path, float alpha,
                               gepard_lora **out);
/* Fold an adapter into the model's weights (affects every later synthesis). */
gepard_status gepard_lora_merge(gepard_model *model, const gepard_lora *lora);
void gepard_lora_free(gepard_lora *lora);

/* ======================================================================
 * Engine: streaming synthesis of many requests at once
 *
 * The engine owns the compute threads and a paged KV cache and runs a step
 * thread that advances every active stream by one frame per step in one
 * batched forward pass (continuous batching). Streams can be started from
 * any thread. Callbacks run on the engine's step thread: keep them short
 * (copy the samples and return).
 * ====================================================================== */

typedef struct gepard_codec gepard_codec;
typedef struct gepard_engine gepard_engine;
typedef struct gepard_stream gepard_stream;

typedef struct gepard_engine_params {
    int threads;            /* compute threads; 0 = all CPUs */
    int max_streams;        /* streams synthesised at once (default 16) */
    int max_queue;          /* streams waiting for a slot (64): once max_streams + max_queue
                               streams are held, running or waiting, start fails with BUSY */
    int prefill_chunk;      /* prefill rows per step while other streams are decoding, so
                               their frames keep coming (0 = 32 on the CPU, 512 on a GPU); an
                               idle engine prefills at once */
    int kv_cache_mb;        /* KV cache address space; 0 = enough for max_streams worst cases */
    double realtime_margin; /* > 0: admit a queued stream only while the measured cycle (one
                               batched step and its audio) with one more stream stays under
                               this fraction of a frame's duration, so every running stream
                               keeps real time and new requests wait instead (gepard serve:
                               0.8); 0 = admit up to max_streams */
} gepard_engine_params;

gepard_engine_params gepard_engine_default_params(void);

/* `codec` may be NULL for code-only use (no audio callbacks then). The model
 * and codec must outlive the engine. */
gepard_status gepard_engine_create(gepard_model *model, const gepard_codec *codec,
                                   const gepard_engine_params *params, gepard_engine **out);
/* Cancels unfinished streams, stops the step thread and frees the engine.
 * Streams must still be freed by their owners. */
void gepard_engine_free(gepard_engine *engine);

/* Return non-zero from a callback to cancel the stream. */
typedef int (*gepard_audio_fn)(const float *samples, size_t n_samples, void *user);
typedef int (*gepard_frame_fn)(const int32_t *codes, int n_channels, void *user);
/* The stream has finished (any status; gepard_stream_wait returns at once
 * from now on). Called once, after the last on_audio, with the engine's lock
 * held — possibly on the thread that cancels or frees a queued stream — so
 * it must be short and must not call the engine (for instance: signal a
 * condition variable or an event loop). */
typedef void (*gepard_done_fn)(gepard_status status, void *user);

typedef struct gepard_stream_callbacks {
    gepard_audio_fn on_audio; /* mono float samples at the codec's rate, as produced */
    gepard_frame_fn on_frame; /* each frame's codes, as sampled */
    void *user;
    gepard_done_fn on_done; /* optional: the stream finished */
} gepard_stream_callbacks;

typedef struct gepard_synth_result {
    gepard_status status; /* GEPARD_OK, GEPARD_ERR_CANCELLED, ... */
    size_t frames;        /* frames generated (all segments) */
    size_t samples;       /* samples delivered */
    int segments;         /* text segments synthesised */
    double audio_seconds;
    double elapsed_seconds; /* from start to the last sample */
    double rtf;             /* elapsed / audio seconds */
    double ttfa_ms;         /* start to the first audio callback (or first frame) */
    double queue_ms;        /* time spent waiting for a slot */
} gepard_synth_result;

/* Queue a synthesis. Text is cleaned (see gepard_synth_params) and, when
 * split_text is set, cut into sentences spoken one after another as one
 * continuous stream. voice and lora must outlive the stream. Fails with
 * GEPARD_ERR_BUSY when the queue is full. */
gepard_status gepard_stream_start(gepard_engine *engine, const char *text,
                                  const gepard_synth_params *params,
                                  const gepard_stream_callbacks *callbacks, gepard_stream **out);
/* Block until the stream ends; fills *result (may be NULL). Returns the
 * stream's final status (message in gepard_last_error()). */
gepard_status gepard_stream_wait(gepard_stream *stream, gepard_synth_result *result);
/* Ask the stream to stop at the next step (safe from any thread). */
void gepard_stream_cancel(gepard_stream *stream);
/* 1 when finished. */
int gepard_stream_done(const gepard_stream *stream);
/* Cancels if still running, waits, frees. */
void gepard_stream_free(gepard_stream *stream);

/* start + wait + free. */
gepard_status gepard_synthesize(gepard_engine *engine, const char *text,
                                const gepard_synth_params *params,
                                const gepard_stream_callbacks *callbacks,
                                gepard_synth_result *result);

typedef struct gepard_engine_stats {
    uint64_t steps;  /* batched steps run */
    uint64_t frames; /* frames generated */
    uint64_t streams_started;
    uint64_t streams_finished;
    int active_streams;
    int queued_streams;
    int max_batch;     /* largest number of streams in one step so far */
    double mean_batch; /* streams per step, averaged */
    size_t kv_blocks_used, kv_blocks_total;
    double step_seconds;      /* total time in batched backbone steps */
    double deliver_seconds;   /* total time decoding audio and running callbacks */
    double cycle_ms;          /* smoothed time of a cycle (step + audio) at the current batch */
    int realtime_capacity;    /* streams the engine would hold now under realtime_margin
                                 (max_streams when the margin is off) */
    double codec_seconds;     /* of deliver_seconds: in batched codec decodes (one call
                                 decoding the new frames of many streams) */
    uint64_t codec_batches;   /* those calls */
    double step_wait_seconds; /* of step_seconds: waiting for a device (GPU) to finish
                                 the step; the rest is the host's work (sampling) */
} gepard_engine_stats;

void gepard_engine_get_stats(gepard_engine *engine, gepard_engine_stats *stats);

/* Run short synthetic batches through the engine before real requests: 1, 2,
 * 3, 4, 6, 8, 12, 16, 24 ... up to max_batch streams at once (0 or more than
 * max_streams: max_streams), `frames` frames each (0: 8), audio decoded and
 * dropped. What a device builds on first use then exists before the first
 * burst of listeners: a GPU's CUDA graphs per batch size, kernels loaded on
 * first launch, library plans. And the real-time admission has measured a
 * cycle at each size, so a burst is admitted at once instead of doubling
 * from one stream. Afterwards gepard_engine_get_stats counts from zero
 * again. Call it before starting real streams; *seconds (may be NULL)
 * receives the time it took. Fails with the first failing stream's status. */
gepard_status gepard_engine_warm_up(gepard_engine *engine, int max_batch, int frames,
                                    double *seconds);

/* ======================================================================
 * Benchmark (`gepard bench`)
 * ====================================================================== */

typedef struct gepard_bench_params {
    const char *model;            /* directory or repo id */
    const char *codec;            /* codec path or repo id */
    gepard_weight_format weights; /* the format measured end to end */
    gepard_weight_format compare; /* a second format for the backbone, or GEPARD_WEIGHTS_NONE */
    int threads;                  /* 0 = all CPUs */
    int frames;                   /* frames generated per measurement (64) */
    const char *text;             /* the sentence for prefill / time to first audio */
    const char *device;           /* as gepard_load_params.device (NULL = auto) */
    const char *gpu_precision;    /* as gepard_load_params.gpu_precision */
    const int *streams; /* GPU aggregate mode: batch sizes to measure (NULL = 1, 64, 256) */
    int n_streams;
    int codec_only; /* nonzero: only the codec decoder on the GPU (device cuda; its gpu_codec
                       figures), in gpu_precision alone when that names a codec precision */
    int codec_frames_per_call; /* codec_only: each stream's frames in one timed call (0 = 1) */
} gepard_bench_params;

gepard_bench_params gepard_bench_default_params(void);
/* Run the benchmark and return its results as one JSON object (free with
 * gepard_free): machine, roofline (mem_bandwidth_gbs, fma_peak_gflops),
 * backbone_ms_per_frame, prefill speed, codec_ms_per_frame, rtf, ttfa_ms,
 * peak_rss_mb and each phase's fraction of its physical bound; codec_kernels (the default
 * decoder path) and codec_paths {f32, mixed, bf16: ms_per_frame, gflops, fraction_of_peak}
 * for every decoder path the CPU runs. On a GPU (device cuda) also: gpu {name, memory,
 * mem_bandwidth_gbs, bf16_gemm_tflops measured in the run}, the backbone's fraction of the
 * GPU's bandwidth bound, and aggregate[] {streams, frames_per_s, realtime_x, step_ms,
 * fraction of the bandwidth bound and of the GEMM rate} for each batch size in `streams`. */
gepard_status gepard_benchmark(const gepard_bench_params *params, char **json);

/* Generate codes only (no audio): *codes is [*n_frames][channels], freed
 * with gepard_free. `threads` 0 = all CPUs. */
gepard_status gepard_generate_codes(gepard_model *model, const char *text,
                                    const gepard_synth_params *params, int threads, int32_t **codes,
                                    size_t *n_frames);

/* ======================================================================== */
/* Codec: NVIDIA NanoCodec (NeMo AudioCodecModel) — codes <-> audio          */
/* ======================================================================== */
/*
 * A codec is loaded once and shared read-only by any number of threads. Codes
 * are int32 per-dimension FSQ codes, frame-major [n_frames][num_codebooks]
 * (Gepard's unfolded order: codebook c = group c / levels-per-group, dimension
 * c % levels-per-group). Audio is mono float in [-1, 1] at the codec's sample
 * rate; every frame is gepard_codec_samples_per_frame() samples.
 *
 * Accepted paths: a NeMo .nemo archive (tar or tar.gz); a .safetensors or torch
 * .ckpt state dict with model_config.yaml beside it; a directory holding
 * model_config.yaml and model_weights.safetensors (or model_weights.ckpt); or
 * a Hugging Face repo id such as nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps,
 * whose <name>.nemo is downloaded into the standard HF cache.
 */
typedef struct gepard_codec gepard_codec;
typedef struct gepard_codec_stream gepard_codec_stream;

/* Arithmetic of the decoder's fast path. bf16 weights cost accuracy in proportion to how
 * much a codec's weights amplify small errors; signal-to-noise ratio against the f32
 * decoder (budget 60 dB) measured on a random real-size NanoCodec / on the random tiny
 * test codec: MIXED ~67 / 26 dB, BF16 ~59 / 23 dB. Measure on your weights first. */
typedef enum gepard_codec_precision {
    GEPARD_CODEC_AUTO = 0,  /* the default: F32, or the CPU's bf16-weight path (TILES on
                               CPUs with AMX tiles, else MIXED) when the load measures it
                               within 60 dB of F32 on the loaded weights and faster
                               (gepard_codec_kernels_why says what it measured) */
    GEPARD_CODEC_F32 = 1,   /* f32 weights and arithmetic throughout */
    GEPARD_CODEC_MIXED = 2, /* f32 arithmetic; the first stage's weights, which streaming
                               reads from memory at every frame, stored as bf16 (AVX2 or
                               AVX-512) */
    GEPARD_CODEC_BF16 = 3,  /* bf16 weights and convolution inputs, f32 accumulation
                               (AVX512-BF16): about twice the speed of F32 */
    GEPARD_CODEC_TILES = 4  /* the residual convolutions on AMX tiles (Intel Sapphire Rapids
                               and later): bf16 weights, f32 inputs as two bf16 terms, f32
                               sums; ~2x F32 on 2 Xeon cores, 62-65 dB on the random
                               real-size codec. F32 where the CPU has no AMX. */
} gepard_codec_precision;

/* GEPARD_CODEC_PRECISION=f32|mixed|bf16|tiles in the environment sets the precision of a
 * codec loaded with GEPARD_CODEC_AUTO (the command line has no flag for it). */
typedef struct gepard_codec_params {
    int n_threads;         /* threads for the convolution kernels; 0 (default) = all CPUs, 1 = the
                              calling thread only. An engine created with this codec shares them. */
    int reference_kernels; /* 1: plain reference kernels (slow; for checking) */
    const gepard_load_params *hub; /* Hub settings when `path` is a repo id (NULL: defaults) */
    /* Fast-path arithmetic; a CPU without the instructions it needs runs the nearest slower
     * path (gepard_codec_kernels() names the one that runs). */
    gepard_codec_precision precision;
    /* Where the decoder runs: "cpu", "cuda", "cuda:N" or "auto" (NULL: auto — a GPU when
     * one is usable, as gepard_load_params.device). The encoder stays on the CPU. */
    const char *device;
    /* GPU arithmetic of the decoder: "f16" (default: FP16 tensor cores, f32 sums; 69 dB
     * against the f32 decoder), "tf32" (TF32 tensor cores) or "f32" (f32 throughout, the
     * exactness path); "bf16" (the backbone's name) is taken as the default. */
    const char *gpu_precision;
    /* 1: load only the decoder (a third less load time and memory); encoding and voice
     * cloning then fail with a clear error. 0 (default): the encoder too. */
    int no_encoder;
} gepard_codec_params;

gepard_codec_params gepard_codec_default_params(void);
gepard_status gepard_codec_load(const char *path, gepard_codec **out);
gepard_status gepard_codec_load_with_params(const char *path, const gepard_codec_params *params,
                                            gepard_codec **out);
void gepard_codec_free(gepard_codec *codec);

/* The decoder path that runs: "f32", "mixed", "bf16", "tiles", "blas" or "reference" on the CPU,
 * "cuda:N tf32" or "cuda:N f32" on a GPU. */
const char *gepard_codec_kernels(const gepard_codec *codec);
/* Why that path: asked for, the default, or what the load measured (on a CPU with AMX
 * tiles the default is chosen by decoding a few frames both ways on the loaded weights). */
const char *gepard_codec_kernels_why(const gepard_codec *codec);
int gepard_codec_sample_rate(const gepard_codec *codec);       /* e.g. 22050 */
int gepard_codec_samples_per_frame(const gepard_codec *codec); /* e.g. 1024 */
int gepard_codec_num_codebooks(const gepard_codec *codec);     /* e.g. 32 */
/* Number of distinct codes of codebook c (codes are 0 .. size-1); 0 if c is out of range. */
int gepard_codec_codebook_size(const gepard_codec *codec, int c);
int gepard_codec_num_groups(const gepard_codec *codec); /* packed indices per frame, e.g. 8 */

/* Decode n_frames frames of codes [n_frames][num_codebooks]; *pcm receives
 * n_frames * samples_per_frame samples (free with gepard_free). Out-of-range codes are an
 * error naming the frame, codebook, value and range. */
gepard_status gepard_codec_decode(const gepard_codec *codec, const int32_t *codes, size_t n_frames,
                                  float **pcm, size_t *n_samples);

/* Streaming decoder: push frames as they are produced, in chunks of any size; the
 * samples are identical to a one-shot decode of all frames. One stream per utterance
 * (reset to reuse it), used by one thread at a time; the stream owns its state. */
gepard_status gepard_codec_stream_create(const gepard_codec *codec, gepard_codec_stream **out);
/* pcm must hold n_frames * samples_per_frame floats. */
gepard_status gepard_codec_stream_push(gepard_codec_stream *stream, const int32_t *codes,
                                       size_t n_frames, float *pcm);
/* Same from dequantised latents [n_frames][num_codebooks] (frame-major). */
gepard_status gepard_codec_stream_push_latent(gepard_codec_stream *stream, const float *latent,
                                              size_t n_frames, float *pcm);
void gepard_codec_stream_reset(gepard_codec_stream *stream);
void gepard_codec_stream_free(gepard_codec_stream *stream);

/* Encode n mono samples at the codec's rate (zero-padded to whole frames). Outputs,
 * each freed with gepard_free: *codes [n_frames][num_codebooks]; *packed (optional,
 * NULL to skip) [n_frames][num_groups] NeMo group indices; *latent (optional)
 * [n_frames][num_codebooks] encoder output before quantisation. */
gepard_status gepard_codec_encode(const gepard_codec *codec, const float *pcm, size_t n,
                                  int32_t **codes, size_t *n_frames, int32_t **packed,
                                  float **latent);

/* A human-readable description of a model file (a codec, or any .safetensors /
 * torch checkpoint): *text is freed with gepard_free. */
gepard_status gepard_describe_file(const char *path, char **text);

#ifdef __cplusplus
}
#endif

#endif /* GEPARD_H */
