/* utf8.h — strict UTF-8 checking, lossy repair, and the byte-level alphabet.
 *
 * Every text the tokenizer sees passes gp_utf8_check first, so the stages
 * after it (NFC, PCRE2 with NO_UTF_CHECK, the added-token scan) can rely on
 * well-formed input. Decoding token ids can produce arbitrary bytes, which
 * gp_utf8_append_lossy turns into valid UTF-8 the way Rust's
 * String::from_utf8_lossy does (each maximal invalid subpart becomes one
 * U+FFFD), so decode() matches Hugging Face `tokenizers` byte for byte.
 *
 * The byte-level alphabet (GPT-2's bytes_to_unicode, MODEL.md §G.6) maps each
 * byte to one printable code point: printable Latin-1 bytes map to
 * themselves, the other 68 bytes to U+0100..U+0143 in increasing order.
 */
#ifndef GP_TEXT_UTF8_H
#define GP_TEXT_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* 0 when s[0..len) is well-formed UTF-8 (no overlongs, no surrogates, nothing
 * above U+10FFFF). Otherwise -1, with *bad_offset the byte offset of the first
 * bad sequence and *reason a short phrase ("an overlong encoding", ...). */
int gp_utf8_check(const char *s, size_t len, size_t *bad_offset, const char **reason);

/* Decode the code point at s[*pos] of well-formed UTF-8 and advance *pos. */
uint32_t gp_utf8_next(const char *s, size_t len, size_t *pos);

/* Write the UTF-8 form of cp (<= U+10FFFF) to out; returns its length (1-4). */
size_t gp_utf8_put(uint32_t cp, char out[4]);

/* True when every byte is ASCII. */
bool gp_utf8_is_ascii(const char *s, size_t len);

/* Append s[0..len) to b, replacing each maximal invalid subpart with U+FFFD.
 * Returns 0, or -1 when out of memory. */
int gp_utf8_append_lossy(gp_buf *b, const char *s, size_t len);

/* The byte-level code point of byte b. */
uint32_t gp_bytelevel_char(uint8_t b);
/* The byte a byte-level code point stands for, or -1 if cp is not one. */
int gp_bytelevel_byte(uint32_t cp);

#endif
