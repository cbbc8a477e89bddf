/* layout.h — the text-repetition layout of the model input (MODEL.md §D.2).
 *
 * Short texts are repeated so the model sees at least `target_text_tokens`
 * text tokens: the block [SOT] + ids + [EOT] appears R times, then one SOS.
 * Only the last copy is spoken; the earlier ones are context. R is fixed at
 * inference (the training-time coin flip is never applied):
 *
 *   R(n) = 1                                  if disabled, n == 0,
 *                                             n >= apply_below or n >= target
 *        = clamp(ceil(target / n), 1, max_repeats)  otherwise
 */
#ifndef GP_TEXT_LAYOUT_H
#define GP_TEXT_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct gp_text_repetition {
    bool enabled;
    int target_text_tokens; /* 16 for Gepard-1.0 */
    int apply_below;        /* 13 */
    int max_repeats;        /* 8 */
} gp_text_repetition;

/* R for n text ids; 1 when policy is NULL. */
int gp_layout_repeat_count(const gp_text_repetition *policy, size_t n_text_ids);

/* block = [sot] + ids + [eot], repeated R times, then one sos. *out is
 * malloc'ed (caller frees) with *n_out = R * (n + 2) + 1 ids. */
int gp_layout_build(const gp_text_repetition *policy, int32_t sot, int32_t eot, int32_t sos,
                    const int32_t *ids, size_t n, int32_t **out, size_t *n_out, gp_error *err);

#endif
