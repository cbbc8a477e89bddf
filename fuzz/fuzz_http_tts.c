/* fuzz_http_tts.c — libFuzzer harness for the body of Cartesia's POST
 * /tts/bytes and /tts/sse (server/cartesia.c): model_id, transcript, the
 * voice object, output_format, generation_config and the refused features,
 * read as /tts/bytes and again as /tts/sse. Seeds: fuzz/seeds/http_tts/. */
#include "fuzz_common.h"

#include "base/log.h"
#include "server/server_internal.h"

#include "fuzz_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_server server;
    gp_api_error e;
    cJSON *json = fuzz_http_json(data, size, &server, &e);
    if (!json) return 0;
    for (int sse = 0; sse < 2; sse++) {
        gp_speech_options o;
        gp_speech_options_init(&o);
        const char *text = NULL;
        if (gp_cartesia_request_parse(json, &server, NULL, sse, &text, &o, &e) == 0) {
            /* what a parsed request promises the job */
            if (!text || !*text || o.sample_rate <= 0 || o.volume < 0.5 || o.volume > 2.0 ||
                o.speed < 0.6 || o.speed > 1.5 || (sse && !o.sse))
                __builtin_trap();
        } else if (e.status != 400 || !e.message[0]) {
            __builtin_trap();
        }
    }
    cJSON_Delete(json);
    return 0;
}
