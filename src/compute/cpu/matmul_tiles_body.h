/* matmul_tiles_body.h — the tile loop of prefill's matrix products on AMX tiles
 * (compute/matmul_tiles.c), written once over the operations of conv_tiles_body.h
 * (TCONFIG, TZERO, TLOAD, TSTORE, TDP, TRELEASE) and included by conv_tiles_amx.c and
 * conv_tiles_emulated.c. Defines MATMUL_TILES_FN.
 *
 * y = x·Wᵀ for row blocks [r0b, r1b) of 16 input rows and output blocks [j0, j1) (j1 - j0
 * even) of 16 features: tiles 0-3 accumulate two row blocks x two output blocks, 4-5 hold
 * the two row blocks' activations (their hi terms, then their lo terms), 6-7 the two
 * weight tiles. Every result is summed over the 32-column blocks ascending, hi before
 * lo in each: a row's values do not depend on the rows it is batched with. */

void MATMUL_TILES_FN(const gp_matmul_tiles_job *j) {
    TCONFIG();
    const size_t a_bytes = (size_t)j->kpad * 2, c_bytes = 32 * 4;
    for (int jb = j->j0; jb < j->j1; jb += 2) {
        const uint32_t *b0 = j->b + (size_t)jb * j->kb * GP_AMX_WORDS,
                       *b1 = b0 + (size_t)j->kb * GP_AMX_WORDS;
        for (int rb = j->r0b; rb < j->r1b; rb += 2) {
            const bool two = rb + 1 < j->r1b;
            const uint16_t *h0 = j->hi + (size_t)rb * 16 * j->kpad,
                           *l0 = j->lo + (size_t)rb * 16 * j->kpad;
            const uint16_t *h1 = h0 + (size_t)16 * j->kpad, *l1 = l0 + (size_t)16 * j->kpad;
            TZERO(0);
            TZERO(1);
            TZERO(2);
            TZERO(3);
            for (int k = 0; k < j->kb; k++) {
                /* both weight streams, every line, 32 tiles ahead into L2: the
                 * hardware alone (and one line of b0 per tile, as before) left
                 * prefill at 71-92 ms for 26 rows on a 2-core Xeon, this 51-68 */
                const char *pf0 = (const char *)(b0 + (size_t)(k + 32) * GP_AMX_WORDS),
                           *pf1 = (const char *)(b1 + (size_t)(k + 32) * GP_AMX_WORDS);
                for (int line = 0; line < GP_AMX_WORDS * 4; line += 64) {
                    __builtin_prefetch(pf0 + line, 0, 2);
                    __builtin_prefetch(pf1 + line, 0, 2);
                }
                TLOAD(6, b0 + (size_t)k * GP_AMX_WORDS, 64);
                TLOAD(7, b1 + (size_t)k * GP_AMX_WORDS, 64);
                for (int term = 0; term < 2; term++) { /* hi, then lo */
                    const size_t at = (size_t)k * 32;
                    TLOAD(4, (term ? l0 : h0) + at, a_bytes);
                    if (two) TLOAD(5, (term ? l1 : h1) + at, a_bytes);
                    TDP(0, 4, 6);
                    TDP(1, 4, 7);
                    if (two) {
                        TDP(2, 5, 6);
                        TDP(3, 5, 7);
                    }
                }
            }
            /* the 32 x 32 results through the caller's scratch */
            TSTORE(0, j->c, c_bytes);
            TSTORE(1, j->c + 16, c_bytes);
            if (two) {
                TSTORE(2, j->c + 16 * 32, c_bytes);
                TSTORE(3, j->c + 16 * 32 + 16, c_bytes);
            }
            const int rows = (two ? 32 : 16) < j->n - rb * 16 ? (two ? 32 : 16) : j->n - rb * 16;
            const int n0 = jb * 16, cols = 32 < j->N - n0 ? 32 : j->N - n0;
            for (int r = 0; r < rows; r++)
                memcpy(j->y + (size_t)(rb * 16 + r) * j->ldy + n0, j->c + r * 32,
                       (size_t)cols * sizeof(float));
        }
    }
    TRELEASE();
}
