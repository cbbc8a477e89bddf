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

#include "fuzz_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_server server;
    gp_api_error e;
    cJSON *json = fuzz_http_json(data, size, &server, &e);
    gp_speech_options base;
    gp_speech_options_init(&base);
    const char *text = NULL;
    batch_item *items = NULL;
    int n = 0;
    if (json && !gp_speech_input_parse(json, &server, &text, &e) &&
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
