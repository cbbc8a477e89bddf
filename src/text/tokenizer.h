/* tokenizer.h — Hugging Face tokenizer.json byte-level BPE (Qwen3.5 family).
 *
 * Loads a `tokenizer.json` and encodes/decodes exactly like the Hugging Face
 * `tokenizers` library does for the pipeline Qwen uses (MODEL.md §G):
 *
 *   text ─ added tokens (matched in the raw text, leftmost-longest)
 *        ─ per remaining segment: NFC ─ added tokens marked normalized
 *        ─ Split(s) (regex or string read from the file, any behavior)
 *        ─ ByteLevel ─ BPE
 *
 * NFC and the regex classes use tables generated from HF's own answers
 * (text/unicode.h), so ids are HF's on every code point whatever Unicode
 * version the system's PCRE2 has; tests/test_tokenizer_hf.c compares with
 * HF's library itself.
 *
 * Anything outside that family (WordPiece/Unigram models, byte fallback,
 * other normalizers or pre-tokenizers, ...) is refused at load time with a
 * sentence naming the file, the field and the value. No special tokens are
 * added around the text (the post-processor is not applied).
 *
 * A loaded tokenizer is immutable except for an internal word cache guarded
 * by a mutex, so gp_tok_encode/gp_tok_decode may be called from several
 * threads at once.
 *
 * Deliberate differences from HF, all outside what the model sees:
 *  - decode: an id that is not in the vocabulary is an error (HF skips it);
 *    added tokens decode to their content as written (HF passes them through
 *    the ByteLevel decoder, which is the same for ASCII contents); with
 *    decoder null the text is still byte-level decoded (HF would join the
 *    token strings with spaces).
 *  - load: inconsistent files HF accepts with a warning (an added token whose
 *    id disagrees with the vocabulary, two tokens sharing an id, a vocabulary
 *    key listed twice) are refused.
 *  - the Split regex runs on PCRE2, translated from Oniguruma syntax (see
 *    tok_regex.c); case-insensitive matches of characters whose case folding
 *    is several characters (ß for "ss") differ — Qwen's patterns have none;
 *    properties other than general categories and White_Space (scripts,
 *    \p{Alphabetic}) follow the system PCRE2's Unicode tables.
 */
#ifndef GP_TEXT_TOKENIZER_H
#define GP_TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct gp_tokenizer gp_tokenizer;

/* Load from a file / from JSON text in memory. `origin` names the text in
 * error messages (normally the file name). */
int gp_tok_load(const char *path, gp_tokenizer **out, gp_error *err);
int gp_tok_load_memory(const char *json, size_t len, const char *origin, gp_tokenizer **out,
                       gp_error *err);
void gp_tok_free(gp_tokenizer *tok);

/* Encode UTF-8 text (len bytes, NULs allowed) to token ids. *ids is a
 * malloc'ed array the caller frees (NULL when *n_ids is 0). Text that is not
 * valid UTF-8 fails with GEPARD_ERR_INVALID_ARGUMENT naming the byte offset.
 * Empty text gives zero ids. Thread-safe. */
int gp_tok_encode(gp_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n_ids,
                  gp_error *err);

/* Decode ids to UTF-8 text (malloc'ed, NUL-terminated; *len, which may be
 * NULL, excludes the NUL).
 * BPE tokens are mapped back from the byte-level alphabet; added tokens give
 * their content, or nothing for special ones when skip_special is true. Byte
 * sequences that do not form valid UTF-8 become U+FFFD. An id that is not in
 * the vocabulary is an error naming it. */
int gp_tok_decode(const gp_tokenizer *tok, const int32_t *ids, size_t n, bool skip_special,
                  char **text, size_t *len, gp_error *err);

/* 1 + the highest id (BPE vocabulary and added tokens). */
size_t gp_tok_vocab_size(const gp_tokenizer *tok);
/* The id of a token string (added-token content or BPE vocabulary entry in
 * its byte-level spelling), or -1 when unknown. */
int32_t gp_tok_token_to_id(const gp_tokenizer *tok, const char *token);

#endif
