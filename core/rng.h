/*
 * rng.h: a seeded, documented random number generator.
 *
 * xoshiro256** (Blackman and Vigna) seeded through splitmix64, so every seed,
 * including 0, gives a well-mixed state. The same seed gives the same numbers
 * on every machine and thread count: nothing here is shared between threads.
 *
 *   hl_rng_uniform: [0, 1) with 24 random bits (float) or 53 (double build);
 *   hl_rng_normal:  N(0, 1) by the Box-Muller transform (one value per call);
 *   hl_rng_below:   an integer in [0, n), without modulo bias.
 *
 *     hl_rng rng;
 *     hl_rng_seed(&rng, 42);
 *     hl_init_normal(t, &rng, 0.0, 0.02);
 */
#ifndef HL_RNG_H
#define HL_RNG_H

#include <stdint.h>

#include "core/tensor.h"

typedef struct hl_rng {
    uint64_t s[4];
} hl_rng;

void hl_rng_seed(hl_rng *rng, uint64_t seed);
uint64_t hl_rng_next(hl_rng *rng);
double hl_rng_uniform(hl_rng *rng);
double hl_rng_normal(hl_rng *rng);
uint32_t hl_rng_below(hl_rng *rng, uint32_t n);

/* In-place initialisers over t->data (none drawn for a tensor without data:
 * parameters whose hl_params_commit failed). */
void hl_init_uniform(hl_tensor *t, hl_rng *rng, double lo, double hi);
void hl_init_normal(hl_tensor *t, hl_rng *rng, double mean, double std);
/* U(+-sqrt(6/(fan_in+fan_out))), as torch.nn.init.xavier_uniform_. */
void hl_init_xavier_uniform(hl_tensor *t, hl_rng *rng, int fan_in, int fan_out);
/* U(+-1/sqrt(fan_in)), what torch.nn.Linear uses for weights and biases
 * (kaiming_uniform_ with a = sqrt(5)). */
void hl_init_kaiming_uniform(hl_tensor *t, hl_rng *rng, int fan_in);

#endif
