/*
 * vmath.h: vectorised row kernels for the transcendental parts of softmax,
 * cross-entropy (soft-capped too), GELU (exact and tanh), SwiGLU and ReLU²,
 * and the scatter-add row of the embedding's backward (internal to ops/).
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

/* The largest of x[0..n): NaN if any is NaN, -inf when n is 0. */
static inline hl_real hl_vmath_max(const hl_real *x, size_t n)
{
    return hl_kernels()->vmath.max(x, n);
}

/* y[i] = exp(x[i] - shift) (y may be NULL); returns Σ y[i] summed in double. */
static inline double hl_vmath_exp_sum(const hl_real *x, hl_real shift, hl_real *y, size_t n)
{
    return hl_kernels()->vmath.exp_sum(x, shift, y, n);
}

/* y[i] = exp((x[i] - a) - b), each difference rounded to hl_real: the
 * log-softmax (x - max) - log Σ of PyTorch, exponentiated. */
static inline void hl_vmath_exp(const hl_real *x, hl_real a, hl_real b, hl_real *y, size_t n)
{
    hl_kernels()->vmath.exp(x, a, b, y, n);
}

/* y[i] = erf(x[i]). */
static inline void hl_vmath_erf(const hl_real *x, hl_real *y, size_t n)
{
    hl_kernels()->vmath.erf(x, y, n);
}

/* The exact GELU y[i] = x·Φ(x) = x·0.5·(1 + erf(x/√2)) (PyTorch's formula). */
static inline void hl_vmath_gelu(const hl_real *x, hl_real *y, size_t n)
{
    hl_kernels()->vmath.gelu(x, y, n);
}

/* dx[i] (+)= dy[i]·(Φ(x) + x·φ(x)): added to dx, or stored when overwrite. */
static inline void hl_vmath_gelu_grad(const hl_real *x, const hl_real *dy, hl_real *dx,
                                      size_t n, bool overwrite)
{
    hl_kernels()->vmath.gelu_grad(x, dy, dx, n, overwrite);
}

/* GELU's tanh approximation (GPT-2's gelu_new, PyTorch's
 * gelu(approximate='tanh')), y[i] = 0.5·x·(1 + tanh(u)), u = √(2/π)·(x +
 * 0.044715·x³), computed as x·σ(2u) = x/(1 + e^(-2u)): the same value without
 * tanh's cancellation in 1 + tanh(u) for negative x; 2u rounds as twice
 * PyTorch's u. */
static inline void hl_vmath_gelu_tanh(const hl_real *x, hl_real *y, size_t n)
{
    hl_kernels()->vmath.gelu_tanh(x, y, n);
}

/* dx[i] (+)= dy[i]·(σ(2u) + x·σ(2u)·(1 - σ(2u))·2u'), 2u' = 2√(2/π)·(1 +
 * 3·0.044715·x²): added to dx, or stored when overwrite. */
static inline void hl_vmath_gelu_tanh_grad(const hl_real *x, const hl_real *dy, hl_real *dx,
                                           size_t n, bool overwrite)
{
    hl_kernels()->vmath.gelu_tanh_grad(x, dy, dx, n, overwrite);
}

/* SwiGLU's gate: y[i] = silu(gate[i])·up[i] = gate·σ(gate)·up, σ the logistic
 * function (PyTorch's F.silu(gate) * up). */
static inline void hl_vmath_swiglu(const hl_real *gate, const hl_real *up, hl_real *y, size_t n)
{
    hl_kernels()->vmath.swiglu(gate, up, y, n);
}

/* dgate[i] (+)= dy·up·σ·(1 + gate·(1 - σ)) and dup[i] (+)= dy·gate·σ: added,
 * or stored when overwrite. */
static inline void hl_vmath_swiglu_grad(const hl_real *gate, const hl_real *up,
                                        const hl_real *dy, hl_real *dgate, hl_real *dup,
                                        size_t n, bool overwrite)
{
    hl_kernels()->vmath.swiglu_grad(gate, up, dy, dgate, dup, n, overwrite);
}

/* Cross-entropy's gradient on a row of logits: y[i] (+)= scale·(p[i] - (i ==
 * hot)), p[i] = exp((x[i] - a) - b) as hl_vmath_exp gives it; added to y, or
 * stored when overwrite. */
static inline void hl_vmath_xent_grad(const hl_real *x, hl_real a, hl_real b, hl_real scale,
                                      size_t hot, hl_real *y, size_t n, bool overwrite)
{
    hl_kernels()->vmath.xent_grad(x, a, b, scale, hot, y, n, overwrite);
}

/* ReLU², y[i] = relu(x)² (NaN stays NaN). */
static inline void hl_vmath_relu2(const hl_real *x, hl_real *y, size_t n)
{
    hl_kernels()->vmath.relu2(x, y, n);
}

/* dx[i] (+)= dy[i]·2·relu(x): added to dx, or stored when overwrite. */
static inline void hl_vmath_relu2_grad(const hl_real *x, const hl_real *dy, hl_real *dx,
                                       size_t n, bool overwrite)
{
    hl_kernels()->vmath.relu2_grad(x, dy, dx, n, overwrite);
}

/* Logit soft-capping, y[i] = cap·tanh(x[i]/cap) (cap > 0). The float build's
 * tanh is its Taylor series to u⁹ below |u| = 1/4, else (1 - e)/(1 + e), e =
 * e^(-2|u|): a few ulp (tests/test_vmath.c). */
static inline void hl_vmath_softcap(const hl_real *x, hl_real cap, hl_real *y, size_t n)
{
    hl_kernels()->vmath.softcap(x, cap, y, n);
}

/* hl_vmath_xent_grad through the cap: y[i] (+)= scale·(p[i] - (i == hot))·(1
 * - t²), t = tanh(x[i]/cap), p[i] = exp((cap·t - a) - b), cap·t as
 * hl_vmath_softcap rounds it. */
static inline void hl_vmath_softcap_xent_grad(const hl_real *x, hl_real cap, hl_real a, hl_real b,
                                              hl_real scale, size_t hot, hl_real *y, size_t n,
                                              bool overwrite)
{
    hl_kernels()->vmath.softcap_xent_grad(x, cap, a, b, scale, hot, y, n, overwrite);
}

/* y[i] += x[i]. */
static inline void hl_vmath_add(const hl_real *x, hl_real *y, size_t n)
{
    hl_kernels()->vmath.add(x, y, n);
}

#endif
