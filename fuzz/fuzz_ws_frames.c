/* fuzz_ws_frames.c — libFuzzer harness for the WebSocket frames a client
 * sends (server/websocket.c): the input is read as a stream of frames, as
 * the server's hub reads a socket, with a small payload limit; every frame
 * parsed must lie inside the input and a refusal must say why. The first
 * byte picks the limit. Seeds: fuzz/seeds/ws_frames/. */
#include "fuzz_common.h"

#include "server/websocket.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const size_t limit = (size_t)data[0] * 64;
    uint8_t *buf = malloc(size);
    if (!buf) return 0;
    memcpy(buf, data + 1, size - 1);
    size_t n = size - 1, used = 0;
    while (used < n) {
        gp_ws_frame f;
        const char *why = NULL;
        long k = gp_ws_parse_frame(buf + used, n - used, limit, &f, &why);
        if (k == 0) break;
        if (k < 0) {
            if (!why || !*why) __builtin_trap();
            break;
        }
        if ((size_t)k > n - used || f.len > limit || f.payload < buf + used ||
            f.payload + f.len > buf + used + (size_t)k)
            __builtin_trap();
        if (f.opcode >= GP_WS_CLOSE && (!f.fin || f.len > 125)) __builtin_trap();
        used += (size_t)k;
    }
    gp_buf out;
    gp_buf_init(&out);
    if (gp_ws_append_frame(&out, GP_WS_TEXT, buf, n) == 0 && out.len < n + 2) __builtin_trap();
    gp_ws_append_close(&out, 1000, (const char *)(n ? "reason" : ""));
    gp_buf_free(&out);
    free(buf);
    return 0;
}
