/* codec_bench.c — NanoCodec speed and accuracy at the real size (CODEC.md §H) on random
 * weights, for every decoder path.
 *
 * Builds the published 22 kHz configuration (decoder base_channels 864, 1.22 GMAC per
 * frame) with random weights in memory, measures the machine (f32 FMA and bf16 dot peaks,
 * read bandwidth) and, for each path (blas, f32, mixed, bf16) at 1 and N threads:
 * streaming one frame per push (best and median of FRAMES frames), one-shot decode,
 * GFLOP/s against the peak, and the signal-to-noise ratio against the f32 path over FRAMES
 * frames (the f32 path itself against the reference decoder over 2 frames). Then several
 * streams decoded together (gp_codec_decode_frames_multi), and the encoder.
 *
 *   build/release/bench/codec_bench [FRAMES [THREADS [STREAMS [MIX]]]]  (default 32 2 4)
 *
 * MIX replaces the bf16 path by a per-stage mix of residual weights, one letter per stage:
 * f (f32), w (bf16-stored, f32 arithmetic; first stage only), b (bf16), e.g. "wbfff".
 * GEPARD_KERNELS=avx2 in the environment measures the AVX2 kernels;
 * GEPARD_CODEC_BENCH_EVICT_MB=600 reads 600 MB before each streamed frame, as
 * the engine's backbone step does between two frames (the caches start cold).
 * GEPARD_CODEC_BENCH_ONLY=1 runs only the MIX (or bf16) path at THREADS threads after the
 * f32 decode it is compared with: a short run to profile.
 *
 * Last, the accuracy a path with bf16 weights but (near-)f32 inputs could reach — AMX
 * tiles multiply bf16 by bf16, so inputs split into two bf16 terms: the f32 path over the
 * same weights with the residual convolutions' weights (all stages, and stages 1-4 only)
 * rounded to bf16, against the f32 path's samples.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/timing.h"
#include "codec/codec.h"
#include "codec/synthetic.h"
#include "compute/roofline.h"

typedef struct machine {
    double fma[2], bf16[2], bw[2]; /* [0]: 1 thread, [1]: N threads */
} machine;

static const char *stage_types; /* optional per-stage mix for the bf16 rows (argv[4]) */

static gp_codec *load(const gp_codec_source *src, gp_codec_kernels kernels, int threads) {
    gp_codec_options opt;
    gp_codec_options_default(&opt);
    opt.reference = kernels == GP_CODEC_KERNELS_REFERENCE;
    opt.kernels = kernels;
    opt.n_threads = threads;
    if (kernels == GP_CODEC_KERNELS_BF16) opt.stage_types = stage_types;
    gp_codec *c;
    gp_error err;
    if (gp_codec_load_source(src, &opt, &c, &err)) {
        fprintf(stderr, "load failed: %s\n", err.message);
        exit(1);
    }
    return c;
}

/* Round the decoder's residual convolution weights in `src` to bf16 in place (the
 * synthetic source's own memory), from stage `first_stage` on; returns how many. */
static int round_residual_weights(gp_codec_source *src, int first_stage) {
    int n = 0;
    for (size_t i = 0; i < src->count; i++) {
        const gp_codec_tensor *t = &src->tensors[i];
        const char *r = strstr(t->name, "audio_decoder.res_layers.");
        if (t->dtype != GP_F32 || !r || !strstr(t->name, "conv.weight")) continue;
        if (atoi(r + strlen("audio_decoder.res_layers.")) < first_stage) continue;
        float *w = (float *)t->data;
        for (size_t k = 0; k < t->numel; k++) w[k] = gp_bf16_to_f32(gp_f32_to_bf16(w[k]));
        n++;
    }
    return n;
}

static int32_t *make_codes(const gp_codec *c, size_t frames, unsigned salt) {
    const size_t C = (size_t)c->fsq.channels;
    int32_t *codes = malloc(frames * C * sizeof(int32_t));
    for (size_t i = 0; i < frames * C; i++)
        codes[i] = (int32_t)(((i + salt) * 2654435761u >> 7) %
                             (size_t)gp_fsq_levels(&c->fsq, (int)(i % C)));
    return codes;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double snr_db(const float *ref, const float *x, size_t n) {
    double s = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        s += (double)ref[i] * ref[i];
        e += ((double)ref[i] - x[i]) * ((double)ref[i] - x[i]);
    }
    return e > 0 ? 10 * log10(s / e) : INFINITY;
}

