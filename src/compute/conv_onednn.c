/* conv_onednn.c — a gp_dconv convolution through oneDNN's bf16 convolution
 * (GP_DCONV_ONEDNN): AMX tiles on Intel Sapphire Rapids and later, where
 * the codec's f32 direct kernels are FMA-bound (issue 15).
 *
 * bf16 × bf16 products are exact in f32, so the f32 input is split into
 * bf16 terms as for the prefill's matmul (gp_onednn_split: three by
 * default, 24 bits as f32 has; GEPARD_ONEDNN_TERMS=2, two thirds of the work)
 * that enter the convolution as extra input channels — channels-last rows
 * [time][term · c_in + c] — against the weights repeated per term
 * ([c_out][term · c_in + c][tap], bf16): one primitive sums every term's
 * products. The error is then the weights' rounding to bf16: on the
 * real-size synthetic codec bf16 residual weights keep ~62 dB against the
 * f32 decoder (codec_bench), so only the residual layers take this path.
 *
 * Time is split between the pool's workers, oneDNN single-threaded inside
 * each (a worker's range reads its own window of the input, history
 * included); one primitive per range length is kept per convolution. The
 * result goes through gp_dconv_out's epilogue here, in the direct kernels'
 * order (bias, residual, store, branch accumulator, activation). Selected
 * per stage with the stage mix letter 'o' (gp_codec_decoder_use_kernels),
 * for measurements. */
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/log.h"
#include "compute/conv_direct.h"
#include "compute/onednn_matmul.h"

#define ONEDNN_CONV_LENGTHS 4 /* range lengths remembered per convolution */

typedef struct conv_prim {
    int len;                /* output samples; 0 = unused */
    dnnl_primitive_t prim;  /* NULL with len set: oneDNN could not build it */
    dnnl_memory_desc_t wmd; /* the weights' layout this primitive asked for */
    void *weights;          /* in that layout */
    unsigned long last_use;
} conv_prim;

struct gp_dconv_onednn {
    int terms;
    uint16_t *plain; /* [c_out][terms · c_in][kernel] bf16 */
    conv_prim prims[ONEDNN_CONV_LENGTHS];
    unsigned long uses;
    pthread_mutex_t lock;
};

static void prim_clear(conv_prim *p) {
    if (p->prim) dnnl_primitive_destroy(p->prim);
    free(p->weights);
    memset(p, 0, sizeof *p);
}

static const conv_prim *conv_prim_for(const gp_dconv *conv, int len);

/* The primitive descriptor for `len` outputs (weights layout `wmd`, or any). */
static dnnl_status_t conv_pd(const gp_dconv *conv, int terms, int len,
                             const dnnl_memory_desc_t *wmd, dnnl_primitive_desc_t *pd) {
    const int ci = terms * conv->c_in, win = len + (conv->kernel - 1) * conv->dilation;
    dnnl_memory_desc_t src, wei, bias, dst;
    dnnl_dims_t sd = {1, ci, win}, wd = {conv->c_out, ci, conv->kernel}, bd = {conv->c_out},
                dd = {1, conv->c_out, len};
    dnnl_dims_t strides = {1}, dil = {conv->dilation - 1}, pad = {0};
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&src, 3, sd, dnnl_bf16, dnnl_nwc);
    if (st == dnnl_success && wmd)
        wei = *wmd;
    else if (st == dnnl_success)
        st = dnnl_memory_desc_init_by_tag(&wei, 3, wd, dnnl_bf16, dnnl_format_tag_any);
    if (st == dnnl_success) st = dnnl_memory_desc_init_by_tag(&bias, 1, bd, dnnl_f32, dnnl_a);
    if (st == dnnl_success) st = dnnl_memory_desc_init_by_tag(&dst, 3, dd, dnnl_f32, dnnl_nwc);
    dnnl_convolution_desc_t cd;
    if (st == dnnl_success)
        st = dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                                        dnnl_convolution_direct, &src, &wei, &bias,
                                                        &dst, strides, dil, pad, pad);
    /* the scratchpad is the caller's (one per worker): oneDNN's own is shared
     * between threads running primitives at once */
    dnnl_primitive_attr_t attr = NULL;
    if (st == dnnl_success) st = dnnl_primitive_attr_create(&attr);
    if (st == dnnl_success)
        st = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (st == dnnl_success)
        st = dnnl_primitive_desc_create(pd, &cd, attr, gp_onednn_engine(), NULL);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return st;
}

