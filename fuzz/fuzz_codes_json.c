/* fuzz_codes_json.c — libFuzzer harness for the codes JSON reader
 * (cli/codes_json.c, `gepard decode` and --ref-codes): frames, widths and
 * code ranges, with and without a required width and vocabulary. The reader
 * takes a path, so the input goes into a memfd. Seeds: fuzz/seeds/codes_json/. */
#include "fuzz_common.h"

#include "base/log.h"
#include "cli/codes_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_log_set_level(GP_LOG_SILENT);
    char path[64];
    int fd = fuzz_memfd(data, size, path, sizeof path);
    if (fd < 0) return 0;
    static const int vocab[4] = {8, 7, 6, 6};
    for (int mode = 0; mode < 2; mode++) {
        gp_error err;
        gp_error_clear(&err);
        int32_t *codes = NULL;
        size_t frames = 0;
        int channels = 0;
        int rc = gp_codes_json_read(path, mode ? 4 : 0, mode ? vocab : NULL, &codes, &frames,
                                    &channels, &err);
        fuzz_check_error(rc, &err);
        if (!rc && frames) {
            volatile int32_t last = codes[frames * (size_t)channels - 1]; /* ASan checks */
            (void)last;
        }
        free(codes);
    }
    close(fd);
    return 0;
}
