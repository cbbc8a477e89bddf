/* test_fuzz_regressions.c — every input the libFuzzer harnesses (fuzz/)
 * found to crash, hang, leak or trip a sanitizer, fed back to the parser it
 * broke: each must now give a clean result or a clean error. Test names are
 * fuzz_<target>_<what>; the bytes are minimised by hand from the fuzzer's
 * reproducer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/pickle.h"
#include "test.h"
#include "text/nfc.h"
#include "text/tokenizer.h"

/* Unpickle `bytes`; expect success with a root of `kind` holding `n` items. */
static void expect_empty_root(const char *bytes, size_t len, gp_pickle_kind kind) {
    gp_error err;
    gp_error_clear(&err);
    gp_pickle *p = NULL;
    int rc = gp_pickle_load((const unsigned char *)bytes, len, "data.pkl", &p, &err);
    CHECK_MSG(rc == 0, "%s", err.message);
    if (rc == 0) {
        CHECK_EQ_INT(p->values[p->root].kind, kind);
        CHECK_EQ_INT(p->values[p->root].n, 0);
    }
    gp_pickle_free(p);
}

/* fuzz_pickle: APPENDS / SETITEMS / DICT / LIST / TUPLE after a MARK with
 * nothing above it copied zero items from a NULL array (UBSan: "applying
 * zero offset to null pointer" in pk_extend and at the stack pointer). */
TEST(fuzz_pickle_empty_mark_collections) {
    const char appends[] = "\x80\x02]q\x00(e."; /* EMPTY_LIST BINPUT MARK APPENDS */
    expect_empty_root(appends, sizeof appends - 1, GP_PK_LIST);
    const char setitems[] = "\x80\x02}q\x00(u."; /* EMPTY_DICT BINPUT MARK SETITEMS */
    expect_empty_root(setitems, sizeof setitems - 1, GP_PK_DICT);
    const char dict[] = "\x80\x02(d."; /* MARK DICT on a stack never pushed to */
    expect_empty_root(dict, sizeof dict - 1, GP_PK_DICT);
    const char list[] = "(l.";
    expect_empty_root(list, sizeof list - 1, GP_PK_LIST);
    const char tuple[] = "(t.";
    expect_empty_root(tuple, sizeof tuple - 1, GP_PK_TUPLE);
    const char empty_tuple[] = "\x80\x02).";
    expect_empty_root(empty_tuple, sizeof empty_tuple - 1, GP_PK_TUPLE);
    /* and the broken neighbours still fail with a message */
    gp_error err;
    gp_pickle *p = NULL;
    const char odd[] = "\x80\x02}(K\x01u.";
    CHECK_ERR_CONTAINS(
        gp_pickle_load((const unsigned char *)odd, sizeof odd - 1, "data.pkl", &p, &err), &err,
        "odd number");
    gp_pickle_free(p);
}

/* fuzz_pickle: _rebuild_tensor_v2 read the storage offset through a
 * pointer into the value array after creating the tensor value, which can
 * move that array (heap use after free). The same call after 0..1100
 * throw-away values (None in a list) hits every growth of the array. */
TEST(fuzz_pickle_rebuild_tensor_after_growth) {
    const char head[] = "\x80\x02]"; /* a list to hold the padding */
    const char body[] = "ctorch._utils\n_rebuild_tensor_v2\n"
                        "((X\x07\x00\x00\x00"
                        "storagectorch\nFloatStorage\n"
                        "X\x01\x00\x00\x00"
                        "0X\x03\x00\x00\x00"
                        "cpuK\x04tQK\x00K\x04\x85K\x01\x85tR.";
    size_t cap = sizeof head + 2 * 1100 + sizeof body;
    char *pk = malloc(cap);
    REQUIRE(pk != NULL);
    int failures = 0;
    for (int pad = 0; pad <= 1100 && failures < 3; pad++) {
        size_t n = 0;
        memcpy(pk, head, sizeof head - 1);
        n += sizeof head - 1;
        for (int i = 0; i < pad; i++) {
            pk[n++] = 'N'; /* None, appended to the list */
            pk[n++] = 'a';
        }
        memcpy(pk + n, body, sizeof body - 1);
        n += sizeof body - 1;
        gp_error err;
        gp_error_clear(&err);
        gp_pickle *p = NULL;
        int rc = gp_pickle_load((const unsigned char *)pk, n, "data.pkl", &p, &err);
        if (rc || p->values[p->root].kind != GP_PK_TENSOR || p->values[p->root].offset != 0 ||
            p->values[p->root].shape[0] != 4) {
            test_fail(__FILE__, __LINE__, "padding %d: %s", pad, rc ? err.message : "wrong tensor");
            failures++;
        }
        gp_pickle_free(p);
    }
    free(pk);
}

/* fuzz_codes_json: a "frames" count that disagrees with the "codes" array
 * was reported after the JSON tree holding it was freed (heap use after
 * free in gp_codes_json_read). Driven through `gepard decode --codes`. */
