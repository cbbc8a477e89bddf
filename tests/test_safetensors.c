/* test_safetensors.c — the safetensors reader against corrupt files (each a
 * specific message, never a crash) and the writer round trip. */
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "test.h"

/* Build a file: 8-byte length + header + data. */
static size_t build(unsigned char *buf, const char *header, size_t declared_len, size_t data_len) {
    size_t hl = strlen(header);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(declared_len >> (8 * i));
    memcpy(buf + 8, header, hl);
    memset(buf + 8 + hl, 0x3f, data_len);
    return 8 + hl + data_len;
}

static void expect_error(const char *header, long declared_delta, size_t data_len,
                         const char *needle) {
    unsigned char buf[4096];
    size_t hl = strlen(header);
    size_t n = build(buf, header, (size_t)((long)hl + declared_delta), data_len);
    gp_st_file *f = NULL;
    gp_error err;
    CHECK_ERR_CONTAINS(gp_st_open_memory(buf, n, "bad.safetensors", &f, &err), &err, needle);
    CHECK(f == NULL);
    if (!strstr(err.message, "bad.safetensors"))
        test_fail(__FILE__, __LINE__, "message does not name the file: %s", err.message);
}

TEST(safetensors_rejects_corrupt_headers) {
    const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    expect_error(ok, 1000, 8, "exceeds the file size");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 0, 8,
                 "malformed JSON");
    expect_error("{\"a\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8,
                 "dtype \"Q7\"");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 0, 8,
                 "needs 8 bytes but data_offsets span 16");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 0, 8,
                 "run past the end");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                 0, 16, "overlap");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 0, 8,
                 "not a non-negative integer");
    expect_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 0, 8,
                 "begin <= end");
    expect_error("[1,2,3]", 0, 0, "does not start with '{'");
    expect_error("{\"a\":5}", 0, 0, "is not an object");
    expect_error("{\"a\":{\"shape\":[1]}}", 0, 0, "lacks a string \"dtype\"");
    unsigned char tiny[4] = {1, 2, 3, 4};
    gp_st_file *f;
    gp_error err;
    CHECK_ERR_CONTAINS(gp_st_open_memory(tiny, 4, "t.safetensors", &f, &err), &err, "too short");
    CHECK_ERR_CONTAINS(gp_st_open("/nonexistent/x.safetensors", &f, &err), &err, "cannot open");
}

TEST(safetensors_truncated_real_file) {
    /* Cut the fixture model in half: the header is intact, the data is not. */
    FILE *in = fopen(test_fixture("model-tiny/model/model.safetensors"), "rb");
    REQUIRE(in);
    unsigned char *buf = malloc(1 << 20);
    size_t n = fread(buf, 1, 1 << 20, in);
    fclose(in);
    test_write_file(test_tmp("half.safetensors"), buf, n / 2);
    gp_st_file *f;
    gp_error err;
    CHECK_ERR_CONTAINS(gp_st_open(test_tmp("half.safetensors"), &f, &err), &err, "truncated");
    test_write_file(test_tmp("head.safetensors"), buf, 100);
    CHECK_ERR_CONTAINS(gp_st_open(test_tmp("head.safetensors"), &f, &err), &err,
                       "exceeds the file size");
    free(buf);
}

TEST(safetensors_lookup_shape_checks_and_writer) {
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t b[2] = {0x3F80, 0x4000};
    int64_t sa[2] = {2, 3}, sb[1] = {2};
    gp_st_writer *w = gp_st_writer_create();
    gp_error err;
    REQUIRE_OK(gp_st_writer_add(w, "layer.weight", GP_F32, 2, sa, a, &err), &err);
    REQUIRE_OK(gp_st_writer_add_copy(w, "layer.bias", GP_BF16, 1, sb, b, &err), &err);
    REQUIRE_OK(gp_st_writer_set_metadata(w, "alpha", "8", &err), &err);
    CHECK_ERR_CONTAINS(gp_st_writer_add(w, "layer.bias", GP_F32, 1, sb, a, &err), &err, "twice");
    REQUIRE_OK(gp_st_writer_write(w, test_tmp("w.safetensors"), &err), &err);
    gp_st_writer_free(w);
    gp_st_file *f;
    REQUIRE_OK(gp_st_open(test_tmp("w.safetensors"), &f, &err), &err);
    CHECK_EQ_INT(f->count, 2);
    CHECK(strcmp(gp_st_metadata(f, "alpha"), "8") == 0);
    const gp_st_tensor *t;
    int64_t want[2] = {2, 3}, wrong[2] = {3, 2};
    REQUIRE_OK(gp_st_expect(f, "layer.weight", 2, want, NULL, &t, &err), &err);
    float back[6];
    REQUIRE_OK(gp_st_read_f32(t, back, &err), &err);
    CHECK(memcmp(back, a, sizeof a) == 0);
    CHECK_ERR_CONTAINS(
        gp_st_expect(f, "layer.weight", 2, wrong, "is this the right model?", &t, &err), &err,
        "has shape [2, 3], expected [3, 2] — is this the right model?");
    CHECK_ERR_CONTAINS(gp_st_expect(f, "missing.weight", 1, sb, NULL, &t, &err), &err,
                       "tensor missing.weight is missing");
    REQUIRE_OK(gp_st_expect(f, "layer.bias", 1, sb, NULL, &t, &err), &err);
    REQUIRE_OK(gp_st_read_f32(t, back, &err), &err);
    CHECK(back[0] == 1.0f && back[1] == 2.0f);
    gp_st_close(f);
}
