/* fuzz_nemo.c — libFuzzer harness for the .nemo reader (io/nemo.c): a tar
 * archive, plain or gzip-compressed, read through libarchive for its
 * model_config.yaml and model_weights.ckpt members. The API takes a path, so
 * the input goes into a memfd. Seeds: small archives from
 * scripts/fuzz-seeds.sh (built from the codec fixture's members). */
#include "fuzz_common.h"

#include "base/log.h"
#include "io/nemo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_log_set_level(GP_LOG_SILENT);
    char path[64];
    int fd = fuzz_memfd(data, size, path, sizeof path);
    if (fd < 0) return 0;
    gp_error err;
    gp_error_clear(&err);
    gp_nemo nemo;
    int rc = gp_nemo_read(path, &nemo, &err);
    fuzz_check_error(rc, &err);
    if (!rc) {
        if (nemo.config && nemo.config[nemo.config_size] != '\0') abort(); /* NUL-terminated */
        gp_nemo_free(&nemo);
    }
    close(fd);
    return 0;
}
