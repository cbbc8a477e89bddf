/* conv_tiles.c — GP_DCONV_TILES: a gp_dconv convolution on the AMX tile unit of Intel
 * Sapphire Rapids and later, where the codec's f32 direct kernels are bound by the FMA
 * rate and oneDNN's bf16 convolution (conv_onednn.c) measured slower still (issue 15).
 *
 * Weights are rounded to bf16 (on the real-size synthetic codec bf16 residual weights
 * keep ~62 dB against the f32 decoder, so only the residual layers take this path); each
 * f32 input is split into two bf16 terms hi + lo (~16 bits), and every weight tile is
 * multiplied with the hi and then the lo tile (conv_tiles_kernels.h has the layout). This file
 * detects the unit, packs the weights, cuts a call into tasks for the pool — time ranges where
 * signals are long, output channel groups where the weights dominate — and per chunk of 128 samples
 * builds the inputs' pair words, runs the tile loop (conv_tiles_amx.c, or conv_tiles_emulated.c
 * under GEPARD_TILES=emulate) and applies the epilogue.
 *
 * A sample's value is summed in one fixed order whatever the chunking, the threads or
 * the other signals of the call, so streaming is bit-identical to one-shot decoding. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/log.h"
#include "compute/conv_direct.h"
#include "compute/cpu/conv_tiles_kernels.h"
#include "compute/onednn_matmul.h"

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define TILES_X86_LINUX 1
#endif

#define TILES_CHUNK 128 /* output samples per chunk: inputs and results stay in L2 */

static atomic_int amx_state = -1; /* whether the CPU and kernel let us use AMX: 0 / 1 */

#ifdef TILES_X86_LINUX
/* AMX-TILE and AMX-BF16 in CPUID, the tile state enabled by the OS (XCR0 bits 17-18),
 * AVX512-BF16 for the input split, and the kernel's permission for this process. */
static bool amx_usable(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool tile = d >> 24 & 1, bf16 = d >> 22 & 1;
    if (!tile || !bf16 || !__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1)) return false;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bf16")) return false;
    /* ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA (Linux 5.16+) */
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}
#endif

/* The hardware is probed once; GEPARD_TILES is read at every call (packing and each run),
 * so a test can compare the emulation with the unit in one process. GEPARD_TILES=emulate
 * runs the emulation whatever the CPU. */
const char *gp_dconv_tiles_mode(void) {
    const char *env = getenv("GEPARD_TILES");
    if (env && !strcmp(env, "emulate")) return "emulated";
    if (env && !strcmp(env, "off")) return NULL;
    /* GEPARD_KERNELS=avx2 (or scalar) stands for a CPU without AVX-512, so without AMX */
    if (gp_dconv_best_isa() < GP_DCONV_AVX512) return NULL;
    int amx = atomic_load_explicit(&amx_state, memory_order_relaxed);
    if (amx < 0) {
        amx = 0;
#ifdef TILES_X86_LINUX
        amx = amx_usable();
#endif
        atomic_store_explicit(&amx_state, amx, memory_order_relaxed);
    }
    return amx ? "amx" : NULL;
}

static int blocks_of(int channels, int per) { return (channels + per - 1) / per; }

void gp_dconv_tiles_shape(gp_dconv *out, const gp_conv1d *conv) {
    out->c_in = conv->c_in;
    out->c_out = conv->c_out;
    out->kernel = conv->kernel;
    out->dilation = conv->dilation;
    out->type = GP_DCONV_TILES;
    out->isa = GP_DCONV_AVX512;
    out->chan = false;
    out->mr = GP_AMX_SIDE;
    /* the loop takes output blocks in pairs */
    out->n_blocks = (blocks_of(conv->c_out, GP_AMX_SIDE) + 1) / 2 * 2;
    out->block_elems = (size_t)conv->kernel * (size_t)blocks_of(conv->c_in, 32) * GP_AMX_WORDS;
}

/* Block b, tap t, input block k: 16 rows (output channels) of 16 words, word j the bf16
 * pair (w[16b + row][32k + 2j][t], w[16b + row][32k + 2j + 1][t]); zero beyond the real
 * channels. */
void gp_dconv_tiles_pack(const gp_conv1d *conv, const gp_dconv *shape) {
    const int cib = blocks_of(conv->c_in, 32), K = conv->kernel;
    uint32_t *w = shape->weight;
    for (int b = 0; b < shape->n_blocks; b++)
        for (int t = 0; t < K; t++)
            for (int k = 0; k < cib; k++)
                for (int r = 0; r < GP_AMX_SIDE; r++)
                    for (int j = 0; j < GP_AMX_SIDE; j++) {
                        const int o = b * GP_AMX_SIDE + r, c = k * 32 + 2 * j;
                        uint32_t pair[2] = {0, 0};
                        for (int h = 0; h < 2; h++)
                            if (o < conv->c_out && c + h < conv->c_in)
                                pair[h] = gp_f32_to_bf16(
                                    conv->weight[((size_t)o * conv->c_in + (size_t)(c + h)) *
                                                     (size_t)K +
                                                 (size_t)t]);
                        *w++ = pair[0] | pair[1] << 16;
                    }
}

