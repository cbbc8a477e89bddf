/* codec.c — loading the NanoCodec and the decode / encode entry points (see codec.h). */
#include "codec/codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "codec/decoder_stream.h"
#include "compute/conv_direct.h"

void gp_codec_options_default(gp_codec_options *opt) {
    memset(opt, 0, sizeof *opt); /* every field, also the ones added later */
    opt->reference = false;
    opt->n_threads = 1;
    opt->kernels = GP_CODEC_KERNELS_AUTO;
    opt->stage_types = NULL;
    opt->skip_encoder = false;
}

/* The int32 FSQ buffers, when present, must agree with the YAML levels. */
static int codec_check_fsq_buffers(const gp_codec_source *src, const gp_codec_config *cfg,
                                   gp_error *err) {
    for (int g = 0; g < cfg->fsq.num_groups; g++) {
        char name[128];
        snprintf(name, sizeof name, "vector_quantizer.fsqs.%d.num_levels", g);
        const gp_codec_tensor *t = gp_codec_source_find(src, name);
        if (!t) continue;
        if ((t->dtype != GP_I32 && t->dtype != GP_I64) || t->numel != (size_t)cfg->fsq.n_levels)
            return gp_fail(err, GEPARD_ERR_FORMAT, "%s: tensor %s should hold %d integer levels",
                           src->weights_origin, name, cfg->fsq.n_levels);
        for (int d = 0; d < cfg->fsq.n_levels; d++) {
            int64_t v = gp_dtype_read_int(t->dtype, t->data, (size_t)d);
            if (v != cfg->fsq.levels[d])
                return gp_fail(err, GEPARD_ERR_FORMAT,
                               "%s: tensor %s says dimension %d has %lld levels but "
                               "model_config.yaml (vector_quantizer.num_levels_per_group) says "
                               "%d — does the config belong to these weights?",
                               src->weights_origin, name, d, (long long)v, cfg->fsq.levels[d]);
        }
    }
    return GEPARD_OK;
}

int gp_codec_load_source(const gp_codec_source *src, const gp_codec_options *opt, gp_codec **out,
                         gp_error *err) {
    *out = NULL;
    gp_codec_options defaults;
    if (!opt) {
        gp_codec_options_default(&defaults);
        opt = &defaults;
    }
    gp_codec *c = calloc(1, sizeof *c);
    if (!c) return gp_fail_oom(err, "codec", sizeof *c);
    int rc = gp_codec_config_parse(src->yaml, &c->cfg, err);
    if (rc == GEPARD_OK) rc = codec_check_fsq_buffers(src, &c->cfg, err);
    if (rc == GEPARD_OK) {
        gp_fsq_init(&c->fsq, &c->cfg.fsq);
        rc = gp_codec_decoder_load(&c->dec, &c->cfg, src, err);
    }
    if (rc == GEPARD_OK)
        rc = gp_codec_decoder_use_kernels(
            &c->dec, opt->reference ? GP_CODEC_KERNELS_REFERENCE : opt->kernels, opt->stage_types,
            err);
    if (rc == GEPARD_OK && !opt->skip_encoder) {
        rc = gp_codec_encoder_load(&c->enc, &c->cfg, src, err);
        c->has_encoder = rc == GEPARD_OK;
    }
    if (rc == GEPARD_OK && opt->n_threads > 1) rc = gp_pool_create(opt->n_threads, &c->pool, err);
    if (rc) {
        gp_codec_free(c);
        return rc;
    }
    c->enc.reference = opt->reference;
    c->dec.pool = c->enc.pool = c->pool;
    const bool chosen = !opt->reference && opt->kernels == GP_CODEC_KERNELS_AUTO;
    snprintf(c->kernels_why, sizeof c->kernels_why, "%s",
             opt->reference ? "the reference kernels were asked for"
             : !chosen      ? "asked for"
                            : "the default");
    if (chosen && !opt->stage_types && c->dec.kernels == GP_CODEC_KERNELS_F32) {
        /* the bf16-weight path this CPU has, measured against f32 on these weights */
        const gp_codec_kernels candidate =
            gp_dconv_tiles_mode() ? GP_CODEC_KERNELS_TILES : GP_CODEC_KERNELS_MIXED;
        rc = gp_codec_choose_kernels(c, src, opt, candidate, err);
        if (rc) {
            gp_codec_free(c);
            return rc;
        }
    }
    *out = c;
    return GEPARD_OK;
}

