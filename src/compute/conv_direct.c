/* conv_direct.c — the instruction-set independent half of the direct convolution (see
 * conv_direct.h): CPU detection, weight packing, bf16 rounding, and spreading a run's
 * tiles over the thread pool. The micro-kernels and epilogues live in
 * compute/cpu/conv_direct_avx512.c and conv_direct_avx2.c.
 *
 * A run's tiles are numbered in one of three orders, and each pool task takes a contiguous
 * range of them:
 *   block-major  tile = (block * n_sig + signal) * n_time + time: a task reuses one block's
 *                weights for every signal and time step. Several tasks per thread, handed
 *                out dynamically, so a thread that loses its core to another process does
 *                not hold the others up. For signals of one or few time tiles.
 *   time-major   tile = (time * n_blocks + block) * n_sig + signal, one task per thread,
 *                with tiles narrowed (down to 2 vectors) until every thread has a span:
 *                each thread computes a fixed span of time for every channel, so the next
 *                convolution's input — written by this one's epilogue, split the same way —
 *                is mostly in the thread's own cache (reading lines another core just wrote
 *                costs more than the arithmetic on the short, narrow layers). The caller
 *                usually runs task 0 and the worker task 1, and a late worker's task is
 *                taken over like any other.
 *   signal groups  where time-major would be used and there are at least as many
 *                signals (streams decoded together) as threads: tile = ((group * n_blocks
 *                + block) * group_size + signal in the group) * n_time + time, one equal
 *                group per thread: whole signals per thread, full-width tiles, each
 *                block's weights reused over the group's signals (16 streams on 2 threads:
 *                5-10 % less time per stream-frame than time-major, whose 16 spans of
 *                time did not stay in a core's cache). The signals left over (fewer than
 *                the threads) follow time-major, each task its span after its group.
 */
#include "compute/conv_direct.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/dtype.h"

#define DCONV_TASKS_PER_THREAD 8
#define DCONV_TIME_SPLIT_RATIO 8 /* weight bytes per input byte up to which time is split */

/* ---- CPU ---- */

static bool cpu_has(gp_dconv_isa isa) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (isa == GP_DCONV_AVX512)
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("fma");
    if (isa == GP_DCONV_AVX2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    return false;
}

/* The CPU's best, capped by GEPARD_KERNELS=scalar|avx2|avx512 like the matrix kernels
 * (compute/matrix.h); decided once, then only read. */
static atomic_int best_isa = -1;

gp_dconv_isa gp_dconv_best_isa(void) {
    int isa = atomic_load_explicit(&best_isa, memory_order_relaxed);
    if (isa >= 0) return (gp_dconv_isa)isa;
    isa = cpu_has(GP_DCONV_AVX512) ? GP_DCONV_AVX512
          : cpu_has(GP_DCONV_AVX2) ? GP_DCONV_AVX2
                                   : GP_DCONV_NONE;
    const char *env = getenv("GEPARD_KERNELS");
    if (env && strcmp(env, "scalar") == 0) isa = GP_DCONV_NONE;
    if (env && strcmp(env, "avx2") == 0 && isa > GP_DCONV_AVX2) isa = GP_DCONV_AVX2;
    atomic_store_explicit(&best_isa, isa, memory_order_relaxed);
    return (gp_dconv_isa)isa;
}

bool gp_dconv_isa_has_bf16(gp_dconv_isa isa) {
#if defined(__x86_64__)
    return isa == GP_DCONV_AVX512 && cpu_has(GP_DCONV_AVX512) &&
           __builtin_cpu_supports("avx512bf16");
#else
    (void)isa;
    return false;
#endif
}

const char *gp_dconv_isa_name(gp_dconv_isa isa) {
    return isa == GP_DCONV_AVX512 ? "avx512" : isa == GP_DCONV_AVX2 ? "avx2" : "none";
}

/* Register tiles per instruction set: accumulators + operands fit the 32 zmm / 16 ymm. */
static const gp_dconv_geometry geometry_avx512 = {6, 4, 2, 8, 16};
static const gp_dconv_geometry geometry_avx2 = {6, 2, 1, 8, 8};

