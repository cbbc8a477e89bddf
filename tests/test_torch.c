/* test_torch.c — the torch.save reader: zip directory, restricted unpickler, views,
 * nested dicts, and every refusal (legacy format, foreign globals and opcodes, short
 * storages, truncation, compression). Inputs are written by tests/torch_writer.c. */
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "io/pickle.h"
#include "io/torch.h"
#include "io/zip.h"
#include "test.h"
#include "torch_writer.h"

/* A checkpoint with a shared storage, a transposed view, a bf16 scalar and an int32 buffer. */
static void build_views(gp_buf *ckpt) {
    static float base[24];
    static uint16_t scalar;
    static int32_t ints[3] = {7, -8, 9};
    for (int i = 0; i < 24; i++) base[i] = (float)i;
    scalar = gp_f32_to_bf16(1.5f);
    tw_tensor t[] = {
        {"whole", "FloatStorage", "0", 24, 0, 2, {4, 6}, {6, 1}},
        {"slice", "FloatStorage", "0", 24, 8, 2, {3, 3}, {6, 1}}, /* base[1:, 2:5] */
        {"transposed", "FloatStorage", "0", 24, 0, 2, {6, 4}, {1, 6}},
        {"scalar", "BFloat16Storage", "1", 1, 0, 0, {0}, {0}},
        {"ints", "IntStorage", "2", 3, 0, 1, {3}, {1}},
    };
    gp_buf pk;
    gp_buf_init(&pk);
    tw_pickle_state_dict(t, 5, &pk);
    tw_record st[] = {{"0", base, sizeof base}, {"1", &scalar, 2}, {"2", ints, sizeof ints}};
    tw_checkpoint(&pk, st, 3, ckpt);
    gp_buf_free(&pk);
}

TEST(torch_reads_views_and_dtypes) {
    gp_buf ckpt;
    gp_buf_init(&ckpt);
    build_views(&ckpt);
    gp_torch_file *f;
    gp_error err;
    REQUIRE_OK(gp_torch_open_memory(ckpt.data, ckpt.len, "views.pt", &f, &err), &err);
    CHECK_EQ_INT(f->count, 5);
    const gp_torch_tensor *slice = gp_torch_find(f, "slice"), *tr = gp_torch_find(f, "transposed");
    REQUIRE(slice && tr);
    float v[24];
    gp_convert_to_f32(GP_F32, slice->data, v, 9);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) CHECK(v[r * 3 + c] == (float)((r + 1) * 6 + c + 2));
    CHECK(tr->owned != NULL); /* non-contiguous: copied */
    gp_convert_to_f32(GP_F32, tr->data, v, 24);
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 4; c++) CHECK(v[r * 4 + c] == (float)(c * 6 + r));
    const gp_torch_tensor *s = gp_torch_find(f, "scalar"), *ints = gp_torch_find(f, "ints");
    REQUIRE(s && ints);
    CHECK(s->ndim == 0 && s->numel == 1 && s->dtype == GP_BF16);
    CHECK(gp_dtype_read_double(GP_BF16, s->data, 0) == 1.5);
    CHECK(ints->dtype == GP_I32 && gp_dtype_read_int(GP_I32, ints->data, 1) == -8);
    gp_torch_close(f);
    gp_buf_free(&ckpt);
}

