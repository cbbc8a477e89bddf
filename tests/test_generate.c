/* test_generate.c — whole generations against the upstream goldens of
 * ../shared/fixtures/model-tiny: generate[] (greedy, repetition penalty, CFG
 * in both modes, force_stop_frames, the stop head), sampling_probs[]
 * (probability vectors to 1e-5, arg-max codes exactly) and lora[]; plus a
 * chi-square test of the sampler and batching invariance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gen_cases.h"
#include "golden.h"
#include "model/compressor.h"
#include "model/generate.h"
#include "model/lora.h"
#include "model/sampler.h"
#include "test.h"

typedef struct run_result {
    int32_t *frames; /* [T][C] */
    int n_frames;
    gp_stop_reason reason;
} run_result;

static gp_model *load_tiny(void) {
    gp_model_load_options o = {.weight_format = GP_WEIGHTS_F32};
    gp_model *m = NULL;
    gp_error err;
    if (gp_model_load(test_fixture("model-tiny/model"), &o, &m, &err))
        test_fail(__FILE__, __LINE__, "model load: %s", err.message);
    return m;
}

static void check_codes(const golden *g, const char *key, const gp_gen_stream *s, int C) {
    char name[64];
    snprintf(name, sizeof name, "%s.codes", key);
    int64_t dims[2];
    int32_t *want = golden_i32(g, name, dims, NULL);
    REQUIRE(want);
    int T = (int)dims[1];
    CHECK_MSG(s->n_frames == T, "%s: %d frames, expected %d", key, s->n_frames, T);
    int mismatches = 0;
    for (int t = 0; t < T && t < s->n_frames; t++)
        for (int c = 0; c < C; c++)
            if (s->frames[(size_t)t * C + c] != want[(size_t)c * T + t]) mismatches++;
    CHECK_MSG(mismatches == 0, "%s: %d codes differ", key, mismatches);
    free(want);
}

static void run_generate_case(const char *key) {
    golden g;
    REQUIRE(golden_open(&g, "model-tiny") == 0);
    gp_model *m = load_tiny();
    REQUIRE(m);
    const cJSON *gc = golden_case(&g, "generate", key);
    REQUIRE(gc);
    size_t n_ids;
    int32_t *ids = gen_case_layout(&g, cJSON_GetObjectItem(gc, "text")->valuestring, &n_ids);
    REQUIRE(ids);
    gp_gen_params p = gen_case_params(cJSON_GetObjectItem(gc, "options"));
    gp_error err;
    const int H = m->cfg.backbone.hidden_size, C = m->cfg.num_channels;
    float *prefix = NULL;
    int prefix_rows = 0;
    const cJSON *ref = cJSON_GetObjectItem(gc, "ref_codes");
    if (ref) {
        int64_t dims[2];
        int32_t *codes = golden_i32(&g, ref->valuestring, dims, NULL);
        prefix_rows = m->cfg.voice_cloning.num_queries;
        prefix = calloc((size_t)prefix_rows * H, sizeof(float));
        REQUIRE_OK(gp_compressor_run(m, codes, (int)dims[0], prefix, NULL, &err), &err);
        free(codes);
    }
    gp_kv_pool *kv;
    REQUIRE_OK(gp_kv_pool_create(m->cfg.backbone.num_layers, m->cfg.backbone.num_kv_heads,
                                 m->cfg.backbone.head_dim, 16, 256, &kv, &err),
               &err);
    gp_gen_stream *s;
    REQUIRE_OK(gp_gen_create(m, &p, ids, (int)n_ids, prefix, prefix_rows, NULL, &s, &err), &err);
    REQUIRE_OK(gen_run_streams(&s, 1, kv, 7, &err), &err);
    check_codes(&g, key, s, C);
    test_note("%s: %d frames, stop reason %d", key, s->n_frames, s->stop_reason);
    gp_gen_free(s, kv);
    CHECK_EQ_INT(kv->free_count, kv->num_blocks); /* every block returned */
    gp_kv_pool_free(kv);
    free(prefix);
    free(ids);
    gp_model_free(m);
    golden_close(&g);
}

TEST(generate_gen0_greedy_voice) { run_generate_case("gen0"); }
TEST(generate_gen1_repetition_penalty) { run_generate_case("gen1"); }
TEST(generate_gen2_cfg_empty_text) { run_generate_case("gen2"); }
TEST(generate_gen3_cfg_audio_only) { run_generate_case("gen3"); }
TEST(generate_gen4_force_stop) { run_generate_case("gen4"); }
TEST(generate_genstop_stop_head) { run_generate_case("genstop"); }

typedef struct probe {
    float *probs;
    size_t n;
} probe;

static void record_probs(int frame, int channel, const float *probs, int L, void *user) {
    (void)frame;
    (void)channel;
    probe *pr = user;
    memcpy(pr->probs + pr->n, probs, (size_t)L * sizeof(float));
    pr->n += (size_t)L;
}

