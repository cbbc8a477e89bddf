/* layout.c — text-repetition layout (see layout.h, MODEL.md §D.2). */
#include "text/layout.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"

int gp_layout_repeat_count(const gp_text_repetition *policy, size_t n_text_ids) {
    if (!policy || !policy->enabled || n_text_ids == 0) return 1;
    long long n = n_text_ids > (size_t)INT32_MAX ? INT32_MAX : (long long)n_text_ids;
    if (n >= policy->apply_below || n >= policy->target_text_tokens) return 1;
    /* Here 0 < n < target, so target > 0 and the division is safe. */
    long long r = (policy->target_text_tokens + n - 1) / n;
    if (r > policy->max_repeats) r = policy->max_repeats;
    if (r < 1) r = 1;
    return (int)r;
}

int gp_layout_build(const gp_text_repetition *policy, int32_t sot, int32_t eot, int32_t sos,
                    const int32_t *ids, size_t n, int32_t **out, size_t *n_out, gp_error *err) {
    *out = NULL;
    *n_out = 0;
    if (!ids && n)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "text layout: no token ids given");
    if (sot < 0 || eot < 0 || sos < 0)
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT,
                       "text layout: special token ids must be >= 0 (start_of_text %d, "
                       "end_of_text %d, start_of_speech %d) — check special_tokens in "
                       "gepard_config.json",
                       (int)sot, (int)eot, (int)sos);
    size_t r = (size_t)gp_layout_repeat_count(policy, n), block, total, bytes;
    if (n > SIZE_MAX - 2 || gp_mul_size(n + 2, r, &block) || block == SIZE_MAX ||
        gp_mul_size(block + 1, sizeof(int32_t), &bytes))
        return gp_fail(err, GEPARD_ERR_INVALID_ARGUMENT, "text layout: %zu token ids is too many",
                       n);
    total = block + 1;
    int32_t *v = malloc(bytes);
    if (!v) return gp_fail_oom(err, "the text layout", bytes);
    size_t k = 0;
    for (size_t copy = 0; copy < r; copy++) {
        v[k++] = sot;
        if (n) memcpy(v + k, ids, n * sizeof *ids);
        k += n;
        v[k++] = eot;
    }
    v[k++] = sos;
    *out = v;
    *n_out = total;
    return GEPARD_OK;
}
