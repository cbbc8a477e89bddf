/* fuzz_http_batch.c — libFuzzer harness for the body of POST
 * /v1/audio/speech/batch (server/speech.c): the top-level options, then
 * "voices": [names] or "items": [option objects], each over the base
 * options, as gp_handle_speech_batch reads them before any synthesis.
 * batch_parse is static, so this file includes speech.c itself; the linker
 * then takes no speech.o from the library (every symbol of it is defined
 * here). Seeds: fuzz/seeds/http_batch/. */
#include "fuzz_common.h"

#include "base/log.h"

#include "../src/server/speech.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_log_set_level(GP_LOG_SILENT);
    gp_server server;
    memset(&server, 0, sizeof server);
    server.params = gp_server_default_params();
    server.model_name = "gepard-1.0";
    gp_http_request r;
    memset(&r, 0, sizeof r);
    r.server = &server;
    r.body.data = (char *)data;
    r.body.len = size;
    gp_api_error e;
    memset(&e, 0, sizeof e);
    cJSON *json = NULL;
    gp_speech_options base;
    gp_speech_options_init(&base);
    const char *text = NULL;
    batch_item *items = NULL;
    int n = 0;
    if (!gp_request_json(&r, &json, &e) && !gp_speech_input_parse(json, &server, &text, &e) &&
        !gp_speech_options_parse(json, &server, NULL, "", &base, &e) &&
        !batch_parse(json, &server, NULL, &base, &items, &n, &e)) {
        for (int i = 0; i < n; i++)
            if (items[i].opts.voice[0] == '\0') abort();
        free(items);
    } else if (e.message[0] == '\0') {
        abort(); /* a refusal needs a message */
    }
    cJSON_Delete(json);
    return 0;
}
