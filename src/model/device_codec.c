/* device_codec.c — describing the loaded decoder to the device plugin and
 * installing the device decoder as the codec's accelerator (device_codec.h). */
#include "model/device_codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert((int)GP_DEV_ACT_IDENTITY == (int)GP_ACT_IDENTITY &&
                   (int)GP_DEV_ACT_LRELU == (int)GP_ACT_LRELU &&
                   (int)GP_DEV_ACT_SNAKE == (int)GP_ACT_SNAKE &&
                   (int)GP_DEV_ACT_HALF_SNAKE == (int)GP_ACT_HALF_SNAKE &&
                   (int)GP_DEV_ACT_ELU == (int)GP_ACT_ELU,
               "device activation kinds follow compute/conv.h");

int gp_device_codec_precision_parse(const char *text, gp_dev_codec_precision *out, gp_error *err) {
    /* The backbone's precision names (bf16, or none) leave the codec at its default, which
     * GEPARD_CUDA_CODEC_PRECISION may override for measurements (serve has one --gpu-precision). */
    const char *override = getenv("GEPARD_CUDA_CODEC_PRECISION");
    if ((!text || !*text || !strcmp(text, "bf16")) && override && *override) text = override;
    if (!text || !*text || !strcmp(text, "bf16") || !strcmp(text, "f16") || !strcmp(text, "fp16")) {
        *out = GP_DEV_CODEC_F16;
        return GEPARD_OK;
    }
    if (!strcmp(text, "tf32")) {
        *out = GP_DEV_CODEC_TF32;
        return GEPARD_OK;
    }
    if (!strcmp(text, "f32")) {
        *out = GP_DEV_CODEC_F32;
        return GEPARD_OK;
    }
    return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                   "unknown GPU precision '%s' for the codec (expected f16, tf32 or f32)", text);
}

const char *gp_device_codec_precision_name(gp_dev_codec_precision p) {
    return p == GP_DEV_CODEC_F32 ? "f32" : p == GP_DEV_CODEC_F16 ? "f16" : "tf32";
}

static gp_dev_codec_act describe_act(const gp_act *a) {
    gp_dev_codec_act d = {(int)a->kind, a->channels, a->n_snake, a->slope, a->alpha, a->inv_alpha};
    return d;
}

static gp_dev_codec_conv describe_conv(const gp_conv1d *c) {
    gp_dev_codec_conv d = {c->c_in,   c->c_out, c->kernel, c->dilation,
                           c->weight, c->bias,  c->stride};
    return d;
}

/* The encoder's layers (blocks: n_stages × n_kernels × n_dilations, caller frees). */
static int describe_encoder(const gp_codec_encoder *enc, gp_dev_codec_enc_desc *d,
                            gp_dev_codec_block **blocks, gp_error *err) {
    const gp_codec_encoder_config *cfg = &enc->cfg;
    const int nb = cfg->res.n_kernels * cfg->res.n_dilations;
    if (cfg->n_stages < 1 || cfg->n_stages > GP_DEV_CODEC_MAX_STAGES) return GEPARD_OK;
    *blocks = calloc((size_t)(cfg->n_stages * nb), sizeof **blocks);
    if (!*blocks) return gp_fail_oom(err, "encoder description", (size_t)(cfg->n_stages * nb));
    d->present = 1;
    d->causal = cfg->causal;
    d->pad_mode = (int)cfg->pad_mode;
    d->encoded_dim = cfg->encoded_dim;
    d->n_stages = cfg->n_stages;
    d->pre = describe_conv(&enc->pre);
    d->post = describe_conv(&enc->post);
    d->post_act = describe_act(&enc->post_act);
    for (int i = 0; i < cfg->n_stages; i++) {
        const gp_codec_enc_stage *st = &enc->stages[i];
        gp_dev_codec_block *b = *blocks + (size_t)i * nb;
        for (int j = 0; j < nb; j++) {
            b[j].in_act = describe_act(&st->blocks[j].in_act);
            b[j].skip_act = describe_act(&st->blocks[j].skip_act);
            b[j].in_conv = describe_conv(&st->blocks[j].in_conv);
            b[j].skip_conv = describe_conv(&st->blocks[j].skip_conv);
        }
        d->stages[i].blocks = b;
        d->stages[i].act = describe_act(&st->act);
        d->stages[i].down = describe_conv(&st->down);
    }
    return GEPARD_OK;
}

