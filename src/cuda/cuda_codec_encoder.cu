/* cuda_codec_encoder.cu — the codec's encoder (HiFiGANEncoder, CODEC.md §D)
 * on the GPU: voice cloning's one-off encode of a reference clip. Every
 * convolution's input is padded on both sides (or causally) by a window
 * kernel and multiplied by the decoder's convolution kernel with a stride;
 * always in f32 on the CUDA cores, so the codes are the CPU's (a value on a
 * rounding boundary of the quantiser may still flip). Buffers are sized per
 * call from the clip's length. */
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_codec.h"

typedef struct enc_plan {
    size_t sig, win, partial, tiles; /* floats (tiles: tickets) */
    size_t too_short;                /* a reflect-padded layer's length, when it pads more */
} enc_plan;

typedef struct enc_bufs {
    float *sig, *acc, *run, *tmp, *win, *partial, *audio, *out;
    unsigned *tickets;
} enc_bufs;

static void enc_padding(const codec_encoder *e, const gp_cuda_codec_conv *cv, size_t n,
                        size_t *left, size_t *right) {
    const size_t k = (size_t)cv->kernel, d = (size_t)cv->dilation, s = (size_t)cv->stride;
    if (e->causal) {
        *left = (k - 1) * d + 1 - s;
        *right = (n + s - 1) / s * s - n;
    } else {
        *left = *right = s == 1 ? d * (k - 1) / 2 : (k - s + 1) / 2;
    }
}

static size_t enc_out_len(const gp_cuda_codec_conv *cv, size_t width) {
    return (width - (size_t)cv->dilation * (size_t)(cv->kernel - 1) - 1) / (size_t)cv->stride + 1;
}

/* Account for one layer over n input samples; returns its output length. */
static size_t plan_layer(const codec_encoder *e, const gp_cuda_codec_conv *cv, size_t n,
                         enc_plan *p) {
    size_t left, right;
    enc_padding(e, cv, n, &left, &right);
    if (!e->causal && e->pad_mode == 2 && (left >= n || right >= n)) p->too_short = n;
    const size_t W = left + n + right, out = enc_out_len(cv, W);
    if (W * (size_t)cv->c_pad > p->win) p->win = W * (size_t)cv->c_pad;
    if (n * (size_t)cv->c_in > p->sig) p->sig = n * (size_t)cv->c_in;
    if (out * (size_t)cv->c_out > p->sig) p->sig = out * (size_t)cv->c_out;
    const size_t part = gp_cuda_codec_conv_partial_floats(cv, (int)out);
    const size_t tiles = gp_cuda_codec_conv_tiles(cv, (int)out);
    if (part > p->partial) p->partial = part;
    if (tiles > p->tiles) p->tiles = tiles;
    return out;
}

static void plan_all(const gp_dev_codec *c, size_t n, enc_plan *p) {
    const codec_encoder *e = &c->enc;
    size_t m = plan_layer(e, &e->pre, n, p);
    for (int i = 0; i < e->n_stages; i++) {
        for (int b = 0; b < c->nk * c->nd; b++) {
            plan_layer(e, &e->stages[i].blocks[b].in_conv, m, p);
            plan_layer(e, &e->stages[i].blocks[b].skip_conv, m, p);
        }
        m = plan_layer(e, &e->stages[i].down, m, p);
    }
    plan_layer(e, &e->post, m, p);
}

/* out = conv(pad(act(x))) over n samples of one signal; returns the output length. */
static size_t enc_layer(const gp_dev_codec *c, const gp_cuda_codec_conv *cv,
                        const gp_cuda_codec_act *act, const float *x, size_t n, enc_bufs *b,
                        const gp_cuda_codec_epilogue *ep) {
    const codec_encoder *e = &c->enc;
    size_t left, right;
    enc_padding(e, cv, n, &left, &right);
    const int mode = e->causal ? 0 : e->pad_mode;
    gp_cuda_codec_run_window_pad(x, (int)n, cv->c_in, cv->c_pad, (int)left, (int)right, mode, act,
                                 b->win, c->stream);
    const size_t W = left + n + right, out = enc_out_len(cv, W);
    gp_cuda_codec_run_conv_rows(cv, b->win, 1, (int)out, (int)W, ep, GP_CODEC_MATH_FMA, b->partial,
                                b->tickets, c->stream);
    return out;
}

