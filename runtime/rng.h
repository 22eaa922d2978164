/* rng: a small deterministic generator (splitmix64), so initial weights and data order
 * depend only on the seed, on every machine. */
#ifndef MMC_RNG_H
#define MMC_RNG_H

#include <math.h>
#include <stdint.h>

static inline uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [0, 1) with 53 random bits */
static inline double rng_uniform(uint64_t *s) { return (double)(rng_next(s) >> 11) * 0x1p-53; }

/* standard normal, Box-Muller */
static inline double rng_normal(uint64_t *s) {
    double u = rng_uniform(s), v = rng_uniform(s);
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

#endif