/* The plain weights reordered into p->wmd (p->weights). */
static dnnl_status_t weights_build(const gp_dconv *conv, const struct gp_dconv_onednn *o,
                                   conv_prim *p) {
    p->weights = malloc(dnnl_memory_desc_get_size(&p->wmd));
    if (!p->weights) return dnnl_out_of_memory;
    dnnl_memory_desc_t pmd;
    dnnl_dims_t wd = {conv->c_out, o->terms * conv->c_in, conv->kernel};
    dnnl_status_t st = dnnl_memory_desc_init_by_tag(&pmd, 3, wd, dnnl_bf16, dnnl_oiw);
    dnnl_memory_t pmem = NULL, wmem = NULL;
    if (st == dnnl_success) st = dnnl_memory_create(&pmem, &pmd, gp_onednn_engine(), o->plain);
    if (st == dnnl_success) st = dnnl_memory_create(&wmem, &p->wmd, gp_onednn_engine(), p->weights);
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    if (st == dnnl_success)
        st = dnnl_reorder_primitive_desc_create(&rpd, &pmd, gp_onednn_engine(), &p->wmd,
                                                gp_onednn_engine(), NULL);
    if (st == dnnl_success) st = dnnl_primitive_create(&reorder, rpd);
    dnnl_stream_t stream = st == dnnl_success ? gp_onednn_thread_stream() : NULL;
    if (st == dnnl_success && !stream) st = dnnl_runtime_error;
    if (st == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, pmem}, {DNNL_ARG_TO, wmem}};
        st = dnnl_primitive_execute(reorder, stream, 2, args);
        if (st == dnnl_success) st = dnnl_stream_wait(stream);
    }
    if (reorder) dnnl_primitive_destroy(reorder);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (pmem) dnnl_memory_destroy(pmem);
    if (wmem) dnnl_memory_destroy(wmem);
    return st;
}

int gp_dconv_onednn_pack(gp_dconv *out, const gp_conv1d *conv, gp_error *err) {
    memset(out, 0, sizeof *out);
    if (conv->stride != 1)
        return gp_fail(err, GEPARD_ERR_INTERNAL, "convolution needs stride 1, not %d",
                       conv->stride);
    if (!gp_onednn_engine())
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED, "oneDNN has no CPU engine here");
    out->c_in = conv->c_in;
    out->c_out = conv->c_out;
    out->kernel = conv->kernel;
    out->dilation = conv->dilation;
    out->type = GP_DCONV_ONEDNN;
    struct gp_dconv_onednn *o = calloc(1, sizeof *o);
    const int terms = gp_onednn_terms(), ci = terms * conv->c_in;
    const size_t plain = (size_t)conv->c_out * (size_t)ci * (size_t)conv->kernel;
    out->onednn = o;
    out->bias = gp_aligned_calloc((size_t)conv->c_out, sizeof(float));
    if (o) o->plain = malloc(plain * sizeof *o->plain);
    if (!o || !o->plain || !out->bias) {
        gp_dconv_free(out);
        return gp_fail_oom(err, "oneDNN convolution weights", plain * 2);
    }
    o->terms = terms;
    pthread_mutex_init(&o->lock, NULL);
    for (int c = 0; c < conv->c_out; c++)
        for (int i = 0; i < ci; i++)
            for (int t = 0; t < conv->kernel; t++)
                o->plain[((size_t)c * ci + i) * conv->kernel + t] = gp_f32_to_bf16(
                    conv->weight[((size_t)c * conv->c_in + i % conv->c_in) * conv->kernel + t]);
    memcpy(out->bias, conv->bias, (size_t)conv->c_out * sizeof(float));
    /* whether oneDNN builds one here at all (a primitive of 64 outputs, kept) */
    if (!conv_prim_for(out, 64)) {
        gp_dconv_free(out);
        return gp_fail(err, GEPARD_ERR_UNSUPPORTED, "oneDNN cannot build a bf16 convolution here");
    }
    return GEPARD_OK;
}

void gp_dconv_onednn_free(struct gp_dconv_onednn *o) {
    if (!o) return;
    for (int i = 0; i < ONEDNN_CONV_LENGTHS; i++) prim_clear(&o->prims[i]);
    free(o->plain);
    pthread_mutex_destroy(&o->lock);
    free(o);
}

/* The primitive for `len` outputs: remembered, or built with the weights in the
 * layout it asks for (least recently used replaced). NULL when oneDNN cannot. */
static const conv_prim *conv_prim_for(const gp_dconv *conv, int len) {
    struct gp_dconv_onednn *o = conv->onednn;
    pthread_mutex_lock(&o->lock);
    conv_prim *oldest = &o->prims[0], *hit = NULL;
    for (int i = 0; i < ONEDNN_CONV_LENGTHS && !hit; i++) {
        conv_prim *p = &o->prims[i];
        if (p->len == len) hit = p;
        if (p->last_use < oldest->last_use) oldest = p;
    }
    if (!hit) {
        prim_clear(oldest);
        dnnl_primitive_desc_t pd = NULL;
        dnnl_status_t st = conv_pd(conv, o->terms, len, NULL, &pd);
        if (st == dnnl_success) {
            oldest->wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
            st = weights_build(conv, o, oldest);
        }
        if (st == dnnl_success) st = dnnl_primitive_create(&oldest->prim, pd);
        if (pd) dnnl_primitive_desc_destroy(pd);
        if (st != dnnl_success) prim_clear(oldest);
        oldest->len = len; /* remembered even when it failed: not rebuilt per call */
        hit = oldest;
    }
    hit->last_use = ++o->uses;
    pthread_mutex_unlock(&o->lock);
    return hit->prim ? hit : NULL;
}

