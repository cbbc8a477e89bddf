/* test_websocket.c — the WebSocket primitives (src/server/websocket.c)
 * against RFC 6455: the handshake's example key, frames of each length
 * form, masking, fragmentation rules, and the protocol errors a client can
 * commit. */
#include <string.h>

#include "server/websocket.h"
#include "test.h"

TEST(websocket_accept_key_is_rfc6455s) {
    char out[29];
    /* RFC 6455 §1.3's example */
    REQUIRE(gp_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out) == 0);
    CHECK(strcmp(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") == 0);
    CHECK(gp_ws_accept_key("short==", out) != 0);
    CHECK(gp_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ!!", out) != 0);
    CHECK(gp_ws_accept_key(NULL, out) != 0);
}

/* A client frame: fin/opcode, masked with `mask`, payload of n bytes. */
static size_t client_frame(uint8_t *buf, bool fin, int opcode, const uint8_t *payload, size_t n,
                           bool masked) {
    const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    size_t h = 0;
    buf[h++] = (uint8_t)((fin ? 0x80 : 0) | opcode);
    uint8_t m = masked ? 0x80 : 0;
    if (n < 126) {
        buf[h++] = (uint8_t)(m | n);
    } else if (n <= 0xFFFF) {
        buf[h++] = m | 126;
        buf[h++] = (uint8_t)(n >> 8);
        buf[h++] = (uint8_t)n;
    } else {
        buf[h++] = m | 127;
        for (int i = 0; i < 8; i++) buf[h++] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
    }
    if (masked) {
        memcpy(buf + h, mask, 4);
        h += 4;
    }
    for (size_t i = 0; i < n; i++) buf[h + i] = payload[i] ^ (masked ? mask[i & 3] : 0);
    return h + n;
}

TEST(websocket_frames_parse_every_length_form) {
    static uint8_t payload[70000], buf[70016];
    for (size_t i = 0; i < sizeof payload; i++) payload[i] = (uint8_t)(i * 7);
    const size_t sizes[] = {0, 5, 125, 126, 65535, 65536, 70000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = client_frame(buf, true, 0x2, payload, sizes[k], true);
        gp_ws_frame f;
        const char *why = NULL;
        /* incomplete: every prefix says "more" */
        const size_t cuts[] = {0, 1, 2, 5, n - 1};
        for (size_t c = 0; c < 5; c++)
            if (cuts[c] < n) CHECK_EQ_INT(gp_ws_parse_frame(buf, cuts[c], 1 << 20, &f, &why), 0);
        CHECK_EQ_INT(gp_ws_parse_frame(buf, n, 1 << 20, &f, &why), (long)n);
        CHECK(f.fin && f.opcode == 0x2 && f.len == sizes[k]);
        CHECK(f.len == 0 || memcmp(f.payload, payload, f.len) == 0);
    }
}

TEST(websocket_protocol_errors) {
    uint8_t buf[512], p[200] = {0};
    gp_ws_frame f;
    const char *why = NULL;
    size_t n = client_frame(buf, true, 0x1, p, 3, false);
    CHECK_EQ_INT(gp_ws_parse_frame(buf, n, 1024, &f, &why), -1);
    CHECK(why && strstr(why, "masked"));
    n = client_frame(buf, false, 0x9, p, 3, true); /* fragmented ping */
    CHECK_EQ_INT(gp_ws_parse_frame(buf, n, 1024, &f, &why), -1);
    n = client_frame(buf, true, 0x8, p, 126, true); /* close of 126 bytes */
    CHECK_EQ_INT(gp_ws_parse_frame(buf, n, 1024, &f, &why), -1);
    n = client_frame(buf, true, 0x3, p, 1, true); /* reserved opcode */
    CHECK_EQ_INT(gp_ws_parse_frame(buf, n, 1024, &f, &why), -1);
    n = client_frame(buf, true, 0x1, p, 1, true);
    buf[0] |= 0x40; /* RSV1 without an extension */
    CHECK_EQ_INT(gp_ws_parse_frame(buf, n, 1024, &f, &why), -1);
    n = client_frame(buf, true, 0x1, p, 200, true);
    CHECK_EQ_INT(gp_ws_parse_frame(buf, n, 100, &f, &why), -1); /* over the limit */
    CHECK(why && strstr(why, "larger"));
}

TEST(websocket_server_frames) {
    gp_buf b;
    gp_buf_init(&b);
    REQUIRE(gp_ws_append_frame(&b, 0x1, "hi", 2) == 0);
    CHECK(b.len == 4 && (uint8_t)b.data[0] == 0x81 && b.data[1] == 2 &&
          !memcmp(b.data + 2, "hi", 2));
    gp_buf_clear(&b);
    static char big[300];
    memset(big, 'x', sizeof big);
    REQUIRE(gp_ws_append_frame(&b, 0x2, big, sizeof big) == 0);
    CHECK(b.len == 4 + sizeof big && (uint8_t)b.data[1] == 126 && (uint8_t)b.data[2] == 1 &&
          (uint8_t)b.data[3] == 44);
    gp_buf_clear(&b);
    /* a close reason is cut to fit a control frame, never inside a character */
    char reason[200];
    memset(reason, 'a', sizeof reason);
    memcpy(reason + 122, "\xC3\xA9", 2); /* é across the 123-byte cut */
    reason[199] = '\0';
    REQUIRE(gp_ws_append_close(&b, 1001, reason) == 0);
    CHECK((uint8_t)b.data[0] == 0x88 && (uint8_t)b.data[1] == 2 + 122);
    CHECK((uint8_t)b.data[2] == 0x03 && (uint8_t)b.data[3] == 0xE9);
    gp_buf_free(&b);
}
