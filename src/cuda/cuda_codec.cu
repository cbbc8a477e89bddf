/* cuda_codec.cu — the codec decoder on the GPU behind device_plugin.h's
 * gp_dev_codec: the weights (one device arena, convolution taps reordered
 * for the implicit GEMM), the streams' state slots, and the decode call that
 * walks the layers of CODEC.md §A for a batch of streams.
 *
 * State: a slot holds every causal layer's history twice (the "current" and
 * the "next" copy); a decode reads one and writes the other and the slot's
 * parity flips, so streams at different positions share every kernel.
 * The calls themselves (pieces, graphs, the queue) are cuda_codec_calls.cu's. Within
 * a stage the residual blocks run side by side on CUDA streams of their own
 * (codec_branch), their sums into the stage output kept in block order.
 * Calls of few frame columns (a lone stream's frame) have most windows
 * written by the convolution before them instead of a kernel each (fused
 * windows, below).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_codec.h"

#define CODEC_SLOT_CHUNK 32 /* slots allocated together */

int gp_cuda_codec_flat_store = 2; /* cuda_codec.h */

/* ---------------- the weights ---------------- */

/* Parameters are packed into one host buffer (sizes first, then copies) and
 * uploaded once; `dev` is the arena's device base. */
typedef struct param_pack {
    char *host; /* NULL while sizing */
    size_t used;
    char *dev;
    bool half; /* also an FP16 copy of every convolution weight */
} param_pack;

static const float *pack_floats(param_pack *p, const float *src, size_t n) {
    const size_t at = p->used;
    p->used += (n * sizeof(float) + 255) & ~(size_t)255;
    if (!p->host) return NULL;
    memcpy(p->host + at, src, n * sizeof(float));
    return (const float *)(p->dev + at);
}

static void pack_act(param_pack *p, const gp_dev_codec_act *a, gp_cuda_codec_act *out) {
    out->kind = a->kind;
    out->n_snake = a->n_snake;
    out->slope = a->slope;
    out->alpha = a->n_snake ? pack_floats(p, a->alpha, (size_t)a->n_snake) : NULL;
    out->inv_alpha = a->n_snake ? pack_floats(p, a->inv_alpha, (size_t)a->n_snake) : NULL;
}

/* [c_out][c_in][k] → [c_out][k][c_pad], zeros in the padding channels (and
 * the same in FP16 after it when the codec computes in FP16) */
static void pack_conv(param_pack *p, const gp_dev_codec_conv *c, gp_cuda_codec_conv *out) {
    out->c_in = c->c_in;
    out->c_pad = (c->c_in + 7) / 8 * 8;
    out->c_out = c->c_out;
    out->kernel = c->kernel;
    out->dilation = c->dilation;
    out->stride = c->stride > 0 ? c->stride : 1;
    out->hist = (c->kernel - 1) * c->dilation;
    const size_t n = (size_t)c->c_out * out->c_pad * c->kernel;
    const size_t at = p->used;
    p->used += (n * sizeof(float) + 255) & ~(size_t)255;
    if (p->host) {
        float *dst = (float *)(p->host + at);
        memset(dst, 0, n * sizeof(float));
        for (int o = 0; o < c->c_out; o++)
            for (int i = 0; i < c->c_in; i++)
                for (int t = 0; t < c->kernel; t++)
                    dst[((size_t)o * c->kernel + t) * out->c_pad + i] =
                        c->weight[((size_t)o * c->c_in + i) * c->kernel + t];
        out->weight = (const float *)(p->dev + at);
    }
    out->weight_h = NULL;
    if (p->half) {
        const size_t at_h = p->used;
        p->used += (n * sizeof(__half) + 255) & ~(size_t)255;
        if (p->host) {
            const float *src = (const float *)(p->host + at);
            __half *dst = (__half *)(p->host + at_h);
            for (size_t i = 0; i < n; i++) dst[i] = __float2half_rn(src[i]);
            out->weight_h = (const __half *)(p->dev + at_h);
        }
    }
    out->bias = pack_floats(p, c->bias, (size_t)c->c_out);
}

static void pack_convt(param_pack *p, const gp_dev_codec_convt *c, gp_cuda_codec_convt *out) {
    out->c_in = c->c_in;
    out->c_out = c->c_out;
    out->kernel = c->kernel;
    out->stride = c->stride;
    out->groups = c->groups;
    out->hist = (c->kernel - 1) / c->stride;
    out->weight =
        pack_floats(p, c->weight, (size_t)c->c_in * (c->c_out / c->groups) * (size_t)c->kernel);
    out->bias = pack_floats(p, c->bias, (size_t)c->c_out);
}

