/* fuzz_http.h — what the harnesses of the server's request bodies share
 * (fuzz_http_speech, fuzz_http_batch, fuzz_http_tts): a server with its
 * default limits, and the input read as a request body's JSON. Include it
 * after fuzz_common.h and server/server_internal.h. */
#ifndef GEPARD_FUZZ_HTTP_H
#define GEPARD_FUZZ_HTTP_H

/* Fill *server with the defaults (quiet logs) and parse the input as a
 * request body: the JSON object, or NULL with *e filled. */
static inline cJSON *fuzz_http_json(const uint8_t *data, size_t size, gp_server *server,
                                    gp_api_error *e) {
    gp_log_set_level(GP_LOG_SILENT);
    memset(server, 0, sizeof *server);
    server->params = gp_server_default_params();
    server->model_name = "gepard-1.0";
    gp_http_request r;
    memset(&r, 0, sizeof r);
    r.server = server;
    r.body.data = (char *)data;
    r.body.len = size;
    memset(e, 0, sizeof *e);
    cJSON *json = NULL;
    return gp_request_json(&r, &json, e) ? NULL : json;
}

#endif