const gp_dconv_geometry *gp_dconv_geometry_for(gp_dconv_isa isa) {
    return isa == GP_DCONV_AVX512 ? &geometry_avx512 : isa == GP_DCONV_AVX2 ? &geometry_avx2 : NULL;
}

/* ---- bf16 ---- */

uint32_t gp_bf16_pair(float lo, float hi) {
    return (uint32_t)gp_f32_to_bf16(lo) | ((uint32_t)gp_f32_to_bf16(hi) << 16);
}

/* ---- packing ---- */

/* Weight w[o][c][t] of the source conv, zero outside the real channels. */
static float src_weight(const gp_conv1d *conv, int o, int c, int t) {
    if (o >= conv->c_out || c >= conv->c_in) return 0.0f;
    return conv->weight[((size_t)o * conv->c_in + (size_t)c) * (size_t)conv->kernel + (size_t)t];
}

/* Block b holds `width` output channels from o0 (channel layout: full width, zero-padded;
 * time layout: only the real ones), [c or pair][t][width]. */
static void pack_block(const gp_conv1d *conv, gp_dconv_type type, int o0, int width, void *dst) {
    const int k = conv->kernel;
    if (type == GP_DCONV_F32) {
        float *w = dst;
        for (int c = 0; c < conv->c_in; c++)
            for (int t = 0; t < k; t++)
                for (int i = 0; i < width; i++) *w++ = src_weight(conv, o0 + i, c, t);
    } else if (type == GP_DCONV_W16 && width % 32 == 0) {
        /* AVX-512: word l of a vector holds channels l and l + 16 */
        uint32_t *w = dst;
        for (int c = 0; c < conv->c_in; c++)
            for (int t = 0; t < k; t++)
                for (int v = 0; v < width; v += 32)
                    for (int l = 0; l < 16; l++)
                        *w++ = gp_bf16_pair(src_weight(conv, o0 + v + l, c, t),
                                            src_weight(conv, o0 + v + 16 + l, c, t));
    } else if (type == GP_DCONV_W16) {
        /* AVX2 (8 channels): the channels in order, word l holding channels 2l and 2l + 1 */
        uint32_t *w = dst;
        for (int c = 0; c < conv->c_in; c++)
            for (int t = 0; t < k; t++)
                for (int i = 0; i < width; i += 2)
                    *w++ = gp_bf16_pair(src_weight(conv, o0 + i, c, t),
                                        src_weight(conv, o0 + i + 1, c, t));
    } else {
        uint32_t *w = dst;
        for (int p = 0; p < (conv->c_in + 1) / 2; p++)
            for (int t = 0; t < k; t++)
                for (int i = 0; i < width; i++)
                    *w++ = gp_bf16_pair(src_weight(conv, o0 + i, 2 * p, t),
                                        src_weight(conv, o0 + i, 2 * p + 1, t));
    }
}

