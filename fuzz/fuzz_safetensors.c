/* fuzz_safetensors.c — libFuzzer harness for the safetensors reader
 * (io/safetensors.c): the 8-byte header length, the JSON header (dtypes,
 * shapes, data offsets, __metadata__) and the f32 conversion of every tensor
 * the reader accepts. Seeds: fuzz/seeds/safetensors/ and the fixtures. */
#include "fuzz_common.h"

#include "base/alloc.h"
#include "base/log.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_log_set_level(GP_LOG_SILENT);
    gp_error err;
    gp_error_clear(&err);
    (void)gp_st_looks_like(data, size);
    gp_st_file *f = NULL;
    int rc = gp_st_open_memory(data, size, "fuzz.safetensors", &f, &err);
    fuzz_check_error(rc, &err);
    if (rc) return 0;
    for (size_t i = 0; i < f->count; i++) {
        const gp_st_tensor *t = &f->tensors[i];
        if (gp_st_find(f, t->name) == NULL) abort();
        if (t->numel > (1u << 20)) continue; /* bounded by the file size already */
        float *x = NULL;
        gp_error e2;
        gp_error_clear(&e2);
        int r2 = gp_st_load_f32(t, &x, &e2);
        fuzz_check_error(r2, &e2);
        gp_aligned_free(x);
    }
    (void)gp_st_metadata(f, "format");
    gp_st_close(f);
    return 0;
}
