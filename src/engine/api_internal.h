/* api_internal.h — what the public handles of gepard.h hold. Only the
 * engine/ files that implement the public API include this. */
#ifndef GP_ENGINE_API_INTERNAL_H
#define GP_ENGINE_API_INTERNAL_H

#include "codec/codec.h"
#include "gepard.h"
#include "model/config.h"
#include "model/lora.h"
#include "model/model.h"
#include "text/layout.h"
#include "text/tokenizer.h"

struct gepard_tokenizer {
    gp_tokenizer *tok;
    bool has_config; /* a gepard_config.json / config.json was found (needed for layouts) */
    char config_error[GP_ERROR_MESSAGE_MAX];
    gp_model_config cfg;
    gp_text_repetition repetition;
};

struct gepard_model {
    gp_model *model;
    gepard_tokenizer tokenizer;
    char *dir;
    char device[192]; /* gepard_model_device() */
};

struct gepard_voice {
    int rows;  /* K */
    int width; /* H */
    float *prefix;
};

struct gepard_lora {
    gp_lora_adapter *adapter;
};

struct gepard_codec {
    gp_codec *codec;
};

struct gepard_codec_stream {
    gp_codec_code_stream *stream;
};

/* Fill a tokenizer handle from a model directory (tokenizer.json, plus the
 * config when present) or from a tokenizer.json file. With `need_config`
 * a missing or broken config is an error; otherwise it only disables
 * layouts (gepard_text_layout then explains why). */
int gp_api_tokenizer_init(gepard_tokenizer *t, const char *path, bool need_config, gp_error *err);
void gp_api_tokenizer_clear(gepard_tokenizer *t);

#endif