static int pick_argmax(const float *probs, int L, void *user) {
    (void)user;
    return gp_sampler_argmax(probs, L);
}

TEST(sampling_probabilities_match_reference) {
    golden g;
    REQUIRE(golden_open(&g, "model-tiny") == 0);
    gp_model *m = load_tiny();
    REQUIRE(m);
    const cJSON *sc = golden_case(&g, "sampling_probs", "sample0");
    REQUIRE(sc);
    size_t n_ids;
    int32_t *ids = gen_case_layout(&g, cJSON_GetObjectItem(sc, "text")->valuestring, &n_ids);
    gp_gen_params p = gen_case_params(cJSON_GetObjectItem(sc, "options"));
    gp_error err;
    gp_kv_pool *kv;
    REQUIRE_OK(gp_kv_pool_create(m->cfg.backbone.num_layers, m->cfg.backbone.num_kv_heads,
                                 m->cfg.backbone.head_dim, 16, 64, &kv, &err),
               &err);
    gp_gen_stream *s;
    REQUIRE_OK(gp_gen_create(m, &p, ids, (int)n_ids, NULL, 0, NULL, &s, &err), &err);
    size_t n_want;
    float *want = golden_f32(&g, "sample0.probs", &n_want);
    probe pr = {calloc(n_want + 4096, sizeof(float)), 0};
    s->on_probs = record_probs;
    s->pick = pick_argmax;
    s->user = &pr;
    REQUIRE_OK(gen_run_streams(&s, 1, kv, 64, &err), &err);
    CHECK_EQ_INT(pr.n, n_want);
    double diff = test_max_abs_diff(pr.probs, want, pr.n < n_want ? pr.n : n_want);
    test_note("sampling probabilities: max abs error %.3g (tolerance 1e-5)", diff);
    CHECK(diff <= 1e-5);
    check_codes(&g, "sample0", s, m->cfg.num_channels);
    gp_gen_free(s, kv);
    gp_kv_pool_free(kv);
    free(pr.probs);
    free(want);
    free(ids);
    gp_model_free(m);
    golden_close(&g);
}

static void run_lora_case(bool merge, const char *file) {
    golden g;
    REQUIRE(golden_open(&g, "model-tiny") == 0);
    gp_model *m = load_tiny();
    REQUIRE(m);
    const cJSON *lc = golden_case(&g, "lora", "lora0");
    REQUIRE(lc);
    size_t n_ids;
    int32_t *ids = gen_case_layout(&g, cJSON_GetObjectItem(lc, "text")->valuestring, &n_ids);
    gp_gen_params p = gen_case_params(cJSON_GetObjectItem(lc, "options"));
    double alpha = cJSON_GetObjectItem(lc, "alpha")->valuedouble;
    gp_error err;
    gp_lora_adapter *ad;
    char path[512];
    snprintf(path, sizeof path, "model-tiny/%s", file);
    REQUIRE_OK(gp_lora_load(test_fixture(path), m, alpha, &ad, &err), &err);
    CHECK_EQ_INT(ad->rank, 4);
    if (merge) REQUIRE_OK(gp_lora_merge(m, ad, &err), &err);
    gp_kv_pool *kv;
    REQUIRE_OK(gp_kv_pool_create(m->cfg.backbone.num_layers, m->cfg.backbone.num_kv_heads,
                                 m->cfg.backbone.head_dim, 16, 64, &kv, &err),
               &err);
    gp_gen_stream *s;
    REQUIRE_OK(gp_gen_create(m, &p, ids, (int)n_ids, NULL, 0, merge ? NULL : ad, &s, &err), &err);
    REQUIRE_OK(gen_run_streams(&s, 1, kv, 64, &err), &err);
    check_codes(&g, "lora0", s, m->cfg.num_channels);
    gp_gen_free(s, kv);
    gp_kv_pool_free(kv);
    gp_lora_free(ad);
    free(ids);
    gp_model_free(m);
    golden_close(&g);
}

TEST(lora_runtime_safetensors) { run_lora_case(false, "lora_adapter.safetensors"); }
TEST(lora_merged_safetensors) { run_lora_case(true, "lora_adapter.safetensors"); }
TEST(lora_runtime_torch_pt) { run_lora_case(false, "lora_adapter.pt"); }
TEST(lora_merged_torch_pt) { run_lora_case(true, "lora_adapter.pt"); }