static void pack_all(gp_dev_codec *c, const gp_dev_codec_desc *d, param_pack *p) {
    pack_conv(p, &d->pre, &c->pre);
    for (int i = 0; i < d->n_stages; i++) {
        const gp_dev_codec_stage *ds = &d->stages[i];
        codec_stage *st = &c->stages[i];
        pack_act(p, &ds->act, &st->act);
        pack_convt(p, &ds->up, &st->up);
        for (int b = 0; b < d->n_kernels * d->n_dilations; b++) {
            pack_act(p, &ds->blocks[b].in_act, &st->blocks[b].in_act);
            pack_act(p, &ds->blocks[b].skip_act, &st->blocks[b].skip_act);
            pack_conv(p, &ds->blocks[b].in_conv, &st->blocks[b].in_conv);
            pack_conv(p, &ds->blocks[b].skip_conv, &st->blocks[b].skip_conv);
        }
    }
    pack_act(p, &d->post_act, &c->post_act);
    pack_conv(p, &d->post, &c->post);
    if (!d->enc.present) return;
    const gp_dev_codec_enc_desc *e = &d->enc;
    pack_conv(p, &e->pre, &c->enc.pre);
    for (int i = 0; i < e->n_stages; i++) {
        codec_enc_stage *st = &c->enc.stages[i];
        for (int b = 0; b < d->n_kernels * d->n_dilations; b++) {
            pack_act(p, &e->stages[i].blocks[b].in_act, &st->blocks[b].in_act);
            pack_act(p, &e->stages[i].blocks[b].skip_act, &st->blocks[b].skip_act);
            pack_conv(p, &e->stages[i].blocks[b].in_conv, &st->blocks[b].in_conv);
            pack_conv(p, &e->stages[i].blocks[b].skip_conv, &st->blocks[b].skip_conv);
        }
        pack_act(p, &e->stages[i].act, &st->act);
        pack_conv(p, &e->stages[i].down, &st->down);
    }
    pack_act(p, &e->post_act, &c->enc.post_act);
    pack_conv(p, &e->post, &c->enc.post);
}

/* Place every layer's history in the state and size the work buffers. */
static void codec_layout(gp_dev_codec *c) {
    size_t off = 0, x = (size_t)c->input_dim, win = 0;
    const size_t M = CODEC_MAX_COLS;
    int R = 1;
    size_t partial = 0, tickets = 1;
    const char *e1 = getenv("GEPARD_CUDA_CODEC_SPLIT_CHUNKS"),
               *e2 = getenv("GEPARD_CUDA_CODEC_TILE");
    const bool f16 = c->math == GP_CODEC_MATH_F16;
    const int per_split = e1 && atoi(e1) > 0 ? atoi(e1)
                          : f16              ? GP_CUDA_CODEC_CHUNKS_PER_SPLIT_F16
                                             : GP_CUDA_CODEC_CHUNKS_PER_SPLIT;
    /* the encoder runs f32 whatever the decoder's precision */
    const int enc_per_split = e1 && atoi(e1) > 0 ? atoi(e1) : GP_CUDA_CODEC_CHUNKS_PER_SPLIT;
    int widest = e2 && (atoi(e2) == 32 || atoi(e2) == 64 || atoi(e2) == 128) ? atoi(e2)
                 : c->math == GP_CODEC_MATH_F16 ? GP_CUDA_CODEC_WIDEST_TILE_F16
                                                : GP_CUDA_CODEC_WIDEST_TILE;
    if (c->math != GP_CODEC_MATH_F16 && widest > 64) widest = 64; /* no 128-row TF32/f32 tiles */
    const int enc_widest = widest > 64 ? 64 : widest;             /* the encoder runs f32 */
    const char *e3 = getenv("GEPARD_CUDA_CODEC_SLICE");           /* FP16 staging: 32 or 64 pairs */
    const int slice = e3 && (atoi(e3) == 32 || atoi(e3) == 64) ? atoi(e3) : GP_CUDA_CODEC_SLICE_F16;
    auto place = [&](gp_cuda_codec_conv *cv, int rate) {
        cv->st_off = off;
        off += (size_t)cv->hist * cv->c_in;
        const size_t w = (size_t)cv->c_pad * ((size_t)cv->hist + (size_t)rate);
        if (w > win) win = w;
        gp_cuda_codec_conv_split(cv, per_split, widest);
        cv->slice = slice;
        const int cols = (int)M * rate;
        const size_t p = gp_cuda_codec_conv_partial_floats(cv, cols);
        const size_t t = gp_cuda_codec_conv_tiles(cv, cols);
        if (p > partial) partial = p;
        if (t > tickets) tickets = t;
    };
    place(&c->pre, 1);
    if ((size_t)c->pre.c_out > x) x = (size_t)c->pre.c_out;
    for (int i = 0; i < c->n_stages; i++) {
        codec_stage *st = &c->stages[i];
        st->up.st_off = off;
        off += (size_t)st->up.hist * st->up.c_in;
        R *= st->rate;
        if ((size_t)R * st->c_out > x) x = (size_t)R * st->c_out;
        for (int b = 0; b < c->nk * c->nd; b++) {
            place(&st->blocks[b].in_conv, R);
            place(&st->blocks[b].skip_conv, R);
        }
    }
    place(&c->post, R);
    if (c->enc.present) { /* encoder convs: only their reduction cut (buffers per call) */
        codec_encoder *e = &c->enc;
        gp_cuda_codec_conv_split(&e->pre, enc_per_split, enc_widest);
        gp_cuda_codec_conv_split(&e->post, enc_per_split, enc_widest);
        for (int i = 0; i < e->n_stages; i++) {
            for (int b = 0; b < c->nk * c->nd; b++) {
                gp_cuda_codec_conv_split(&e->stages[i].blocks[b].in_conv, enc_per_split,
                                         enc_widest);
                gp_cuda_codec_conv_split(&e->stages[i].blocks[b].skip_conv, enc_per_split,
                                         enc_widest);
            }
            gp_cuda_codec_conv_split(&e->stages[i].down, enc_per_split, enc_widest);
        }
    }
    c->state_floats = off ? off : 1;
    c->x_floats = M * x;
    c->win_floats = M * win;
    c->partial_floats = partial ? partial : 1;
    /* narrow tiles (cuda_codec_mma.cu) take a ticket each, but never more
     * tiles than multiprocessors */
    c->n_tickets = tickets > 1024 ? tickets : 1024;
}

