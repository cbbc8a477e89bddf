/* api_text.c — the public tokenizer functions of gepard.h. */
#include <stdlib.h>
#include <string.h>

#include "engine/api_error.h"
#include "engine/api_internal.h"
#include "io/file.h"

void gepard_free(void *p) { free(p); }

int gp_api_tokenizer_init(gepard_tokenizer *t, const char *path, bool need_config, gp_error *err) {
    memset(t, 0, sizeof *t);
    bool is_dir = gp_path_is_dir(path);
    if (!is_dir && !gp_path_exists(path))
        return gp_fail(err, GEPARD_ERR_NOT_FOUND,
                       "%s: no such model directory or tokenizer.json file", path);
    if (is_dir) {
        gp_error cfg_err;
        gp_error_clear(&cfg_err);
        int rc = gp_model_config_load(path, &t->cfg, &cfg_err);
        if (rc && (need_config || rc != GEPARD_ERR_NOT_FOUND)) {
            *err = cfg_err;
            return rc;
        }
        t->has_config = rc == GEPARD_OK;
        if (!t->has_config)
            snprintf(t->config_error, sizeof t->config_error, "%s", cfg_err.message);
    } else {
        if (need_config)
            return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                           "%s: expected a model directory, got a file", path);
        snprintf(t->config_error, sizeof t->config_error,
                 "%s: a bare tokenizer.json has no gepard_config.json to take the layout from — "
                 "pass the model directory",
                 path);
    }
    char *file = is_dir ? gp_path_join(path, "tokenizer.json") : strdup(path);
    if (!file) return gp_fail_oom(err, "path", strlen(path));
    int rc = gp_tok_load(file, &t->tok, err);
    free(file);
    if (rc) return rc;
    t->repetition.enabled = t->cfg.repetition.enabled;
    t->repetition.target_text_tokens = t->cfg.repetition.target_text_tokens;
    t->repetition.apply_below = t->cfg.repetition.apply_below;
    t->repetition.max_repeats = t->cfg.repetition.max_repeats;
    return GEPARD_OK;
}

void gp_api_tokenizer_clear(gepard_tokenizer *t) {
    gp_tok_free(t->tok);
    memset(t, 0, sizeof *t);
}

gepard_status gepard_tokenizer_load(const char *model_dir, gepard_tokenizer **out) {
    *out = NULL;
    gp_error err;
    gp_error_clear(&err);
    gepard_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return gp_api_failf(GEPARD_ERR_NOMEM, "out of memory");
    if (gp_api_tokenizer_init(t, model_dir, false, &err)) {
        gp_api_tokenizer_clear(t);
        free(t);
        return gp_api_fail(&err);
    }
    *out = t;
    return gp_api_ok();
}

void gepard_tokenizer_free(gepard_tokenizer *t) {
    if (!t) return;
    gp_api_tokenizer_clear(t);
    free(t);
}

gepard_status gepard_tokenize(gepard_tokenizer *t, const char *text, int32_t **ids, size_t *n_ids) {
    gp_error err;
    gp_error_clear(&err);
    *ids = NULL;
    *n_ids = 0;
    if (!text) return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT, "no text given");
    if (gp_tok_encode(t->tok, text, strlen(text), ids, n_ids, &err)) return gp_api_fail(&err);
    return gp_api_ok();
}

gepard_status gepard_text_layout(const gepard_tokenizer *t, const int32_t *ids, size_t n_ids,
                                 int32_t **layout, size_t *n_layout) {
    gp_error err;
    gp_error_clear(&err);
    if (!t->has_config) return gp_api_failf(GEPARD_ERR_INVALID_ARGUMENT, "%s", t->config_error);
    const gp_special_tokens *st = &t->cfg.special;
    if (gp_layout_build(&t->repetition, st->start_of_text, st->end_of_text, st->start_of_speech,
                        ids, n_ids, layout, n_layout, &err))
        return gp_api_fail(&err);
    return gp_api_ok();
}

gepard_status gepard_detokenize(const gepard_tokenizer *t, const int32_t *ids, size_t n_ids,
                                char **text) {
    gp_error err;
    gp_error_clear(&err);
    size_t len;
    if (gp_tok_decode(t->tok, ids, n_ids, false, text, &len, &err)) return gp_api_fail(&err);
    return gp_api_ok();
}
