/* test_cuda_codec.c — the codec decoder on the GPU against the CPU decoder
 * and NeMo's goldens. Every test needs a GPU and reports "skipped (no CUDA
 * device: …)" without one (CI); `make test-cuda` runs them on a GPU machine.
 *
 * - codec-tiny dec5 / dec70: the f32 GPU path within the CPU path's
 *   tolerances (1e-4; 3e-4 for the clipping dec70, see test_codec.c); the
 *   TF32 and FP16 paths' errors are reported, bounded loosely (SNR ≥ 20 dB: the tiny
 *   fixture's gain-1.6 random weights amplify rounding, so it is no measure
 *   of TF32 on real weights).
 * - real size (`codec0`, NeMo's float32 output for the synthetic checkpoint's
 *   codec): SNR ≥ 100 dB for f32 and ≥ 60 dB for TF32 and FP16 (issue 11's
 *   budget).
 * - the encoder (f32 on the GPU): latent within 1e-4 of NeMo on codec-tiny,
 *   codes equal the CPU encoder's except on rounding boundaries (counted).
 * - streaming: chunks of 1, 2, 3 and all frames, and streams at different
 *   positions batched into one call, equal one-shot decoding within 1e-6
 *   (the measured difference is printed; the kernels sum every output in an
 *   order that does not depend on the chunking, so it is expected to be 0).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "codec/codec.h"
#include "cuda_common.h"
#include "gen_cases.h"
#include "golden.h"
#include "model/device_codec.h"
#include "test.h"

static gp_codec *load_codec(const char *path, bool gpu, gp_dev_codec_precision precision) {
    gp_codec_options opt;
    gp_codec_options_default(&opt);
    /* the CPU side is the exact f32 decoder (AUTO could measure its way to AMX tiles) */
    opt.kernels = gpu ? GP_CODEC_KERNELS_BLAS : GP_CODEC_KERNELS_F32;
    gp_codec *c = NULL;
    gp_error err;
    if (gp_codec_load(path, &opt, &c, &err)) {
        test_fail(__FILE__, __LINE__, "codec load %s: %s", path, err.message);
        return NULL;
    }
    if (gpu) {
        gp_device_spec spec = {GP_DEVICE_CUDA, 0, GP_DEV_BF16};
        if (gp_device_codec_attach(c, &spec, precision, &err)) {
            test_fail(__FILE__, __LINE__, "codec on the GPU: %s", err.message);
            gp_codec_free(c);
            return NULL;
        }
    }
    return c;
}

static const char *prec_name(gp_dev_codec_precision p) { return gp_device_codec_precision_name(p); }

static double snr_db(const float *ref, const float *got, size_t n) {
    double s = 0, e = 0;
    for (size_t i = 0; i < n; i++) {
        s += (double)ref[i] * ref[i];
        e += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
    }
    return e > 0 ? 10.0 * log10(s / e) : 999.0;
}

/* A whole file (caller frees); NULL when unreadable. */
static void *read_file(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    void *p = len > 0 ? malloc((size_t)len) : NULL;
    if (p && fread(p, 1, (size_t)len, fp) != (size_t)len) {
        free(p);
        p = NULL;
    }
    fclose(fp);
    *n = p ? (size_t)len : 0;
    return p;
}

/* [C][T] → [T][C] */
static int32_t *frame_major(const int32_t *cm, size_t C, size_t T) {
    int32_t *fm = malloc(C * T * sizeof(int32_t));
    for (size_t c = 0; c < C; c++)
        for (size_t t = 0; t < T; t++) fm[t * C + c] = cm[c * T + t];
    return fm;
}

TEST(cuda_codec_tiny_goldens) {
    require_cuda();
    gp_error err;
    gp_st_file *g;
    REQUIRE_OK(gp_st_open(test_fixture("codec-tiny/golden.safetensors"), &g, &err), &err);
    const gp_dev_codec_precision precs[] = {GP_DEV_CODEC_F32, GP_DEV_CODEC_TF32, GP_DEV_CODEC_F16};
    for (int p = 0; p < 3; p++) {
        gp_codec *c = load_codec(test_fixture("codec-tiny/nano-tiny.nemo"), true, precs[p]);
        REQUIRE(c);
        const char *keys[] = {"dec5", "dec70"};
        const double tol[] = {1e-4, 3e-4};
        for (int k = 0; k < 2; k++) {
            char name[64];
            snprintf(name, sizeof name, "%s.codes", keys[k]);
            const gp_st_tensor *tc = gp_st_find(g, name);
            snprintf(name, sizeof name, "%s.pcm", keys[k]);
            const gp_st_tensor *tp = gp_st_find(g, name);
            REQUIRE(tc && tp && tc->ndim == 2);
            const size_t C = (size_t)tc->shape[0], T = (size_t)tc->shape[1];
            int32_t *codes = frame_major(tc->data, C, T);
            float *pcm = malloc(T * 1024 * sizeof(float));
            REQUIRE_OK(gp_codec_decode(c, codes, T, pcm, &err), &err);
            const double e = test_max_abs_diff(pcm, tp->data, T * 1024);
            const double snr = snr_db(tp->data, pcm, T * 1024);
            test_note("GPU %s %s: max abs error %.3g, SNR %.1f dB", prec_name(precs[p]), keys[k], e,
                      snr);
            if (precs[p] == GP_DEV_CODEC_F32)
                CHECK_MSG(e <= tol[k], "%s f32: %.3g > %g", keys[k], e, tol[k]);
            else
                CHECK_MSG(snr >= 20.0, "%s %s: SNR %.1f dB < 20", keys[k], prec_name(precs[p]),
                          snr);
            free(codes);
            free(pcm);
        }
        gp_codec_free(c);
    }
    gp_st_close(g);
}

