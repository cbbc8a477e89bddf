/* nfc.h — Unicode NFC exactly as Hugging Face `tokenizers` computes it.
 *
 * HF's NFC normalizer uses older Unicode tables than current Unicode; this
 * one uses tables generated from HF's own answers (unicode.h), so the
 * tokenizer sees the text the model was trained on. The work is linear in
 * the length of the text, however long a run of combining marks is: each run
 * is put in canonical order with a stable counting sort, and composition
 * looks at each code point once.
 */
#ifndef GP_TEXT_NFC_H
#define GP_TEXT_NFC_H

#include <stddef.h>

#include "base/error.h"

/* NFC of UTF-8 into a malloc'ed, NUL-terminated string (*out, *out_len
 * without the NUL). Malformed UTF-8 is an error naming the byte offset. */
int gp_nfc(const char *s, size_t len, char **out, size_t *out_len, gp_error *err);

#endif
