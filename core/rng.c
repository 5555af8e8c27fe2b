#include "core/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void hl_rng_seed(hl_rng *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t hl_rng_next(hl_rng *rng)
{
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

double hl_rng_uniform(hl_rng *rng)
{
#ifdef HL_REAL_DOUBLE
    return (double)(hl_rng_next(rng) >> 11) * 0x1.0p-53;
#else
    /* 24 bits, so the value stays below 1 once rounded to float. */
    return (double)(hl_rng_next(rng) >> 40) * 0x1.0p-24;
#endif
}

double hl_rng_normal(hl_rng *rng)
{
    double u1 = 1.0 - (double)(hl_rng_next(rng) >> 11) * 0x1.0p-53; /* (0, 1] */
    double u2 = (double)(hl_rng_next(rng) >> 11) * 0x1.0p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586477 * u2);
}

uint32_t hl_rng_below(hl_rng *rng, uint32_t n)
{
    /* Lemire's multiply-shift with rejection: unbiased. */
    uint64_t m = (hl_rng_next(rng) >> 32) * (uint64_t)n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while (low < threshold) {
            m = (hl_rng_next(rng) >> 32) * (uint64_t)n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

void hl_init_uniform(hl_tensor *t, hl_rng *rng, double lo, double hi)
{
    for (size_t i = 0; t && t->data && i < t->numel; i++)
        t->data[i] = (hl_real)(lo + (hi - lo) * hl_rng_uniform(rng));
}

void hl_init_normal(hl_tensor *t, hl_rng *rng, double mean, double std)
{
    for (size_t i = 0; t && t->data && i < t->numel; i++)
        t->data[i] = (hl_real)(mean + std * hl_rng_normal(rng));
}

void hl_init_xavier_uniform(hl_tensor *t, hl_rng *rng, int fan_in, int fan_out)
{
    double bound = sqrt(6.0 / (double)(fan_in + fan_out));
    hl_init_uniform(t, rng, -bound, bound);
}

void hl_init_kaiming_uniform(hl_tensor *t, hl_rng *rng, int fan_in)
{
    double bound = 1.0 / sqrt((double)fan_in);
    hl_init_uniform(t, rng, -bound, bound);
}