/* codec0's codes and NeMo's samples from the real-size goldens. */
static const char *realsize_codec(golden *g, int32_t **codes, size_t *T, float **pcm) {
    static char path[1100];
    if (golden_open(g, "real-size")) return NULL;
    const char *dir = gen_realsize_dir(g);
    if (!dir) return NULL;
    snprintf(path, sizeof path, "%s/codec", dir);
    int64_t dims[4];
    int nd = 0;
    *codes = golden_i32(g, "codec0.codes", dims, &nd);
    size_t n = 0;
    *pcm = golden_f32(g, "codec0.pcm", &n);
    if (!*codes || !*pcm || nd != 2 || n != (size_t)dims[0] * 1024) return NULL;
    *T = (size_t)dims[0];
    return path;
}

TEST(cuda_codec_real_size_against_nemo) {
    require_cuda();
    golden g;
    int32_t *codes = NULL;
    float *ref = NULL;
    size_t T = 0;
    const char *path = realsize_codec(&g, &codes, &T, &ref);
    REQUIRE(path);
    const size_t n = T * 1024;
    float *pcm = malloc(n * sizeof(float)), *cpu = malloc(n * sizeof(float));
    gp_error err;
    gp_codec *c = load_codec(path, false, GP_DEV_CODEC_F32);
    REQUIRE(c);
    REQUIRE_OK(gp_codec_decode(c, codes, T, cpu, &err), &err);
    gp_codec_free(c);
    test_note("CPU decoder vs NeMo: SNR %.1f dB", snr_db(ref, cpu, n));
    const gp_dev_codec_precision precs[] = {GP_DEV_CODEC_F32, GP_DEV_CODEC_TF32, GP_DEV_CODEC_F16};
    const double need[] = {100.0, 60.0, 60.0};
    for (int p = 0; p < 3; p++) {
        c = load_codec(path, true, precs[p]);
        REQUIRE(c);
        REQUIRE_OK(gp_codec_decode(c, codes, T, pcm, &err), &err);
        const double s = snr_db(ref, pcm, n), s_cpu = snr_db(cpu, pcm, n);
        test_note("GPU %s vs NeMo: SNR %.1f dB (max abs %.3g); vs the CPU decoder %.1f dB",
                  prec_name(precs[p]), s, test_max_abs_diff(pcm, ref, n), s_cpu);
        CHECK_MSG(s >= need[p], "GPU %s: SNR %.1f dB < %.0f", prec_name(precs[p]), s, need[p]);
        gp_codec_free(c);
    }
    free(pcm);
    free(cpu);
    free(codes);
    free(ref);
    golden_close(&g);
}

/* The real-size codec's FP16 samples with `env`=`on` (the default kernels
 * when NULL) and with `env`=0: the largest difference, and whether they are
 * bit for bit equal. */
static void fp16_compare_settings(const char *env, const char *on_value, double *max_diff,
                                  bool *equal) {
    *equal = false;
    *max_diff = INFINITY;
    golden g;
    int32_t *codes = NULL;
    float *ref = NULL;
    size_t T = 0;
    const char *path = realsize_codec(&g, &codes, &T, &ref);
    REQUIRE(path);
    const size_t n = T * 1024;
    float *on = malloc(n * sizeof(float)), *off = malloc(n * sizeof(float));
    REQUIRE(on && off);
    gp_error err;
    if (on_value) setenv(env, on_value, 1);
    gp_codec *c = load_codec(path, true, GP_DEV_CODEC_F16);
    unsetenv(env);
    REQUIRE(c);
    REQUIRE_OK(gp_codec_decode(c, codes, T, on, &err), &err);
    gp_codec_free(c);
    setenv(env, "0", 1);
    c = load_codec(path, true, GP_DEV_CODEC_F16);
    unsetenv(env);
    REQUIRE(c);
    REQUIRE_OK(gp_codec_decode(c, codes, T, off, &err), &err);
    gp_codec_free(c);
    *max_diff = test_max_abs_diff(on, off, n);
    *equal = memcmp(on, off, n * sizeof(float)) == 0;
    test_note("FP16 with %s=%s and =0: max difference %g over %zu samples", env,
              on_value ? on_value : "(default)", *max_diff, n);
    free(on);
    free(off);
    free(codes);
    free(ref);
    golden_close(&g);
}