/* The shape of the packed form (no memory yet). */
static int dconv_shape(gp_dconv *out, const gp_conv1d *conv, gp_dconv_type type, gp_dconv_isa isa,
                       bool chan, gp_error *err) {
    memset(out, 0, sizeof *out);
    if (type == GP_DCONV_TILES) {
        if (!gp_dconv_tiles_mode())
            return gp_fail(err, GEPARD_ERR_UNSUPPORTED,
                           "this CPU has no AMX tile unit (GEPARD_TILES=emulate runs the tile "
                           "path in plain C, for tests)");
        if (conv->stride != 1)
            return gp_fail(err, GEPARD_ERR_INTERNAL, "convolution needs stride 1, not %d",
                           conv->stride);
        gp_dconv_tiles_shape(out, conv);
        return GEPARD_OK;
    }
    const gp_dconv_geometry *g = gp_dconv_geometry_for(isa);
    if (!g) return gp_fail(err, GEPARD_ERR_INTERNAL, "no direct convolution kernels for this CPU");
    if (type == GP_DCONV_BF16 && !gp_dconv_isa_has_bf16(isa))
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "bf16 convolution kernels need a CPU with AVX512-BF16");
    if (type == GP_DCONV_W16 && (!chan || (isa == GP_DCONV_AVX512 && g->mv_chan % 2)))
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "bf16-stored weights need the channel layout");
    if (conv->stride != 1)
        return gp_fail(err, GEPARD_ERR_INTERNAL, "direct convolution needs stride 1, not %d",
                       conv->stride);
    out->c_in = conv->c_in;
    out->c_out = conv->c_out;
    out->kernel = conv->kernel;
    out->dilation = conv->dilation;
    out->type = type;
    out->isa = isa;
    out->chan = chan;
    out->mr = chan ? g->mv_chan * g->vec : g->mr_time;
    out->n_blocks = (conv->c_out + out->mr - 1) / out->mr;
    const size_t reduce = (size_t)(type == GP_DCONV_BF16 ? (conv->c_in + 1) / 2 : conv->c_in);
    out->block_elems = (size_t)out->mr * reduce * (size_t)conv->kernel;
    if (type == GP_DCONV_W16) out->block_elems /= 2; /* two weights per word */
    return GEPARD_OK;
}

size_t gp_dconv_pack_size(const gp_conv1d *conv, gp_dconv_type type, gp_dconv_isa isa, bool chan) {
    if (type == GP_DCONV_ONEDNN) return 64; /* its weights live in its gp_dconv_onednn */
    gp_dconv d;
    if (dconv_shape(&d, conv, type, isa, chan, NULL)) return 0;
    size_t bytes = d.block_elems * (size_t)d.n_blocks * 4;
    return (bytes + 63) / 64 * 64;
}

int gp_dconv_pack(gp_dconv *out, const gp_conv1d *conv, gp_dconv_type type, gp_dconv_isa isa,
                  bool chan, gp_error *err) {
    size_t bytes = gp_dconv_pack_size(conv, type, isa, chan);
    void *mem = bytes ? gp_aligned_alloc(bytes) : NULL;
    if (!mem && bytes) return gp_fail_oom(err, "packed convolution weights", bytes);
    int rc = gp_dconv_pack_into(out, conv, type, isa, chan, mem, err);
    if (rc) {
        gp_aligned_free(mem);
        return rc;
    }
    out->owns_weight = true;
    return GEPARD_OK;
}

int gp_dconv_pack_into(gp_dconv *out, const gp_conv1d *conv, gp_dconv_type type, gp_dconv_isa isa,
                       bool chan, void *mem, gp_error *err) {
    if (type == GP_DCONV_ONEDNN) return gp_dconv_onednn_pack(out, conv, err);
    int rc = dconv_shape(out, conv, type, isa, chan, err);
    if (rc) return rc;
    out->weight = mem;
    out->bias = gp_aligned_calloc((size_t)out->n_blocks * (size_t)out->mr, sizeof(float));
    if (!out->bias) {
        out->weight = NULL;
        return gp_fail_oom(err, "convolution bias", (size_t)out->n_blocks * (size_t)out->mr * 4);
    }
    if (type == GP_DCONV_TILES) {
        gp_dconv_tiles_pack(conv, out);
        memcpy(out->bias, conv->bias, (size_t)conv->c_out * sizeof(float));
        return GEPARD_OK;
    }
    for (int b = 0; b < out->n_blocks; b++) {
        const int o0 = b * out->mr, rows = conv->c_out - o0 < out->mr ? conv->c_out - o0 : out->mr;
        pack_block(conv, type, o0, chan ? out->mr : rows,
                   (char *)out->weight + (size_t)b * out->block_elems * 4);
    }
    memcpy(out->bias, conv->bias, (size_t)conv->c_out * sizeof(float));
    return GEPARD_OK;
}

