/*
 * vmath.h: vectorised row kernels for the transcendental parts of softmax,
 * cross-entropy (soft-capped too), GELU (exact and tanh) and SwiGLU, and
 * the scatter-add row of the embedding's backward (internal to ops/).
 *
 * The float build evaluates exp and erf with its own polynomials on the
 * vectors of the active kernel set (ops/kernels/vmath.c, one compilation per
 * set); the double build calls libm's exp and erf per element: it exists for
 * tight gradient checks, not for speed.
 *
 *     double s = hl_vmath_exp_sum(row, hl_vmath_max(row, n), y, n); // softmax numerators
 *
 * Accuracy against libm over the whole float range (tests/test_vmath.c):
 * exp within 0.94 ulp, erf within 2.96 ulp with FMA (1.22 and 3.36 for the
 * portable set without it); -inf → 0, +inf → inf, NaN → NaN, overflow to inf
 * and gradual underflow through the denormals as libm.
 * Every sum keeps HL_SUM_LANES (16) partial sums, element i in partial
 * i mod 16, then adds them in a fixed tree: it depends only on the row, not
 * on the vector width or the thread that runs it.
 */
#ifndef HL_OPS_VMATH_H
#define HL_OPS_VMATH_H

#include <stdbool.h>
#include <stddef.h>

#include "core/real.h"
#include "ops/kernels.h"

/* hl_vmath_max, hl_vmath_exp_sum, ...: one call per kernel of the list
 * HL_VMATH_KERNELS (ops/kernels.h, which says what each computes), through
 * the set in use. */
#define VMATH_CALL_F(name, type, params, args)                                                    \
    static inline type hl_vmath_##name params { return hl_kernels()->vmath.name args; }
#define VMATH_CALL_P(name, params, args)                                                          \
    static inline void hl_vmath_##name params { hl_kernels()->vmath.name args; }
HL_VMATH_KERNELS(VMATH_CALL_F, VMATH_CALL_P)
#undef VMATH_CALL_F
#undef VMATH_CALL_P

#endif