/* The check every kernel-equivalence test makes: the samples with `env`=`on_value`
 * (the defaults when NULL) equal those with `env`=0 bit for bit; `differ` names
 * what differs otherwise. */
static void check_fp16_equal(const char *env, const char *on_value, const char *differ) {
    require_cuda();
    double d;
    bool equal;
    fp16_compare_settings(env, on_value, &d, &equal);
    CHECK_MSG(equal, "%s (max %g)", differ, d);
}

/* The FP16 convolution over window rows staged once per tile (stages 2-4,
 * k_codec_conv_f16_rows) runs the same MMAs as the one that copies each
 * tap's slice: the samples must be equal bit for bit with it switched off
 * (GEPARD_CUDA_CODEC_ROWS=0, read when a GPU codec is made). */
TEST(cuda_codec_rows_tiles_equal_copied_tiles) {
    check_fp16_equal("GEPARD_CUDA_CODEC_ROWS", NULL, "the two FP16 convolution kernels differ");
}

/* Wide staged-row tiles (512 columns of 32 rows, 256 of 64: 64 columns per
 * warp) run the same MMAs per output in the same order as 128-column ones:
 * forced on for every layer they fit (GEPARD_CUDA_CODEC_WIDE=1) against never
 * (=0), the samples must be equal bit for bit. */
TEST(cuda_codec_wide_tiles_equal_narrow_tiles) {
    check_fp16_equal("GEPARD_CUDA_CODEC_WIDE", "1", "wide and 128-column FP16 tiles differ");
}

/* The transposed convolutions with NanoCodec's group shape as constants
 * (k_codec_convt<2, 2>: the activated inputs in registers) sum in the order
 * of the run-time shaped kernel: equal bit for bit
 * (GEPARD_CUDA_CODEC_CONVT_FIXED=0). */
TEST(cuda_codec_fixed_convt_equals_generic) {
    check_fp16_equal("GEPARD_CUDA_CODEC_CONVT_FIXED", NULL,
                     "the fixed-shape transposed convolution differs");
}

/* A tile holding every output channel stores its outputs as one flat run
 * (codec_conv_store_flat, cuda_codec.h) with the per-channel store's
 * arithmetic: equal bit for bit (GEPARD_CUDA_CODEC_FLAT_STORE=0). */
TEST(cuda_codec_flat_store_equals_channel_store) {
    check_fp16_equal("GEPARD_CUDA_CODEC_FLAT_STORE", NULL,
                     "the flat and the per-channel epilogue stores differ");
}

/* The window kernel with its indices by a float reciprocal and its
 * activation branched once per group of 8 (k_codec_window_fast in
 * cuda_codec_kernels.cu) computes the same values: equal bit for bit
 * (GEPARD_CUDA_CODEC_WINDOW_FAST=0). */
TEST(cuda_codec_fast_window_equals_window) {
    check_fp16_equal("GEPARD_CUDA_CODEC_WINDOW_FAST", NULL,
                     "the fast and the plain window kernels differ");
}

/* The flat store reading the tile and the bias 4 or 2 values at a time (C_out
 * a multiple of 4 or 2) adds the same numbers: equal bit for bit to reading
 * one value at a time (GEPARD_CUDA_CODEC_FLAT_VEC=0). */
TEST(cuda_codec_flat_store_vector_reads_equal_scalar) {
    check_fp16_equal("GEPARD_CUDA_CODEC_FLAT_VEC", NULL,
                     "the flat store's vector and scalar tile reads differ");
}

/* Calls whose 64-row tiles would leave multiprocessors idle run 32-row tiles
 * (tile_rows in cuda_codec_mma.cu; below one tile per multiprocessor,
 * GEPARD_CUDA_CODEC_SMALL_GRID=100, the real-size one-shot decode of 40
 * frames does so at the 432- and 216-channel stages): a tile's height changes
 * no output's order of addition, so the samples equal 64-row tiles' bit for
 * bit (=0). */
TEST(cuda_codec_small_grid_tiles_equal_planned_tiles) {
    check_fp16_equal("GEPARD_CUDA_CODEC_SMALL_GRID", "100",
                     "32-row tiles for small grids differ from the planned 64-row tiles");
}

/* Every codec kernel launched with programmatic stream serialization
 * (cuda_launch.cuh: launched while the kernel before it still runs, waiting
 * in griddepcontrol.wait before it touches memory) computes what it computes
 * launched plainly: equal bit for bit (GEPARD_CUDA_PDL=0). */
TEST(cuda_codec_dependent_launch_equals_plain_launch) {
    check_fp16_equal("GEPARD_CUDA_PDL", NULL,
                     "kernels launched as programmatic dependents differ from plain launches");
}

