/* rng.h — the engine's seedable random number generator.
 *
 * xoshiro256** (Blackman & Vigna, 2018) seeded from a 64-bit seed through
 * splitmix64. Each stream owns one, so a request's audio depends only on its
 * seed and options, never on what else the server is doing. Uniform doubles
 * use the top 53 bits, so they lie in [0, 1).
 */
#ifndef GP_BASE_RNG_H
#define GP_BASE_RNG_H

#include <stdint.h>

typedef struct gp_rng {
    uint64_t s[4];
} gp_rng;

void gp_rng_seed(gp_rng *rng, uint64_t seed);
uint64_t gp_rng_next_u64(gp_rng *rng);
/* Uniform in [0, 1) with 53 random bits. */
double gp_rng_uniform(gp_rng *rng);
/* A seed from the OS entropy pool (getrandom), falling back to the clock. */
uint64_t gp_rng_entropy_seed(void);

#endif