static size_t enc_forward(const gp_dev_codec *c, size_t n, enc_bufs *b) {
    const codec_encoder *e = &c->enc;
    const gp_cuda_codec_act ident = {GP_DEV_ACT_IDENTITY, 0, 0.0f, NULL, NULL};
    gp_cuda_codec_epilogue ep = gp_cuda_codec_ep(GP_CODEC_EP_STORE, b->sig, NULL, 0, 0.0f, false);
    size_t m = enc_layer(c, &e->pre, &ident, b->audio, n, b, &ep);
    for (int i = 0; i < e->n_stages; i++) {
        const codec_enc_stage *st = &e->stages[i];
        for (int j = 0; j < c->nk; j++) {
            for (int k = 0; k < c->nd; k++) {
                const codec_block *blk = &st->blocks[j * c->nd + k];
                const float *res = k == 0 ? b->sig : b->run;
                ep = gp_cuda_codec_ep(GP_CODEC_EP_STORE, b->tmp, NULL, 0, 0.0f, false);
                enc_layer(c, &blk->in_conv, &blk->in_act, res, m, b, &ep);
                if (k < c->nd - 1)
                    ep = gp_cuda_codec_ep(GP_CODEC_EP_RESIDUAL, b->run, res, 0, 0.0f, false);
                else
                    ep = gp_cuda_codec_ep(GP_CODEC_EP_BRANCH, b->acc, res, j == 0,
                                          j == c->nk - 1 ? (float)c->nk : 0.0f, false);
                enc_layer(c, &blk->skip_conv, &blk->skip_act, b->tmp, m, b, &ep);
            }
        }
        ep = gp_cuda_codec_ep(GP_CODEC_EP_STORE, b->sig, NULL, 0, 0.0f, false);
        m = enc_layer(c, &st->down, &st->act, b->acc, m, b, &ep);
    }
    ep = gp_cuda_codec_ep(GP_CODEC_EP_STORE, b->out, NULL, 0, 0.0f, false);
    return enc_layer(c, &e->post, &e->post_act, b->sig, m, b, &ep);
}

extern "C" int gp_cuda_codec_encode(gp_dev_codec *c, const float *audio, size_t n, float *latent,
                                    gp_dev_status *st) {
    if (!c->enc.present)
        return gp_cuda_fail(st, GEPARD_ERR_UNSUPPORTED, "the codec's encoder is not on the GPU");
    if (n == 0 || n % (size_t)c->spf)
        return gp_cuda_fail(st, GEPARD_ERR_INVALID_ARGUMENT,
                            "encoder input of %zu samples is not a positive multiple of %d", n,
                            c->spf);
    const codec_encoder *e = &c->enc;
    enc_plan p = {0, 0, 0, 1, 0};
    plan_all(c, n, &p);
    if (p.too_short)
        return gp_cuda_fail(st, GEPARD_ERR_INVALID_ARGUMENT,
                            "the audio is too short for the encoder's reflect padding (a layer "
                            "sees %zu samples) — use a longer reference",
                            p.too_short);
    const size_t T = n / (size_t)c->spf, limit = (size_t)1 << 31;
    if (p.win >= limit || p.sig >= limit)
        return gp_cuda_fail(st, GEPARD_ERR_INVALID_ARGUMENT,
                            "a reference of %zu samples is too long for the GPU encoder — use a "
                            "clip under a few minutes",
                            n);
    GP_CUDA_TRY(cudaSetDevice(c->device), "selecting the GPU");
    enc_bufs b;
    memset(&b, 0, sizeof b);
    float **sigs[] = {&b.sig, &b.acc, &b.run, &b.tmp};
    cudaError_t err = cudaSuccess;
    for (float **q : sigs)
        if (err == cudaSuccess) err = cudaMalloc(q, p.sig * sizeof(float));
    if (err == cudaSuccess) err = cudaMalloc(&b.win, p.win * sizeof(float));
    if (err == cudaSuccess)
        err = cudaMalloc(&b.partial, (p.partial ? p.partial : 1) * sizeof(float));
    if (err == cudaSuccess) err = cudaMalloc(&b.tickets, p.tiles * sizeof(unsigned));
    if (err == cudaSuccess) err = cudaMalloc(&b.audio, n * sizeof(float));
    const size_t outn = T * (size_t)e->encoded_dim;
    if (err == cudaSuccess) err = cudaMalloc(&b.out, outn * sizeof(float));
    float *host = (float *)malloc(outn * sizeof(float));
    int rc = 0;
    pthread_mutex_lock(&c->lock);
    if (err == cudaSuccess)
        err = cudaMemsetAsync(b.tickets, 0, p.tiles * sizeof(unsigned), c->stream);
    if (err == cudaSuccess)
        err = cudaMemcpyAsync(b.audio, audio, n * sizeof(float), cudaMemcpyHostToDevice, c->stream);
    if (err == cudaSuccess && host) {
        const size_t frames = enc_forward(c, n, &b);
        err = cudaGetLastError();
        if (err == cudaSuccess && frames != T)
            rc = gp_cuda_fail(st, GEPARD_ERR_INTERNAL,
                              "the GPU encoder made %zu frames of %zu samples, not %zu", frames, n,
                              T);
        if (err == cudaSuccess)
            err = cudaMemcpyAsync(host, b.out, outn * sizeof(float), cudaMemcpyDeviceToHost,
                                  c->stream);
        if (err == cudaSuccess) err = cudaStreamSynchronize(c->stream);
    }
    pthread_mutex_unlock(&c->lock);
    if (!rc && err != cudaSuccess) rc = gp_cuda_check(err, "the GPU encoder", st);
    if (!rc && !host) rc = gp_cuda_fail(st, GEPARD_ERR_NOMEM, "out of host memory encoding");
    if (!rc) /* [T][D] -> [D][T] */
        for (size_t t = 0; t < T; t++)
            for (int d = 0; d < e->encoded_dim; d++)
                latent[(size_t)d * T + t] = host[t * (size_t)e->encoded_dim + (size_t)d];
    free(host);
    float *all[] = {b.sig, b.acc, b.run, b.tmp, b.win, b.partial, b.audio, b.out};
    for (float *q : all) cudaFree(q);
    cudaFree(b.tickets);
    return rc;
}