TEST(lora_shape_mismatch_is_an_error) {
    gp_model *m = load_tiny();
    REQUIRE(m);
    float a[3 * 64] = {0}, b[128 * 3] = {0};
    int64_t sa[2] = {3, 64}, sb[2] = {100, 3}; /* q_proj has 128 outputs, not 100 */
    gp_st_writer *w = gp_st_writer_create();
    gp_error err;
    REQUIRE_OK(
        gp_st_writer_add(w, "model.layers.1.self_attn.q_proj.lora_A", GP_F32, 2, sa, a, &err),
        &err);
    REQUIRE_OK(
        gp_st_writer_add(w, "model.layers.1.self_attn.q_proj.lora_B", GP_F32, 2, sb, b, &err),
        &err);
    REQUIRE_OK(gp_st_writer_write(w, test_tmp("bad_lora.safetensors"), &err), &err);
    gp_st_writer_free(w);
    gp_lora_adapter *ad = NULL;
    CHECK_ERR_CONTAINS(gp_lora_load(test_tmp("bad_lora.safetensors"), m, 0, &ad, &err), &err,
                       "do not fit the model");
    CHECK(ad == NULL);
    gp_model_free(m);
}

/* Several streams in one batch produce exactly what each produces alone. */
TEST(batched_streams_equal_individual_runs) {
    golden g;
    REQUIRE(golden_open(&g, "model-tiny") == 0);
    gp_model *m = load_tiny();
    REQUIRE(m);
    const char *keys[] = {"gen1", "gen2", "gen3", "gen4"};
    gp_gen_stream *streams[4];
    gp_error err;
    gp_kv_pool *kv;
    REQUIRE_OK(gp_kv_pool_create(m->cfg.backbone.num_layers, m->cfg.backbone.num_kv_heads,
                                 m->cfg.backbone.head_dim, 16, 512, &kv, &err),
               &err);
    for (int i = 0; i < 4; i++) {
        const cJSON *gc = golden_case(&g, "generate", keys[i]);
        size_t n_ids;
        int32_t *ids = gen_case_layout(&g, cJSON_GetObjectItem(gc, "text")->valuestring, &n_ids);
        gp_gen_params p = gen_case_params(cJSON_GetObjectItem(gc, "options"));
        REQUIRE_OK(gp_gen_create(m, &p, ids, (int)n_ids, NULL, 0, NULL, &streams[i], &err), &err);
        free(ids);
    }
    REQUIRE_OK(gen_run_streams(streams, 4, kv, 5, &err), &err);
    for (int i = 0; i < 4; i++) {
        check_codes(&g, keys[i], streams[i], m->cfg.num_channels);
        gp_gen_free(streams[i], kv);
    }
    CHECK_EQ_INT(kv->free_count, kv->num_blocks);
    gp_kv_pool_free(kv);
    gp_model_free(m);
    golden_close(&g);
}

/* For fixed logits, 100k draws follow the softmax (chi-square, fixed seed). */
TEST(sampler_chi_square) {
    const int L = 8;
    const float logits[8] = {0.3f, -1.2f, 2.0f, 0.0f, 1.1f, -0.4f, 0.7f, -2.5f};
    gp_sampler_params sp = {0.8f, 0, 1.0f};
    float probs[8];
    memcpy(probs, logits, sizeof probs);
    gp_sampler_probs(probs, L, &sp, NULL);
    double psum = 0;
    for (int k = 0; k < L; k++) psum += probs[k];
    CHECK(fabs(psum - 1) < 1e-6);
    gp_rng rng;
    gp_rng_seed(&rng, 1234);
    const int draws = 100000;
    int counts[8] = {0};
    for (int i = 0; i < draws; i++) counts[gp_sampler_draw(probs, L, gp_rng_uniform(&rng))]++;
    double chi2 = 0;
    for (int k = 0; k < L; k++) {
        double expected = probs[k] * draws;
        chi2 += (counts[k] - expected) * (counts[k] - expected) / expected;
    }
    /* 7 degrees of freedom: the 99.9th percentile is 24.32. */
    test_note("chi-square %.2f over %d draws (7 dof, limit 24.32)", chi2, draws);
    CHECK(chi2 < 24.32);
    /* top-k keeps ties; penalty applies once per distinct code. */
    float z[6] = {1, 3, 3, 2, 0, -1};
    gp_sampler_params topk = {1.0f, 2, 1.0f};
    gp_sampler_probs(z, 6, &topk, NULL);
    CHECK(z[1] == 0.5f && z[2] == 0.5f && z[3] == 0 && z[0] == 0);
    float ties[5] = {1, 2, 2, 2, 0}; /* k = 2: three values tie at the 2nd place, all kept */
    gp_sampler_probs(ties, 5, &topk, NULL);
    CHECK(ties[1] > 0.33f && ties[2] > 0.33f && ties[3] > 0.33f && ties[0] == 0);
    float y[3] = {2, -2, 1};
    bool pen[3] = {true, true, false};
    gp_sampler_params penalty = {0, 0, 2.0f};
    gp_sampler_probs(y, 3, &penalty, pen); /* 2 -> 1 ties with 1; arg-max picks the first */
    CHECK(y[0] == 1.0f);
}
