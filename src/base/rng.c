/* rng.c — xoshiro256** with splitmix64 seeding (see rng.h). */
#include "base/rng.h"

#include <sys/random.h>

#include "base/timing.h"

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void gp_rng_seed(gp_rng *rng, uint64_t seed) {
    uint64_t state = seed;
    for (int i = 0; i < 4; i++) rng->s[i] = splitmix64(&state);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t gp_rng_next_u64(gp_rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double gp_rng_uniform(gp_rng *rng) { return (double)(gp_rng_next_u64(rng) >> 11) * 0x1.0p-53; }

uint64_t gp_rng_entropy_seed(void) {
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) == (ssize_t)sizeof seed) return seed;
    return gp_now_ns() ^ 0x5DEECE66Dull;
}
