/* test_model_shapes.c — nothing assumes the fixture's dimensions: a
 * synthetic checkpoint of another shape (odd widths, 3 layers, GQA ratio 3,
 * partial rotary 0.5, attention biases, repetition off, other prefix size)
 * loads and generates, and the invariants hold that tie the fast paths to the
 * reference: chunked prefill equals one-shot prefill, streams batched
 * together equal streams run alone, and f32 and bf16 weights (bf16 holds the
 * stored values exactly) give the same codes. */
#include <stdlib.h>
#include <string.h>

#include "model/generate.h"
#include "model/synth.h"
#include "test.h"

static gp_synth_model_spec odd_spec(void) {
    gp_synth_model_spec s;
    gp_synth_model_preset("tiny", &s);
    s.hidden = 48;
    s.layers = 3;
    s.heads = 6;
    s.kv_heads = 2;
    s.head_dim = 12;
    s.intermediate = 80;
    s.vocab = 248100;
    s.audio_embed_dim = 4;
    s.vc_queries = 3;
    s.vc_heads = 3;
    s.partial_rotary_factor = 0.5;
    s.attention_bias = true;
    s.no_repetition = true;
    s.tokenizer_merges = 300;
    s.stop_after_frames = 0; /* every run here is fixed-length: no stop-head fit */
    return s;
}

/* Streams j = first .. first+streams-1 speak ids[0 .. 17-j) with seed 40+j. */
static int run(gp_model *m, const int32_t *ids, int first, int streams, int max_rows,
               int32_t *out /* [streams][20][C] */) {
    gp_gen_params p = gp_gen_default_params();
    p.temperature = 0.7f;
    p.stop_threshold = 2.0f;
    p.max_frames = 20;
    p.repetition_penalty = 1.1f;
    gp_error err;
    gp_kv_pool *kv;
    const gp_backbone_config *bb = &m->cfg.backbone;
    if (gp_kv_pool_create(bb->num_layers, bb->num_kv_heads, bb->head_dim, 8, 256, &kv, &err))
        return -1;
    gp_gen_stream *s[4];
    for (int i = 0; i < streams; i++) {
        p.seed = 40 + (uint64_t)(first + i);
        if (gp_gen_create(m, &p, ids, 17 - first - i, NULL, 0, NULL, &s[i], &err) ||
            gp_gen_reserve(s[i], kv, &err))
            return -1;
    }
    gp_gen_workspace w;
    gp_gen_workspace_init(&w);
    while (gp_gen_step(s, streams, kv, &w, max_rows, NULL, &err) > 0) {
    }
    const int C = m->cfg.num_channels;
    for (int i = 0; i < streams; i++) {
        memcpy(out + (size_t)i * 20 * C, s[i]->frames,
               (size_t)s[i]->n_frames * C * sizeof(int32_t));
        gp_gen_free(s[i], kv);
    }
    gp_gen_workspace_free(&w);
    gp_kv_pool_free(kv);
    return 0;
}

TEST(model_of_another_shape_keeps_invariants) {
    gp_synth_model_spec spec = odd_spec();
    gp_error err;
    REQUIRE_OK(gp_synth_model_write(test_tmpdir(), &spec, 9, &err), &err);
    gp_model *f32, *bf16;
    gp_model_load_options o = {.weight_format = GP_WEIGHTS_F32};
    REQUIRE_OK(gp_model_load(test_tmpdir(), &o, &f32, &err), &err);
    o.weight_format = GP_WEIGHTS_BF16;
    REQUIRE_OK(gp_model_load(test_tmpdir(), &o, &bf16, &err), &err);
    CHECK_EQ_INT(f32->cfg.backbone.rotary_dim, 6);
    CHECK(f32->layers[0].q_bias != NULL);
    CHECK(!f32->cfg.repetition.enabled);
    const int C = f32->cfg.num_channels;
    int32_t ids[17];
    for (int i = 0; i < 16; i++) ids[i] = 97 + i * 3;
    ids[16] = f32->cfg.special.start_of_speech;
    int32_t *one_shot = calloc(4 * 20 * (size_t)C, sizeof(int32_t));
    int32_t *chunked = calloc(4 * 20 * (size_t)C, sizeof(int32_t));
    int32_t *batched = calloc(4 * 20 * (size_t)C, sizeof(int32_t));
    int32_t *in_bf16 = calloc(4 * 20 * (size_t)C, sizeof(int32_t));
    for (int i = 0; i < 3; i++) {
        REQUIRE(run(f32, ids, i, 1, 512, one_shot + (size_t)i * 20 * C) == 0);
        REQUIRE(run(f32, ids, i, 1, 5, chunked + (size_t)i * 20 * C) == 0);
        REQUIRE(run(bf16, ids, i, 1, 512, in_bf16 + (size_t)i * 20 * C) == 0);
    }
    REQUIRE(run(f32, ids, 0, 3, 7, batched) == 0);
    size_t n = 3 * 20 * (size_t)C;
    CHECK_MSG(memcmp(one_shot, chunked, n * 4) == 0, "chunked prefill changed the codes");
    CHECK_MSG(memcmp(one_shot, batched, n * 4) == 0, "batching changed the codes");
    CHECK_MSG(memcmp(one_shot, in_bf16, n * 4) == 0, "bf16 weights changed the codes");
    free(one_shot);
    free(chunked);
    free(batched);
    free(in_bf16);
    gp_model_free(f32);
    gp_model_free(bf16);
}