/* Frame-by-frame streaming of `frames` frames (after one untimed frame): best and median
 * ms per frame; the samples go to pcm. */
static void stream_frames(const gp_codec *c, const int32_t *codes, size_t frames, float *pcm,
                          double *best, double *median) {
    const size_t C = (size_t)c->fsq.channels, spf = (size_t)c->cfg.samples_per_frame;
    gp_error err;
    gp_codec_code_stream *s;
    if (gp_codec_code_stream_create(c, &s, &err)) exit(1);
    gp_codec_code_stream_push(s, codes, 1, pcm, &err); /* warm-up, then start over */
    gp_codec_code_stream_reset(s);
    double *t = malloc(frames * sizeof(double));
    /* GEPARD_CODEC_BENCH_EVICT_MB=N reads N MB before each frame (untimed), as the
     * engine's backbone step streams its ~0.5 GB of weights between two frames */
    const char *evict_env = getenv("GEPARD_CODEC_BENCH_EVICT_MB");
    const size_t evict = evict_env ? (size_t)atol(evict_env) << 20 : 0;
    volatile unsigned char *junk = evict ? calloc(evict, 1) : NULL;
    for (size_t f = 0; f < frames; f++) {
        unsigned sum = 0;
        for (size_t i = 0; junk && i < evict; i += 64) sum += junk[i];
        (void)sum;
        double t0 = gp_now_s();
        gp_codec_code_stream_push(s, codes + f * C, 1, pcm + f * spf, &err);
        t[f] = 1e3 * (gp_now_s() - t0);
    }
    qsort(t, frames, sizeof(double), cmp_double);
    *best = t[0];
    *median = t[frames / 2];
    free(t);
    free((void *)junk);
    gp_codec_code_stream_free(s);
}

static void bench_path(const gp_codec_source *src, gp_codec_kernels kernels, int threads,
                       size_t frames, const float *f32_pcm, const machine *m, int mi) {
    gp_codec *c = load(src, kernels, threads);
    if (c->dec.kernels != kernels) {
        printf("%-6s %2d   (not on this CPU: runs as %s)\n", gp_codec_kernels_name(kernels),
               threads, gp_codec_kernels_name(c->dec.kernels));
        gp_codec_free(c);
        return;
    }
    const size_t spf = (size_t)c->cfg.samples_per_frame;
    int32_t *codes = make_codes(c, frames, 0);
    float *pcm = malloc(frames * spf * sizeof(float));
    double best, median;
    stream_frames(c, codes, frames, pcm, &best, &median);
    double snr = f32_pcm ? snr_db(f32_pcm, pcm, frames * spf) : NAN;
    gp_error err;
    double t0 = gp_now_s();
    gp_codec_decode(c, codes, frames, pcm, &err);
    double oneshot = 1e3 * (gp_now_s() - t0) / (double)frames;
    const double gflop = 2e-9 * gp_codec_decoder_macs_per_frame(&c->dec);
    const double peak = kernels == GP_CODEC_KERNELS_BF16 ? m->bf16[mi] : m->fma[mi];
    const double rate = gflop / (median * 1e-3);
    const char *name = kernels == GP_CODEC_KERNELS_BF16 && stage_types
                           ? stage_types
                           : gp_codec_kernels_name(kernels);
    printf("%-6s %2d  %7.2f %7.2f  %8.2f  %7.1f  %5.1f%% %-5s", name, threads, best, median,
           oneshot, rate, peak > 0 ? 100 * rate / peak : 0,
           kernels == GP_CODEC_KERNELS_BF16 ? "bf16" : "f32");
    if (f32_pcm)
        printf("  %6.1f dB\n", snr);
    else
        printf("       -\n");
    free(codes);
    free(pcm);
    gp_codec_free(c);
}

