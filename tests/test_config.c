/* test_config.c — gepard_config.json resolution rules (MODEL.md §A) and the
 * refusals of configs the engine cannot run. Each case edits the fixture's
 * config in memory. */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "io/safetensors.h"
#include "model/config.h"
#include "test.h"

static cJSON *fixture_config(void) {
    cJSON *root;
    gp_error err;
    if (gp_json_load_file(test_fixture("model-tiny/model/gepard_config.json"), 1 << 20, &root,
                          &err))
        return NULL;
    return root;
}

TEST(config_fixture_resolves) {
    gp_model_config cfg;
    gp_error err;
    REQUIRE_OK(gp_model_config_load(test_fixture("model-tiny/model"), &cfg, &err), &err);
    CHECK_EQ_INT(cfg.backbone.hidden_size, 64);
    CHECK_EQ_INT(cfg.backbone.head_dim, 16);
    CHECK_EQ_INT(cfg.backbone.rotary_dim, 16);
    CHECK_EQ_INT(cfg.num_channels, 32);
    CHECK_EQ_INT(cfg.total_logits, 216);
    CHECK_EQ_INT(cfg.channel_vocab[10], 6);
    CHECK_EQ_INT(cfg.special.start_of_speech, 423);
    CHECK(cfg.repetition.enabled && cfg.repetition.apply_below == 13);
    CHECK(cfg.voice_cloning.enabled && cfg.voice_cloning.num_queries == 4);
    CHECK_EQ_INT(cfg.voice_cloning.ffn_hidden_size, 128);
}

static void expect_parse_error(cJSON *root, const char *needle) {
    gp_model_config cfg;
    gp_error err;
    CHECK_ERR_CONTAINS(gp_model_config_parse_gepard(root, "gepard_config.json", &cfg, &err), &err,
                       needle);
}

TEST(config_refusals) {
    cJSON *root = fixture_config();
    REQUIRE(root);
    cJSON_DeleteItemFromObject(root, "audio_heads");
    expect_parse_error(root, "\"audio_heads\" is missing");
    cJSON_Delete(root);

    root = fixture_config();
    cJSON *types = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "backbone_config"), "layer_types");
    cJSON_ReplaceItemInArray(types, 1, cJSON_CreateString("linear_attention"));
    expect_parse_error(root, "layer 1 is a \"linear_attention\" layer");
    cJSON_Delete(root);

    root = fixture_config();
    cJSON_DeleteItemFromObject(root, "backbone_config");
    expect_parse_error(root, "\"backbone_config\" is missing");
    cJSON_Delete(root);

    root = fixture_config();
    cJSON *heads = cJSON_GetObjectItem(root, "audio_heads");
    cJSON_DeleteItemFromObject(heads, "level_audio_7");
    cJSON_AddNumberToObject(heads, "level_audio_40", 6);
    expect_parse_error(root, "without gaps");
    cJSON_Delete(root);

    root = fixture_config();
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "audio_heads"), "level_audio_5",
                              cJSON_CreateNumber(9));
    expect_parse_error(root, "fsq_levels says 7");
    cJSON_Delete(root);

    root = fixture_config();
    cJSON *rope =
        cJSON_GetObjectItem(cJSON_GetObjectItem(root, "backbone_config"), "rope_parameters");
    cJSON_ReplaceItemInObject(rope, "rope_type", cJSON_CreateString("yarn"));
    expect_parse_error(root, "rope_type \"yarn\" is not supported");
    cJSON_Delete(root);

    root = fixture_config();
    cJSON *bb = cJSON_GetObjectItem(root, "backbone_config");
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(bb, "rope_parameters"), "rope_theta");
    expect_parse_error(root, "rope_theta is missing");
    cJSON_Delete(root);

    root = fixture_config();
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "backbone_config"), "hidden_size",
                              cJSON_CreateString("big"));
    expect_parse_error(root, "\"hidden_size\" must be an integer");
    cJSON_Delete(root);
}

TEST(config_resolution_rules) {
    /* partial_rotary_factor: gepard top level wins over nested and flat. */
    cJSON *root = fixture_config();
    cJSON_ReplaceItemInObject(root, "partial_rotary_factor", cJSON_CreateNumber(0.5));
    gp_model_config cfg;
    gp_error err;
    REQUIRE_OK(gp_model_config_parse_gepard(root, "c", &cfg, &err), &err);
    CHECK_EQ_INT(cfg.backbone.rotary_dim, 8);
    /* without it, the nested value (1.0) wins over a stale flat 0.25 */
    cJSON_DeleteItemFromObject(root, "partial_rotary_factor");
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(root, "backbone_config"), "partial_rotary_factor",
                              cJSON_CreateNumber(0.25));
    REQUIRE_OK(gp_model_config_parse_gepard(root, "c", &cfg, &err), &err);
    CHECK_EQ_INT(cfg.backbone.rotary_dim, 16);
    cJSON_Delete(root);
    /* audio_heads order comes from the numeric suffix, not the key order */
    root = fixture_config();
    cJSON *heads = cJSON_GetObjectItem(root, "audio_heads");
    cJSON *h10 = cJSON_DetachItemFromObject(heads, "level_audio_10");
    cJSON_AddItemToObject(heads, "level_audio_10", h10); /* now last in the file */
    REQUIRE_OK(gp_model_config_parse_gepard(root, "c", &cfg, &err), &err);
    CHECK_EQ_INT(cfg.channel_vocab[10], 6);
    CHECK_EQ_INT(cfg.channel_vocab[31], 6);
    CHECK_EQ_INT(cfg.channel_offset[1], 8);
    /* a missing text_repetition block means repetition is off */
    cJSON_DeleteItemFromObject(root, "text_repetition");
    REQUIRE_OK(gp_model_config_parse_gepard(root, "c", &cfg, &err), &err);
    CHECK(!cfg.repetition.enabled);
    cJSON_Delete(root);
}

TEST(model_load_reports_bad_tensors) {
    /* A checkpoint directory whose safetensors lacks a tensor. */
    const char *dir = test_tmpdir();
    char path[1024];
    FILE *in = fopen(test_fixture("model-tiny/model/gepard_config.json"), "rb");
    REQUIRE(in);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    snprintf(path, sizeof path, "%s/gepard_config.json", dir);
    test_write_file(path, buf, n);
    float x[64] = {0};
    int64_t shape[1] = {64};
    gp_st_writer *w = gp_st_writer_create();
    gp_error err;
    gp_st_writer_add(w, "model.norm.weight", GP_F32, 1, shape, x, &err);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    REQUIRE_OK(gp_st_writer_write(w, path, &err), &err);
    gp_st_writer_free(w);
    const char *cp[] = {"cp", test_fixture("model-tiny/model/tokenizer.json"), dir, NULL};
    test_cmd_result c;
    REQUIRE(test_run_program(&c, NULL, 0, 10, cp) == 0 && c.status == 0);
    test_cmd_result_free(&c);
    const char *args[] = {"codes", "--model", dir, "hello", NULL};
    test_cmd_result r;
    REQUIRE(test_run_gepard(&r, NULL, 0, 30, args) == 0);
    CHECK_EQ_INT(r.status, 1);
    CHECK_MSG(strstr(r.err, "model.embed_tokens.weight is missing — is this a Gepard checkpoint"),
              "unexpected message: %s", r.err);
    test_cmd_result_free(&r);
}