TEST(torch_flattens_nested_dicts_and_scalars) {
    /* {"lora": {"a": tensor, "b": tensor}, "step": 5}, like a DPO adapter */
    static float data[4] = {1, 2, 3, 4};
    gp_buf pk;
    gp_buf_init(&pk);
    gp_buf_append(&pk, "\x80\x02}(X\x04\x00\x00\x00lora}(", 15);
    gp_buf inner;
    gp_buf_init(&inner);
    tw_tensor t[] = {{"a", "FloatStorage", "0", 4, 0, 1, {2}, {1}},
                     {"b", "FloatStorage", "0", 4, 2, 1, {2}, {1}}};
    tw_pickle_state_dict(t, 2, &inner);
    /* reuse the items of the inner dict: strip its "\x80\x02}(" head and "u." tail */
    gp_buf_append(&pk, inner.data + 4, inner.len - 6);
    gp_buf_append(&pk, "uX\x04\x00\x00\x00stepK\x05u.", 14);
    tw_record st[] = {{"0", data, sizeof data}};
    gp_buf ckpt;
    gp_buf_init(&ckpt);
    tw_checkpoint(&pk, st, 1, &ckpt);
    gp_torch_file *f;
    gp_error err;
    REQUIRE_OK(gp_torch_open_memory(ckpt.data, ckpt.len, "dpo.pt", &f, &err), &err);
    const gp_torch_tensor *b = gp_torch_find(f, "lora.b");
    REQUIRE(b && gp_torch_find(f, "lora.a"));
    CHECK(gp_dtype_read_double(GP_F32, b->data, 0) == 3.0);
    const gp_torch_scalar *step = gp_torch_find_scalar(f, "step");
    CHECK(step && step->i == 5);
    gp_torch_close(f);
    gp_buf_free(&pk);
    gp_buf_free(&inner);
    gp_buf_free(&ckpt);
}

/* Open a checkpoint whose data.pkl is `pickle` (one float storage "0" of 4 elements). */
static int open_with_pickle(const void *pickle, size_t len, gp_error *err) {
    static float data[4];
    gp_buf pk, ckpt;
    gp_buf_init(&pk);
    gp_buf_init(&ckpt);
    gp_buf_append(&pk, pickle, len);
    tw_record st[] = {{"0", data, sizeof data}};
    tw_checkpoint(&pk, st, 1, &ckpt);
    gp_torch_file *f = NULL;
    int rc = gp_torch_open_memory(ckpt.data, ckpt.len, "evil.pt", &f, err);
    gp_torch_close(f);
    gp_buf_free(&pk);
    gp_buf_free(&ckpt);
    return rc;
}

TEST(torch_refuses_foreign_globals_and_opcodes) {
    gp_error err;
    const char evil[] = "\x80\x02"
                        "cos\nsystem\n"
                        "X\x02\x00\x00\x00ls\x85R.";
    CHECK_ERR_CONTAINS(open_with_pickle(evil, sizeof evil - 1, &err), &err, "os.system");
    const char builtins[] = "\x80\x02\x8c\x08"
                            "builtins\x8c\x04"
                            "eval\x93.";
    CHECK_ERR_CONTAINS(open_with_pickle(builtins, sizeof builtins - 1, &err), &err,
                       "builtins.eval");
    const char inst[] = "\x80\x02(ios\nsystem\n.";
    CHECK_ERR_CONTAINS(open_with_pickle(inst, sizeof inst - 1, &err), &err, "opcode INST");
    const char newobj[] = "\x80\x02}(\x81.";
    CHECK_ERR_CONTAINS(open_with_pickle(newobj, sizeof newobj - 1, &err), &err, "NEWOBJ");
    const char list[] = "\x80\x02]."; /* not a dict */
    CHECK_ERR_CONTAINS(open_with_pickle(list, sizeof list - 1, &err), &err, "expected a dict");
    const char nostop[] = "\x80\x02}";
    CHECK_ERR_CONTAINS(open_with_pickle(nostop, sizeof nostop - 1, &err), &err, "STOP");
    const char underflow[] = "\x80\x02u.";
    CHECK_ERR_CONTAINS(open_with_pickle(underflow, sizeof underflow - 1, &err), &err, "MARK");
    const char memo[] = "\x80\x02h\x07.";
    CHECK_ERR_CONTAINS(open_with_pickle(memo, sizeof memo - 1, &err), &err, "memo");
    /* A storage type called like a function. */
    const char callstorage[] = "\x80\x02"
                               "ctorch\nFloatStorage\n)R.";
    CHECK_ERR_CONTAINS(open_with_pickle(callstorage, sizeof callstorage - 1, &err), &err,
                       "storage type");
    /* Deep nesting of MARKs and tuples stays bounded (no recursion to blow up). */
    gp_buf deep;
    gp_buf_init(&deep);
    gp_buf_append(&deep, "\x80\x02", 2);
    for (int i = 0; i < 100000; i++) gp_buf_append(&deep, "(", 1);
    for (int i = 0; i < 100000; i++) gp_buf_append(&deep, "t", 1);
    gp_buf_append(&deep, ".", 1);
    CHECK_ERR_CONTAINS(open_with_pickle(deep.data, deep.len, &err), &err, "expected a dict");
    gp_buf_free(&deep);
}