TEST(fuzz_codes_json_frames_mismatch) {
    const char json[] = "{\"frames\":1,\"codes\":[[1,2,3,3],[0,6,5,5]]}";
    const char *path = test_tmp("codes.json");
    REQUIRE(test_write_file(path, json, sizeof json - 1) == 0);
    const char *args[] = {"decode",
                          "--codec",
                          test_fixture("codec-tiny/nano-tiny.nemo"),
                          "--codes",
                          path,
                          "-o",
                          test_tmp("out.wav"),
                          NULL};
    test_cmd_result r;
    test_run_gepard(&r, NULL, 0, 60, args);
    CHECK_EQ_INT(r.status, 1);
    CHECK_MSG(r.err && strstr(r.err, "\"frames\" says 1 but \"codes\" holds 2 frames"),
              "stderr: %s", r.err ? r.err : "");
    CHECK_MSG(r.err && !strstr(r.err, "AddressSanitizer"), "stderr: %s", r.err);
    test_cmd_result_free(&r);
}

/* fuzz_nemo: a tar header's member size was allocated up front, so a
 * 2 KB .nemo claiming a 4 GiB model_config.yaml asked malloc for 4 GiB
 * (libFuzzer: out-of-memory). Run `gepard info` on it with allocations
 * above 1 GiB failing: the answer must be the truncation message, not "out
 * of memory". */
TEST(fuzz_nemo_huge_declared_member) {
    unsigned char tar[2048];
    memset(tar, 0, sizeof tar);
    memcpy(tar, "./model_config.yaml", 19);
    memcpy(tar + 100, "0000644", 7);      /* mode */
    memcpy(tar + 108, "0000000", 7);      /* uid */
    memcpy(tar + 116, "0000000", 7);      /* gid */
    memcpy(tar + 124, "40000000000", 11); /* size: 4 GiB in octal */
    memcpy(tar + 136, "00000000000", 11); /* mtime */
    tar[156] = '0';                       /* a regular file */
    memcpy(tar + 257,
           "ustar\0"
           "00",
           8);                 /* magic, version */
    memset(tar + 148, ' ', 8); /* checksum over the header */
    unsigned sum = 0;
    for (int i = 0; i < 512; i++) sum += tar[i];
    snprintf((char *)tar + 148, 8, "%06o", sum);
    memcpy(tar + 512, "sample_rate: 1\n", 15);
    const char *path = test_tmp("big.nemo");
    REQUIRE(test_write_file(path, tar, sizeof tar) == 0);
    const char *old = getenv("ASAN_OPTIONS");
    char opts[512];
    snprintf(opts, sizeof opts, "%s%smax_allocation_size_mb=1024:allocator_may_return_null=1",
             old ? old : "", old && *old ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1); /* this test runs in its own process */
    const char *args[] = {"info", path, NULL};
    test_cmd_result r;
    test_run_gepard(&r, NULL, 0, 60, args);
    CHECK_EQ_INT(r.status, 1);
    CHECK_MSG(r.err && strstr(r.err, "truncated or corrupt"), "stderr: %s", r.err ? r.err : "");
    CHECK_MSG(r.err && !strstr(r.err, "out of memory"), "stderr: %s", r.err);
    test_cmd_result_free(&r);
}

/* fuzz_text: NFC indexed its tables with whatever malformed UTF-8 decoded
 * to (above U+10FFFF: global buffer overflow); its callers checked UTF-8
 * first, but nothing in gp_nfc said so. It now refuses malformed text
 * itself. The tokenizer.json route (an added token's content) stays refused
 * by the loader. */
TEST(fuzz_nfc_malformed_utf8) {
    gp_error err;
    char *out = NULL;
    size_t n = 0;
    const char text[] = "Dr. \xfc\xfc\xfc\xfc Smith e\xcc\x81";
    CHECK_ERR_CONTAINS(gp_nfc(text, sizeof text - 1, &out, &n, &err), &err, "not valid UTF-8");
    free(out);
    const char json[] =
        "{\"normalizer\":{\"type\":\"NFC\"},\"added_tokens\":[{\"id\":3,\"content\":"
        "\"\xfc\xfc\",\"special\":false,\"normalized\":true}],\"model\":{\"type\":"
        "\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}}";
    gp_tokenizer *tok = NULL;
    CHECK_ERR_CONTAINS(gp_tok_load_memory(json, sizeof json - 1, "tokenizer.json", &tok, &err),
                       &err, "content is not valid UTF-8");
    gp_tok_free(tok);
}

/* fuzz_codes_json: a negative or huge "frames" was converted to size_t
 * before the comparison (UBSan float-cast-overflow); it is now compared as
 * a double and refused with the usual message. */
TEST(fuzz_codes_json_negative_frames) {
    const char json[] = "{\"frames\":-6666666666666660,\"codes\":[]}";
    const char *path = test_tmp("codes.json");
    REQUIRE(test_write_file(path, json, sizeof json - 1) == 0);
    const char *args[] = {"decode",
                          "--codec",
                          test_fixture("codec-tiny/nano-tiny.nemo"),
                          "--codes",
                          path,
                          "-o",
                          test_tmp("out.wav"),
                          NULL};
    test_cmd_result r;
    test_run_gepard(&r, NULL, 0, 60, args);
    CHECK_EQ_INT(r.status, 1);
    CHECK_MSG(r.err && strstr(r.err, "but \"codes\" holds 0 frames"), "stderr: %s",
              r.err ? r.err : "");
    test_cmd_result_free(&r);
}
