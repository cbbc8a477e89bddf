/* api_codec.c — the public codec API of gepard.h over codec/codec.h. Every failure
 * leaves its message for gepard_last_error(). */
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "codec/codec.h"
#include "engine/api_error.h"
#include "engine/api_internal.h"
#include "engine/hub_paths.h"
#include "gepard.h"
#include "model/device_codec.h"

gepard_codec_params gepard_codec_default_params(void) {
    gepard_codec_params p = {
        .n_threads = 0,
        .reference_kernels = 0,
        .hub = NULL,
        .precision = GEPARD_CODEC_AUTO,
        .device = NULL,
        .gpu_precision = NULL,
    };
    return p;
}

gepard_status gepard_codec_load_with_params(const char *path, const gepard_codec_params *params,
                                            gepard_codec **out) {
    if (!out) return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT, "gepard_codec_load: out is NULL");
    *out = NULL;
    if (!path) return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT, "gepard_codec_load: path is NULL");
    gepard_codec_params defaults = gepard_codec_default_params();
    if (!params) params = &defaults;
    gp_codec_options opt;
    gp_codec_options_default(&opt);
    opt.n_threads = params->n_threads > 0 ? params->n_threads : gp_cpu_count();
    opt.reference = params->reference_kernels != 0;
    opt.skip_encoder = params->no_encoder != 0;
    gepard_codec_precision precision = params->precision;
    const char *env = getenv("GEPARD_CODEC_PRECISION");
    if (precision == GEPARD_CODEC_AUTO && env && *env) {
        precision = !strcmp(env, "f32")     ? GEPARD_CODEC_F32
                    : !strcmp(env, "mixed") ? GEPARD_CODEC_MIXED
                    : !strcmp(env, "bf16")  ? GEPARD_CODEC_BF16
                    : !strcmp(env, "tiles") ? GEPARD_CODEC_TILES
                                            : (gepard_codec_precision)-1;
        if ((int)precision < 0)
            return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT,
                                "GEPARD_CODEC_PRECISION=%s: expected f32, mixed, bf16 or tiles",
                                env);
    }
    switch (precision) {
    case GEPARD_CODEC_AUTO: opt.kernels = GP_CODEC_KERNELS_AUTO; break;
    case GEPARD_CODEC_F32: opt.kernels = GP_CODEC_KERNELS_F32; break;
    case GEPARD_CODEC_MIXED: opt.kernels = GP_CODEC_KERNELS_MIXED; break;
    case GEPARD_CODEC_BF16: opt.kernels = GP_CODEC_KERNELS_BF16; break;
    case GEPARD_CODEC_TILES: opt.kernels = GP_CODEC_KERNELS_TILES; break;
    default:
        return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT,
                            "gepard_codec_load: unknown precision %d (expected 0-4)",
                            (int)params->precision);
    }
    gp_error err;
    gp_error_clear(&err);
    gp_device_spec spec;
    gp_dev_codec_precision gpu_precision;
    char note[256] = "";
    if (gp_device_parse(params->device, &spec, &err) ||
        gp_device_codec_precision_parse(params->gpu_precision, &gpu_precision, &err) ||
        gp_device_resolve(&spec, note, sizeof note, &err))
        return gp_api_fail(&err);
    /* The GPU decoder takes the f32 weights the BLAS path keeps unpacked. */
    if (spec.kind == GP_DEVICE_CUDA && !opt.reference) opt.kernels = GP_CODEC_KERNELS_BLAS;
    char *local = NULL;
    if (gp_resolve_codec_path(path, params->hub, &local, &err)) return gp_api_fail(&err);
    gepard_codec *c = calloc(1, sizeof *c);
    if (!c) {
        free(local);
        return gp_api_failf(GEPARD_ERR_NOMEM, "out of memory loading %s", path);
    }
    int rc = gp_codec_load(local, &opt, &c->codec, &err);
    free(local);
    if (rc == GEPARD_OK && spec.kind == GP_DEVICE_CUDA) {
        rc = gp_device_codec_attach(c->codec, &spec, gpu_precision, &err);
        if (rc) gp_codec_free(c->codec);
    }
    if (rc) {
        free(c);
        return gp_api_fail(&err);
    }
    *out = c;
    return gp_api_ok();
}

gepard_status gepard_codec_load(const char *path, gepard_codec **out) {
    return gepard_codec_load_with_params(path, NULL, out);
}

void gepard_codec_free(gepard_codec *codec) {
    if (!codec) return;
    gp_codec_free(codec->codec);
    free(codec);
}

const char *gepard_codec_kernels(const gepard_codec *c) {
    if (!c) return "";
    return c->codec->accel ? c->codec->accel->name : gp_codec_kernels_name(c->codec->dec.kernels);
}
const char *gepard_codec_kernels_why(const gepard_codec *c) {
    if (!c) return "";
    return c->codec->accel ? "on the GPU" : c->codec->kernels_why;
}
int gepard_codec_sample_rate(const gepard_codec *c) { return c ? c->codec->cfg.sample_rate : 0; }
int gepard_codec_samples_per_frame(const gepard_codec *c) {
    return c ? c->codec->cfg.samples_per_frame : 0;
}
int gepard_codec_num_codebooks(const gepard_codec *c) { return c ? c->codec->fsq.channels : 0; }
int gepard_codec_num_groups(const gepard_codec *c) { return c ? c->codec->fsq.num_groups : 0; }
int gepard_codec_codebook_size(const gepard_codec *codec, int c) {
    if (!codec || c < 0 || c >= codec->codec->fsq.channels) return 0;
    return gp_fsq_levels(&codec->codec->fsq, c);
}

