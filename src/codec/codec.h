/* codec.h — the NanoCodec as one object: config, FSQ, decoder and encoder.
 *
 * gp_codec_load opens any container codec/source.h accepts, reads the config,
 * checks every tensor shape against it, folds weight norm and keeps only what
 * inference needs (the file's memory is released). The codec is then
 * read-only: any number of threads may decode and encode with it at once,
 * each through its own gp_codec_code_stream (state) or one-shot call.
 *
 * Layouts: codes are frame-major [T][C] int32 per-dimension codes (Gepard's
 * unfolded order, C = num_groups * len(levels)); audio is mono f32 in [-1, 1].
 */
#ifndef GP_CODEC_CODEC_H
#define GP_CODEC_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/pool.h"
#include "codec/config.h"
#include "codec/decoder.h"
#include "codec/encoder.h"
#include "codec/fsq.h"

typedef struct gp_codec_options {
    bool reference; /* plain reference kernels instead of the BLAS/SIMD ones */
    int n_threads;  /* threads for the fast kernels (<= 1: the calling thread only) */
    /* The decoder's fast path (AUTO: the default; ignored with `reference`). */
    gp_codec_kernels kernels;
    /* Direct paths: per-stage weight types, see gp_codec_decoder_use_kernels (NULL: by
     * `kernels`). */
    const char *stage_types;
    /* Leave the encoder out (decode-only callers: a third of the load time and its
     * weights' memory); gp_codec_encode then says it is missing. */
    bool skip_encoder;
} gp_codec_options;

/* A decoder that runs somewhere else (a GPU: model/device_codec.c installs it).
 * A codec with one decodes every stream there: each stream holds a state slot
 * of the accelerator instead of a CPU decoder state. Latents are frame-major
 * [T][C]. Calls come from any thread; the accelerator serialises them. */
typedef struct gp_codec_accel {
    void *impl;
    char name[96]; /* where it runs, e.g. "cuda:0 (tf32)" */
    int (*slot_open)(void *impl, int *slot, gp_error *err);
    int (*slot_reset)(void *impl, int slot, gp_error *err);
    void (*slot_close)(void *impl, int slot);
    /* n streams (distinct slots), `frames` frames each: latent [n][frames][C],
     * pcm[i] gets frames · samples_per_frame samples. */
    int (*decode)(void *impl, int n, const int *slots, size_t frames, const float *latent,
                  float *const *pcm, gp_error *err);
    /* The same decode queued without waiting for it (NULL: the accelerator
     * has no queue). The latents are copied before submit returns; the
     * samples reach pcm[i] when collect reports *done (wait: block until
     * then). One decode is queued at a time: any other call waits for it. */
    int (*submit)(void *impl, int n, const int *slots, size_t frames, const float *latent,
                  float *const *pcm, gp_error *err);
    int (*collect)(void *impl, bool wait, bool *done, gp_error *err);
    /* The encoder there too (NULL: it runs on the CPU): n samples, a multiple of
     * samples_per_frame, into latent [C][n / samples_per_frame]. */
    int (*encode)(void *impl, const float *audio, size_t n, float *latent, gp_error *err);
    /* The device time of the last decode call, from its first upload to its
     * last download (ms; NULL: not measured). */
    double (*last_gpu_ms)(void *impl);
    void (*release)(void *impl);
} gp_codec_accel;

typedef struct gp_codec {
    gp_codec_config cfg;
    gp_fsq fsq;
    gp_codec_decoder dec;
    gp_codec_encoder enc;
    bool has_encoder;      /* false when loaded with skip_encoder */
    char kernels_why[224]; /* why the decoder runs the path it runs (codec_choice.c) */
    gp_pool *pool;
    gp_codec_accel *accel; /* NULL: the CPU decodes (owned) */
} gp_codec;

void gp_codec_options_default(gp_codec_options *opt);
int gp_codec_load(const char *path, const gp_codec_options *opt, gp_codec **out, gp_error *err);
int gp_codec_load_source(const gp_codec_source *src, const gp_codec_options *opt, gp_codec **out,
                         gp_error *err);