static int describe(const gp_codec_decoder *dec, gp_dev_codec_desc *d, gp_dev_codec_block **blocks,
                    gp_error *err) {
    const gp_codec_decoder_config *cfg = &dec->cfg;
    const int nb = cfg->res.n_kernels * cfg->res.n_dilations;
    if (!dec->pre.conv.weight)
        return gp_fail(err, GEPARD_ERR_INTERNAL,
                       "the codec's f32 weights were packed for the CPU before the GPU got them");
    if (cfg->n_stages > GP_DEV_CODEC_MAX_STAGES)
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED, "a codec of %d stages is too deep for the GPU",
                       cfg->n_stages);
    d->input_dim = cfg->input_dim;
    d->samples_per_frame = dec->samples_per_frame;
    d->n_stages = cfg->n_stages;
    d->n_kernels = cfg->res.n_kernels;
    d->n_dilations = cfg->res.n_dilations;
    d->clamp_output = cfg->output_activation == GP_CODEC_OUT_CLAMP;
    d->pre = describe_conv(&dec->pre.conv);
    d->post = describe_conv(&dec->post.conv);
    d->post_act = describe_act(&dec->post_act);
    *blocks = calloc((size_t)(cfg->n_stages * nb), sizeof **blocks);
    if (!*blocks) return gp_fail_oom(err, "codec description", (size_t)(cfg->n_stages * nb));
    for (int i = 0; i < cfg->n_stages; i++) {
        const gp_codec_dec_stage *st = &dec->stages[i];
        const gp_convt1d *u = &st->up.convt;
        gp_dev_codec_stage *ds = &d->stages[i];
        ds->act = describe_act(&st->act);
        ds->up = (gp_dev_codec_convt){u->c_in,   u->c_out,  u->kernel, u->stride,
                                      u->groups, u->weight, u->bias};
        gp_dev_codec_block *b = *blocks + (size_t)i * nb;
        for (int j = 0; j < nb; j++) {
            b[j].in_act = describe_act(&st->blocks[j].in_act);
            b[j].skip_act = describe_act(&st->blocks[j].skip_act);
            b[j].in_conv = describe_conv(&st->blocks[j].in_conv.conv);
            b[j].skip_conv = describe_conv(&st->blocks[j].skip_conv.conv);
        }
        ds->blocks = b;
    }
    return GEPARD_OK;
}

typedef struct device_codec {
    const gp_dev_plugin *plugin;
    gp_dev_codec *dc;
} device_codec;

static int dc_slot_open(void *impl, int *slot, gp_error *err) {
    device_codec *d = impl;
    gp_dev_status st = {0, ""};
    return d->plugin->codec_slot_open(d->dc, slot, &st) ? gp_device_error(&st, err) : GEPARD_OK;
}

static int dc_slot_reset(void *impl, int slot, gp_error *err) {
    device_codec *d = impl;
    gp_dev_status st = {0, ""};
    return d->plugin->codec_slot_reset(d->dc, slot, &st) ? gp_device_error(&st, err) : GEPARD_OK;
}

static void dc_slot_close(void *impl, int slot) {
    device_codec *d = impl;
    d->plugin->codec_slot_close(d->dc, slot);
}

/* A decode now or queued (the plugin's codec_decode / codec_decode_submit). */
static int dc_decode_call(void *impl, int n, const int *slots, size_t frames, const float *latent,
                          float *const *pcm, bool queue, gp_error *err) {
    device_codec *d = impl;
    if (frames > (size_t)1 << 24)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "%zu frames is too many to decode",
                       frames);
    gp_dev_status st = {0, ""};
    const int rc =
        queue ? d->plugin->codec_decode_submit(d->dc, n, slots, (int)frames, latent, pcm, &st)
              : d->plugin->codec_decode(d->dc, n, slots, (int)frames, latent, pcm, &st);
    return rc ? gp_device_error(&st, err) : GEPARD_OK;
}