/* S streams decoded together frame by frame: ms per step and per stream-frame. */
static void bench_multi(const gp_codec_source *src, gp_codec_kernels kernels, int threads,
                        int streams, size_t frames) {
    gp_codec *c = load(src, kernels, threads);
    if (c->dec.kernels != kernels) {
        gp_codec_free(c);
        return;
    }
    const size_t C = (size_t)c->fsq.channels, spf = (size_t)c->cfg.samples_per_frame;
    gp_codec_code_stream **s = calloc((size_t)streams, sizeof *s);
    int32_t **codes = calloc((size_t)streams, sizeof *codes);
    float **pcm = calloc((size_t)streams, sizeof *pcm);
    const int32_t **cp = calloc((size_t)streams, sizeof *cp);
    gp_error err;
    for (int i = 0; i < streams; i++) {
        if (gp_codec_code_stream_create(c, &s[i], &err)) exit(1);
        codes[i] = make_codes(c, frames, (unsigned)i * 977u);
        pcm[i] = malloc(spf * sizeof(float));
    }
    double *t = malloc(frames * sizeof(double));
    for (size_t f = 0; f < frames; f++) {
        for (int i = 0; i < streams; i++) cp[i] = codes[i] + f * C;
        double t0 = gp_now_s();
        gp_codec_decode_frames_multi(c, s, cp, streams, 1, pcm, &err);
        t[f] = 1e3 * (gp_now_s() - t0);
    }
    qsort(t, frames, sizeof(double), cmp_double);
    printf("%-6s %2d threads, %2d streams: median %7.2f ms per step = %6.2f ms per stream-frame "
           "(best %.2f)\n",
           gp_codec_kernels_name(kernels), threads, streams, t[frames / 2], t[frames / 2] / streams,
           t[0] / streams);
    for (int i = 0; i < streams; i++) {
        gp_codec_code_stream_free(s[i]);
        free(codes[i]);
        free(pcm[i]);
    }
    free(s);
    free(codes);
    free(pcm);
    free(cp);
    free(t);
    gp_codec_free(c);
}

static void bench_encode(const gp_codec_source *src, int threads, size_t frames) {
    gp_codec *c = load(src, GP_CODEC_KERNELS_AUTO, threads);
    size_t n = frames * (size_t)c->cfg.samples_per_frame;
    float *audio = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) audio[i] = 0.3f * (float)((i * 7919) % 200) / 200.0f - 0.15f;
    int32_t *codes;
    size_t T;
    gp_error err;
    double t0 = gp_now_s();
    if (gp_codec_encode(c, audio, n, &codes, &T, NULL, &err)) {
        fprintf(stderr, "encode failed: %s\n", err.message);
        exit(1);
    }
    printf("encode (BLAS), %d thread(s): %.1f ms/frame\n", threads,
           1e3 * (gp_now_s() - t0) / (double)frames);
    free(codes);
    free(audio);
    gp_codec_free(c);
}

static void measure_machine(int threads, machine *m) {
    for (int i = 0; i < 2; i++) {
        gp_pool *pool = NULL;
        gp_error err;
        if (i && gp_pool_create(threads, &pool, &err)) exit(1);
        m->fma[i] = gp_roofline_fma_f32(pool);
        m->bf16[i] = gp_roofline_dot_bf16(pool);
        m->bw[i] = gp_roofline_read_bandwidth(pool, (size_t)256 << 20);
        gp_pool_free(pool);
    }
}

