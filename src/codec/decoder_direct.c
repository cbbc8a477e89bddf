/* decoder_direct.c — one decoder step on the direct SIMD convolutions (compute/conv_direct.h),
 * for one or several streams at once (see decoder.h).
 *
 * Every convolution reads an input buffer [rows][hist + n] — its left context, then the
 * activated signal — and its epilogue writes the NEXT convolution's activated input into
 * the other of two buffers, so an activation is never a pass of its own:
 *
 *   pre_conv      -> act_0(.)                          = up-conv input of stage 0
 *   stage head    up conv -> sig; in_act(sig)          = input of the first block
 *   in_conv       -> skip_act(.)                       = skip_conv input
 *   skip_conv     r = base + . (base: sig, then the branch's running value)
 *                 not last block:  run = r, next in_act(r)
 *                 last block:      acc = r | acc + r | (acc + r) / n_kernels, and
 *                                  the next branch's first in_act(sig), or after the
 *                                  last branch act_{i+1}(acc) / post_act(acc) in f32
 *   post_conv     -> pcm, then clamp or tanh
 *
 * On the bf16 path the residual convolutions' inputs (and their left context in the
 * state) are bf16 channel pairs; the residual stream, accumulators, pre/post convs and the
 * transposed convs stay f32. The left context is swapped in and out of the state right
 * before each convolution: copied into the buffer's first columns, then the buffer's last
 * columns kept for the next step.
 */
#include <math.h>
#include <string.h>

#include "codec/decoder_stream.h"

typedef struct direct_step {
    gp_codec_stream *const *s;
    int n; /* streams */
    const gp_codec_decoder *dec;
    bool bf16;
    int cur;    /* which of a stream's two input buffers the next convolution reads */
    size_t len; /* samples per stream at the current layer */
    gp_dconv_signal sig[GP_CODEC_MULTI_MAX];
} direct_step;

static float *xbuf(const direct_step *d, int i, int which) {
    return d->s[i]->buf[which ? BUF_IN : BUF_TMP];
}

/* Swap layer l's left context (rows of 4-byte units, hist + len columns at x): copy it in
 * from the state, then keep the last hist columns as the next context. */
static void hist_swap(gp_codec_stream *s, const gp_codec_causal *l, int rows, float *x,
                      size_t len) {
    const size_t P = (size_t)l->hist, W = P + len;
    float *h = s->state + l->state_off;
    if (P == 0) return;
    for (int r = 0; r < rows; r++) {
        memcpy(x + (size_t)r * W, h + (size_t)r * P, P * sizeof(float));
        memcpy(h + (size_t)r * P, x + (size_t)r * W + len, P * sizeof(float));
    }
}

/* Swap every stream's context of l and point the signals at their input buffers. */
static void prepare(direct_step *d, const gp_codec_causal *l, int rows) {
    for (int i = 0; i < d->n; i++) {
        float *x = xbuf(d, i, d->cur);
        hist_swap(d->s[i], l, rows, x, d->len);
        memset(&d->sig[i], 0, sizeof d->sig[i]);
        d->sig[i].x = x;
        d->sig[i].xs = (size_t)l->hist + d->len;
    }
}

/* Point stream i's activation output at the data columns of the next input buffer. */
static void act_into(direct_step *d, int i, const gp_act *act, int next_hist, bool bf16) {
    gp_dconv_out *o = &d->sig[i].out;
    o->act = act;
    o->act_dst = xbuf(d, i, !d->cur) + next_hist;
    o->act_ld = (size_t)next_hist + d->len;
    o->act_bf16 = bf16;
}

/* ---- stage head: transposed conv and the first block's activation, in parallel ---- */

typedef struct head_job {
    const direct_step *d;
    const gp_codec_dec_stage *st;
    const gp_codec_causal *first; /* in_conv of the first block */
    size_t n_in;
    int parts;
} head_job;

static void head_task(void *ctx, int task, int worker) {
    (void)worker;
    const head_job *j = ctx;
    const direct_step *d = j->d;
    const int i = task / j->parts;
    long o0, o1;
    gp_split_range(j->st->c_out, j->parts, task % j->parts, 2, &o0, &o1);
    if (o1 <= o0) return;
    gp_codec_stream *s = d->s[i];
    const size_t n_out = j->n_in * (size_t)j->st->rate, P = (size_t)j->first->hist;
    gp_dconv_convt_rows(&j->st->up.convt, xbuf(d, i, d->cur), (size_t)j->st->up.hist + j->n_in,
                        j->n_in, s->buf[BUF_SIG], n_out, (int)o0, (int)o1);
    gp_dconv_act_rows(&j->st->blocks[0].in_act, s->buf[BUF_SIG], n_out, xbuf(d, i, !d->cur) + P,
                      P + n_out, d->bf16, (int)o0, (int)o1, n_out);
}

static void run_head(direct_step *d, const gp_codec_dec_stage *st) {
    for (int i = 0; i < d->n; i++)
        hist_swap(d->s[i], &st->up, st->c_in, xbuf(d, i, d->cur), d->len);
    const int threads = gp_pool_size(d->dec->pool);
    head_job job = {d, st, &st->blocks[0].in_conv, d->len, threads > 1 ? 2 * threads : 1};
    gp_pool_parallel_for(d->dec->pool, d->n * job.parts, head_task, &job);
    d->cur = !d->cur;
    d->len *= (size_t)st->rate;
}