/* The residual blocks of a stage on CUDA streams of their own (cuda_codec.cu,
 * codec_run) run the same kernels on the same values and sum into the
 * stage's output in block order: the samples equal the blocks run one after
 * another (GEPARD_CUDA_CODEC_BRANCHES=0) bit for bit. */
TEST(cuda_codec_concurrent_blocks_equal_serial) {
    check_fp16_equal("GEPARD_CUDA_CODEC_BRANCHES", NULL,
                     "the residual blocks on their own streams differ from serial");
}

/* One stream of T frames pushed `chunk` frames at a time: the samples (the
 * caller frees), or NULL. */
static float *stream_in_chunks(const gp_codec *c, const int32_t *codes, size_t T, size_t chunk) {
    const size_t C = (size_t)c->fsq.channels;
    gp_codec_code_stream *s = NULL;
    gp_error err;
    float *pcm = malloc(T * 1024 * sizeof(float));
    bool ok = pcm && gp_codec_code_stream_create(c, &s, &err) == 0;
    for (size_t f = 0; ok && f < T; f += chunk) {
        const size_t m = T - f < chunk ? T - f : chunk;
        ok = gp_codec_code_stream_push(s, codes + f * C, m, pcm + f * 1024, &err) == 0;
    }
    if (s) gp_codec_code_stream_free(s);
    if (!ok) {
        free(pcm);
        return NULL;
    }
    return pcm;
}

/* Largest difference between streamed and one-shot samples. */
static double chunked_vs_oneshot(const gp_codec *c, const int32_t *codes, size_t T, size_t chunk,
                                 const float *oneshot) {
    float *pcm = stream_in_chunks(c, codes, T, chunk);
    if (!pcm) return INFINITY;
    const double e = test_max_abs_diff(pcm, oneshot, T * 1024);
    free(pcm);
    return e;
}

/* Three streams at different positions share every call from frame `lead`
 * on: stream i first decodes starts[i] frames alone. */
static double mixed_positions(const gp_codec *c, const int32_t *const *codes, size_t T,
                              const float *const *oneshot) {
    const size_t C = (size_t)c->fsq.channels;
    const size_t starts[3] = {5, 0, 2};
    gp_codec_code_stream *s[3];
    float *pcm[3];
    gp_error err;
    double worst = 0;
    for (int i = 0; i < 3; i++) {
        if (gp_codec_code_stream_create(c, &s[i], &err)) return INFINITY;
        pcm[i] = malloc(T * 1024 * sizeof(float));
        if (starts[i] && gp_codec_code_stream_push(s[i], codes[i], starts[i], pcm[i], &err))
            worst = INFINITY;
    }
    /* then one frame of each per call until the first runs out */
    for (size_t k = 0; k + starts[0] < T && worst == 0; k++) {
        const int32_t *cp[3];
        float *pp[3];
        for (int i = 0; i < 3; i++) {
            cp[i] = codes[i] + (starts[i] + k) * C;
            pp[i] = pcm[i] + (starts[i] + k) * 1024;
        }
        if (gp_codec_decode_frames_multi(c, s, cp, 3, 1, pp, &err)) worst = INFINITY;
    }
    const size_t done = T - starts[0];
    for (int i = 0; i < 3; i++) {
        const double e = test_max_abs_diff(pcm[i], oneshot[i], (starts[i] + done) * 1024);
        if (e > worst) worst = e;
        free(pcm[i]);
        gp_codec_code_stream_free(s[i]);
    }
    return worst;
}

/* The real-size codec and three different utterances of T frames of 32
 * codes: codec0's codes, reversed, and shifted by one level. */
typedef struct utterances {
    golden g;
    const char *path;
    int32_t *codes, *variants[3];
    float *ref;
    size_t T;
} utterances;

static bool utterances_open(utterances *u) {
    memset(u, 0, sizeof *u);
    u->path = realsize_codec(&u->g, &u->codes, &u->T, &u->ref);
    if (!u->path) return false;
    const size_t C = 32, T = u->T;
    u->variants[0] = u->codes;
    u->variants[1] = malloc(C * T * sizeof(int32_t));
    u->variants[2] = malloc(C * T * sizeof(int32_t));
    if (!u->variants[1] || !u->variants[2]) return false;
    for (size_t t = 0; t < T; t++)
        for (size_t k = 0; k < C; k++) {
            u->variants[1][t * C + k] = u->codes[(T - 1 - t) * C + k];
            u->variants[2][t * C + k] = u->codes[t * C + k] > 0 ? u->codes[t * C + k] - 1 : 1;
        }
    return true;
}