void gp_dconv_free(gp_dconv *conv) {
    if (!conv) return;
    if (conv->owns_weight) gp_aligned_free(conv->weight);
    gp_aligned_free(conv->bias);
    gp_dconv_onednn_free(conv->onednn);
    conv->onednn = NULL;
    conv->weight = NULL;
    conv->bias = NULL;
}

size_t gp_dconv_weight_bytes(const gp_dconv *conv) {
    if (conv->type == GP_DCONV_ONEDNN)
        return (size_t)conv->c_out * (size_t)conv->c_in * (size_t)conv->kernel * 2;
    return conv->block_elems * (size_t)conv->n_blocks * 4;
}

/* ---- running ---- */

typedef void (*dconv_tiles_fn)(const gp_dconv *, const gp_dconv_signal *, int, size_t,
                               const gp_dconv_plan *, long, long);

typedef struct dconv_job {
    const gp_dconv *conv;
    const gp_dconv_signal *sig;
    int n_sig, n_tasks;
    size_t n;
    gp_dconv_plan plan;
    long tiles, align; /* tasks take whole multiples of `align` tiles */
    dconv_tiles_fn fn;
    /* signal groups: the signals left over (fewer than the threads) after the groups,
     * split time-major, each task its span of them after its group */
    int tail_sig;
    gp_dconv_plan tail_plan;
    long tail_tiles, tail_align;
} dconv_job;

static void dconv_task(void *ctx, int task, int worker) {
    (void)worker;
    const dconv_job *j = ctx;
    long b, e;
    gp_split_range(j->tiles, j->n_tasks, task, j->align, &b, &e);
    if (e > b) j->fn(j->conv, j->sig, j->n_sig, j->n, &j->plan, b, e);
    if (!j->tail_sig) return;
    gp_split_range(j->tail_tiles, j->n_tasks, task, j->tail_align, &b, &e);
    if (e > b) j->fn(j->conv, j->sig + j->n_sig, j->tail_sig, j->n, &j->tail_plan, b, e);
}

/* Vectors per time tile for `threads`: the time split needs a tile per thread; of the
 * widths that give one, the least work for the busiest thread, then the widest. 0: none. */
static int dconv_time_vectors(size_t n, int vec, int nr_max, int threads) {
    int best = 0;
    long best_cost = 0;
    for (int nr = nr_max; nr >= 2; nr--) {
        const long tiles = (long)((n + (size_t)(vec * nr) - 1) / (size_t)(vec * nr));
        if (tiles < threads) continue;
        const long cost = (tiles + threads - 1) / threads * nr;
        if (!best || cost < best_cost) {
            best = nr;
            best_cost = cost;
        }
    }
    return best;
}