/* The plain-C split (emulated tiles): hi = bf16(x), lo = bf16(x - hi), channel pairs. */
static void split_plain(const float *x, size_t xs, int c_in, int rows, size_t valid, uint32_t *xhi,
                        uint32_t *xlo, size_t xw) {
    for (int r = 0; r < rows; r++) {
        uint32_t *dh = xhi + (size_t)r * xw, *dl = xlo + (size_t)r * xw;
        memset(dh, 0, xw * sizeof *dh);
        memset(dl, 0, xw * sizeof *dl);
        for (int h = 0; h < 2; h++) {
            const int c = 2 * r + h;
            if (c >= c_in) continue;
            const float *s = x + (size_t)c * xs;
            for (size_t i = 0; i < valid; i++) {
                uint16_t hi, lo;
                gp_tiles_terms(s[i], &hi, &lo);
                dh[i] |= (uint32_t)hi << (16 * h);
                dl[i] |= (uint32_t)lo << (16 * h);
            }
        }
    }
}

typedef struct tiles_job {
    const gp_dconv *conv;
    const gp_dconv_signal *sig;
    size_t n;
    int parts, groups; /* time ranges and output channel groups per signal */
    bool amx;
    atomic_int failed;
} tiles_job;

static void tiles_task(void *ctx, int task, int worker) {
    (void)worker;
    tiles_job *j = ctx;
    const gp_dconv *conv = j->conv;
    const gp_dconv_signal *s = &j->sig[task / (j->parts * j->groups)];
    const int part = task % (j->parts * j->groups) / j->groups, group = task % j->groups;
    const size_t t0 = j->n * (size_t)part / (size_t)j->parts,
                 t1 = j->n * (size_t)(part + 1) / (size_t)j->parts;
    const int pairs = conv->n_blocks / 2;
    const int b0 = 2 * (pairs * group / j->groups), b1 = 2 * (pairs * (group + 1) / j->groups);
    const int r0 = b0 * GP_AMX_SIDE,
              r1 = b1 * GP_AMX_SIDE < conv->c_out ? b1 * GP_AMX_SIDE : conv->c_out;
    if (t1 <= t0 || r0 >= r1) return;
    const int cib = blocks_of(conv->c_in, 32), rows = cib * GP_AMX_SIDE;
    const size_t hist = (size_t)(conv->kernel - 1) * (size_t)conv->dilation;
    const size_t xw = TILES_CHUNK + hist, vld = TILES_CHUNK;
    const size_t x_bytes = ((size_t)rows * xw * 4 + 63) / 64 * 64;
    /* buffer 1 of the worker's scratch (a matmul slice's results elsewhere): only used
     * inside this task */
    char *buf = gp_onednn_thread_buffer(1, 2 * x_bytes + (size_t)conv->n_blocks * GP_AMX_SIDE *
                                                             vld * sizeof(float));
    if (!buf) {
        atomic_store(&j->failed, 1);
        return;
    }
    uint32_t *xhi = (uint32_t *)buf, *xlo = (uint32_t *)(buf + x_bytes);
    float *v = (float *)(buf + 2 * x_bytes);
    gp_tiles_chunk c = {conv->weight,
                        conv->block_elems,
                        cib,
                        conv->kernel,
                        conv->dilation,
                        b0,
                        b1,
                        xhi,
                        xlo,
                        0,
                        0,
                        v,
                        vld};
    for (size_t c0 = t0; c0 < t1; c0 += TILES_CHUNK) {
        const size_t len = t1 - c0 < TILES_CHUNK ? t1 - c0 : TILES_CHUNK;
        c.nt = (int)((len + GP_AMX_SIDE - 1) / GP_AMX_SIDE);
        c.xw = (size_t)c.nt * GP_AMX_SIDE + hist;
        const float *x = (const float *)s->x + c0;
        if (j->amx) {
            gp_tiles_split_avx512(x, s->xs, conv->c_in, rows, len + hist, xhi, xlo, c.xw);
            gp_tiles_chunk_amx(&c);
        } else {
            split_plain(x, s->xs, conv->c_in, rows, len + hist, xhi, xlo, c.xw);
            gp_tiles_chunk_emulated(&c);
        }
        if (j->amx) {
            gp_tiles_epilogue_avx512(conv, &s->out, v, vld, r0, r1, c0, len);
            gp_dconv_epilogue_act_rows(&s->out, v, vld, r0, r1, c0, len);
        } else {
            gp_dconv_epilogue_rows(conv, &s->out, v, vld, r0, r1, c0, len, true);
        }
    }
}

void gp_dconv_tiles_run(const gp_dconv *conv, const gp_dconv_signal *sig, int n_sig, size_t n,
                        gp_pool *pool) {
    const char *mode = gp_dconv_tiles_mode();
    if (!mode) { /* packing refuses this type then: not reached */
        GP_WARN("AMX tile convolution without a tile unit: its outputs are not written");
        return;
    }
    const int threads = gp_pool_size(pool), pairs = conv->n_blocks / 2;
    /* time ranges of at least 64 samples, one per thread at most; the threads left over
     * split the output channels (a stream's first stage: 8 samples per frame, 47 MB of
     * weights to read) */
    int parts = (int)(n / 64);
    if (parts > threads) parts = threads;
    if (parts < 1) parts = 1;
    int groups = threads / parts;
    if (groups > pairs) groups = pairs;
    if (groups < 1 || n_sig >= threads) groups = 1;
    tiles_job job = {conv, sig, n, parts, groups, !strcmp(mode, "amx"), 0};
    gp_pool_parallel_for(pool, n_sig * parts * groups, tiles_task, &job);
    if (atomic_load(&job.failed))
        GP_WARN("AMX tile convolution had no scratch memory: some outputs are not written");
}
