/* fuzz_http_speech.c — libFuzzer harness for the body of POST
 * /v1/audio/speech (server/speech_options.c): the JSON object, `input`, every
 * option field, and the base64 of a ref_audio (decoded with the server's size
 * limit; the audio decoder has its own harness, fuzz_audio). Seeds:
 * fuzz/seeds/http_speech/. */
#include "fuzz_common.h"

#include "base/log.h"
#include "io/json.h"
#include "server/base64.h"
#include "server/server_internal.h"

#include "fuzz_http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_server server;
    gp_api_error e;
    cJSON *json = fuzz_http_json(data, size, &server, &e);
    if (!json) return 0;
    gp_speech_options o;
    gp_speech_options_init(&o);
    const char *text = NULL;
    if (!gp_speech_input_parse(json, &server, &text, &e) &&
        !gp_speech_options_parse(json, &server, NULL, "", &o, &e) && o.ref_audio) {
        unsigned char *bytes = NULL;
        size_t n = 0;
        gp_error err;
        gp_error_clear(&err);
        int rc = gp_base64_decode(o.ref_audio, o.ref_audio_len, server.params.max_ref_audio_bytes,
                                  "ref_audio", &bytes, &n, &err);
        fuzz_check_error(rc, &err);
        free(bytes);
    }
    cJSON_Delete(json);
    return 0;
}
