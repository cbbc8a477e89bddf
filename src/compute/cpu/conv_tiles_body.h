/* conv_tiles_body.h — the tile loop of GP_DCONV_TILES (see conv_tiles_kernels.h), written
 * once over six operations that conv_tiles_amx.c maps to the AMX instructions and
 * conv_tiles_emulated.c to plain C:
 *
 *   TCONFIG()             every tile 16 rows x 64 bytes
 *   TZERO(t)              tile t = 0
 *   TLOAD(t, p, stride)   16 rows of 64 bytes from p, `stride` bytes apart
 *   TSTORE(t, p, stride)  the same the other way
 *   TDP(c, a, b)          c += a . b in bf16 pairs (TDPBF16PS)
 *   TRELEASE()
 *
 * Tiles 0-3 accumulate a 2 x 2 square of 16 x 16 results (two output channel blocks x
 * two sample blocks), 4-5 hold the two weight tiles and 6-7 the two input tiles, first
 * the hi terms', then the lo terms'. A remaining odd sample block runs with tiles 0, 2
 * and 6 only. Defines TILES_CHUNK_FN.
 *
 * The weights are read in the order they are packed, so each block's tiles form one
 * sequential stream; a tile load waits for all of its 16 lines, and the first stage's
 * weights come from memory at every frame, so each stream is prefetched TILES_AHEAD
 * tiles ahead (a prefetch past the end is harmless). */

#define TILES_AHEAD 4

static inline void tiles_prefetch(const uint32_t *tile) {
    const char *p = (const char *)(tile + TILES_AHEAD * GP_AMX_WORDS);
    for (int l = 0; l < GP_AMX_SIDE; l++) __builtin_prefetch(p + l * 64, 0, 3);
}

void TILES_CHUNK_FN(const gp_tiles_chunk *c) {
    TCONFIG();
    const size_t xs_bytes = c->xw * 4, v_bytes = c->vld * 4;
    const size_t tap_words = (size_t)c->cib * GP_AMX_WORDS, row_block = 16 * c->xw;
    for (int b = c->b0; b < c->b1; b += 2) {
        const uint32_t *a0 = c->a + (size_t)b * c->a_block, *a1 = a0 + c->a_block;
        float *v0 = c->v + (size_t)b * 16 * c->vld, *v1 = v0 + 16 * c->vld;
        for (int s = 0; s < c->nt; s += 2) {
            const bool two = s + 1 < c->nt; /* a second sample block (tiles 1, 3 and 7) */
            TZERO(0);
            TZERO(2);
            if (two) {
                TZERO(1);
                TZERO(3);
            }
            for (int t = 0; t < c->kernel; t++) {
                const size_t col = (size_t)s * 16 + (size_t)t * c->dilation;
                const uint32_t *w0 = a0 + (size_t)t * tap_words, *w1 = a1 + (size_t)t * tap_words;
                for (int k = 0; k < c->cib; k++) {
                    tiles_prefetch(w0 + (size_t)k * GP_AMX_WORDS);
                    tiles_prefetch(w1 + (size_t)k * GP_AMX_WORDS);
                    TLOAD(4, w0 + (size_t)k * GP_AMX_WORDS, 64);
                    TLOAD(5, w1 + (size_t)k * GP_AMX_WORDS, 64);
                    for (int term = 0; term < 2; term++) { /* hi, then lo */
                        const uint32_t *x = (term ? c->xlo : c->xhi) + col + (size_t)k * row_block;
                        TLOAD(6, x, xs_bytes);
                        if (two) TLOAD(7, x + 16, xs_bytes);
                        TDP(0, 4, 6);
                        TDP(2, 5, 6);
                        if (two) {
                            TDP(1, 4, 7);
                            TDP(3, 5, 7);
                        }
                    }
                }
            }
            TSTORE(0, v0 + (size_t)s * 16, v_bytes);
            TSTORE(2, v1 + (size_t)s * 16, v_bytes);
            if (two) {
                TSTORE(1, v0 + (size_t)s * 16 + 16, v_bytes);
                TSTORE(3, v1 + (size_t)s * 16 + 16, v_bytes);
            }
        }
    }
    TRELEASE();
}