/* Each utterance decoded one-shot by c into oneshot[i] (the caller frees). */
static bool decode_oneshots(const gp_codec *c, const utterances *u, float *oneshot[3]) {
    gp_error err;
    bool ok = true;
    for (int i = 0; i < 3; i++) {
        oneshot[i] = malloc(u->T * 1024 * sizeof(float));
        ok = ok && oneshot[i] && gp_codec_decode(c, u->variants[i], u->T, oneshot[i], &err) == 0;
    }
    return ok;
}

static void utterances_close(utterances *u) {
    free(u->variants[1]);
    free(u->variants[2]);
    free(u->codes);
    free(u->ref);
    golden_close(&u->g);
}

/* One stream of the real-size codec decoded `chunk` frames per call (one:
 * the calls whose grids leave most multiprocessors idle) with `env`=`value`:
 * the samples (the caller frees), or NULL. */
static float *stream_chunks_with(const char *env, const char *value, const utterances *u,
                                 size_t chunk) {
    setenv(env, value, 1);
    gp_codec *c = load_codec(u->path, true, GP_DEV_CODEC_F16);
    unsetenv(env);
    if (!c) return NULL;
    float *pcm = stream_in_chunks(c, u->codes, u->T, chunk);
    gp_codec_free(c);
    return pcm;
}

/* The check of the one-stream kernel-equivalence tests: one stream of the
 * real-size codec decoded `chunk` frames per call with `env`=`on` and with
 * `env`=`off` gives the same samples bit for bit (`what` names the two). */
static void check_stream_settings_equal(const char *env, const char *on, const char *off,
                                        size_t chunk, const char *what) {
    require_cuda();
    utterances u;
    REQUIRE(utterances_open(&u));
    float *a = stream_chunks_with(env, on, &u, chunk);
    float *b = stream_chunks_with(env, off, &u, chunk);
    const size_t n = u.T * 1024;
    const double d = a && b ? test_max_abs_diff(a, b, n) : INFINITY;
    if (a && b) test_note("one stream, %zu frames per call, %s: max difference %g", chunk, what, d);
    CHECK_MSG(a && b && memcmp(a, b, n * sizeof(float)) == 0,
              "%s: the samples differ at %zu frames per call (max %g)", what, chunk, d);
    free(a);
    free(b);
    utterances_close(&u);
}

/* Calls whose grid leaves multiprocessors idle (one stream, a few) run
 * one-warp tiles of 32 channels × 8 columns (k_codec_conv_f16_narrow,
 * cuda_codec_mma.cu) with the MMAs of the 128-column kernels in the same
 * order: one stream decoded a frame per call (every layer narrow, the split
 * 432-channel ones included) equals the same with GEPARD_CUDA_CODEC_NARROW=0
 * bit for bit (16-channel narrow tiles off, so the 32-channel ones run). */
TEST(cuda_codec_narrow_tiles_equal_wide_tiles) {
    setenv("GEPARD_CUDA_CODEC_NARROW16", "0", 1);
    check_stream_settings_equal("GEPARD_CUDA_CODEC_NARROW", "50", "0", 1,
                                "narrow against 128-column tiles");
    unsetenv("GEPARD_CUDA_CODEC_NARROW16");
}

/* Narrow tiles of 16 output channels (one MMA a k-step) where their grid
 * fits four warps per multiprocessor run the MMA the 32-channel ones run for
 * the same outputs: one stream decoded a frame per call (every stage on
 * them) equals the same with GEPARD_CUDA_CODEC_NARROW16=0 bit for bit. */
TEST(cuda_codec_narrow16_tiles_equal_narrow32_tiles) {
    check_stream_settings_equal("GEPARD_CUDA_CODEC_NARROW16", "1", "0", 1,
                                "16- against 32-channel narrow tiles");
}

/* Calls of few frame columns write each residual unit's windows (but a
 * stage's first) from the convolution before it, their older rows from one
 * launch at the call's start (fused windows, cuda_codec.cu): the values the
 * window kernels write, so one stream decoded 1, 3 and 16 frames per call
 * equals the same with GEPARD_CUDA_CODEC_FUSED_WINDOWS=0 bit for bit. */
TEST(cuda_codec_fused_windows_equal_window_kernels) {
    const size_t chunks[] = {1, 3, 16};
    for (int i = 0; i < 3; i++)
        check_stream_settings_equal("GEPARD_CUDA_CODEC_FUSED_WINDOWS", "16", "0", chunks[i],
                                    "fused windows against window kernels");
}

