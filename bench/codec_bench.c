/* codec_bench.c — NanoCodec speed at the real size (CODEC.md §H) on random weights.
 *
 * Builds the published 22 kHz configuration (decoder base_channels 864, 1.22 GMAC per
 * frame) with random weights in memory and times: one-shot decode and frame-by-frame
 * streaming on the fast path (1 and N threads), the reference path, and the encoder.
 *
 *   build/release/examples/codec_bench [FRAMES] [THREADS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timing.h"
#include "codec/codec.h"
#include "codec/synthetic.h"

static gp_codec *load(const gp_codec_source *src, bool reference, int threads) {
    gp_codec_options opt = {.reference = reference, .n_threads = threads};
    gp_codec *c;
    gp_error err;
    if (gp_codec_load_source(src, &opt, &c, &err)) {
        fprintf(stderr, "load failed: %s\n", err.message);
        exit(1);
    }
    return c;
}

static void bench_decode(const gp_codec *c, const char *label, size_t frames, bool streaming) {
    const size_t C = (size_t)c->fsq.channels, spf = (size_t)c->cfg.samples_per_frame;
    int32_t *codes = malloc(frames * C * sizeof(int32_t));
    float *pcm = malloc(frames * spf * sizeof(float));
    for (size_t i = 0; i < frames * C; i++)
        codes[i] = (int32_t)((i * 2654435761u) % (size_t)gp_fsq_levels(&c->fsq, (int)(i % C)));
    gp_error err;
    gp_codec_code_stream *s;
    if (gp_codec_code_stream_create(c, &s, &err)) exit(1);
    double t0 = gp_now_s();
    if (streaming) {
        for (size_t f = 0; f < frames; f++)
            gp_codec_code_stream_push(s, codes + f * C, 1, pcm + f * spf, &err);
    } else {
        gp_codec_code_stream_push(s, codes, frames, pcm, &err);
    }
    double dt = gp_now_s() - t0;
    double ms = 1e3 * dt / (double)frames, audio_ms = 1e3 * (double)spf / c->cfg.sample_rate;
    printf("%-34s %8.1f ms/frame  real-time factor %.2f  %.1f GFLOP/s\n", label, ms, ms / audio_ms,
           2e-9 * gp_codec_decoder_macs_per_frame(&c->dec) * (double)frames / dt);
    gp_codec_code_stream_free(s);
    free(codes);
    free(pcm);
}

static void bench_encode(const gp_codec *c, const char *label, size_t frames) {
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
    double ms = 1e3 * (gp_now_s() - t0) / (double)frames;
    printf("%-34s %8.1f ms/frame\n", label, ms);
    free(codes);
    free(audio);
}

int main(int argc, char **argv) {
    size_t frames = argc > 1 ? (size_t)atoi(argv[1]) : 16;
    int threads = argc > 2 ? atoi(argv[2]) : 2;
    gp_codec_source *src;
    gp_error err;
    double t0 = gp_now_s();
    if (gp_codec_synthetic_source(gp_codec_nano_22khz_yaml, 1, &src, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    gp_codec *fast1 = load(src, false, 1), *fastn = load(src, false, threads),
             *ref = load(src, true, 1);
    gp_codec_source_free(src);
    printf("NanoCodec 22 kHz, random weights, %.2f GMAC/frame decode (setup %.1f s)\n",
           1e-9 * gp_codec_decoder_macs_per_frame(&fast1->dec), gp_now_s() - t0);
    bench_decode(fast1, "decode fast, 1 thread, one-shot", frames, false);
    bench_decode(fast1, "decode fast, 1 thread, streaming", frames, true);
    char label[64];
    snprintf(label, sizeof label, "decode fast, %d threads, one-shot", threads);
    bench_decode(fastn, label, frames, false);
    snprintf(label, sizeof label, "decode fast, %d threads, streaming", threads);
    bench_decode(fastn, label, frames, true);
    bench_decode(ref, "decode reference, 1 thread", 2, false);
    bench_encode(fast1, "encode fast, 1 thread", frames);
    snprintf(label, sizeof label, "encode fast, %d threads", threads);
    bench_encode(fastn, label, frames);
    gp_codec_free(fast1);
    gp_codec_free(fastn);
    gp_codec_free(ref);
    return 0;
}