void gp_dconv_run(const gp_dconv *conv, const gp_dconv_signal *sig, int n_sig, size_t n,
                  gp_pool *pool) {
    if (n == 0 || n_sig <= 0) return;
    if (conv->type == GP_DCONV_ONEDNN) {
        gp_dconv_onednn_run(conv, sig, n_sig, n, pool);
        return;
    }
    if (conv->type == GP_DCONV_TILES) {
        gp_dconv_tiles_run(conv, sig, n_sig, n, pool);
        return;
    }
    const gp_dconv_geometry *g = gp_dconv_geometry_for(conv->isa);
    const int threads = gp_pool_size(pool);
    dconv_job job = {.conv = conv,
                     .sig = sig,
                     .n_sig = n_sig,
                     .n_tasks = 1,
                     .n = n,
                     .align = 1,
                     .fn = conv->isa == GP_DCONV_AVX512 ? gp_dconv_tiles_avx512
                                                        : gp_dconv_tiles_avx2};
    /* Splitting time makes every thread read all the weights; splitting channels makes it
     * read the input the other threads wrote. The time split pays where the weights are
     * not much larger than the inputs (measured: the 108- to 27-channel stages gain, the
     * 216-channel stage, with 20x more weight than input, loses). */
    const size_t in_bytes = (size_t)conv->c_in *
                            (n + (size_t)((conv->kernel - 1) * conv->dilation)) *
                            (conv->type == GP_DCONV_BF16 ? 2 : 4) * (size_t)n_sig;
    const bool split_time = !conv->chan && threads > 1 &&
                            gp_dconv_weight_bytes(conv) <= DCONV_TIME_SPLIT_RATIO * in_bytes;
    /* Several streams at once, as many per thread: each thread takes whole signals (full
     * tiles, its signals' data in its cache, each block's weights reused over them) rather
     * than a span of time of every signal; the few left over go time-major. */
    int nr = split_time ? dconv_time_vectors(n, g->vec, g->nr_time, threads) : 0;
    const int tail = n_sig % threads; /* signals left over after equal groups */
    if (split_time && n_sig >= threads && (tail == 0 || nr > 0)) {
        job.n_sig = n_sig - tail;
        job.plan.group = job.n_sig / threads;
        job.plan.width = (size_t)(g->vec * g->nr_time);
        job.plan.n_time = (long)((n + job.plan.width - 1) / job.plan.width);
        job.tiles = (long)conv->n_blocks * job.n_sig * job.plan.n_time;
        job.n_tasks = threads;
        job.align = (long)conv->n_blocks * job.plan.group * job.plan.n_time;
        if (tail) {
            job.tail_sig = tail;
            job.tail_plan.time_major = true;
            job.tail_plan.width = (size_t)(g->vec * nr);
            job.tail_plan.n_time = (long)((n + job.tail_plan.width - 1) / job.tail_plan.width);
            job.tail_align = (long)conv->n_blocks * tail;
            job.tail_tiles = job.tail_align * job.tail_plan.n_time;
        }
        gp_pool_parallel_for(pool, job.n_tasks, dconv_task, &job);
        return;
    }
    job.plan.time_major = nr > 0;
    if (!nr) nr = g->nr_time;
    job.plan.width = conv->chan ? (size_t)g->nn_chan : (size_t)(g->vec * nr);
    job.plan.n_time = (long)((n + job.plan.width - 1) / job.plan.width);
    const long per_time = (long)conv->n_blocks * n_sig;
    job.tiles = per_time * job.plan.n_time;
    if (threads <= 1 || job.tiles < 2) {
        job.fn(conv, sig, n_sig, n, &job.plan, 0, job.tiles);
        return;
    }
    if (job.plan.time_major) { /* a fixed span of time per thread */
        job.n_tasks = threads;
        job.align = per_time;
    } else {
        long tasks = (long)threads * DCONV_TASKS_PER_THREAD;
        job.n_tasks = (int)(tasks < job.tiles ? tasks : job.tiles);
    }
    gp_pool_parallel_for(pool, job.n_tasks, dconv_task, &job);
}

void gp_dconv_epilogue_rows(const gp_dconv *conv, const gp_dconv_out *o, float *v, size_t vld,
                            int r0, int r1, size_t t0, size_t len, bool add_bias) {
    for (int c = r0; c < r1; c++) {
        float *vr = v + (size_t)c * vld;
        const size_t off = (size_t)c * o->ld + t0;
        if (add_bias)
            for (size_t t = 0; t < len; t++) vr[t] += conv->bias[c];
        if (o->base)
            for (size_t t = 0; t < len; t++) vr[t] += o->base[off + t];
        if (o->store) memcpy(o->store + off, vr, len * sizeof(float));
        if (o->acc) {
            float *a = o->acc + off;
            for (size_t t = 0; t < len; t++) {
                switch (o->acc_mode) {
                case GP_DCONV_ACC_SET: a[t] = vr[t]; break;
                case GP_DCONV_ACC_ADD: a[t] += vr[t]; break;
                case GP_DCONV_ACC_ADD_DIV: a[t] = (a[t] + vr[t]) / o->acc_div; break;
                default: break;
                }
            }
        }
    }
    gp_dconv_epilogue_act_rows(o, v, vld, r0, r1, t0, len);
}