TEST(torch_refuses_short_storage_and_bad_views) {
    static float data[4];
    gp_error err;
    tw_tensor t[] = {{"w", "FloatStorage", "0", 6, 0, 1, {6}, {1}}}; /* declares 6, has 4 */
    gp_buf pk, ckpt;
    gp_buf_init(&pk);
    gp_buf_init(&ckpt);
    tw_pickle_state_dict(t, 1, &pk);
    tw_record st[] = {{"0", data, sizeof data}};
    tw_checkpoint(&pk, st, 1, &ckpt);
    gp_torch_file *f = NULL;
    CHECK_ERR_CONTAINS(gp_torch_open_memory(ckpt.data, ckpt.len, "short.pt", &f, &err), &err,
                       "holds 16 bytes but the checkpoint declares 6");
    gp_buf_clear(&pk);
    gp_buf_clear(&ckpt);
    tw_tensor view[] = {{"w", "FloatStorage", "0", 4, 2, 1, {3}, {1}}}; /* offset 2 + 3 > 4 */
    tw_pickle_state_dict(view, 1, &pk);
    tw_checkpoint(&pk, st, 1, &ckpt);
    CHECK_ERR_CONTAINS(gp_torch_open_memory(ckpt.data, ckpt.len, "view.pt", &f, &err), &err,
                       "storage is shorter than its tensor");
    gp_buf_clear(&pk);
    gp_buf_clear(&ckpt);
    tw_tensor missing[] = {{"w", "FloatStorage", "9", 4, 0, 1, {4}, {1}}};
    tw_pickle_state_dict(missing, 1, &pk);
    tw_checkpoint(&pk, st, 1, &ckpt);
    CHECK_ERR_CONTAINS(gp_torch_open_memory(ckpt.data, ckpt.len, "missing.pt", &f, &err), &err,
                       "archive/data/9 is missing");
    /* Truncated zip: every cut point is an error, never a crash. */
    gp_buf_clear(&pk);
    gp_buf_clear(&ckpt);
    tw_pickle_state_dict(t, 0, &pk);
    tw_checkpoint(&pk, st, 1, &ckpt);
    for (size_t cut = 0; cut < ckpt.len; cut += 7) {
        int rc = gp_torch_open_memory(ckpt.data, cut, "cut.pt", &f, &err);
        CHECK(rc != 0);
        if (rc == 0) gp_torch_close(f);
    }
    CHECK_ERR_CONTAINS(gp_torch_open_memory(ckpt.data, ckpt.len - 10, "cut.pt", &f, &err), &err,
                       "truncated");
    gp_buf_free(&pk);
    gp_buf_free(&ckpt);
}

TEST(torch_refuses_legacy_and_compressed) {
    gp_error err;
    gp_torch_file *f = NULL;
    const unsigned char legacy[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                    0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e, 0x80};
    CHECK_ERR_CONTAINS(gp_torch_open_memory(legacy, sizeof legacy, "old.ckpt", &f, &err), &err,
                       "_use_new_zipfile_serialization=True");
    CHECK_ERR_CONTAINS(gp_torch_open_memory("hello world", 11, "x.pt", &f, &err), &err,
                       "not a PyTorch checkpoint");
    /* Mark data.pkl as deflated (method 8) in the central directory. */
    gp_buf ckpt;
    gp_buf_init(&ckpt);
    build_views(&ckpt);
    unsigned char *p = (unsigned char *)ckpt.data;
    for (size_t i = 0; i + 46 < ckpt.len; i++) {
        if (p[i] == 0x50 && p[i + 1] == 0x4b && p[i + 2] == 1 && p[i + 3] == 2) {
            p[i + 10] = 8;
            break;
        }
    }
    CHECK_ERR_CONTAINS(gp_torch_open_memory(ckpt.data, ckpt.len, "zipped.pt", &f, &err), &err,
                       "compressed");
    gp_buf_free(&ckpt);
    gp_torch_open("/nonexistent/file.pt", &f, &err);
    CHECK(strstr(err.message, "No such file") != NULL);
}