gepard_status gepard_codec_decode(const gepard_codec *codec, const int32_t *codes, size_t n_frames,
                                  float **pcm, size_t *n_samples) {
    if (!codec || !pcm || !n_samples || (!codes && n_frames))
        return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT, "gepard_codec_decode: NULL argument");
    *pcm = NULL;
    *n_samples = 0;
    size_t spf = (size_t)codec->codec->cfg.samples_per_frame, n;
    if (gp_mul_size(n_frames, spf, &n) != 0 || n > ((size_t)1 << 34))
        return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT, "%zu frames is too many to decode",
                            n_frames);
    float *out = malloc((n ? n : 1) * sizeof(float));
    if (!out) return gp_api_failf(GEPARD_ERR_NOMEM, "out of memory for %zu samples", n);
    gp_error err;
    gp_error_clear(&err);
    if (gp_codec_decode(codec->codec, codes, n_frames, out, &err)) {
        free(out);
        return gp_api_fail(&err);
    }
    *pcm = out;
    *n_samples = n;
    return gp_api_ok();
}

gepard_status gepard_codec_stream_create(const gepard_codec *codec, gepard_codec_stream **out) {
    if (!codec || !out)
        return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT,
                            "gepard_codec_stream_create: NULL argument");
    *out = NULL;
    gepard_codec_stream *s = calloc(1, sizeof *s);
    if (!s) {
        return gp_api_failf(GEPARD_ERR_NOMEM, "out of memory creating a codec stream");
    }
    gp_error err;
    gp_error_clear(&err);
    if (gp_codec_code_stream_create(codec->codec, &s->stream, &err)) {
        free(s);
        return gp_api_fail(&err);
    }
    *out = s;
    return gp_api_ok();
}

gepard_status gepard_codec_stream_push(gepard_codec_stream *s, const int32_t *codes,
                                       size_t n_frames, float *pcm) {
    if (!s || (n_frames && (!codes || !pcm)))
        return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT, "gepard_codec_stream_push: NULL argument");
    gp_error err;
    gp_error_clear(&err);
    if (gp_codec_code_stream_push(s->stream, codes, n_frames, pcm, &err)) return gp_api_fail(&err);
    return gp_api_ok();
}

gepard_status gepard_codec_stream_push_latent(gepard_codec_stream *s, const float *latent,
                                              size_t n_frames, float *pcm) {
    if (!s || (n_frames && (!latent || !pcm)))
        return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT,
                            "gepard_codec_stream_push_latent: NULL argument");
    gp_error err;
    gp_error_clear(&err);
    if (gp_codec_code_stream_push_latent(s->stream, latent, n_frames, pcm, &err))
        return gp_api_fail(&err);
    return gp_api_ok();
}

void gepard_codec_stream_reset(gepard_codec_stream *s) {
    if (s) gp_codec_code_stream_reset(s->stream);
}

void gepard_codec_stream_free(gepard_codec_stream *s) {
    if (!s) return;
    gp_codec_code_stream_free(s->stream);
    free(s);
}

gepard_status gepard_codec_encode(const gepard_codec *codec, const float *pcm, size_t n,
                                  int32_t **codes, size_t *n_frames, int32_t **packed,
                                  float **latent) {
    if (!codec || !codes || !n_frames || (!pcm && n))
        return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT, "gepard_codec_encode: NULL argument");
    *codes = NULL;
    *n_frames = 0;
    if (packed) *packed = NULL;
    if (latent) *latent = NULL;
    const gp_codec *c = codec->codec;
    gp_error err;
    gp_error_clear(&err);
    float *lat_cm = NULL;
    size_t T;
    int32_t *k;
    if (gp_codec_encode(c, pcm, n, &k, &T, latent ? &lat_cm : NULL, &err)) return gp_api_fail(&err);
    const size_t C = (size_t)c->fsq.channels, G = (size_t)c->fsq.num_groups;
    int32_t *pk = packed ? malloc(T * G * sizeof(int32_t)) : NULL;
    float *lat = latent ? malloc(T * C * sizeof(float)) : NULL;
    if ((packed && !pk) || (latent && !lat)) {
        free(k);
        free(pk);
        free(lat);
        free(lat_cm);
        return gp_api_failf(GEPARD_ERR_NOMEM, "out of memory for %zu encoded frames", T);
    }
    if (pk) gp_fsq_pack(&c->fsq, k, T, pk);
    if (lat)
        for (size_t ch = 0; ch < C; ch++)
            for (size_t t = 0; t < T; t++) lat[t * C + ch] = lat_cm[ch * T + t];
    free(lat_cm);
    *codes = k;
    *n_frames = T;
    if (packed) *packed = pk;
    if (latent) *latent = lat;
    return gp_api_ok();
}