void gp_codec_free(gp_codec *codec);
/* GP_CODEC_KERNELS_AUTO (codec_choice.c): decode GP_CODEC_CHOICE_FRAMES frames of fixed
 * codes with the f32 decoder `c` and with `candidate` (GP_CODEC_KERNELS_TILES on a CPU with
 * AMX tiles, else GP_CODEC_KERNELS_MIXED: the first stage's weights stored as bf16), and
 * switch `c` to the candidate when it stays within GP_CODEC_TILES_MIN_SNR dB of f32 on these
 * weights and decodes faster (under 0.9 of f32's time for the tiles, 0.95 for mixed, whose
 * gain is smaller: memory, not arithmetic). Either way c->kernels_why says what was
 * measured. Called by the loader. */
#define GP_CODEC_CHOICE_FRAMES 16
#define GP_CODEC_TILES_MIN_SNR 60.0
int gp_codec_choose_kernels(gp_codec *c, const gp_codec_source *src, const gp_codec_options *opt,
                            gp_codec_kernels candidate, gp_error *err);
/* Hand decoding to `accel` (taken over, also on failure); only before any stream exists. */
void gp_codec_set_accel(gp_codec *codec, gp_codec_accel *accel);

/* A decoding stream: the decoder state plus room to dequantise codes. */
typedef struct gp_codec_code_stream {
    const gp_codec *codec;
    gp_codec_stream *stream; /* CPU state (NULL with an accelerator) */
    int slot;                /* the accelerator's state slot (-1 on the CPU) */
    float *latent;           /* [channels][GP_CODEC_STEP_FRAMES] (CPU streams only) */
} gp_codec_code_stream;

int gp_codec_code_stream_create(const gp_codec *codec, gp_codec_code_stream **out, gp_error *err);
void gp_codec_code_stream_free(gp_codec_code_stream *s);
void gp_codec_code_stream_reset(gp_codec_code_stream *s);
/* Decode `frames` frames of codes [frames][C] into frames * samples_per_frame samples.
 * Codes are range-checked first; on error nothing is decoded and the state is unchanged. */
int gp_codec_code_stream_push(gp_codec_code_stream *s, const int32_t *codes, size_t frames,
                              float *pcm, gp_error *err);

/* The same from a frame-major latent [frames][C] (no range check needed). */
int gp_codec_code_stream_push_latent(gp_codec_code_stream *s, const float *latent, size_t frames,
                                     float *pcm, gp_error *err);

/* Several streams of one codec at once, `frames` frames each (codes[i] -> pcm[i] for
 * streams[i]): the samples are those of pushing each stream alone, but the streams'
 * columns share every pass over the weights. All codes are checked before anything is
 * decoded. */
int gp_codec_decode_frames_multi(const gp_codec *codec, gp_codec_code_stream *const *streams,
                                 const int32_t *const *codes, int n, size_t frames,
                                 float *const *pcm, gp_error *err);

/* Queued decoding, for a caller with other work meanwhile (the engine's
 * step thread while the GPU decodes): gp_codec_decode_frames_queue checks
 * and starts what gp_codec_decode_frames_multi does; the samples are in
 * pcm[i] once gp_codec_collect sets *done (with `wait`, it blocks until
 * then). Until then the streams and pcm must stay; a stream freed meanwhile
 * only loses its own samples. One decode is queued per codec at a time (a
 * second waits for the first). Without an accelerator that queues
 * (gp_codec_can_queue false) the decode happens at once and collect reports
 * done. */
bool gp_codec_can_queue(const gp_codec *codec);
int gp_codec_decode_frames_queue(const gp_codec *codec, gp_codec_code_stream *const *streams,
                                 const int32_t *const *codes, int n, size_t frames,
                                 float *const *pcm, gp_error *err);
int gp_codec_collect(const gp_codec *codec, bool wait, bool *done, gp_error *err);

/* One-shot decode: a fresh stream fed all frames. pcm holds frames * samples_per_frame. */
int gp_codec_decode(const gp_codec *codec, const int32_t *codes, size_t frames, float *pcm,
                    gp_error *err);

/* Encode n samples: zero-pad to whole frames, run the encoder, quantise. Outputs are
 * malloc'd: codes [T][C], latent [C][T] (may be NULL if not wanted). */
int gp_codec_encode(const gp_codec *codec, const float *audio, size_t n, int32_t **codes,
                    size_t *frames, float **latent, gp_error *err);

#endif