static int dc_decode(void *impl, int n, const int *slots, size_t frames, const float *latent,
                     float *const *pcm, gp_error *err) {
    return dc_decode_call(impl, n, slots, frames, latent, pcm, false, err);
}

static int dc_submit(void *impl, int n, const int *slots, size_t frames, const float *latent,
                     float *const *pcm, gp_error *err) {
    return dc_decode_call(impl, n, slots, frames, latent, pcm, true, err);
}

static int dc_collect(void *impl, bool wait, bool *done, gp_error *err) {
    device_codec *d = impl;
    gp_dev_status st = {0, ""};
    int ready = 1;
    const int rc = d->plugin->codec_decode_collect(d->dc, wait, &ready, &st);
    *done = ready != 0;
    return rc ? gp_device_error(&st, err) : GEPARD_OK;
}

static int dc_encode(void *impl, const float *audio, size_t n, float *latent, gp_error *err) {
    device_codec *d = impl;
    gp_dev_status st = {0, ""};
    return d->plugin->codec_encode(d->dc, audio, n, latent, &st) ? gp_device_error(&st, err)
                                                                 : GEPARD_OK;
}

static double dc_last_gpu_ms(void *impl) {
    device_codec *d = impl;
    return d->plugin->codec_gpu_ms(d->dc);
}

static void dc_release(void *impl) {
    device_codec *d = impl;
    if (!d) return;
    d->plugin->codec_free(d->dc);
    free(d);
}

int gp_device_codec_attach(gp_codec *codec, const gp_device_spec *spec,
                           gp_dev_codec_precision precision, gp_error *err) {
    if (spec->kind != GP_DEVICE_CUDA)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "the codec can only move to a CUDA GPU");
    const gp_dev_plugin *p = gp_device_cuda_plugin(err);
    if (!p) return GEPARD_ERR_UNSUPPORTED;
    gp_dev_codec_desc d;
    memset(&d, 0, sizeof d);
    d.device = spec->index;
    d.precision = precision;
    gp_dev_codec_block *blocks = NULL, *enc_blocks = NULL;
    int rc = describe(&codec->dec, &d, &blocks, err);
    /* the encoder shares the decoder's residual-block shape (one n_kernels × n_dilations) */
    if (rc == GEPARD_OK && codec->has_encoder &&
        codec->enc.cfg.res.n_kernels == codec->dec.cfg.res.n_kernels &&
        codec->enc.cfg.res.n_dilations == codec->dec.cfg.res.n_dilations)
        rc = describe_encoder(&codec->enc, &d.enc, &enc_blocks, err);
    device_codec *dc = NULL;
    gp_codec_accel *accel = NULL;
    if (rc == GEPARD_OK) {
        dc = calloc(1, sizeof *dc);
        accel = calloc(1, sizeof *accel);
        if (!dc || !accel) rc = gp_fail_oom(err, "device codec", sizeof *dc);
    }
    if (rc == GEPARD_OK) {
        gp_dev_status st = {0, ""};
        dc->plugin = p;
        if (p->codec_create(&d, &dc->dc, &st)) rc = gp_device_error(&st, err);
    }
    free(blocks);
    free(enc_blocks);
    if (rc) {
        free(dc);
        free(accel);
        return rc;
    }
    accel->impl = dc;
    snprintf(accel->name, sizeof accel->name, "cuda:%d %s", spec->index,
             gp_device_codec_precision_name(precision));
    accel->slot_open = dc_slot_open;
    accel->slot_reset = dc_slot_reset;
    accel->slot_close = dc_slot_close;
    accel->decode = dc_decode;
    accel->submit = dc_submit;
    accel->collect = dc_collect;
    accel->encode = d.enc.present ? dc_encode : NULL;
    accel->last_gpu_ms = dc_last_gpu_ms;
    accel->release = dc_release;
    gp_codec_set_accel(codec, accel);
    return GEPARD_OK;
}
