/* matmul_tiles_body.h — the tile loop of prefill's matrix products on AMX tiles
 * (compute/matmul_tiles.c), written once over the operations of conv_tiles_body.h
 * (TCONFIG, TZERO, TLOAD, TSTORE, TDP, TRELEASE) and included by conv_tiles_amx.c and
 * conv_tiles_emulated.c. Defines MATMUL_TILES_FN.
 *
 * y = x·Wᵀ for row blocks [r0b, r1b) of 16 input rows and output blocks [j0, j1) (j1 - j0
 * even) of 16 features: tiles 0-3 accumulate two row blocks x two output blocks, 4-5 hold
 * the two row blocks' activations (their hi terms, then their lo terms), 6-7 the two
 * weight tiles.
 *
 * The columns are walked in chunks of kc blocks, every output block of the job inside
 * each chunk, the accumulators stored to the job's scratch between chunks: a chunk's
 * activation tiles (packed, 1 KB each) stay in L1 while the weights stream past them
 * once. The tile-per-row-stride layout read every activation tile from L2 once per
 * output pair. A stored and reloaded accumulator keeps its f32 bits, so every result is
 * still summed over the 32-column blocks ascending, hi before lo in each: a row's values
 * do not depend on the rows it is batched with, nor on kc. */

/* The scratch of output pair jb's and row pair rb's four accumulator tiles. */
static inline float *tiles_acc(const gp_matmul_tiles_job *j, int jb, int rb) {
    const int rpairs = (j->r1b - j->r0b + 1) / 2;
    return j->c + ((size_t)((jb - j->j0) / 2) * rpairs + (rb - j->r0b) / 2) * (4 * GP_AMX_WORDS);
}

void MATMUL_TILES_FN(const gp_matmul_tiles_job *j) {
    TCONFIG();
    const size_t term_words = (size_t)j->rblocks * j->kb * (GP_AMX_WORDS * 2);
    for (int k0 = 0; k0 < j->kb; k0 += j->kc) {
        const int k1 = k0 + j->kc < j->kb ? k0 + j->kc : j->kb;
        for (int jb = j->j0; jb < j->j1; jb += 2) {
            const uint32_t *b0 = j->b + (size_t)jb * j->kb * GP_AMX_WORDS,
                           *b1 = b0 + (size_t)j->kb * GP_AMX_WORDS;
            /* the next pair's tiles of this chunk (or the first pair's of the next
             * chunk), into L2 while this pair multiplies; with one chunk, this pair's
             * tiles 32 ahead (without them 16 threads measured 10-15 % slower) */
            const bool last = jb + 2 >= j->j1;
            const uint32_t *n0 = last ? j->b + (size_t)j->j0 * j->kb * GP_AMX_WORDS
                                      : b0 + (size_t)2 * j->kb * GP_AMX_WORDS;
            const int next_k0 = last ? k1 : k0;
            const bool one_chunk = j->kc >= j->kb;
            for (int rb = j->r0b; rb < j->r1b; rb += 2) {
                const bool two = rb + 1 < j->r1b;
                float *acc = tiles_acc(j, jb, rb);
                if (k0 == 0) {
                    TZERO(0);
                    TZERO(1);
                    TZERO(2);
                    TZERO(3);
                } else {
                    TLOAD(0, acc, 64);
                    TLOAD(1, acc + GP_AMX_WORDS, 64);
                    TLOAD(2, acc + 2 * GP_AMX_WORDS, 64);
                    TLOAD(3, acc + 3 * GP_AMX_WORDS, 64);
                }
                for (int k = k0; k < k1; k++) {
                    /* one chunk: this pair's own streams 32 tiles ahead (the next
                     * pair's tiles of this chunk would come kb tiles later) */
                    const int next_k = one_chunk ? k + 32 : next_k0 + (k - k0);
                    if (rb == j->r0b && next_k < j->kb) {
                        const char *p0 = (const char *)((one_chunk ? b0 : n0) +
                                                        (size_t)next_k * GP_AMX_WORDS),
                                   *p1 = p0 + (size_t)j->kb * GP_AMX_WORDS * 4;
                        for (int line = 0; line < GP_AMX_WORDS * 4; line += 64) {
                            __builtin_prefetch(p0 + line, 0, 2);
                            __builtin_prefetch(p1 + line, 0, 2);
                        }
                    }
                    TLOAD(6, b0 + (size_t)k * GP_AMX_WORDS, 64);
                    TLOAD(7, b1 + (size_t)k * GP_AMX_WORDS, 64);
                    for (int term = 0; term < 2; term++) { /* hi, then lo */
                        const uint16_t *a0 = j->a + term * term_words +
                                             ((size_t)rb * j->kb + k) * (GP_AMX_WORDS * 2);
                        TLOAD(4, a0, 64);
                        if (two) TLOAD(5, a0 + (size_t)j->kb * (GP_AMX_WORDS * 2), 64);
                        TDP(0, 4, 6);
                        TDP(1, 4, 7);
                        if (two) {
                            TDP(2, 5, 6);
                            TDP(3, 5, 7);
                        }
                    }
                }
                TSTORE(0, acc, 64);
                TSTORE(1, acc + GP_AMX_WORDS, 64);
                if (two) {
                    TSTORE(2, acc + 2 * GP_AMX_WORDS, 64);
                    TSTORE(3, acc + 3 * GP_AMX_WORDS, 64);
                }
            }
        }
    }
    TRELEASE();
    /* the accumulators (tile order: row block, output block) to y */
    for (int jb = j->j0; jb < j->j1; jb += 2)
        for (int rb = j->r0b; rb < j->r1b; rb += 2) {
            const float *acc = tiles_acc(j, jb, rb);
            for (int half = 0; half < 2 && rb + half < j->r1b; half++) {
                const int r0 = (rb + half) * 16, rows = 16 < j->n - r0 ? 16 : j->n - r0;
                for (int side = 0; side < 2; side++) {
                    const int n0 = (jb + side) * 16, cols = 16 < j->N - n0 ? 16 : j->N - n0;
                    if (cols <= 0) continue;
                    const float *t = acc + (size_t)(2 * half + side) * GP_AMX_WORDS;
                    for (int r = 0; r < rows; r++)
                        memcpy(j->y + (size_t)(r0 + r) * j->ldy + n0, t + r * 16,
                               (size_t)cols * sizeof(float));
                }
            }
        }
}