int main(int argc, char **argv) {
    size_t frames = argc > 1 ? (size_t)atoi(argv[1]) : 32;
    int threads = argc > 2 ? atoi(argv[2]) : 2, streams = argc > 3 ? atoi(argv[3]) : 4;
    stage_types = argc > 4 ? argv[4] : NULL;
    if (frames < 2) frames = 2;
    if (threads < 1) threads = 1;
    if (streams < 1) streams = 1;
    gp_codec_source *src;
    gp_error err;
    double t0 = gp_now_s();
    if (gp_codec_synthetic_source(gp_codec_nano_22khz_yaml, 1, &src, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    machine m;
    measure_machine(threads, &m);
    gp_codec *f32 = load(src, GP_CODEC_KERNELS_F32, threads);
    const size_t spf = (size_t)f32->cfg.samples_per_frame;
    const double gflop = 2e-9 * gp_codec_decoder_macs_per_frame(&f32->dec);
    printf("NanoCodec 22 kHz, random weights: %.3f GFLOP per frame (setup %.1f s)\n", gflop,
           gp_now_s() - t0);
    printf("machine, 1 / %d threads: f32 FMA peak %.0f / %.0f GFLOP/s, bf16 dot peak %.0f / %.0f "
           "GFLOP/s, read %.1f / %.1f GB/s\n",
           threads, m.fma[0], m.fma[1], m.bf16[0], m.bf16[1], m.bw[0], m.bw[1]);
    printf("bound per frame at %d threads: f32 %.2f ms, bf16 %.2f ms\n\n", threads,
           m.fma[1] > 0 ? 1e3 * gflop / m.fma[1] : 0, m.bf16[1] > 0 ? 1e3 * gflop / m.bf16[1] : 0);
    /* the f32 path: the accuracy yardstick, checked against the reference itself */
    int32_t *codes = make_codes(f32, frames, 0);
    float *f32_pcm = malloc(frames * spf * sizeof(float)), *ref_pcm = malloc(2 * spf * 4);
    if (gp_codec_decode(f32, codes, frames, f32_pcm, &err)) return 1;
    if (getenv("GEPARD_CODEC_BENCH_ONLY")) { /* one path at THREADS threads, for a profiler */
        gp_codec_free(f32);
        bench_path(src, GP_CODEC_KERNELS_BF16, threads, frames, f32_pcm, &m, 1);
        free(codes);
        free(f32_pcm);
        free(ref_pcm);
        gp_codec_source_free(src);
        return 0;
    }
    gp_codec *ref = load(src, GP_CODEC_KERNELS_REFERENCE, 1);
    t0 = gp_now_s();
    gp_codec_decode(ref, codes, 2, ref_pcm, &err);
    const double ref_ms = 1e3 * (gp_now_s() - t0) / 2;
    printf("f32 path vs reference decoder (2 frames): SNR %.1f dB; reference %.0f ms/frame\n\n",
           snr_db(ref_pcm, f32_pcm, 2 * spf), ref_ms);
    gp_codec_free(ref);
    gp_codec_free(f32);
    printf("path   thr  stream ms/frame  one-shot  GFLOP/s  of peak       SNR vs f32\n"
           "            best  median   ms/frame  (median)                 (%zu frames)\n",
           frames);
    const gp_codec_kernels paths[] = {GP_CODEC_KERNELS_BLAS, GP_CODEC_KERNELS_F32,
                                      GP_CODEC_KERNELS_MIXED, GP_CODEC_KERNELS_BF16};
    for (size_t p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        for (int mi = 0; mi < 2; mi++) {
            if (mi && threads == 1) continue;
            bench_path(src, paths[p], mi ? threads : 1, frames,
                       paths[p] == GP_CODEC_KERNELS_F32 ? NULL : f32_pcm, &m, mi);
        }
    }
    printf("\n");
    for (size_t p = 1; p < sizeof paths / sizeof paths[0]; p++)
        bench_multi(src, paths[p], threads, streams, frames);
    printf("\n");
    bench_encode(src, 1, frames < 8 ? frames : 8);
    /* the same weights rounded to bf16 (changes src: last) */
    float *w16_pcm = malloc(frames * spf * sizeof(float));
    for (int first = 1; first >= 0; first--) {
        const int n = round_residual_weights(src, first);
        gp_codec *w16 = load(src, GP_CODEC_KERNELS_F32, threads);
        if (gp_codec_decode(w16, codes, frames, w16_pcm, &err)) return 1;
        printf("f32 arithmetic, residual conv weights of stages %d-4 in bf16 (%d tensors): SNR "
               "%.1f dB vs f32 over %zu frames (%.1f dB over the first 4)\n",
               first, n, snr_db(f32_pcm, w16_pcm, frames * spf), frames,
               snr_db(f32_pcm, w16_pcm, (frames < 4 ? frames : 4) * spf));
        gp_codec_free(w16);
    }
    free(w16_pcm);
    free(codes);
    free(f32_pcm);
    free(ref_pcm);
    gp_codec_source_free(src);
    return 0;
}
