/* test_base.c — tests of base/: errors, buffers, RNG, pool, dtype conversions. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/pool.h"
#include "base/rng.h"
#include "test.h"

TEST(error_prefix_keeps_message) {
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_fail(&err, GEPARD_ERR_FORMAT, "tensor %s missing", "x");
    CHECK_EQ_INT(rc, GEPARD_ERR_FORMAT);
    gp_error_prefix(&err, "%s: ", "model.safetensors");
    CHECK(strcmp(err.message, "model.safetensors: tensor x missing") == 0);
    CHECK_EQ_INT(err.code, GEPARD_ERR_FORMAT);
}

TEST(buf_printf_and_consume) {
    gp_buf b;
    gp_buf_init(&b);
    for (int i = 0; i < 1000; i++) CHECK(gp_buf_printf(&b, "%d,", i) == 0);
    CHECK(strncmp(b.data, "0,1,2,", 6) == 0);
    gp_buf_consume(&b, 4);
    CHECK(strncmp(b.data, "2,3,", 4) == 0);
    size_t len;
    char *s = gp_buf_detach(&b, &len);
    CHECK(strlen(s) == len);
    free(s);
    CHECK(b.data == NULL);
}

TEST(rng_is_reproducible_and_uniform) {
    gp_rng a, b;
    gp_rng_seed(&a, 42);
    gp_rng_seed(&b, 42);
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        double x = gp_rng_uniform(&a);
        CHECK(x >= 0 && x < 1);
        CHECK(x == gp_rng_uniform(&b));
        sum += x;
    }
    CHECK(fabs(sum / 100000 - 0.5) < 0.01);
    gp_rng_seed(&b, 43);
    CHECK(gp_rng_next_u64(&a) != gp_rng_next_u64(&b));
}

typedef struct pool_sum_ctx {
    atomic_long total;
    int hits[1000];
} pool_sum_ctx;

static void pool_sum_task(void *ctx, int task, int worker) {
    (void)worker;
    pool_sum_ctx *c = ctx;
    c->hits[task]++;
    atomic_fetch_add(&c->total, task);
}

TEST(pool_runs_every_task_once) {
    gp_pool *pool;
    gp_error err;
    REQUIRE_OK(gp_pool_create(4, &pool, &err), &err);
    CHECK_EQ_INT(gp_pool_size(pool), 4);
    for (int round = 0; round < 200; round++) {
        pool_sum_ctx *ctx = calloc(1, sizeof *ctx);
        int n = 1 + (round * 37) % 1000;
        gp_pool_parallel_for(pool, n, pool_sum_task, ctx);
        CHECK_EQ_INT(atomic_load(&ctx->total), (long)n * (n - 1) / 2);
        for (int i = 0; i < n; i++) CHECK_EQ_INT(ctx->hits[i], 1);
        free(ctx);
    }
    gp_pool_free(pool);
}

TEST(split_range_covers_everything) {
    for (int parts = 1; parts < 7; parts++) {
        long covered = 0, prev_end = 0;
        for (int p = 0; p < parts; p++) {
            long b, e;
            gp_split_range(1000, parts, p, 16, &b, &e);
            CHECK(b == prev_end);
            CHECK(b % 16 == 0);
            covered += e - b;
            prev_end = e;
        }
        CHECK_EQ_INT(covered, 1000);
    }
}

TEST(bf16_f16_conversions) {
    CHECK(gp_bf16_to_f32(0x3F80) == 1.0f);
    CHECK(gp_f32_to_bf16(1.0f) == 0x3F80);
    /* Round to nearest even: 1 + 2^-8 is a tie between 1 and 1 + 2^-7. */
    CHECK(gp_f32_to_bf16(1.0f + 1.0f / 256) == 0x3F80);
    CHECK(gp_f32_to_bf16(1.0f + 3.0f / 256) == 0x3F82);
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = gp_f16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        CHECK_MSG(gp_f32_to_f16(f) == h, "f16 round trip of 0x%04x", h);
    }
    CHECK(gp_f16_to_f32(0x3C00) == 1.0f);
    CHECK(gp_f16_to_f32(0x0001) == ldexpf(1, -24));
}

TEST(arena_alignment_and_reset) {
    gp_arena arena;
    REQUIRE(gp_arena_init(&arena, 4096) == 0);
    void *a = gp_arena_alloc(&arena, 10);
    void *b = gp_arena_alloc(&arena, 10);
    CHECK(((uintptr_t)a % 64) == 0 && ((uintptr_t)b % 64) == 0 && a != b);
    CHECK(gp_arena_alloc(&arena, 8192) == NULL);
    gp_arena_reset(&arena);
    CHECK(gp_arena_alloc(&arena, 10) == a);
    gp_arena_free(&arena);
}
