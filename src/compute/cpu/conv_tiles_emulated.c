/* conv_tiles_emulated.c — GP_DCONV_TILES's tile loop (conv_tiles_body.h) with the AMX
 * operations done in plain C on eight thread-local tiles: the products and the order of
 * their sums are those of TDPBF16PS (Intel SDM pseudo-code; bf16 x bf16 products are
 * exact in f32), only the hardware's flush of denormal bf16 inputs to zero is not
 * reproduced. GEPARD_TILES=emulate selects it, so the packing, the input split, the tile
 * walk and the epilogue are tested on CPUs without AMX; it is far too slow to serve. */
#include <string.h>

#include "compute/cpu/conv_tiles_kernels.h"

typedef union emu_tile {
    uint32_t w[GP_AMX_WORDS];
    float f[GP_AMX_WORDS];
} emu_tile;

static _Thread_local emu_tile emu[8];

static float bf16_lo(uint32_t w) {
    union {
        uint32_t u;
        float f;
    } b = {w << 16};
    return b.f;
}

static float bf16_hi(uint32_t w) {
    union {
        uint32_t u;
        float f;
    } b = {w & 0xFFFF0000u};
    return b.f;
}

static void emu_load(int t, const void *p, size_t stride) {
    for (int r = 0; r < GP_AMX_SIDE; r++)
        memcpy(&emu[t].w[r * 16], (const char *)p + (size_t)r * stride, 64);
}

static void emu_store(int t, void *p, size_t stride) {
    for (int r = 0; r < GP_AMX_SIDE; r++)
        memcpy((char *)p + (size_t)r * stride, &emu[t].w[r * 16], 64);
}

/* c[m][n] += sum over pairs k of a[m][2k] b[k][2n] + a[m][2k+1] b[k][2n+1]. */
static void emu_dp(int c, int a, int b) {
    for (int m = 0; m < GP_AMX_SIDE; m++) {
        for (int n = 0; n < GP_AMX_SIDE; n++) {
            float acc = emu[c].f[m * 16 + n];
            for (int k = 0; k < GP_AMX_SIDE; k++) {
                const uint32_t aw = emu[a].w[m * 16 + k], bw = emu[b].w[k * 16 + n];
                acc += bf16_lo(aw) * bf16_lo(bw);
                acc += bf16_hi(aw) * bf16_hi(bw);
            }
            emu[c].f[m * 16 + n] = acc;
        }
    }
}

#define TCONFIG() ((void)0)
#define TZERO(t) memset(&emu[t], 0, sizeof emu[t])
#define TLOAD(t, p, stride) emu_load(t, p, stride)
#define TSTORE(t, p, stride) emu_store(t, p, stride)
#define TDP(c, a, b) emu_dp(c, a, b)
#define TRELEASE() ((void)0)
#define TILES_CHUNK_FN gp_tiles_chunk_emulated
#include "compute/cpu/conv_tiles_body.h"
#define MATMUL_TILES_FN gp_matmul_tiles_emulated
#include "compute/cpu/matmul_tiles_body.h"
