/* websocket.h — the WebSocket protocol (RFC 6455) as far as a server needs
 * it: the handshake's Sec-WebSocket-Accept, parsing the frames a client
 * sends (masked, possibly fragmented, with control frames between) and
 * writing the server's frames (unmasked). The connection itself — the
 * upgrade through libmicrohttpd, reading, writing — is ws_tts.c's. */
#ifndef GP_SERVER_WEBSOCKET_H
#define GP_SERVER_WEBSOCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

enum {
    GP_WS_CONTINUATION = 0x0,
    GP_WS_TEXT = 0x1,
    GP_WS_BINARY = 0x2,
    GP_WS_CLOSE = 0x8,
    GP_WS_PING = 0x9,
    GP_WS_PONG = 0xA,
};

/* Close codes (RFC 6455 §7.4.1). */
enum {
    GP_WS_CLOSE_NORMAL = 1000,
    GP_WS_CLOSE_GOING_AWAY = 1001,
    GP_WS_CLOSE_PROTOCOL = 1002,
    GP_WS_CLOSE_DATA = 1007, /* a text message that is not UTF-8 */
    GP_WS_CLOSE_POLICY = 1008,
    GP_WS_CLOSE_TOO_BIG = 1009,
    GP_WS_CLOSE_ERROR = 1011,
};

/* base64(SHA-1(key + the protocol's GUID)): 28 characters and a NUL.
 * Returns 0, or -1 when the key is not the base64 of 16 bytes. */
int gp_ws_accept_key(const char *client_key, char out[29]);

typedef struct gp_ws_frame {
    bool fin;
    int opcode;
    uint8_t *payload; /* unmasked in place, inside the parsed buffer */
    size_t len;
} gp_ws_frame;

/* Parse one client frame from buf[0..n): returns the bytes it took (> 0),
 * 0 when the frame is not complete yet, or -1 with *why set for a protocol
 * error (an unmasked client frame, reserved bits or opcodes, a fragmented or
 * oversized control frame, a payload over max_payload). */
long gp_ws_parse_frame(uint8_t *buf, size_t n, size_t max_payload, gp_ws_frame *f,
                       const char **why);

/* Append a whole (fin) unmasked server frame to `out`; 0 or -1 (memory). */
int gp_ws_append_frame(gp_buf *out, int opcode, const void *data, size_t len);
/* A close frame with `code` and a reason (cut to fit a control frame). */
int gp_ws_append_close(gp_buf *out, int code, const char *reason);

#endif
