/* fuzz_text.c — libFuzzer harness for the text a request speaks (the HTTP
 * `input`, `gepard say` arguments): cleaning and UTF-8 checks
 * (text/clean.c), NFC (text/nfc.c), long-text segmentation (text/segment.c)
 * and encoding with the fixture model's tokenizer (text/tok_encode.c,
 * tok_regex.c; loaded once from $GEPARD_FIXTURES, default ../shared/fixtures).
 * Every segment must lie inside the text and the segmenter must advance.
 * Seeds: fuzz/seeds/text/. */
#include "fuzz_common.h"

#include "base/log.h"
#include "text/clean.h"
#include "text/nfc.h"
#include "text/segment.h"
#include "text/tokenizer.h"

static gp_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    gp_log_set_level(GP_LOG_SILENT);
    const char *fixtures = getenv("GEPARD_FIXTURES");
    char path[4096];
    snprintf(path, sizeof path, "%s/model-tiny/model/tokenizer.json",
             fixtures ? fixtures : "../shared/fixtures");
    gp_error err;
    gp_error_clear(&err);
    if (gp_tok_load(path, &tok, &err)) {
        fprintf(stderr, "fuzz_text: %s (set GEPARD_FIXTURES)\n", err.message);
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_error err;
    gp_error_clear(&err);
    char *clean = NULL;
    size_t clean_len = 0;
    int rc = gp_text_clean((const char *)data, size, 1 << 20, &clean, &clean_len, &err);
    fuzz_check_error(rc, &err);
    char *nfc = NULL;
    size_t nfc_len = 0;
    gp_error_clear(&err);
    rc = gp_nfc((const char *)data, size, &nfc, &nfc_len, &err);
    fuzz_check_error(rc, &err);
    free(nfc);
    int32_t *ids = NULL;
    size_t n = 0;
    gp_error_clear(&err);
    rc = gp_tok_encode(tok, (const char *)data, size, &ids, &n, &err);
    fuzz_check_error(rc, &err);
    free(ids);
    if (clean) {
        gp_segment_options opts = gp_segment_default_options();
        opts.target_bytes = 40;
        opts.max_bytes = 80;
        size_t pos = 0, begin = 0, end = 0, last = 0;
        while (gp_segment_next(clean, clean_len, &pos, &opts, &begin, &end)) {
            if (begin > end || end > clean_len || pos > clean_len || pos <= last) abort();
            last = pos;
        }
        free(clean);
    }
    return 0;
}
