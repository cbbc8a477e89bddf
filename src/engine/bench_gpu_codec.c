/* bench_gpu_codec.c — the codec figures of `gepard bench --device cuda`
 * (bench_gpu.h): the decoder on the GPU in each precision it offers, one
 * stream decoded frame by frame (the latency a listener sees per frame) and
 * batches of streams each decoding its next frame in one call (the server's
 * step), against the measured TF32 / FP16 / f32 GEMM rate of the same GPU. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/timing.h"
#include "engine/api_internal.h"
#include "engine/bench_gpu.h"
#include "model/device.h"
#include "model/device_codec.h"

#define FRAME_RATE (22050.0 / 1024.0)

static void random_codes(const gp_codec *c, uint64_t *state, int32_t *codes, int n) {
    for (int k = 0; k < n; k++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        codes[k] =
            (int32_t)((*state >> 33) % (uint64_t)gp_fsq_levels(&c->fsq, k % c->fsq.channels));
    }
}

/* n streams, `steps` timed calls of `per_call` frames each (after two warm-up
 * calls): ms per call, wall clock and on the device (first upload to last
 * download: the rest of a call is the host's, launching included). */
static int time_batch(const gp_codec *c, int n, int per_call, int steps, double *ms_per_step,
                      double *gpu_ms_per_step, gp_error *err) {
    const int C = c->fsq.channels * per_call, spf = c->cfg.samples_per_frame * per_call;
    gp_codec_code_stream **s = calloc((size_t)n, sizeof *s);
    int32_t *codes = malloc((size_t)n * C * sizeof(int32_t));
    float *pcm = malloc((size_t)n * spf * sizeof(float));
    const int32_t **cp = malloc((size_t)n * sizeof *cp);
    float **pp = malloc((size_t)n * sizeof *pp);
    int rc = s && codes && pcm && cp && pp ? GEPARD_OK : gp_fail_oom(err, "codec bench", 0);
    for (int i = 0; !rc && i < n; i++) {
        rc = gp_codec_code_stream_create(c, &s[i], err);
        cp[i] = codes + (size_t)i * C;
        pp[i] = pcm + (size_t)i * spf;
    }
    uint64_t state = 12345;
    uint64_t t0 = 0;
    double gpu_ms = 0;
    for (int k = -2; !rc && k < steps; k++) {
        random_codes(c, &state, codes, n * C);
        if (k == 0) t0 = gp_now_ns();
        rc = gp_codec_decode_frames_multi(c, s, cp, n, per_call, pp, err);
        if (k >= 0 && c->accel && c->accel->last_gpu_ms)
            gpu_ms += c->accel->last_gpu_ms(c->accel->impl);
    }
    if (!rc) *ms_per_step = (double)(gp_now_ns() - t0) * 1e-6 / steps;
    if (!rc) *gpu_ms_per_step = gpu_ms / steps;
    for (int i = 0; s && i < n; i++) gp_codec_code_stream_free(s[i]);
    free(s);
    free(codes);
    free(pcm);
    free(cp);
    free(pp);
    return rc;
}