/* ---- residual layer ---- */

/* skip_conv of block (j, m): the residual add and what follows it. */
static void skip_outputs(direct_step *d, int stage, int j, int m) {
    const gp_codec_decoder *dec = d->dec;
    const gp_codec_resblock_config *res = &dec->cfg.res;
    const gp_codec_dec_stage *st = &dec->stages[stage];
    const int nk = res->n_kernels, nd = res->n_dilations;
    for (int i = 0; i < d->n; i++) {
        float *const *b = d->s[i]->buf;
        gp_dconv_out *o = &d->sig[i].out;
        o->base = m == 0 ? b[BUF_SIG] : b[BUF_RUN];
        o->ld = d->len;
        if (m + 1 < nd) {
            const gp_codec_dec_block *next = &st->blocks[j * nd + m + 1];
            o->store = b[BUF_RUN];
            act_into(d, i, &next->in_act, next->in_conv.hist, d->bf16);
            continue;
        }
        o->acc = b[BUF_ACC];
        o->acc_mode = j == 0       ? GP_DCONV_ACC_SET
                      : j + 1 < nk ? GP_DCONV_ACC_ADD
                                   : GP_DCONV_ACC_ADD_DIV;
        o->acc_div = (float)nk;
        if (j + 1 < nk) { /* the next branch starts from the stage signal */
            const gp_codec_dec_block *next = &st->blocks[(j + 1) * nd];
            act_into(d, i, &next->in_act, next->in_conv.hist, d->bf16);
            o->act_src = GP_DCONV_ACT_OF_FROM;
            o->act_from = b[BUF_SIG];
        } else if (stage + 1 < dec->cfg.n_stages) { /* the next stage's up-conv input */
            const gp_codec_dec_stage *nx = &dec->stages[stage + 1];
            act_into(d, i, &nx->act, nx->up.hist, false);
            o->act_src = GP_DCONV_ACT_OF_ACC;
        } else { /* the post conv's input */
            act_into(d, i, &dec->post_act, dec->post.hist, false);
            o->act_src = GP_DCONV_ACT_OF_ACC;
        }
    }
}

static void run_res_layer(direct_step *d, int stage) {
    const gp_codec_decoder *dec = d->dec;
    const gp_codec_dec_stage *st = &dec->stages[stage];
    const int nk = dec->cfg.res.n_kernels, nd = dec->cfg.res.n_dilations;
    const int rows = d->bf16 ? (st->c_out + 1) / 2 : st->c_out;
    gp_pool *pool = dec->pool;
    for (int j = 0; j < nk; j++) {
        for (int m = 0; m < nd; m++) {
            const gp_codec_dec_block *b = &st->blocks[j * nd + m];
            prepare(d, &b->in_conv, rows);
            for (int i = 0; i < d->n; i++) act_into(d, i, &b->skip_act, b->skip_conv.hist, d->bf16);
            gp_dconv_run(&b->in_conv.packed, d->sig, d->n, d->len, pool);
            d->cur = !d->cur;
            prepare(d, &b->skip_conv, rows);
            skip_outputs(d, stage, j, m);
            gp_dconv_run(&b->skip_conv.packed, d->sig, d->n, d->len, pool);
            d->cur = !d->cur;
        }
    }
}

/* ---- the step ---- */

void gp_codec_direct_step(gp_codec_stream *const *s, int n, const float *const *latent, size_t ld,
                          size_t frames, float *const *pcm) {
    const gp_codec_decoder *dec = s[0]->dec;
    direct_step d = {.s = s, .n = n, .dec = dec, .cur = 0, .len = frames};
    /* pre_conv: the latent goes into the input buffer behind its left context */
    const int D = dec->cfg.input_dim;
    const size_t P = (size_t)dec->pre.hist;
    for (int i = 0; i < n; i++) {
        float *x = xbuf(&d, i, d.cur);
        for (int c = 0; c < D; c++)
            memcpy(x + (size_t)c * (P + frames) + P, latent[i] + (size_t)c * ld,
                   frames * sizeof(float));
    }
    prepare(&d, &dec->pre, D);
    for (int i = 0; i < n; i++) act_into(&d, i, &dec->stages[0].act, dec->stages[0].up.hist, false);
    gp_dconv_run(&dec->pre.packed, d.sig, n, d.len, dec->pool);
    d.cur = !d.cur;
    for (int st = 0; st < dec->cfg.n_stages; st++) {
        d.bf16 = dec->stage_type[st] == GP_DCONV_BF16;
        run_head(&d, &dec->stages[st]);
        run_res_layer(&d, st);
    }
    prepare(&d, &dec->post, dec->post.conv.c_in);
    for (int i = 0; i < n; i++) {
        d.sig[i].out.store = pcm[i];
        d.sig[i].out.ld = d.len;
    }
    gp_dconv_run(&dec->post.packed, d.sig, n, d.len, dec->pool);
    for (int i = 0; i < n; i++) {
        float *y = pcm[i];
        if (dec->cfg.output_activation == GP_CODEC_OUT_CLAMP) {
            for (size_t k = 0; k < d.len; k++)
                y[k] = y[k] < -1.0f ? -1.0f : y[k] > 1.0f ? 1.0f : y[k];
        } else {
            for (size_t k = 0; k < d.len; k++) y[k] = tanhf(y[k]);
        }
    }
}