int gp_codec_load(const char *path, const gp_codec_options *opt, gp_codec **out, gp_error *err) {
    *out = NULL;
    gp_codec_source *src;
    int rc = gp_codec_source_open(path, &src, err);
    if (rc) return rc;
    rc = gp_codec_load_source(src, opt, out, err);
    gp_codec_source_free(src);
    return rc;
}

void gp_codec_set_accel(gp_codec *c, gp_codec_accel *accel) {
    if (c->accel) {
        c->accel->release(c->accel->impl);
        free(c->accel);
    }
    c->accel = accel;
}

void gp_codec_free(gp_codec *c) {
    if (!c) return;
    gp_codec_set_accel(c, NULL);
    gp_codec_decoder_free(&c->dec);
    gp_codec_encoder_free(&c->enc);
    gp_pool_free(c->pool);
    free(c);
}

int gp_codec_code_stream_create(const gp_codec *codec, gp_codec_code_stream **out, gp_error *err) {
    *out = NULL;
    gp_codec_code_stream *s = calloc(1, sizeof *s);
    if (!s) return gp_fail_oom(err, "codec stream", sizeof *s);
    s->codec = codec;
    s->slot = -1;
    size_t n = (size_t)codec->fsq.channels * GP_CODEC_STEP_FRAMES;
    int rc;
    if (codec->accel) { /* the state lives on the device; latents go there frame-major */
        rc = codec->accel->slot_open(codec->accel->impl, &s->slot, err);
    } else {
        s->latent = gp_aligned_alloc(n * sizeof(float));
        rc = s->latent ? gp_codec_stream_create(&codec->dec, &s->stream, err)
                       : gp_fail_oom(err, "codec stream", n * sizeof(float));
    }
    if (rc) {
        gp_codec_code_stream_free(s);
        return rc;
    }
    *out = s;
    return GEPARD_OK;
}

void gp_codec_code_stream_free(gp_codec_code_stream *s) {
    if (!s) return;
    if (s->slot >= 0) s->codec->accel->slot_close(s->codec->accel->impl, s->slot);
    gp_codec_stream_free(s->stream);
    gp_aligned_free(s->latent);
    free(s);
}

void gp_codec_code_stream_reset(gp_codec_code_stream *s) {
    if (s->slot < 0) {
        gp_codec_stream_reset(s->stream);
        return;
    }
    gp_error err;
    gp_error_clear(&err);
    if (s->codec->accel->slot_reset(s->codec->accel->impl, s->slot, &err))
        fprintf(stderr, "gepard: warning: %s\n", err.message);
}

/* Frame-major latents of n streams' codes, decoded on the accelerator. */
static int accel_decode_codes(const gp_codec *c, gp_codec_code_stream *const *streams,
                              const int32_t *const *codes, int n, size_t frames, float *const *pcm,
                              bool queue, gp_error *err) {
    const size_t C = (size_t)c->fsq.channels;
    float *lat = malloc((size_t)n * frames * C * sizeof(float));
    int *slots = malloc((size_t)n * sizeof(int));
    if (!lat || !slots) {
        free(lat);
        free(slots);
        return gp_fail_oom(err, "codec latents", (size_t)n * frames * C * sizeof(float));
    }
    for (int i = 0; i < n; i++) {
        gp_fsq_dequantize_frames(&c->fsq, codes[i], frames, lat + (size_t)i * frames * C);
        slots[i] = streams[i]->slot;
    }
    int rc = queue ? c->accel->submit(c->accel->impl, n, slots, frames, lat, pcm, err)
                   : c->accel->decode(c->accel->impl, n, slots, frames, lat, pcm, err);
    free(lat);
    free(slots);
    return rc;
}