typedef struct conv_job {
    const gp_dconv *conv;
    const gp_dconv_signal *sig;
    size_t n;
    int parts; /* time ranges per signal */
    int failed;
} conv_job;

static void conv_task(void *ctx, int task, int worker) {
    (void)worker;
    conv_job *j = ctx;
    const gp_dconv *conv = j->conv;
    const struct gp_dconv_onednn *o = conv->onednn;
    const gp_dconv_signal *s = &j->sig[task / j->parts];
    const int part = task % j->parts;
    const size_t t0 = j->n * (size_t)part / (size_t)j->parts,
                 t1 = j->n * (size_t)(part + 1) / (size_t)j->parts, len = t1 - t0;
    if (len == 0) return;
    const int C = conv->c_in, ci = o->terms * C, C_out = conv->c_out;
    const size_t win = len + (size_t)(conv->kernel - 1) * conv->dilation;
    const size_t src_bytes = (win * ci * 2 + 63) / 64 * 64, dst_floats = len * (size_t)C_out;
    dnnl_stream_t stream = gp_onednn_thread_stream();
    const conv_prim *cp = stream ? conv_prim_for(conv, (int)len) : NULL;
    const_dnnl_primitive_desc_t pd = NULL; /* the primitive's own */
    if (cp && dnnl_primitive_get_primitive_desc(cp->prim, &pd) != dnnl_success) cp = NULL;
    const dnnl_memory_desc_t *pad_md =
        cp ? dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0) : NULL;
    const size_t pad_bytes = pad_md ? (dnnl_memory_desc_get_size(pad_md) + 63) / 64 * 64 : 0;
    /* buffer 1: a matmul slice's results on a worker, never in use across a task */
    char *buf =
        cp ? gp_onednn_thread_buffer(1, pad_bytes + src_bytes + 2 * dst_floats * sizeof(float))
           : NULL;
    if (!buf) cp = NULL;
    if (!cp) {
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    void *pad = buf;
    uint16_t *src = (uint16_t *)(buf + pad_bytes);
    float *dst = (float *)(buf + pad_bytes + src_bytes), *v = dst + dst_floats;
    /* channels-last rows of the window, each value as its bf16 terms */
    const float *x = (const float *)s->x + t0;
    for (int c = 0; c < C; c++) {
        const float *row = x + (size_t)c * s->xs;
        for (size_t t = 0; t < win; t++) gp_onednn_split(row[t], o->terms, src + t * ci + c, C);
    }
    dnnl_memory_t ms = NULL, mw = NULL, mb = NULL, md = NULL, mp = NULL;
    dnnl_status_t st = dnnl_memory_create(
        &ms, dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), gp_onednn_engine(), src);
    if (st == dnnl_success) st = dnnl_memory_create(&mp, pad_md, gp_onednn_engine(), pad);
    if (st == dnnl_success) st = dnnl_memory_create(&mw, &cp->wmd, gp_onednn_engine(), cp->weights);
    if (st == dnnl_success)
        st = dnnl_memory_create(&mb, dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1),
                                gp_onednn_engine(), conv->bias);
    if (st == dnnl_success)
        st = dnnl_memory_create(&md, dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0),
                                gp_onednn_engine(), dst);
    if (st == dnnl_success) {
        dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, ms},
                                   {DNNL_ARG_WEIGHTS, mw},
                                   {DNNL_ARG_BIAS, mb},
                                   {DNNL_ARG_DST, md},
                                   {DNNL_ARG_SCRATCHPAD, mp}};
        st = dnnl_primitive_execute(cp->prim, stream, 5, args);
        if (st == dnnl_success) st = dnnl_stream_wait(stream);
    }
    if (ms) dnnl_memory_destroy(ms);
    if (mw) dnnl_memory_destroy(mw);
    if (mb) dnnl_memory_destroy(mb);
    if (md) dnnl_memory_destroy(md);
    if (mp) dnnl_memory_destroy(mp);
    if (st != dnnl_success) {
        __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int c = 0; c < C_out; c++)
        for (size_t t = 0; t < len; t++) v[(size_t)c * len + t] = dst[t * C_out + c];
    gp_dconv_epilogue_rows(conv, &s->out, v, len, 0, C_out, t0, len, false);
}

void gp_dconv_onednn_run(const gp_dconv *conv, const gp_dconv_signal *sig, int n_sig, size_t n,
                         gp_pool *pool) {
    const int threads = gp_pool_size(pool);
    /* ranges of at least 64 outputs, one per worker at most */
    int parts = (int)(n / 64);
    if (parts > threads) parts = threads;
    if (parts < 1) parts = 1;
    conv_job job = {conv, sig, n, parts, 0};
    gp_pool_parallel_for(pool, n_sig * parts, conv_task, &job);
    if (job.failed) GP_WARN("oneDNN convolution failed: its outputs are not written");
}
