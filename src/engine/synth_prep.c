/* synth_prep.c — parameter conversion and text → layout ids with the input
 * checks every synthesis path shares (see synth_prep.h). */
#include "engine/synth_prep.h"

#include <stdlib.h>
#include <string.h>

#include "base/rng.h"

int gp_synth_params_convert(const gepard_synth_params *in, gp_gen_params *out, gp_error *err) {
    gp_gen_params p = gp_gen_default_params();
    p.temperature = in->temperature;
    p.top_k = in->top_k;
    p.stop_threshold = in->stop_threshold;
    p.max_frames = in->max_frames;
    p.repetition_penalty = in->repetition_penalty;
    p.repetition_window = in->repetition_window;
    p.cfg_scale = in->cfg_scale;
    p.cfg_frames = in->cfg_frames;
    p.cfg_uncond = in->cfg_uncond == GEPARD_CFG_AUDIO_ONLY ? GP_CFG_AUDIO_ONLY : GP_CFG_EMPTY_TEXT;
    if (in->cfg_uncond != GEPARD_CFG_AUDIO_ONLY && in->cfg_uncond != GEPARD_CFG_EMPTY_TEXT)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "cfg_uncond must be empty_text or audio_only");
    p.force_stop_frames = in->force_stop_frames;
    p.seed = in->random_seed ? gp_rng_entropy_seed() : in->seed;
    *out = p;
    return gp_gen_params_validate(&p, err);
}

static bool only_whitespace(const char *text, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\v' && c != '\f') return false;
    }
    return true;
}

int gp_synth_layout(const gepard_model *gm, const char *text, size_t len, int prefix_rows,
                    int max_frames, int32_t **ids, int *n_ids, gp_error *err) {
    *ids = NULL;
    *n_ids = 0;
    if (!text || len == 0 || only_whitespace(text, len))
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "the text is empty — give some words to speak");
    int32_t *text_ids = NULL;
    size_t n_text = 0;
    int rc = gp_tok_encode(gm->tokenizer.tok, text, len, &text_ids, &n_text, err);
    if (rc) return rc;
    const gp_special_tokens *st = &gm->tokenizer.cfg.special;
    int32_t *layout = NULL;
    size_t n_layout = 0;
    rc = gp_layout_build(&gm->tokenizer.repetition, st->start_of_text, st->end_of_text,
                         st->start_of_speech, text_ids, n_text, &layout, &n_layout, err);
    free(text_ids);
    if (rc) return rc;
    const gp_backbone_config *bb = &gm->model->cfg.backbone;
    long long need = (long long)prefix_rows + (long long)n_layout + max_frames;
    if (need > bb->max_position_embeddings || n_layout > 1000000) {
        free(layout);
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "the text is too long: %zu layout tokens + %d speaker rows + max_frames %d "
                       "= %lld positions exceed the model's context of %lld — split the text or "
                       "lower max_frames",
                       n_layout, prefix_rows, max_frames, need,
                       (long long)bb->max_position_embeddings);
    }
    *ids = layout;
    *n_ids = (int)n_layout;
    return GEPARD_OK;
}
