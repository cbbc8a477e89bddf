/* fuzz_torch.c — libFuzzer harness for torch.save checkpoints
 * (io/torch.c over io/zip.c and io/pickle.c): the zip, data.pkl, storages,
 * views with offsets and strides, flattened names and scalars; every tensor
 * it returns must lie inside the image (or its own copy). Seeds: the fixture
 * lora_adapter.pt and fuzz/seeds/torch/. */
#include "fuzz_common.h"

#include "base/log.h"
#include "io/torch.h"

static volatile unsigned fuzz_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_log_set_level(GP_LOG_SILENT);
    gp_error err;
    gp_error_clear(&err);
    (void)gp_torch_is_legacy(data, size);
    gp_torch_file *f = NULL;
    int rc = gp_torch_open_memory(data, size, "fuzz.pt", &f, &err);
    fuzz_check_error(rc, &err);
    if (rc) return 0;
    unsigned sum = 0;
    for (size_t i = 0; i < f->count; i++) {
        const gp_torch_tensor *t = &f->tensors[i];
        if (gp_torch_find(f, t->name) == NULL) abort();
        if (t->nbytes) {
            const unsigned char *b = t->data;
            sum += b[0] + b[t->nbytes - 1]; /* ASan checks the bounds */
        }
    }
    for (size_t i = 0; i < f->scalar_count; i++) (void)gp_torch_find_scalar(f, f->scalars[i].name);
    fuzz_sink = sum;
    gp_torch_close(f);
    return 0;
}