/* ---------------- fused windows ---------------- */

/* Frame columns (streams × frames) up to which a call writes its residual
 * units' windows from the convolutions' epilogues (GEPARD_CUDA_CODEC_FUSED_WINDOWS
 * overrides; 0: window kernels for every call). Of a stage's 6 windows on
 * the k = 11 branch's path 5 are no longer kernels of their own. H200, `bench
 * --codec-only --frames 64`, alternating: one stream 0.466 → 0.441-0.444 ms of
 * GPU time per frame; 2 to 8 streams the same within noise (3.8k, 6.1k, 9.7k
 * frames/s); 16 streams 16.4-16.5k against 16.1-16.2k with them fused, so
 * calls of 16 keep their window kernels. */
#define CODEC_FUSE_COLS 8

/* A fused window's halves for calls of up to F frame columns: n streams of T
 * frames with n·T ≤ F have n · (hist + T·R) ≤ F · (hist + R) rows. */
static size_t fused_win_halves(const gp_cuda_codec_conv *cv, int F, int R) {
    return ((size_t)F * ((size_t)cv->hist + (size_t)R) * (size_t)cv->c_pad + 63) & ~(size_t)63;
}

/* Point every fused window into base (none when base is NULL); the halves they take. */
static size_t codec_fused_place(gp_dev_codec *c, __half *base) {
    size_t at = 0;
    int R = 1;
    for (int i = 0; i < c->n_stages; i++) {
        codec_stage *st = &c->stages[i];
        R *= st->rate;
        for (int b = 0; b < c->nk * c->nd; b++) {
            codec_block *bl = &st->blocks[b];
            bl->in_win = NULL;
            if (b % c->nd) { /* a branch's first block reads the transposed convolution's output */
                bl->in_win = base ? base + at : NULL;
                at += fused_win_halves(&bl->in_conv, c->fuse_cols, R);
            }
            bl->skip_win = base ? base + at : NULL;
            at += fused_win_halves(&bl->skip_conv, c->fuse_cols, R);
        }
    }
    return at;
}

/* Fused windows for this codec, if its shape and precision allow them. */
static cudaError_t codec_fused_alloc(gp_dev_codec *c) {
    const char *v = getenv("GEPARD_CUDA_CODEC_FUSED_WINDOWS");
    int F = v ? atoi(v) : CODEC_FUSE_COLS;
    if (F < 0) F = 0;
    if (F > CODEC_MAX_COLS) F = CODEC_MAX_COLS;
    if (c->math != GP_CODEC_MATH_F16 ||
        c->n_stages * c->nk * (2 * c->nd - 1) > GP_CUDA_CODEC_MAX_FUSED)
        F = 0;
    c->fuse_cols = F;
    if (!F) return cudaSuccess;
    const size_t halves = codec_fused_place(c, NULL);
    cudaError_t e = cudaMalloc(&c->fw, halves * sizeof(__half));
    /* the padding channels stay zero: nothing writes them after this */
    if (e == cudaSuccess) e = cudaMemset(c->fw, 0, halves * sizeof(__half));
    if (e != cudaSuccess) return e;
    codec_fused_place(c, c->fw);
    c->bytes += halves * sizeof(__half);
    return cudaSuccess;
}

/* The older rows of every fused window for n streams of T frames. */
static void codec_histories(gp_dev_codec *c, int n, int T, const float *const *st_in,
                            float *const *st_out, cudaStream_t s) {
    gp_cuda_codec_histories h;
    h.n_layers = 0;
    auto add = [&](__half *win, const gp_cuda_codec_conv *cv) {
        h.l[h.n_layers++] =
            (gp_cuda_codec_history){win, cv->hist, T, cv->c_in, cv->c_pad, (unsigned)cv->st_off};
    };
    for (int i = 0; i < c->n_stages; i++) {
        codec_stage *st = &c->stages[i];
        T *= st->rate;
        for (int b = 0; b < c->nk * c->nd; b++) {
            codec_block *bl = &st->blocks[b];
            if (bl->in_win) add(bl->in_win, &bl->in_conv);
            add(bl->skip_win, &bl->skip_conv);
        }
    }
    gp_cuda_codec_run_histories(&h, n, st_in, st_out, s);
}