void gp_dconv_epilogue_act_rows(const gp_dconv_out *o, const float *v, size_t vld, int r0, int r1,
                                size_t t0, size_t len) {
    if (!o->act) return;
    const float *src = o->act_src == GP_DCONV_ACT_OF_ACC    ? o->acc + t0
                       : o->act_src == GP_DCONV_ACT_OF_FROM ? o->act_from + t0
                                                            : v;
    const size_t ss = o->act_src == GP_DCONV_ACT_OF_V ? vld : o->ld;
    void *dst =
        o->act_bf16 ? (void *)((uint32_t *)o->act_dst + t0) : (void *)((float *)o->act_dst + t0);
    gp_dconv_act_rows(o->act, src, ss, dst, o->act_ld, o->act_bf16, r0, r1, len);
}

/* ---- element-wise ---- */

static float act_one(const gp_act *act, int c, float x) {
    if (c < act->n_snake) {
        float v = sinf(act->alpha[c] * x);
        return x + act->inv_alpha[c] * (v * v);
    }
    switch (act->kind) {
    case GP_ACT_LRELU:
    case GP_ACT_HALF_SNAKE: return x > 0.0f ? x : act->slope * x;
    case GP_ACT_ELU: return x > 0.0f ? x : expm1f(x);
    default: return x;
    }
}

void gp_dconv_act_rows(const gp_act *act, const float *src, size_t ss, void *dst, size_t ds,
                       bool dst_bf16, int r0, int r1, size_t n) {
    gp_dconv_isa isa = gp_dconv_best_isa();
    if (isa == GP_DCONV_AVX512 && (!dst_bf16 || gp_dconv_isa_has_bf16(isa))) {
        gp_dconv_act_rows_avx512(act, src, ss, dst, ds, dst_bf16, r0, r1, n);
        return;
    }
    if (isa == GP_DCONV_AVX2 && !dst_bf16) {
        gp_dconv_act_rows_avx2(act, src, ss, dst, ds, r0, r1, n);
        return;
    }
    for (int r = r0; r < r1; r += dst_bf16 ? 2 : 1) {
        const float *a = src + (size_t)r * ss, *b = a + ss;
        for (size_t i = 0; i < n; i++) {
            float va = act_one(act, r, a[i]);
            if (!dst_bf16) {
                ((float *)dst)[(size_t)r * ds + i] = va;
            } else {
                float vb = r + 1 < r1 ? act_one(act, r + 1, b[i]) : 0.0f;
                ((uint32_t *)dst)[(size_t)(r / 2) * ds + i] = gp_bf16_pair(va, vb);
            }
        }
    }
}

void gp_dconv_sin2(const float *x, float *y, size_t n) {
    gp_dconv_isa isa = gp_dconv_best_isa();
    if (isa == GP_DCONV_AVX512) {
        gp_dconv_sin2_avx512(x, y, n);
    } else if (isa == GP_DCONV_AVX2) {
        gp_dconv_sin2_avx2(x, y, n);
    } else {
        for (size_t i = 0; i < n; i++) {
            float v = sinf(x[i]);
            y[i] = v * v;
        }
    }
}

void gp_dconv_convt_rows(const gp_convt1d *conv, const float *x, size_t xs, size_t n_in, float *y,
                         size_t ys, int o0, int o1) {
    const bool fits = conv->groups == conv->c_out && conv->c_in == 2 * conv->c_out &&
                      conv->kernel == 2 * conv->stride && conv->stride <= 16 &&
                      16 % conv->stride == 0;
    const gp_dconv_isa isa = gp_dconv_best_isa();
    if (fits && isa == GP_DCONV_AVX512)
        gp_dconv_convt_rows_avx512(conv, x, xs, n_in, y, ys, o0, o1);
    else if (fits && isa == GP_DCONV_AVX2 && conv->stride <= 8 && 8 % conv->stride == 0)
        gp_dconv_convt_rows_avx2(conv, x, xs, n_in, y, ys, o0, o1);
    else
        gp_convt1d_rows(conv, x, xs, n_in, y, ys, o0, o1);
}