TEST(cuda_codec_streaming_equals_oneshot) {
    require_cuda();
    utterances u;
    REQUIRE(utterances_open(&u));
    const size_t T = u.T;
    const gp_dev_codec_precision precs[] = {GP_DEV_CODEC_F32, GP_DEV_CODEC_TF32, GP_DEV_CODEC_F16};
    for (int p = 0; p < 3; p++) {
        gp_codec *c = load_codec(u.path, true, precs[p]);
        REQUIRE(c);
        float *oneshot[3];
        REQUIRE(decode_oneshots(c, &u, oneshot));
        const size_t chunks[] = {1, 2, 3, T};
        for (int k = 0; k < 4; k++) {
            const double e = chunked_vs_oneshot(c, u.codes, T, chunks[k], oneshot[0]);
            test_note("GPU %s, chunks of %zu frames: max difference %.3g", prec_name(precs[p]),
                      chunks[k], e);
            CHECK(e <= 1e-6);
        }
        const double e = mixed_positions(c, (const int32_t *const *)u.variants, T,
                                         (const float *const *)oneshot);
        test_note("GPU %s, 3 streams at positions 5/0/2 batched: max difference %.3g",
                  prec_name(precs[p]), e);
        CHECK(e <= 1e-6);
        for (int i = 0; i < 3; i++) free(oneshot[i]);
        gp_codec_free(c);
    }
    utterances_close(&u);
}

/* n streams of the three utterances (stream i: variant i % 3), one frame of
 * each per call from the first frame: the largest difference from one-shot
 * decoding. */
static double batched_streams(const gp_codec *c, const int32_t *const *codes, size_t T, int n,
                              const float *const *oneshot) {
    const size_t C = (size_t)c->fsq.channels;
    gp_codec_code_stream **s = calloc((size_t)n, sizeof *s);
    float **pcm = calloc((size_t)n, sizeof *pcm);
    const int32_t **cp = calloc((size_t)n, sizeof *cp);
    float **pp = calloc((size_t)n, sizeof *pp);
    gp_error err;
    double worst = s && pcm && cp && pp ? 0 : INFINITY;
    for (int i = 0; i < n && worst == 0; i++) {
        pcm[i] = malloc(T * 1024 * sizeof(float));
        if (!pcm[i] || gp_codec_code_stream_create(c, &s[i], &err)) worst = INFINITY;
    }
    for (size_t t = 0; t < T && worst == 0; t++) {
        for (int i = 0; i < n; i++) {
            cp[i] = codes[i % 3] + t * C;
            pp[i] = pcm[i] + t * 1024;
        }
        if (gp_codec_decode_frames_multi(c, s, cp, n, 1, pp, &err)) worst = INFINITY;
    }
    for (int i = 0; i < n && worst != INFINITY; i++) {
        const double e = test_max_abs_diff(pcm[i], oneshot[i % 3], T * 1024);
        if (e > worst) worst = e;
    }
    for (int i = 0; s && pcm && i < n; i++) {
        free(pcm[i]);
        if (s[i]) gp_codec_code_stream_free(s[i]);
    }
    free(s);
    free(pcm);
    free(cp);
    free(pp);
    return worst;
}

/* A call of n one-frame streams runs as a captured graph of the batch
 * codec_graph_cols gives (cuda_codec.cu): 20 streams as 24 (padding that is
 * not a power of two), 130 as 144, 300 as 320; the padding streams must not
 * touch the real ones, and every stream equals its one-shot decode. */
TEST(cuda_codec_padded_batches_equal_oneshot) {
    require_cuda();
    utterances u;
    REQUIRE(utterances_open(&u));
    gp_codec *c = load_codec(u.path, true, GP_DEV_CODEC_F16);
    REQUIRE(c);
    float *oneshot[3];
    REQUIRE(decode_oneshots(c, &u, oneshot));
    const int counts[] = {20, 130, 300};
    for (int k = 0; k < 3; k++) {
        const double e = batched_streams(c, (const int32_t *const *)u.variants, u.T, counts[k],
                                         (const float *const *)oneshot);
        test_note("GPU f16, %d streams of one frame per call: max difference from one-shot %.3g",
                  counts[k], e);
        CHECK(e <= 1e-6);
    }
    for (int i = 0; i < 3; i++) free(oneshot[i]);
    gp_codec_free(c);
    utterances_close(&u);
}

/* The FP16 path's inner signals of the residual units in FP16 (the default,
 * GP_CUDA_CODEC_HALF_TMP) and in f32 (GEPARD_CUDA_CODEC_HALF_SIGNALS=0): both
 * within 60 dB of NeMo at real size, and the f32 form streams one frame per
 * call as it decodes one-shot (the default form is what every other test of
 * the FP16 path runs). */