int gp_codec_code_stream_push(gp_codec_code_stream *s, const int32_t *codes, size_t frames,
                              float *pcm, gp_error *err) {
    const gp_codec *c = s->codec;
    int rc = gp_fsq_check_codes(&c->fsq, codes, frames, err);
    if (rc) return rc;
    if (s->slot >= 0) return accel_decode_codes(c, &s, &codes, 1, frames, &pcm, false, err);
    const size_t C = (size_t)c->fsq.channels, spf = (size_t)c->cfg.samples_per_frame;
    for (size_t f = 0; f < frames; f += GP_CODEC_STEP_FRAMES) {
        size_t n = frames - f < GP_CODEC_STEP_FRAMES ? frames - f : GP_CODEC_STEP_FRAMES;
        gp_fsq_dequantize(&c->fsq, codes + f * C, n, s->latent, GP_CODEC_STEP_FRAMES);
        gp_codec_stream_push_latent(s->stream, s->latent, GP_CODEC_STEP_FRAMES, n, pcm + f * spf);
    }
    return GEPARD_OK;
}

int gp_codec_code_stream_push_latent(gp_codec_code_stream *s, const float *latent, size_t frames,
                                     float *pcm, gp_error *err) {
    const gp_codec *c = s->codec;
    if (s->slot >= 0)
        return c->accel->decode(c->accel->impl, 1, &s->slot, frames, latent, &pcm, err);
    const size_t C = (size_t)c->fsq.channels, spf = (size_t)c->cfg.samples_per_frame;
    for (size_t f = 0; f < frames; f += GP_CODEC_STEP_FRAMES) {
        size_t n = frames - f < GP_CODEC_STEP_FRAMES ? frames - f : GP_CODEC_STEP_FRAMES;
        for (size_t t = 0; t < n; t++) /* frame-major -> channel-major */
            for (size_t ch = 0; ch < C; ch++)
                s->latent[ch * GP_CODEC_STEP_FRAMES + t] = latent[(f + t) * C + ch];
        gp_codec_stream_push_latent(s->stream, s->latent, GP_CODEC_STEP_FRAMES, n, pcm + f * spf);
    }
    return GEPARD_OK;
}

/* What every multi-stream call checks before decoding anything. */
static int check_multi(const gp_codec *codec, gp_codec_code_stream *const *streams,
                       const int32_t *const *codes, int n, size_t frames, gp_error *err) {
    for (int i = 0; i < n; i++) {
        if (streams[i]->codec != codec)
            return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "stream %d belongs to another codec",
                           i);
        if (gp_fsq_check_codes(&codec->fsq, codes[i], frames, err))
            return gp_error_prefix(err, "stream %d: ", i);
    }
    return GEPARD_OK;
}

bool gp_codec_can_queue(const gp_codec *codec) {
    return codec->accel && codec->accel->submit && codec->accel->collect;
}

int gp_codec_decode_frames_queue(const gp_codec *codec, gp_codec_code_stream *const *streams,
                                 const int32_t *const *codes, int n, size_t frames,
                                 float *const *pcm, gp_error *err) {
    if (!gp_codec_can_queue(codec))
        return gp_codec_decode_frames_multi(codec, streams, codes, n, frames, pcm, err);
    int rc = check_multi(codec, streams, codes, n, frames, err);
    return rc ? rc : accel_decode_codes(codec, streams, codes, n, frames, pcm, true, err);
}

int gp_codec_collect(const gp_codec *codec, bool wait, bool *done, gp_error *err) {
    *done = true;
    if (!gp_codec_can_queue(codec)) return GEPARD_OK;
    return codec->accel->collect(codec->accel->impl, wait, done, err);
}

