/* unicode.h — the Unicode tables of the tokenizer, generated from Hugging
 * Face `tokenizers` itself (unicode_data.c, by scripts/unicode/gen_tables.py).
 *
 * Two uses:
 *
 *  - NFC (nfc.c). HF normalises with older Unicode tables than current
 *    Unicode (marks added since about Unicode 10 have class 0 there, a few
 *    compositions are missing). Per code point a 16-bit value holds the
 *    canonical combining class and two flags; decompositions (full, in
 *    canonical order) and composition pairs are sorted lists, searched only
 *    for the rare characters that need them. Hangul syllables are algorithmic.
 *
 *  - The split regex (tok_regex.c). PCRE2 classifies \p{L}, \p{N}, \p{M}...
 *    with the Unicode version it was built with; HF's Oniguruma has Unicode
 *    16. Each code point whose general category may differ between the two
 *    has a representative: a code point with the same category (outside
 *    marks also the same Alphabetic property, for \w), the same UTF-8 length
 *    and a category unchanged since Unicode 3.2. Matching the regex on a copy
 *    of the text with those code points replaced gives HF's pieces with any
 *    PCRE2 built with Unicode 13 or later (see unicode_data.c's header).
 *
 * All tables are read-only data; the lookups are two-stage (code point >> 7
 * selects a block of 128 entries).
 */
#ifndef GP_TEXT_UNICODE_H
#define GP_TEXT_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#define GP_UNI_BLOCK_SHIFT 7
#define GP_UNI_BLOCK_MASK 127u

/* NFC property bits: the combining class in the low 8 bits, and flags. */
#define GP_UNI_DECOMPOSES 0x100u    /* has a canonical decomposition (not Hangul) */
#define GP_UNI_COMBINES_BACK 0x200u /* second of a composition pair (Hangul V, T too) */
#define GP_UNI_NFC_UNSTABLE 0x3FFu  /* any of: class > 0, decomposes, combines back */

typedef struct gp_uni_rep {
    uint32_t cp;     /* the representative */
    uint32_t lo, hi; /* smallest and largest code point it stands for */
} gp_uni_rep;

typedef struct gp_uni_decomp {
    uint32_t cp;
    uint16_t off; /* into gp_uni_decomp_pool */
    uint16_t len; /* 1..4 code points */
} gp_uni_decomp;

typedef struct gp_uni_pair {
    uint32_t first, second, composite;
} gp_uni_pair;

extern const uint16_t gp_uni_nfc_stage1[];
extern const uint16_t gp_uni_nfc_blocks[];
extern const uint16_t gp_uni_rep_stage1[];
extern const uint8_t gp_uni_rep_blocks[];
extern const gp_uni_rep gp_uni_reps[]; /* index 0: no representative */
extern const size_t gp_uni_n_reps;     /* entries including index 0 */
extern const uint32_t gp_uni_decomp_pool[];
extern const gp_uni_decomp gp_uni_decomps[]; /* sorted by cp */
extern const size_t gp_uni_n_decomps;
extern const gp_uni_pair gp_uni_pairs[]; /* sorted by (first, second) */
extern const size_t gp_uni_n_pairs;

/* NFC properties of a code point (<= U+10FFFF). */
static inline uint16_t gp_uni_nfc_props(uint32_t cp) {
    return gp_uni_nfc_blocks[((uint32_t)gp_uni_nfc_stage1[cp >> GP_UNI_BLOCK_SHIFT]
                              << GP_UNI_BLOCK_SHIFT) |
                             (cp & GP_UNI_BLOCK_MASK)];
}

/* Index into gp_uni_reps of the representative of cp, 0 when cp is used as
 * it is. */
static inline unsigned gp_uni_rep_index(uint32_t cp) {
    return gp_uni_rep_blocks[((uint32_t)gp_uni_rep_stage1[cp >> GP_UNI_BLOCK_SHIFT]
                              << GP_UNI_BLOCK_SHIFT) |
                             (cp & GP_UNI_BLOCK_MASK)];
}

/* The full canonical decomposition of cp (not for Hangul syllables): its
 * length, 0 when cp has none; *out points into read-only data. */
size_t gp_uni_decompose(uint32_t cp, const uint32_t **out);

/* The primary composite of the pair (first, second), Hangul included, or 0. */
uint32_t gp_uni_compose(uint32_t first, uint32_t second);

#endif