TEST(cuda_codec_half_inner_signals) {
    require_cuda();
    utterances u;
    REQUIRE(utterances_open(&u));
    const size_t T = u.T, n = T * 1024;
    gp_codec *c = load_codec(u.path, true, GP_DEV_CODEC_F16);
    REQUIRE(c);
    float *half[3];
    REQUIRE(decode_oneshots(c, &u, half));
    gp_codec_free(c);
    setenv("GEPARD_CUDA_CODEC_HALF_SIGNALS", "0", 1);
    c = load_codec(u.path, true, GP_DEV_CODEC_F16);
    unsetenv("GEPARD_CUDA_CODEC_HALF_SIGNALS");
    REQUIRE(c);
    float *full[3];
    REQUIRE(decode_oneshots(c, &u, full));
    const double s_half = snr_db(u.ref, half[0], n), s_full = snr_db(u.ref, full[0], n);
    test_note("FP16 inner signals: SNR %.1f dB against NeMo; f32 inner signals %.1f dB; "
              "%.1f dB between the two",
              s_half, s_full, snr_db(full[0], half[0], n));
    CHECK_MSG(s_half >= 60.0 && s_full >= 60.0, "SNR %.1f / %.1f dB < 60", s_half, s_full);
    const double e = chunked_vs_oneshot(c, u.codes, T, 1, full[0]);
    CHECK_MSG(e <= 1e-6, "f32 inner signals, one frame per call: max difference %.3g", e);
    for (int i = 0; i < 3; i++) {
        free(half[i]);
        free(full[i]);
    }
    gp_codec_free(c);
    utterances_close(&u);
}

TEST(cuda_codec_cli_decode) {
    require_cuda();
    /* `gepard decode --device cuda` on dec5 equals `--device cpu` within 1e-4
     * (raw .f32 output; the CPU's own tolerance against NeMo). */
    const char *codes_json = test_tmp("dec5.json");
    gp_error err;
    gp_st_file *g;
    REQUIRE_OK(gp_st_open(test_fixture("codec-tiny/golden.safetensors"), &g, &err), &err);
    const gp_st_tensor *tc = gp_st_find(g, "dec5.codes");
    REQUIRE(tc);
    const size_t C = (size_t)tc->shape[0], T = (size_t)tc->shape[1];
    FILE *fp = fopen(codes_json, "w");
    REQUIRE(fp);
    fprintf(fp, "{\"frames\":%zu,\"codes\":[", T);
    const int32_t *cm = tc->data;
    for (size_t t = 0; t < T; t++) {
        fprintf(fp, "%s[", t ? "," : "");
        for (size_t k = 0; k < C; k++) fprintf(fp, "%s%d", k ? "," : "", cm[k * T + t]);
        fprintf(fp, "]");
    }
    fprintf(fp, "]}");
    fclose(fp);
    const char *out_cpu = test_tmp("cpu.f32"), *out_gpu = test_tmp("gpu.f32");
    const char *codec = test_fixture("codec-tiny/nano-tiny.nemo");
    const char *a_cpu[] = {"decode",   "--codec", codec, "--codes", codes_json,
                           "--device", "cpu",     "-o",  out_cpu,   NULL};
    const char *a_gpu[] = {"decode", "--codec",         codec, "--codes", codes_json, "--device",
                           "cuda",   "--gpu-precision", "f32", "-o",      out_gpu,    NULL};
    test_cmd_result r1, r2;
    test_run_gepard(&r1, NULL, 0, 120, a_cpu);
    test_run_gepard(&r2, NULL, 0, 120, a_gpu);
    CHECK_MSG(r1.status == 0 && r2.status == 0, "decode failed: %s %s", r1.err, r2.err);
    size_t n1 = 0, n2 = 0;
    float *p1 = (float *)read_file(out_cpu, &n1), *p2 = (float *)read_file(out_gpu, &n2);
    REQUIRE(p1 && p2 && n1 == n2 && n1 == T * 1024 * sizeof(float));
    const double e = test_max_abs_diff(p1, p2, T * 1024);
    test_note("decode --device cuda vs cpu: max difference %.3g (tolerance 1e-4)", e);
    CHECK(e <= 1e-4);
    free(p1);
    free(p2);
    test_cmd_result_free(&r1);
    test_cmd_result_free(&r2);
    gp_st_close(g);
}

/* `gepard bench --codec-only --device cuda` reports, for the single stream and
 * each batch, the wall time of a call and the device's part of it (first
 * upload to last download: never more than the wall time, which also holds
 * the host's launching and copying). */
TEST(cuda_codec_bench_reports_gpu_time) {
    require_cuda();
    const char *codec = test_fixture("codec-tiny/nano-tiny.nemo");
    const char *args[] = {"bench",     "--codec-only", "--device", "cuda", "--codec",         codec,
                          "--streams", "1,2",          "--frames", "4",    "--gpu-precision", "f16",
                          NULL};
    test_cmd_result r;
    test_run_gepard(&r, NULL, 0, 300, args);
    REQUIRE_MSG(r.status == 0, "bench failed: %s", r.err);
    cJSON *root = cJSON_Parse(r.out);
    REQUIRE_MSG(root, "bench printed no JSON: %.200s", r.out);
    const cJSON *f16 = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "gpu_codec"), "f16");
    REQUIRE(f16);
    const double wall =
        cJSON_GetNumberValue(cJSON_GetObjectItem(f16, "single_stream_ms_per_frame"));
    const double gpu =
        cJSON_GetNumberValue(cJSON_GetObjectItem(f16, "single_stream_gpu_ms_per_frame"));
    test_note("one stream: %.3f ms per frame, %.3f ms of it on the GPU", wall, gpu);
    CHECK(wall > 0 && gpu > 0 && gpu <= wall * 1.01);
    const cJSON *batches = cJSON_GetObjectItem(f16, "batches");
    REQUIRE(cJSON_GetArraySize(batches) == 1);
    const cJSON *b = cJSON_GetArrayItem(batches, 0);
    const double bw = cJSON_GetNumberValue(cJSON_GetObjectItem(b, "ms_per_step"));
    const double bg = cJSON_GetNumberValue(cJSON_GetObjectItem(b, "gpu_ms_per_step"));
    test_note("two streams: %.3f ms per call, %.3f ms of it on the GPU", bw, bg);
    CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(b, "streams")) == 2);
    CHECK(bw > 0 && bg > 0 && bg <= bw * 1.01);
    cJSON_Delete(root);
    test_cmd_result_free(&r);
}