int gp_codec_decode_frames_multi(const gp_codec *codec, gp_codec_code_stream *const *streams,
                                 const int32_t *const *codes, int n, size_t frames,
                                 float *const *pcm, gp_error *err) {
    int rc = check_multi(codec, streams, codes, n, frames, err);
    if (rc) return rc;
    if (codec->accel) return accel_decode_codes(codec, streams, codes, n, frames, pcm, false, err);
    const size_t C = (size_t)codec->fsq.channels, spf = (size_t)codec->cfg.samples_per_frame;
    for (int g = 0; g < n; g += GP_CODEC_MULTI_MAX) {
        const int count = n - g < GP_CODEC_MULTI_MAX ? n - g : GP_CODEC_MULTI_MAX;
        gp_codec_stream *st[GP_CODEC_MULTI_MAX];
        const float *lat[GP_CODEC_MULTI_MAX];
        float *out[GP_CODEC_MULTI_MAX];
        for (size_t f = 0; f < frames; f += GP_CODEC_STEP_FRAMES) {
            size_t m = frames - f < GP_CODEC_STEP_FRAMES ? frames - f : GP_CODEC_STEP_FRAMES;
            for (int i = 0; i < count; i++) {
                gp_codec_code_stream *s = streams[g + i];
                gp_fsq_dequantize(&codec->fsq, codes[g + i] + f * C, m, s->latent,
                                  GP_CODEC_STEP_FRAMES);
                st[i] = s->stream;
                lat[i] = s->latent;
                out[i] = pcm[g + i] + f * spf;
            }
            gp_codec_stream_push_latent_multi(st, count, lat, GP_CODEC_STEP_FRAMES, m, out);
        }
    }
    return GEPARD_OK;
}

int gp_codec_decode(const gp_codec *codec, const int32_t *codes, size_t frames, float *pcm,
                    gp_error *err) {
    gp_codec_code_stream *s;
    int rc = gp_codec_code_stream_create(codec, &s, err);
    if (rc) return rc;
    rc = gp_codec_code_stream_push(s, codes, frames, pcm, err);
    gp_codec_code_stream_free(s);
    return rc;
}

int gp_codec_encode(const gp_codec *codec, const float *audio, size_t n, int32_t **codes,
                    size_t *frames, float **latent, gp_error *err) {
    *codes = NULL;
    *frames = 0;
    if (latent) *latent = NULL;
    const size_t spf = (size_t)codec->cfg.samples_per_frame, C = (size_t)codec->fsq.channels;
    if (!codec->has_encoder)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "this codec was loaded without its encoder (decode only), so it cannot "
                       "encode audio or clone a voice — load it without skipping the encoder "
                       "(gepard_codec_params.no_encoder = 0)");
    if (n == 0)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "cannot encode empty audio (0 samples)");
    size_t T = (n + spf - 1) / spf, padded;
    if (gp_mul_size(T, spf, &padded) != 0 || padded > ((size_t)1 << 34))
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "audio of %zu samples is too long", n);
    float *input = gp_aligned_calloc(padded, sizeof(float)); /* zero-padded to whole frames */
    float *lat = gp_aligned_alloc(C * T * sizeof(float));
    int32_t *out = malloc(C * T * sizeof(int32_t));
    int rc = GEPARD_OK;
    if (!input || !lat || !out) rc = gp_fail_oom(err, "encoder input", padded * sizeof(float));
    if (rc == GEPARD_OK) {
        memcpy(input, audio, n * sizeof(float));
        rc = codec->accel && codec->accel->encode
                 ? codec->accel->encode(codec->accel->impl, input, padded, lat, err)
                 : gp_codec_encoder_run(&codec->enc, input, padded, lat, err);
    }
    gp_aligned_free(input);
    if (rc == GEPARD_OK) {
        gp_fsq_quantize(&codec->fsq, lat, T, T, out);
        *codes = out;
        *frames = T;
        out = NULL;
        if (latent) {
            *latent = malloc(C * T * sizeof(float));
            if (*latent)
                memcpy(*latent, lat, C * T * sizeof(float));
            else
                rc = gp_fail_oom(err, "latent", C * T * sizeof(float));
        }
    }
    if (rc) {
        free(*codes);
        *codes = NULL;
        *frames = 0;
    }
    free(out);
    gp_aligned_free(lat);
    return rc;
}
