/* fuzz_zip.c — libFuzzer harness for the zip central-directory reader
 * (io/zip.c): end-of-central-directory search, zip64 records and extra
 * fields, local headers; every entry's data pointer must stay inside the
 * buffer. Seeds: the fixture lora_adapter.pt and fuzz/seeds/zip/. */
#include "fuzz_common.h"

#include "base/log.h"
#include "io/zip.h"

static volatile unsigned fuzz_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_log_set_level(GP_LOG_SILENT);
    gp_error err;
    gp_error_clear(&err);
    (void)gp_zip_looks_like(data, size);
    gp_zip *zip = NULL;
    int rc = gp_zip_open_memory(data, size, "fuzz.zip", &zip, &err);
    fuzz_check_error(rc, &err);
    if (rc) return 0;
    unsigned sum = 0;
    for (size_t i = 0; i < zip->count; i++) {
        const gp_zip_entry *e = &zip->entries[i];
        (void)gp_zip_find(zip, e->name);
        const unsigned char *p = NULL;
        gp_error e2;
        gp_error_clear(&e2);
        int r2 = gp_zip_entry_data(zip, e, &p, &e2);
        fuzz_check_error(r2, &e2);
        if (!r2 && e->size) sum += p[0] + p[e->size - 1]; /* ASan checks the bounds */
    }
    fuzz_sink = sum;
    gp_zip_free(zip);
    return 0;
}
