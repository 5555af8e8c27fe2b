/*
 * vmath.h: vectorised row kernels for the transcendental parts of softmax,
 * cross-entropy and GELU (internal to ops/).
 *
 * The float build evaluates exp and erf with its own polynomials on AVX-512
 * or AVX2+FMA vectors (chosen at compile time by __AVX512F__ / __AVX2__), or
 * on one float at a time in portable C. The double build calls libm's exp
 * and erf per element: it exists for tight gradient checks, not for speed.
 *
 *     double s = hl_vmath_exp_sum(row, hl_vmath_max(row, n), y, n); // softmax numerators
 *
 * Accuracy against libm over the whole float range (tests/test_vmath.c):
 * exp within 0.94 ulp, erf within 2.96 ulp (1.22 and 3.36 in portable C,
 * without FMA); -inf → 0, +inf → inf, NaN → NaN, overflow to inf and
 * gradual underflow through the denormals as libm.
 * Every sum is taken in one fixed order (vector lanes, then a fixed tree),
 * so it depends only on the row, never on which thread runs it.
 */
#ifndef HL_OPS_VMATH_H
#define HL_OPS_VMATH_H

#include <stdbool.h>
#include <stddef.h>

#include "core/real.h"

/* The largest of x[0..n): NaN if any is NaN, -inf when n is 0. */
hl_real hl_vmath_max(const hl_real *x, size_t n);

/* y[i] = exp(x[i] - shift) (y may be NULL); returns Σ y[i] summed in double. */
double hl_vmath_exp_sum(const hl_real *x, hl_real shift, hl_real *y, size_t n);

/* y[i] = exp((x[i] - a) - b), each difference rounded to hl_real: the
 * log-softmax (x - max) - log Σ of PyTorch, exponentiated. */
void hl_vmath_exp(const hl_real *x, hl_real a, hl_real b, hl_real *y, size_t n);

/* y[i] = erf(x[i]). */
void hl_vmath_erf(const hl_real *x, hl_real *y, size_t n);

/* The exact GELU y[i] = x·Φ(x) = x·0.5·(1 + erf(x/√2)) (PyTorch's formula). */
void hl_vmath_gelu(const hl_real *x, hl_real *y, size_t n);

/* dx[i] (+)= dy[i]·(Φ(x) + x·φ(x)): added to dx, or stored when overwrite. */
void hl_vmath_gelu_grad(const hl_real *x, const hl_real *dy, hl_real *dx, size_t n,
                        bool overwrite);

#endif