/* Codes of `got` against `want` (both [T][C]); a difference counts as a
 * boundary flip when the CPU's latent value sits within 1e-3 of a rounding
 * boundary of the quantiser. */
static void count_code_flips(const gp_codec *c, const int32_t *want, const int32_t *got,
                             const float *latent_cm, size_t T, int *boundary, int *other) {
    const size_t C = (size_t)c->fsq.channels;
    *boundary = *other = 0;
    for (size_t t = 0; t < T; t++)
        for (size_t k = 0; k < C; k++) {
            if (want[t * C + k] == got[t * C + k]) continue;
            const float y = gp_fsq_compress(&c->fsq, (int)k, latent_cm[k * T + t]);
            if (fabsf(fabsf(y - floorf(y)) - 0.5f) < 1e-3f)
                (*boundary)++;
            else
                (*other)++;
        }
}

/* The encoder on the GPU (f32) against the CPU encoder: codec-tiny's
 * enc28000 clip (golden latent within 1e-4, the CPU's tolerance) and
 * real-size codec0's audio; codes equal except on rounding boundaries. */
TEST(cuda_codec_encoder_matches_cpu) {
    require_cuda();
    gp_error err;
    gp_st_file *g;
    REQUIRE_OK(gp_st_open(test_fixture("codec-tiny/golden.safetensors"), &g, &err), &err);
    const gp_st_tensor *ta = gp_st_find(g, "enc28000.audio"),
                       *te = gp_st_find(g, "enc28000.encoded");
    REQUIRE(ta && te);
    golden rg;
    int32_t *rcodes = NULL;
    float *rpcm = NULL;
    size_t rT = 0;
    const char *rpath = realsize_codec(&rg, &rcodes, &rT, &rpcm);
    REQUIRE(rpath);
    const struct {
        const char *path, *label;
        const float *audio;
        size_t n;
        const float *golden_latent;
    } cases[] = {
        {test_fixture("codec-tiny/nano-tiny.nemo"), "codec-tiny enc28000", ta->data, ta->numel,
         te->data},
        {rpath, "real size, codec0's audio", rpcm, rT * 1024, NULL},
    };
    for (int i = 0; i < 2; i++) {
        gp_codec *cpu = load_codec(cases[i].path, false, GP_DEV_CODEC_F32);
        gp_codec *gpu = load_codec(cases[i].path, true, GP_DEV_CODEC_TF32);
        REQUIRE(cpu && gpu && gpu->accel && gpu->accel->encode);
        int32_t *c1 = NULL, *c2 = NULL;
        float *l1 = NULL, *l2 = NULL;
        size_t f1 = 0, f2 = 0;
        REQUIRE_OK(gp_codec_encode(cpu, cases[i].audio, cases[i].n, &c1, &f1, &l1, &err), &err);
        REQUIRE_OK(gp_codec_encode(gpu, cases[i].audio, cases[i].n, &c2, &f2, &l2, &err), &err);
        REQUIRE(f1 == f2);
        const size_t nl = f1 * (size_t)cpu->fsq.channels;
        const double e = test_max_abs_diff(l1, l2, nl);
        int boundary, other;
        count_code_flips(cpu, c1, c2, l1, f1, &boundary, &other);
        test_note("%s: GPU latent vs CPU max abs %.3g; codes: %d flips on rounding boundaries, "
                  "%d elsewhere, of %zu",
                  cases[i].label, e, boundary, other, nl);
        CHECK_EQ_INT(other, 0);
        if (cases[i].golden_latent) {
            const double eg = test_max_abs_diff(l2, cases[i].golden_latent, nl);
            test_note("%s: GPU latent vs NeMo max abs %.3g (tolerance 1e-4)", cases[i].label, eg);
            CHECK(eg <= 1e-4);
        }
        free(c1);
        free(c2);
        free(l1);
        free(l2);
        gp_codec_free(cpu);
        gp_codec_free(gpu);
    }
    free(rcodes);
    free(rpcm);
    golden_close(&rg);
    gp_st_close(g);
}