static int bench_path(const gepard_bench_params *p, const char *precision, double tflops,
                      cJSON *into, gp_error *err) {
    gepard_codec_params cp = gepard_codec_default_params();
    cp.device = p->device;
    cp.gpu_precision = precision;
    gepard_codec *gc;
    if (gepard_codec_load_with_params(p->codec, &cp, &gc) != GEPARD_OK)
        return gp_fail(err, GEPARD_ERR_IO, "%s", gepard_last_error());
    const gp_codec *c = gc->codec;
    const double flop = 2.0 * gp_codec_decoder_macs_per_frame(&c->dec);
    cJSON *o = cJSON_AddObjectToObject(into, precision);
    cJSON_AddStringToObject(o, "kernels", gepard_codec_kernels(gc));
    double ms = 0, gpu_ms = 0;
    /* --codec-only --streams N,…: those batches alone (1: the single stream),
     * `frames` calls each (for a profiler's view of one batch size) */
    static const int default_sizes[] = {16, 64, 256, 1024};
    const bool chosen = p->codec_only && p->n_streams > 0;
    const int *sizes = chosen ? p->streams : default_sizes;
    const int n_sizes = chosen ? p->n_streams : 4, steps = chosen ? p->frames : 16;
    const int per_call = chosen && p->codec_frames_per_call > 1 ? p->codec_frames_per_call : 1;
    bool single = !chosen;
    for (int i = 0; chosen && i < n_sizes; i++) single = single || sizes[i] == 1;
    int rc = GEPARD_OK;
    if (single) {
        gp_progress("bench: GPU codec (%s), one stream", precision);
        rc = time_batch(c, 1, 1, p->frames, &ms, &gpu_ms, err);
        cJSON_AddNumberToObject(o, "single_stream_ms_per_frame", ms);
        cJSON_AddNumberToObject(o, "single_stream_gpu_ms_per_frame", gpu_ms);
    }
    cJSON *arr = cJSON_AddArrayToObject(o, "batches");
    for (int i = 0; !rc && i < n_sizes; i++) {
        if (sizes[i] == 1) continue;
        gp_progress("bench: GPU codec (%s), %d streams", precision, sizes[i]);
        rc = time_batch(c, sizes[i], per_call, steps, &ms, &gpu_ms, err);
        if (rc) break;
        const double fps = (double)sizes[i] * per_call / (ms * 1e-3);
        cJSON *b = cJSON_CreateObject();
        cJSON_AddNumberToObject(b, "streams", sizes[i]);
        cJSON_AddNumberToObject(b, "frames_per_call", per_call);
        cJSON_AddNumberToObject(b, "ms_per_step", ms);
        cJSON_AddNumberToObject(b, "gpu_ms_per_step", gpu_ms);
        cJSON_AddNumberToObject(b, "frames_per_s", fps);
        cJSON_AddNumberToObject(b, "realtime_x", fps / FRAME_RATE);
        cJSON_AddNumberToObject(b, "tflops", fps * flop / 1e12);
        cJSON_AddNumberToObject(b, "fraction_of_gemm_rate",
                                tflops > 0 ? fps * flop / (tflops * 1e12) : 0);
        cJSON_AddItemToArray(arr, b);
    }
    gepard_codec_free(gc);
    return rc;
}

int gp_bench_gpu_codec(const gepard_bench_params *p, cJSON *root, gp_error *err) {
    gp_device_spec spec;
    int rc = gp_device_parse(p->device, &spec, err);
    if (!rc) rc = gp_device_resolve(&spec, NULL, 0, err);
    if (rc || spec.kind != GP_DEVICE_CUDA) return rc;
    const gp_dev_plugin *plugin = gp_device_cuda_plugin(err);
    if (!plugin) return GEPARD_ERR_UNSUPPORTED;
    gp_dev_status st = {0, ""};
    double tf32 = 0, f16 = 0, f32 = 0;
    if (plugin->codec_measure(spec.index, GP_DEV_CODEC_TF32, &tf32, &st) ||
        plugin->codec_measure(spec.index, GP_DEV_CODEC_F16, &f16, &st) ||
        plugin->codec_measure(spec.index, GP_DEV_CODEC_F32, &f32, &st))
        return gp_device_error(&st, err);
    cJSON *o = cJSON_AddObjectToObject(root, "gpu_codec");
    cJSON_AddNumberToObject(o, "tf32_gemm_tflops", tf32);
    cJSON_AddNumberToObject(o, "f16_gemm_tflops", f16);
    cJSON_AddNumberToObject(o, "f32_gemm_tflops", f32);
    /* --codec-only --gpu-precision P: that path alone */
    const char *only = NULL;
    gp_dev_codec_precision named;
    gp_error ignored;
    if (p->codec_only && p->gpu_precision && strcmp(p->gpu_precision, "bf16") &&
        gp_device_codec_precision_parse(p->gpu_precision, &named, &ignored) == GEPARD_OK)
        only = gp_device_codec_precision_name(named);
    const struct {
        const char *name;
        double tflops;
    } paths[] = {{"f16", f16}, {"tf32", tf32}, {"f32", f32}};
    for (int i = 0; !rc && i < 3; i++)
        if (!only || !strcmp(only, paths[i].name))
            rc = bench_path(p, paths[i].name, paths[i].tflops, o, err);
    return rc;
}
