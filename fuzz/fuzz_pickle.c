/* fuzz_pickle.c — libFuzzer harness for the restricted unpickler
 * (io/pickle.c): opcodes, memo, stack and the allowed globals; the value
 * graph it returns must only refer to values that exist. Seeds: data.pkl of
 * the fixture lora_adapter.pt and fuzz/seeds/pickle/. */
#include "fuzz_common.h"

#include "base/log.h"
#include "io/pickle.h"

static void check_graph(const gp_pickle *p) {
    if (p->root < 0 || p->root >= p->count) abort();
    for (int v = 0; v < p->count; v++) {
        const gp_pickle_value *x = &p->values[v];
        int n = x->kind == GP_PK_DICT                               ? 2 * x->n
                : (x->kind == GP_PK_TUPLE || x->kind == GP_PK_LIST) ? x->n
                                                                    : 0;
        for (int k = 0; k < n; k++)
            if (x->items[k] < 0 || x->items[k] >= p->count) abort();
        if (x->kind == GP_PK_TENSOR && (x->storage < 0 || x->storage >= p->count)) abort();
        (void)gp_pickle_kind_name(x->kind);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gp_log_set_level(GP_LOG_SILENT);
    gp_error err;
    gp_error_clear(&err);
    gp_pickle *p = NULL;
    int rc = gp_pickle_load(data, size, "data.pkl", &p, &err);
    fuzz_check_error(rc, &err);
    if (rc) return 0;
    check_graph(p);
    gp_pickle_free(p);
    return 0;
}
