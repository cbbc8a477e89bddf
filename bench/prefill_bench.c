/* prefill_bench.c — hand-run benchmark of the backbone's prefill (not part of
 * `make test`): one sequence of ROWS rows (random embeddings) through every
 * layer of a real or synthetic checkpoint with gp_backbone_forward, a fresh
 * KV cache each repetition. Prints the best and median time, tokens per
 * second and GFLOP/s (2 × backbone matrix parameters per row; attention's
 * few MFLOP per row are left out), which matrix kernel served the rows, and
 * the first (untimed) run, which pays for the scratch buffers' page faults.
 *
 *   build/release/bench/prefill_bench MODEL_DIR [ROWS [THREADS [REPS [DTYPE]]]]
 *                                      (default 26 2 5 bf16)
 *
 * GEPARD_KERNELS=avx2 in the environment measures the AVX2 kernels.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/rng.h"
#include "base/timing.h"
#include "compute/kernels.h"
#include "model/backbone.h"
#include "model/model.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL_DIR [ROWS [THREADS [REPS [DTYPE]]]]\n", argv[0]);
        return 2;
    }
    const int rows = argc > 2 ? atoi(argv[2]) : 26, threads = argc > 3 ? atoi(argv[3]) : 2;
    int reps = argc > 4 ? atoi(argv[4]) : 5;
    if (reps < 1 || reps > 100) reps = 5;
    gp_model_load_options opt = gp_model_load_default_options();
    if (argc > 5) opt.weight_format = (gp_weight_format)gp_weight_format_parse(argv[5]);
    gp_model *m;
    gp_error err;
    if (gp_model_load(argv[1], &opt, &m, &err)) {
        fprintf(stderr, "load failed: %s\n", err.message);
        return 1;
    }
    const gp_backbone_config *bb = &m->cfg.backbone;
    const int H = bb->hidden_size;
    double macs = 0;
    for (int l = 0; l < bb->num_layers; l++) {
        const gp_layer *L = &m->layers[l];
        const gp_matrix *ms[] = {&L->q_proj,    &L->k_proj,  &L->v_proj,   &L->o_proj,
                                 &L->gate_proj, &L->up_proj, &L->down_proj};
        for (int i = 0; i < 7; i++) macs += (double)ms[i]->rows * ms[i]->cols;
    }
    float *x = gp_aligned_alloc((size_t)rows * H * sizeof(float));
    float *h = gp_aligned_alloc((size_t)H * sizeof(float));
    gp_rng rng;
    gp_rng_seed(&rng, 7);
    for (size_t i = 0; i < (size_t)rows * H; i++) x[i] = (float)(gp_rng_uniform(&rng) - 0.5);
    gp_kv_pool *kv;
    gp_pool *pool;
    if (gp_kv_pool_create(bb->num_layers, bb->num_kv_heads, bb->head_dim, 16, rows / 16 + 2, &kv,
                          &err) ||
        gp_pool_create(threads, &pool, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    gp_forward_scratch s;
    gp_forward_scratch_init(&s);
    double times[101];
    for (int r = 0; r <= reps; r++) {
        gp_kv_seq seq;
        gp_kv_seq_init(&seq);
        if (gp_kv_seq_reserve(kv, &seq, rows, &err)) return 1;
        gp_backbone_seq bs = {&seq, rows, NULL};
        uint64_t t0 = gp_now_ns();
        if (gp_backbone_forward(m, kv, &s, &bs, 1, x, h, NULL, pool, &err)) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        times[r] = (double)(gp_now_ns() - t0) * 1e-6; /* times[0]: warm-up */
        gp_kv_seq_release(kv, &seq);
    }
    qsort(times + 1, (size_t)reps, sizeof(double), cmp_double);
    const double best = times[1], median = times[1 + reps / 2];
    printf("prefill %s %d rows, %d threads, kernels %s: best %.2f ms, median %.2f ms, "
           "%.0f tok/s, %.1f GFLOP/s (%.3f GFLOP/row); first run %.2f ms\n",
           gp_weight_format_name(m->weight_format), rows, gp_pool_size(pool),
           gp_kernel_table_active()->name, best, median, rows / (best * 1e-3),
           2 * macs * rows / (best * 1e6), 2 * macs / 1e9, times[0]);
    gp_forward_scratch_free(&s);
    gp_kv_pool_free(kv);
    gp_pool_free(pool);
    gp_aligned_free(x);
    gp_aligned_free(h);
    gp_model_free(m);
    return 0;
}