/* What an epilogue needs to write cv's fused window (act: cv's input activation). */
static gp_cuda_codec_next_window next_window(__half *win, const gp_cuda_codec_conv *cv,
                                             const gp_cuda_codec_act *act, int T,
                                             float *const *st_out) {
    gp_cuda_codec_next_window w;
    w.win = win;
    w.hist = cv->hist;
    w.cp = cv->c_pad;
    w.T = T;
    w.st_off = (unsigned)cv->st_off;
    w.act = *act;
    w.st_out = st_out;
    return w;
}

static void codec_release(gp_dev_codec *c) {
    if (!c) return;
    cudaSetDevice(c->device);
    if (c->stream) cudaStreamSynchronize(c->stream);
    for (int i = 0; i < c->n_chunks; i++) cudaFree(c->chunks[i]);
    free(c->chunks);
    free(c->slot_state);
    free(c->parity);
    free(c->used);
    cudaFree(c->params);
    float *bufs[] = {c->sig, c->acc, c->run, c->tmp, c->win, c->pcm, c->lat};
    for (float *b : bufs) cudaFree(b);
    cudaFree(c->ptrs);
    cudaFree(c->partial);
    cudaFree(c->tickets);
    cudaFree(c->dummy);
    cudaFree(c->fw);
    for (int b = 1; b < CODEC_MAX_BRANCHES; b++) {
        codec_branch *br = &c->br[b];
        if (br->stream) cudaStreamSynchronize(br->stream);
        float *owned[] = {br->run, br->tmp, br->win, br->partial};
        for (float *p : owned) cudaFree(p);
        cudaFree(br->tickets);
        if (br->stream) cudaStreamDestroy(br->stream);
    }
    for (codec_branch &br : c->br)
        if (br.done) cudaEventDestroy(br.done);
    if (c->fork) cudaEventDestroy(c->fork);
    for (int i = 0; i < CODEC_GRAPHS; i++)
        if (c->graphs[i]) cudaGraphExecDestroy(c->graphs[i]);
    for (int i = 0; i < CODEC_QUEUE_PIECES; i++) {
        cudaFreeHost(c->h_in[i]);
        cudaFreeHost(c->h_pcm[i]);
    }
    if (c->t0) cudaEventDestroy(c->t0);
    if (c->t1) cudaEventDestroy(c->t1);
    if (c->stream) cudaStreamDestroy(c->stream);
    for (int i = 0; i < GP_DEV_CODEC_MAX_STAGES; i++) {
        free(c->stages[i].blocks);
        free(c->enc.stages[i].blocks);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static int codec_check_desc(const gp_dev_codec_desc *d, gp_dev_status *st) {
    if (d->n_stages < 1 || d->n_stages > GP_DEV_CODEC_MAX_STAGES || d->n_kernels < 1 ||
        d->n_dilations < 1 || d->input_dim < 1 || d->samples_per_frame < 1)
        return gp_cuda_fail(st, GEPARD_ERR_INVALID_ARGUMENT,
                            "codec description out of range for the GPU decoder");
    if (d->post.c_out != 1)
        return gp_cuda_fail(st, GEPARD_ERR_UNSUPPORTED,
                            "the GPU decoder needs a one-channel output (post_conv has %d)",
                            d->post.c_out);
    int R = 1;
    for (int i = 0; i < d->n_stages; i++) {
        const gp_dev_codec_convt *u = &d->stages[i].up;
        if (u->groups < 1 || u->c_in % u->groups || u->c_out % u->groups || u->stride < 1)
            return gp_cuda_fail(st, GEPARD_ERR_INVALID_ARGUMENT,
                                "codec stage %d: bad transposed convolution shape", i);
        if ((u->c_in / u->groups) * ((u->kernel - 1) / u->stride + 1) > GP_CUDA_CODEC_CONVT_CACHE)
            return gp_cuda_fail(st, GEPARD_ERR_UNSUPPORTED,
                                "codec stage %d: the GPU decoder's transposed convolution takes at "
                                "most %d inputs per output (this one has %d channels per group, "
                                "kernel %d, stride %d); decode on the CPU (--codec-device cpu)",
                                i, GP_CUDA_CODEC_CONVT_CACHE, u->c_in / u->groups, u->kernel,
                                u->stride);
        R *= u->stride;
    }
    if (R != d->samples_per_frame)
        return gp_cuda_fail(st, GEPARD_ERR_INVALID_ARGUMENT,
                            "codec rates give %d samples per frame, not %d", R,
                            d->samples_per_frame);
    return 0;
}

extern "C" int gp_cuda_codec_create(const gp_dev_codec_desc *d, gp_dev_codec **out,
                                    gp_dev_status *st) {
    *out = NULL;
    int rc = codec_check_desc(d, st);
    if (rc) return rc;
    GP_CUDA_TRY(cudaSetDevice(d->device), "selecting the GPU");
    GP_CUDA_TRY(gp_cuda_codec_kernels_init(), "configuring the codec kernels");
    gp_dev_codec *c = (gp_dev_codec *)calloc(1, sizeof *c);
    if (!c) return gp_cuda_fail(st, GEPARD_ERR_NOMEM, "out of memory for the GPU codec");
    pthread_mutex_init(&c->lock, NULL);
    c->device = d->device;
    c->math = d->precision == GP_DEV_CODEC_TF32  ? GP_CODEC_MATH_TF32
              : d->precision == GP_DEV_CODEC_F16 ? GP_CODEC_MATH_F16
                                                 : GP_CODEC_MATH_FMA;
    c->input_dim = d->input_dim;
    c->spf = d->samples_per_frame;
    c->n_stages = d->n_stages;
    c->nk = d->n_kernels;
    c->nd = d->n_dilations;
    c->clamp = d->clamp_output;
    for (int i = 0; i < d->n_stages; i++) {
        c->stages[i].c_in = d->stages[i].up.c_in;
        c->stages[i].c_out = d->stages[i].up.c_out;
        c->stages[i].rate = d->stages[i].up.stride;
        c->stages[i].blocks = (codec_block *)calloc((size_t)(c->nk * c->nd), sizeof(codec_block));
        if (!c->stages[i].blocks) {
            codec_release(c);
            return gp_cuda_fail(st, GEPARD_ERR_NOMEM, "out of memory for the GPU codec");
        }
    }
    if (d->enc.present) {
        if (d->enc.n_stages < 1 || d->enc.n_stages > GP_DEV_CODEC_MAX_STAGES) {
            codec_release(c);
            return gp_cuda_fail(st, GEPARD_ERR_INVALID_ARGUMENT,
                                "encoder description out of range for the GPU");
        }
        c->enc.present = true;
        c->enc.causal = d->enc.causal != 0;
        c->enc.pad_mode = d->enc.pad_mode;
        c->enc.encoded_dim = d->enc.encoded_dim;
        c->enc.n_stages = d->enc.n_stages;
        for (int i = 0; i < d->enc.n_stages; i++) {
            c->enc.stages[i].blocks =
                (codec_block *)calloc((size_t)(c->nk * c->nd), sizeof(codec_block));
            if (!c->enc.stages[i].blocks) {
                codec_release(c);
                return gp_cuda_fail(st, GEPARD_ERR_NOMEM, "out of memory for the GPU codec");
            }
        }
    }
    param_pack p = {NULL, 0, NULL, c->math == GP_CODEC_MATH_F16};
    pack_all(c, d, &p); /* sizes only */
    const size_t bytes = p.used;
    cudaError_t e = cudaMalloc(&c->params, bytes);
    p.host = (char *)malloc(bytes);
    if (e != cudaSuccess || !p.host) {
        free(p.host);
        codec_release(c);
        return e != cudaSuccess ? gp_cuda_check(e, "codec weights", st)
                                : gp_cuda_fail(st, GEPARD_ERR_NOMEM, "out of host memory");
    }
    p.used = 0;
    p.dev = (char *)c->params;
    pack_all(c, d, &p);
    e = cudaMemcpy(c->params, p.host, bytes, cudaMemcpyHostToDevice);
    free(p.host);
    c->bytes = bytes;
    codec_layout(c);
    const size_t M = CODEC_MAX_COLS;
    if (e == cudaSuccess) e = gp_cuda_stream_create(&c->stream, GP_CUDA_STREAM_BULK);
    if (e == cudaSuccess) e = cudaEventCreate(&c->t0);
    if (e == cudaSuccess) e = cudaEventCreate(&c->t1);
    float **bufs[] = {&c->sig, &c->acc, &c->run, &c->tmp};
    for (float **b : bufs)
        if (e == cudaSuccess) e = cudaMalloc(b, c->x_floats * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc(&c->win, c->win_floats * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc(&c->pcm, M * c->spf * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc(&c->lat, M * c->input_dim * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc(&c->ptrs, 2 * M * sizeof(float *));
    for (int i = 0; i < CODEC_QUEUE_PIECES && e == cudaSuccess; i++) {
        e = cudaMallocHost(&c->h_in[i], 2 * M * sizeof(float *) + M * c->input_dim * sizeof(float));
        if (e == cudaSuccess) e = cudaMallocHost(&c->h_pcm[i], M * c->spf * sizeof(float));
    }
    if (e == cudaSuccess) e = cudaMalloc(&c->partial, c->partial_floats * sizeof(float));
    if (e == cudaSuccess) e = cudaMalloc(&c->tickets, c->n_tickets * sizeof(unsigned));
    if (e == cudaSuccess) e = cudaMemset(c->tickets, 0, c->n_tickets * sizeof(unsigned));
    if (e == cudaSuccess) e = cudaMalloc(&c->dummy, 2 * c->state_floats * sizeof(float));
    if (e == cudaSuccess) e = cudaMemset(c->dummy, 0, 2 * c->state_floats * sizeof(float));
    const char *g = getenv("GEPARD_CUDA_CODEC_GRAPHS");
    c->use_graphs = !(g && !strcmp(g, "0"));
    /* GEPARD_CUDA_CODEC_GRAPH_POW2=1: batches padded to the next power of two
     * (before 2026-12-02, fourth part; for measurements) */
    const char *pow2 = getenv("GEPARD_CUDA_CODEC_GRAPH_POW2");
    c->graph_pow2 = pow2 && !strcmp(pow2, "1");
    const char *ahead = getenv("GEPARD_CUDA_GRAPHS_AHEAD"); /* (cuda_codec_calls.cu) */
    c->graphs_ahead = !(ahead && !strcmp(ahead, "0"));
    const char *fs = getenv("GEPARD_CUDA_CODEC_FLAT_STORE");
    const char *fv = getenv("GEPARD_CUDA_CODEC_FLAT_VEC");
    gp_cuda_codec_flat_store = fs && !strcmp(fs, "0") ? 0 : fv && !strcmp(fv, "0") ? 1 : 2;
    /* GEPARD_CUDA_CODEC_HALF_SIGNALS=0: f32 inner signals (for measurements) */
    const char *hs = getenv("GEPARD_CUDA_CODEC_HALF_SIGNALS");
    c->half_tmp = hs ? strcmp(hs, "0") != 0 : GP_CUDA_CODEC_HALF_TMP;
    /* GEPARD_CUDA_CODEC_BRANCHES=0: the residual blocks one after another (for measurements) */
    const char *nb = getenv("GEPARD_CUDA_CODEC_BRANCHES");
    c->n_br = nb && !strcmp(nb, "0") ? 1 : c->nk <= CODEC_MAX_BRANCHES ? c->nk : 1;
    c->br[0] = (codec_branch){c->stream, c->run, c->tmp, c->win, c->partial, c->tickets, NULL};
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->fork, cudaEventDisableTiming);
    for (int b = 0; b < c->n_br && e == cudaSuccess; b++) {
        codec_branch *br = &c->br[b];
        e = cudaEventCreateWithFlags(&br->done, cudaEventDisableTiming);
        if (b == 0) continue;
        if (e == cudaSuccess) e = gp_cuda_stream_create(&br->stream, GP_CUDA_STREAM_BULK);
        if (e == cudaSuccess) e = cudaMalloc(&br->run, c->x_floats * sizeof(float));
        if (e == cudaSuccess) e = cudaMalloc(&br->tmp, c->x_floats * sizeof(float));
        if (e == cudaSuccess) e = cudaMalloc(&br->win, c->win_floats * sizeof(float));
        if (e == cudaSuccess) e = cudaMalloc(&br->partial, c->partial_floats * sizeof(float));
        if (e == cudaSuccess) e = cudaMalloc(&br->tickets, c->n_tickets * sizeof(unsigned));
        if (e == cudaSuccess) e = cudaMemset(br->tickets, 0, c->n_tickets * sizeof(unsigned));
        c->bytes +=
            (2 * c->x_floats + c->win_floats + c->partial_floats + c->n_tickets) * sizeof(float);
    }
    if (e == cudaSuccess) e = codec_fused_alloc(c);
    if (e != cudaSuccess) {
        rc = gp_cuda_check(e, "codec buffers", st);
        codec_release(c);
        return rc;
    }
    c->bytes += (4 * c->x_floats + c->win_floats + M * (c->spf + c->input_dim) + c->partial_floats +
                 2 * c->state_floats) *
                sizeof(float);
    *out = c;
    return 0;
}

extern "C" void gp_cuda_codec_free(gp_dev_codec *c) { codec_release(c); }

extern "C" size_t gp_cuda_codec_bytes(const gp_dev_codec *c) { return c ? c->bytes : 0; }

/* ---------------- slots ---------------- */

static int slot_zero(gp_dev_codec *c, int slot, gp_dev_status *st) {
    c->parity[slot] = 0;
    return gp_cuda_check(
        cudaMemsetAsync(c->slot_state[slot], 0, 2 * c->state_floats * sizeof(float), c->stream),
        "clearing a codec state", st);
}

static int slot_grow(gp_dev_codec *c, gp_dev_status *st) {
    const int cap = c->cap_slots + CODEC_SLOT_CHUNK;
    void *chunk = NULL;
    const size_t per = 2 * c->state_floats * sizeof(float);
    GP_CUDA_TRY(cudaMalloc(&chunk, per * CODEC_SLOT_CHUNK), "codec stream states");
    float **ss = (float **)realloc(c->slot_state, (size_t)cap * sizeof *ss);
    if (ss) c->slot_state = ss;
    unsigned char *par = ss ? (unsigned char *)realloc(c->parity, (size_t)cap) : NULL;
    if (par) c->parity = par;
    unsigned char *used = par ? (unsigned char *)realloc(c->used, (size_t)cap) : NULL;
    if (used) c->used = used;
    void **chunks =
        used ? (void **)realloc(c->chunks, (size_t)(c->n_chunks + 1) * sizeof(void *)) : NULL;
    if (!chunks) {
        cudaFree(chunk);
        return gp_cuda_fail(st, GEPARD_ERR_NOMEM, "out of host memory for codec states");
    }
    c->chunks = chunks;
    c->chunks[c->n_chunks++] = chunk;
    for (int i = 0; i < CODEC_SLOT_CHUNK; i++) {
        c->slot_state[c->cap_slots + i] = (float *)((char *)chunk + per * i);
        c->used[c->cap_slots + i] = 0;
        c->parity[c->cap_slots + i] = 0;
    }
    c->cap_slots = cap;
    return 0;
}

extern "C" int gp_cuda_codec_slot_open(gp_dev_codec *c, int *slot, gp_dev_status *st) {
    *slot = -1;
    GP_CUDA_TRY(cudaSetDevice(c->device), "selecting the GPU");
    pthread_mutex_lock(&c->lock);
    int s = 0;
    while (s < c->cap_slots && c->used[s]) s++;
    int rc = s == c->cap_slots ? slot_grow(c, st) : 0;
    if (rc == 0) rc = slot_zero(c, s, st);
    if (rc == 0) {
        c->used[s] = 1;
        *slot = s;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

extern "C" int gp_cuda_codec_slot_reset(gp_dev_codec *c, int slot, gp_dev_status *st) {
    GP_CUDA_TRY(cudaSetDevice(c->device), "selecting the GPU");
    pthread_mutex_lock(&c->lock);
    int rc = slot >= 0 && slot < c->cap_slots && c->used[slot]
                 ? slot_zero(c, slot, st)
                 : gp_cuda_fail(st, GEPARD_ERR_INVALID_ARGUMENT, "no codec state slot %d", slot);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

extern "C" void gp_cuda_codec_slot_close(gp_dev_codec *c, int slot) {
    pthread_mutex_lock(&c->lock);
    if (slot >= 0 && slot < c->cap_slots) c->used[slot] = 0;
    /* a queued decode of this slot keeps running; its samples go nowhere */
    for (int i = 0; c->queued && i < c->queued_n; i++)
        if (c->queued_slots[i] == slot) c->queued_pcm[i] = NULL;
    pthread_mutex_unlock(&c->lock);
}

/* ---------------- decoding ---------------- */

/* The layers for n streams of T frames (cuda_codec.h). */
void gp_cuda_codec_run_layers(gp_dev_codec *c, int n, int T) {
    cudaStream_t s = c->stream;
    const float *const *in = (const float *const *)c->ptrs;
    float *const *outp = c->ptrs + CODEC_MAX_COLS;
    const gp_cuda_codec_math tc = c->math;
    const bool half = tc == GP_CODEC_MATH_F16; /* FP16 windows */
    const bool half_tmp = half && c->half_tmp;
    const bool fused = half && c->fuse_cols > 0 && n * T <= c->fuse_cols;
    if (fused) codec_histories(c, n, T, in, outp, s);
    gp_cuda_codec_act ident = {GP_DEV_ACT_IDENTITY, 0, 0.0f, NULL, NULL};
    gp_cuda_codec_run_window(c->lat, false, n, T, c->input_dim, c->pre.c_pad, c->pre.hist, &ident,
                             in, outp, c->pre.st_off, c->win, half, s);
    gp_cuda_codec_epilogue ep = gp_cuda_codec_ep(GP_CODEC_EP_STORE, c->sig, NULL, 0, 0.0f, false);
    gp_cuda_codec_run_conv(&c->pre, c->win, n, T, &ep, tc, c->partial, c->tickets, s);
    /* sig: the stage's input, acc: its output (the blocks' average); branch
     * 0's running signal rotates with them, the other branches own theirs */
    float *sig = c->sig, *acc = c->acc, *run0 = c->run;
    const bool forked = c->n_br > 1;
    for (int i = 0; i < c->n_stages; i++) {
        codec_stage *stg = &c->stages[i];
        gp_cuda_codec_run_convt(sig, n, T, &stg->up, &stg->act, in, outp, stg->up.st_off, run0, s);
        T *= stg->rate;
        float *t = sig;
        sig = run0;
        run0 = t;
        const int C = stg->c_out;
        if (forked) {
            cudaEventRecord(c->fork, s);
            for (int b = 1; b < c->n_br; b++) cudaStreamWaitEvent(c->br[b].stream, c->fork, 0);
        }
        for (int j = 0; j < c->nk; j++) {
            const codec_branch *B = &c->br[forked ? j : 0];
            cudaStream_t bs = B->stream;
            float *run = j == 0 || !forked ? run0 : B->run;
            for (int m = 0; m < c->nd; m++) {
                codec_block *b = &stg->blocks[j * c->nd + m];
                const float *res = m == 0 ? sig : run;
                /* fused: every window here but the first is written by the
                 * convolution before it */
                const bool in_fused = fused && b->in_win;
                const void *in_win = in_fused ? (const void *)b->in_win : B->win;
                if (!in_fused)
                    gp_cuda_codec_run_window(res, false, n, T, C, b->in_conv.c_pad, b->in_conv.hist,
                                             &b->in_act, in, outp, b->in_conv.st_off, B->win, half,
                                             bs);
                ep = gp_cuda_codec_ep(GP_CODEC_EP_STORE, B->tmp, NULL, 0, 0.0f, half_tmp);
                if (fused) ep.nw = next_window(b->skip_win, &b->skip_conv, &b->skip_act, T, outp);
                gp_cuda_codec_run_conv(&b->in_conv, in_win, n, T, &ep, tc, B->partial, B->tickets,
                                       bs);
                if (!fused)
                    gp_cuda_codec_run_window(B->tmp, half_tmp, n, T, C, b->skip_conv.c_pad,
                                             b->skip_conv.hist, &b->skip_act, in, outp,
                                             b->skip_conv.st_off, B->win, half, bs);
                const void *skip_win = fused ? (const void *)b->skip_win : B->win;
                if (m < c->nd - 1) {
                    ep = gp_cuda_codec_ep(GP_CODEC_EP_RESIDUAL, run, res, 0, 0.0f, false);
                    const codec_block *nb = b + 1;
                    if (fused) ep.nw = next_window(nb->in_win, &nb->in_conv, &nb->in_act, T, outp);
                } else {
                    /* the sum into acc in block order */
                    if (forked && j > 0) cudaStreamWaitEvent(bs, c->br[j - 1].done, 0);
                    ep = gp_cuda_codec_ep(GP_CODEC_EP_BRANCH, acc, res, j == 0,
                                          j == c->nk - 1 ? (float)c->nk : 0.0f, false);
                }
                gp_cuda_codec_run_conv(&b->skip_conv, skip_win, n, T, &ep, tc, B->partial,
                                       B->tickets, bs);
            }
            if (forked) cudaEventRecord(B->done, bs);
        }
        if (forked) cudaStreamWaitEvent(s, c->br[c->nk - 1].done, 0);
        t = sig;
        sig = acc;
        acc = t;
    }
    gp_cuda_codec_run_window(sig, false, n, T, c->post.c_in, c->post.c_pad, c->post.hist,
                             &c->post_act, in, outp, c->post.st_off, c->win, half, s);
    ep = gp_cuda_codec_ep(c->clamp ? GP_CODEC_EP_CLAMP : GP_CODEC_EP_TANH, c->pcm, NULL, 0, 0.0f,
                          false);
    gp_cuda_codec_run_conv(&c->post, c->win, n, T, &ep, tc, c->partial, c->tickets, s);
}

extern "C" int gp_cuda_codec_measure(int device, gp_dev_codec_precision precision, double *tflops,
                                     gp_dev_status *st) {
    *tflops = 0.0;
    GP_CUDA_TRY(cudaSetDevice(device), "selecting the GPU");
    const int n = 4096;
    /* f32 or FP16 square operands (FP16: half the bytes, f32 sums and output) */
    const bool half = precision == GP_DEV_CODEC_F16;
    const size_t in_bytes = (size_t)n * n * (half ? sizeof(__half) : sizeof(float));
    void *a = NULL, *b = NULL, *d = NULL;
    cublasHandle_t h = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    int rc = gp_cuda_check(cudaMalloc(&a, in_bytes), "measure", st);
    if (!rc) rc = gp_cuda_check(cudaMalloc(&b, in_bytes), "measure", st);
    if (!rc) rc = gp_cuda_check(cudaMalloc(&d, (size_t)n * n * sizeof(float)), "measure", st);
    if (!rc) rc = gp_cuda_blas_check(cublasCreate(&h), "measure", st);
    if (!rc) {
        cudaMemset(a, 0, in_bytes);
        cudaMemset(b, 0, in_bytes);
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        const cublasComputeType_t ct =
            precision == GP_DEV_CODEC_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        const cudaDataType_t in_type = half ? CUDA_R_16F : CUDA_R_32F;
        const float one = 1.0f, zero = 0.0f;
        const int reps = 10;
        for (int r = -2; r < reps && !rc; r++) {
            if (r == 0) cudaEventRecord(e0, 0);
            rc = gp_cuda_blas_check(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a,
                                                 in_type, n, b, in_type, n, &zero, d, CUDA_R_32F, n,
                                                 ct, CUBLAS_GEMM_DEFAULT),
                                    "measure", st);
        }
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, e0, e1);
        if (!rc && ms > 0.0f) *tflops = 2.0 * n * (double)n * n * reps / (ms * 1e-3) / 1e12;
    }
    if (h) cublasDestroy(h);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    cudaFree(d);
    return rc;
}
