/* playground.c — the page served at "/" (src/server/playground.html, built
 * into playground_page.c by scripts/embed_playground.py): streaming playback
 * with a waveform and a WAV download, the voices with cloning from an
 * uploaded or recorded clip (ref_audio), the sampling options explained, the
 * server's model and load, curl/Python/JavaScript snippets of the current
 * settings, each run's time to first audio and real-time factor, an API-key
 * prompt on 401, keyboard shortcuts; one column on a phone. With
 * "?selftest=1" the page runs one synthesis by itself and writes a JSON
 * report into #result, which the headless-Chromium test reads. */

#include "server/server_internal.h"

enum MHD_Result gp_handle_playground(gp_http_request *r) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        gp_playground_html_len, (void *)gp_playground_html, MHD_RESPMEM_PERSISTENT);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    return gp_http_send_response(r, 200, resp);
}
