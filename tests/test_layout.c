/* test_layout.c — the text-repetition layout (MODEL.md §D.2) against the
 * table of repeat counts and the teacher-forced goldens of model-tiny. */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "test.h"
#include "text/layout.h"
#include "text/tokenizer.h"

static const gp_text_repetition shipped = {true, 16, 13, 8};

TEST(layout_repeat_count_table) {
    /* MODEL.md §D.2: n=1->8, 2->8, 3->6, 4->4, 5->4, 6->3, 7->3, 8..12->2,
     * >=13->1, n=0->1. */
    static const int want[21] = {1, 8, 8, 6, 4, 4, 3, 3, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1};
    for (size_t n = 0; n <= 20; n++)
        CHECK_MSG(gp_layout_repeat_count(&shipped, n) == want[n], "R(%zu) = %d, expected %d", n,
                  gp_layout_repeat_count(&shipped, n), want[n]);
    gp_text_repetition off = shipped;
    off.enabled = false;
    CHECK_EQ_INT(gp_layout_repeat_count(&off, 1), 1);
    CHECK_EQ_INT(gp_layout_repeat_count(NULL, 1), 1);
    CHECK_EQ_INT(gp_layout_repeat_count(&shipped, (size_t)1 << 40), 1);
    /* target above apply_below: n in [below, target) is still 1. */
    gp_text_repetition wide = {true, 40, 10, 100};
    CHECK_EQ_INT(gp_layout_repeat_count(&wide, 9), 5);
    CHECK_EQ_INT(gp_layout_repeat_count(&wide, 10), 1);
    /* Degenerate policies never give R < 1. */
    gp_text_repetition zero = {true, 16, 13, 0};
    CHECK_EQ_INT(gp_layout_repeat_count(&zero, 3), 1);
}

TEST(layout_build_shapes) {
    gp_error err;
    int32_t *out;
    size_t n;
    REQUIRE_OK(gp_layout_build(&shipped, 100, 101, 102, NULL, 0, &out, &n, &err), &err);
    CHECK(n == 3 && out[0] == 100 && out[1] == 101 && out[2] == 102);
    free(out);
    const int32_t ids[3] = {7, 8, 9};
    REQUIRE_OK(gp_layout_build(&shipped, 100, 101, 102, ids, 3, &out, &n, &err), &err);
    /* R = 6: T_text = 6 * (3 + 2) + 1. */
    CHECK_EQ_INT(n, 31);
    for (int r = 0; r < 6; r++) {
        CHECK(out[5 * r] == 100 && out[5 * r + 4] == 101);
        CHECK(memcmp(out + 5 * r + 1, ids, sizeof ids) == 0);
    }
    CHECK_EQ_INT(out[30], 102);
    free(out);
    CHECK_ERR_CONTAINS(gp_layout_build(&shipped, -1, 101, 102, ids, 3, &out, &n, &err), &err,
                       "special token ids must be >= 0");
    CHECK_ERR_CONTAINS(gp_layout_build(&shipped, 1, 2, 3, NULL, 3, &out, &n, &err), &err,
                       "no token ids");
}

static int32_t special_id(const cJSON *golden, const char *key) {
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(golden, "special_tokens");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(sp, key);
    return cJSON_IsNumber(v) ? (int32_t)v->valuedouble : -1;
}

TEST(layout_reproduces_teacher_forced_goldens) {
    gp_error err;
    cJSON *golden;
    REQUIRE_OK(gp_json_load_file(test_fixture("model-tiny/golden.json"), 0, &golden, &err), &err);
    gp_tokenizer *tok;
    REQUIRE_OK(gp_tok_load(test_fixture("model-tiny/model/tokenizer.json"), &tok, &err), &err);
    int32_t sot = special_id(golden, "start_of_text"), eot = special_id(golden, "end_of_text"),
            sos = special_id(golden, "start_of_speech");
    REQUIRE(sot >= 0 && eot >= 0 && sos >= 0);
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(golden, "teacher_forced");
    int checked = 0;
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next) {
        const char *key = cJSON_GetObjectItemCaseSensitive(c, "key")->valuestring;
        const char *text = cJSON_GetObjectItemCaseSensitive(c, "text")->valuestring;
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(c, "layout_ids");
        const cJSON *want_text = cJSON_GetObjectItemCaseSensitive(c, "text_ids");
        int32_t *ids, *layout;
        size_t n, n_layout;
        REQUIRE_OK(gp_tok_encode(tok, text, strlen(text), &ids, &n, &err), &err);
        CHECK_MSG((size_t)cJSON_GetArraySize(want_text) == n, "%s: %zu text ids", key, n);
        REQUIRE_OK(gp_layout_build(&shipped, sot, eot, sos, ids, n, &layout, &n_layout, &err),
                   &err);
        bool same = (size_t)cJSON_GetArraySize(want) == n_layout;
        size_t i = 0;
        for (const cJSON *it = want->child; same && it; it = it->next, i++)
            same = (int32_t)it->valuedouble == layout[i];
        CHECK_MSG(same, "%s: layout of \"%s\" (%zu ids) differs from the golden", key, text,
                  n_layout);
        free(ids);
        free(layout);
        checked++;
    }
    CHECK(checked == 3);
    gp_tok_free(tok);
    cJSON_Delete(golden);
}
