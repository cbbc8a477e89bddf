/* websocket.c — RFC 6455 handshake key and frames (see websocket.h). SHA-1
 * is GnuTLS's (libmicrohttpd is built on it). */
#include "server/websocket.h"

#include <gnutls/crypto.h>
#include <stdio.h>
#include <string.h>

#include "server/base64.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

int gp_ws_accept_key(const char *client_key, char out[29]) {
    /* the key is base64 of 16 random bytes: 24 characters ending in "==" */
    size_t n = client_key ? strlen(client_key) : 0;
    if (n != 24 || client_key[22] != '=' || client_key[23] != '=') return -1;
    for (size_t i = 0; i < 22; i++) {
        char c = client_key[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/'))
            return -1;
    }
    char joined[24 + sizeof WS_GUID];
    memcpy(joined, client_key, 24);
    memcpy(joined + 24, WS_GUID, sizeof WS_GUID - 1);
    unsigned char digest[20];
    if (gnutls_hash_fast(GNUTLS_DIG_SHA1, joined, 24 + sizeof WS_GUID - 1, digest) != 0) return -1;
    gp_buf b;
    gp_buf_init(&b);
    if (gp_base64_append(&b, digest, sizeof digest) || b.len != 28) {
        gp_buf_free(&b);
        return -1;
    }
    memcpy(out, b.data, 28);
    out[28] = '\0';
    gp_buf_free(&b);
    return 0;
}

long gp_ws_parse_frame(uint8_t *buf, size_t n, size_t max_payload, gp_ws_frame *f,
                       const char **why) {
    if (n < 2) return 0;
    const bool fin = buf[0] & 0x80;
    const int opcode = buf[0] & 0x0F;
    if (buf[0] & 0x70) {
        *why = "a frame has reserved bits set (no extension was agreed)";
        return -1;
    }
    if (!(opcode <= GP_WS_BINARY || (opcode >= GP_WS_CLOSE && opcode <= GP_WS_PONG))) {
        *why = "a frame has an unknown opcode";
        return -1;
    }
    if (!(buf[1] & 0x80)) {
        *why = "a client frame is not masked";
        return -1;
    }
    uint64_t len = buf[1] & 0x7F;
    size_t head = 2;
    if (len == 126) {
        if (n < 4) return 0;
        len = ((uint64_t)buf[2] << 8) | buf[3];
        head = 4;
    } else if (len == 127) {
        if (n < 10) return 0;
        len = 0;
        for (int i = 0; i < 8; i++) len = (len << 8) | buf[2 + i];
        head = 10;
    }
    if (opcode >= GP_WS_CLOSE && (!fin || len > 125)) {
        *why = "a control frame is fragmented or longer than 125 bytes";
        return -1;
    }
    if (len > max_payload) {
        *why = "a frame is larger than the server accepts";
        return -1;
    }
    if (n < head + 4 + len) return 0;
    const uint8_t *mask = buf + head;
    uint8_t *payload = buf + head + 4;
    for (uint64_t i = 0; i < len; i++) payload[i] ^= mask[i & 3];
    f->fin = fin;
    f->opcode = opcode;
    f->payload = payload;
    f->len = (size_t)len;
    return (long)(head + 4 + len);
}

int gp_ws_append_frame(gp_buf *out, int opcode, const void *data, size_t len) {
    uint8_t head[10];
    size_t h = 2;
    head[0] = (uint8_t)(0x80 | (opcode & 0x0F));
    if (len < 126) {
        head[1] = (uint8_t)len;
    } else if (len <= 0xFFFF) {
        head[1] = 126;
        head[2] = (uint8_t)(len >> 8);
        head[3] = (uint8_t)len;
        h = 4;
    } else {
        head[1] = 127;
        for (int i = 0; i < 8; i++) head[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
        h = 10;
    }
    return gp_buf_append(out, head, h) || (len && gp_buf_append(out, data, len)) ? -1 : 0;
}

int gp_ws_append_close(gp_buf *out, int code, const char *reason) {
    uint8_t body[125];
    body[0] = (uint8_t)(code >> 8);
    body[1] = (uint8_t)code;
    size_t n = reason ? strlen(reason) : 0;
    if (n > sizeof body - 2) n = sizeof body - 2;
    /* never cut inside a UTF-8 sequence */
    while (n > 0 && ((unsigned char)reason[n] & 0xC0) == 0x80) n--;
    if (n) memcpy(body + 2, reason, n);
    return gp_ws_append_frame(out, GP_WS_CLOSE, body, n + 2);
}
