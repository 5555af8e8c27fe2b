/*
 * kernels.h: the table of one kernel set (internal to ops/).
 *
 * The hot loops of ops/ (GEMM micro-kernels and packing, the fused
 * attention's tile products, the exp/erf/GELU row kernels) are written once
 * in ops/kernels/ on the vector layer of ops/simd.h and compiled once per
 * instruction set. Each compilation fills one hl_kernel_set; ops/isa.c
 * picks the set the CPU runs best (or the one HL_ISA names) at the first
 * call, and every op reaches its kernels through it:
 *
 *     const hl_kernel_set *ks = hl_kernels();
 *     ks->tile_gemm(m, n, k, a, lda, 1, b, ldb, false, 1, c, ldc);
 *
 * Every set computes the same bits (see ops/simd.h), except the portable one
 * on a target without FMA.
 */
#ifndef HL_OPS_KERNELS_H
#define HL_OPS_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/real.h"
#include "ops/isa.h"

/* ---- GEMM micro-kernels (driven by ops/gemm.c).
 *
 * A kernel updates one mr×nr tile of C from panels: a holds mr values of
 * op(A)'s column k at a[k·a_step..], b holds nr values of op(B)'s row k at
 * b[k·b_step..], for k < kc:
 *     c (mr rows, row stride ldc) = beta·c + Σ_k a[k·a_step + r]·b[k·b_step + j]
 * beta 0 writes c without reading it; a bias (nr values, or NULL) is where
 * every row starts instead of beta·c, which is then not read either. Each
 * element is one running sum: beta·c (or the bias) first, then one fused
 * multiply-add per k in ascending order, carried across calls through c
 * itself, so the result depends neither on how K is cut into panels and C
 * into tiles nor on the tile shape of the set. */
typedef void hl_gemm_micro_fn(int kc, const hl_real *restrict a, size_t a_step,
                              const hl_real *restrict b, size_t b_step, hl_real beta,
                              const hl_real *restrict bias, hl_real *restrict c, size_t ldc);

typedef struct {
    int mr, nr;   /* the tile of C it updates */
    double speed; /* multiply-adds per second, relative to the set's first kernel */
    hl_gemm_micro_fn *fn;
    /* The same with a[r·a_step + k] instead, reading rows of an untransposed
     * A in place; NULL if this kernel has no such form. */
    hl_gemm_micro_fn *fn_rows;
} hl_gemm_kernel;

/* The largest tile of any set (AVX-512: 14 rows of two 64-byte vectors). */
#define HL_GEMM_MAX_MR 14
#define HL_GEMM_MAX_NR (128 / (int)sizeof(hl_real))

/* dst[k·ld + r] = alpha·src[k·lds + r] (a straight copy) or, transposed,
 * alpha·src[r·lds + k], for r < rows and k < kc; zero for rows ≤ r < width.
 * These pack slivers of A (width mr) and B (width nr) for a kernel. */
typedef void hl_gemm_pack_fn(int rows, int width, int kc, hl_real alpha,
                             const hl_real *restrict src, size_t lds, hl_real *restrict dst,
                             int ld);

/* ---- Tile products read in place (see ops/tile_gemm.h):
 * c = scale·((accumulate ? c : 0) + A·B), the scale applied to each finished
 * sum as it is stored (1 leaves the sums as they are). */
typedef void hl_tile_gemm_fn(int m, int n, int k, const hl_real *a, size_t a_row,
                             size_t a_col, const hl_real *b, size_t ldb, bool accumulate,
                             hl_real scale, hl_real *c, size_t ldc);

/* ---- Row kernels: the one list of them (called through ops/vmath.h).
 *
 * F(name, type, (parameters), (arguments)) is a kernel that returns a type,
 * P(name, (parameters), (arguments)) one that returns nothing. Each line
 * gives hl_vmath_kernels its field, every set its prototype
 * (HL_SIMD_FN(hl_vmath_<name>), ops/kernels/set.h) and its entry
 * (ops/kernels/set.c), and ops/vmath.h the call hl_vmath_<name> through the
 * set in use: a new row kernel is its code in ops/kernels/ and one line here.
 * "(+)=" adds, or stores when overwrite. */
#define HL_VMATH_KERNELS(F, P)                                                                    \
    /* The largest of x[0..n): NaN if any is NaN, -inf when n is 0. */                           \
    F(max, hl_real, (const hl_real *x, size_t n), (x, n))                                        \
    /* y[i] = exp(x[i] - shift) (y may be NULL); returns Σ y[i] summed in double. */              \
    F(exp_sum, double, (const hl_real *x, hl_real shift, hl_real *y, size_t n), (x, shift, y, n)) \
    /* exp_sum of each of a tile's rows, in place: row r (x + r·ldx, n values)                   \
     * becomes exp(x - shift[r]) and sum[r] its sum, the bits of one exp_sum a row. */           \
    P(exp_sum_rows,                                                                              \
      (hl_real *x, size_t ldx, int rows, size_t n, const hl_real *shift, double *sum),           \
      (x, ldx, rows, n, shift, sum))                                                             \
    /* y[i] = exp((x[i] - a) - b), each difference rounded to hl_real: the                      \
     * log-softmax (x - max) - log Σ of PyTorch, exponentiated. */                               \
    P(exp, (const hl_real *x, hl_real a, hl_real b, hl_real *y, size_t n), (x, a, b, y, n))      \
    /* y[i] = erf(x[i]). */                                                                      \
    P(erf, (const hl_real *x, hl_real *y, size_t n), (x, y, n))                                  \
    /* The exact GELU y[i] = x·Φ(x) = x·0.5·(1 + erf(x/√2)) (PyTorch's formula). */              \
    P(gelu, (const hl_real *x, hl_real *y, size_t n), (x, y, n))                                 \
    /* dx[i] (+)= dy[i]·(Φ(x) + x·φ(x)). */                                                      \
    P(gelu_grad, (const hl_real *x, const hl_real *dy, hl_real *dx, size_t n, bool overwrite),   \
      (x, dy, dx, n, overwrite))                                                                 \
    /* GELU's tanh approximation (GPT-2's gelu_new, PyTorch's                                    \
     * gelu(approximate='tanh')), y[i] = 0.5·x·(1 + tanh(u)), u = √(2/π)·(x +                    \
     * 0.044715·x³), computed as x·σ(2u) = x/(1 + e^(-2u)): the same value without               \
     * tanh's cancellation in 1 + tanh(u) for negative x; 2u rounds as twice                     \
     * PyTorch's u. */                                                                           \
    P(gelu_tanh, (const hl_real *x, hl_real *y, size_t n), (x, y, n))                            \
    /* dx[i] (+)= dy[i]·(σ(2u) + x·σ(2u)·(1 - σ(2u))·2u'), 2u' = 2√(2/π)·(1 +                    \
     * 3·0.044715·x²). */                                                                        \
    P(gelu_tanh_grad,                                                                            \
      (const hl_real *x, const hl_real *dy, hl_real *dx, size_t n, bool overwrite),              \
      (x, dy, dx, n, overwrite))                                                                 \
    /* SwiGLU's gate: y[i] = silu(gate[i])·up[i] = gate·σ(gate)·up, σ the logistic               \
     * function (PyTorch's F.silu(gate) * up). */                                                \
    P(swiglu, (const hl_real *gate, const hl_real *up, hl_real *y, size_t n), (gate, up, y, n))  \
    /* dgate[i] (+)= dy·up·σ·(1 + gate·(1 - σ)) and dup[i] (+)= dy·gate·σ. */                     \
    P(swiglu_grad,                                                                               \
      (const hl_real *gate, const hl_real *up, const hl_real *dy, hl_real *dgate, hl_real *dup,  \
       size_t n, bool overwrite),                                                                \
      (gate, up, dy, dgate, dup, n, overwrite))                                                  \
    /* Cross-entropy's gradient on a row of logits: y[i] (+)= scale·(p[i] - (i ==                \
     * hot)), p[i] = exp((x[i] - a) - b) as hl_vmath_exp gives it. */                            \
    P(xent_grad,                                                                                 \
      (const hl_real *x, hl_real a, hl_real b, hl_real scale, size_t hot, hl_real *y, size_t n,  \
       bool overwrite),                                                                          \
      (x, a, b, scale, hot, y, n, overwrite))                                                    \
    /* Logit soft-capping, y[i] = cap·tanh(x[i]/cap) (cap > 0). The float build's                \
     * tanh is its Taylor series to u⁹ below |u| = 1/4, else (1 - e)/(1 + e), e =                \
     * e^(-2|u|): a few ulp (tests/test_vmath.c). */                                             \
    P(softcap, (const hl_real *x, hl_real cap, hl_real *y, size_t n), (x, cap, y, n))            \
    /* hl_vmath_xent_grad through the cap: y[i] (+)= scale·(p[i] - (i == hot))·(1                \
     * - t²), t = tanh(x[i]/cap), p[i] = exp((cap·t - a) - b), cap·t as                          \
     * hl_vmath_softcap rounds it. */                                                            \
    P(softcap_xent_grad,                                                                         \
      (const hl_real *x, hl_real cap, hl_real a, hl_real b, hl_real scale, size_t hot,           \
       hl_real *y, size_t n, bool overwrite),                                                    \
      (x, cap, a, b, scale, hot, y, n, overwrite))                                               \
    /* y[i] += x[i]. */                                                                          \
    P(add, (const hl_real *x, hl_real *y, size_t n), (x, y, n))                                  \
    /* y[i] = x[i]·s, the product in double, then rounded (y may be x): a                        \
     * softmax row's normalisation by 1/Σ. */                                                    \
    P(mul_double, (const hl_real *x, double s, hl_real *y, size_t n), (x, s, y, n))              \
    /* Σ x[i]·y[i], each product and the sum in double, element i in partial sum                 \
     * i mod HL_SUM_LANES (ops/simd.h): the same bits whatever the vector width. */              \
    F(dot, double, (const hl_real *x, const hl_real *y, size_t n), (x, y, n))                    \
    /* Softmax's backward on a row of probabilities p: dx[i] (+)= scale·(p[i]·(dp[i]             \
     * - dot)), the difference and product in double, rounded before scale (dx                   \
     * may be dp; dot = Σ dp·p). */                                                              \
    P(softmax_grad,                                                                              \
      (const hl_real *p, const hl_real *dp, double dot, hl_real scale, hl_real *dx, size_t n,    \
       bool overwrite),                                                                          \
      (p, dp, dot, scale, dx, n, overwrite))                                                     \
    /* Column sums over rows r < rows (row stride ld), j < n, each in double over                \
     * the rows in order: sum_dy[j] += Σ dy and, when x is given, sum_dxhat[j] +=                \
     * Σ dy·((x - mean[r·step])·rstd[r·step]) (mean NULL: 0); a NULL sum is not                  \
     * taken. A bias's gradient, and the norms' gamma and beta gradients. */                     \
    P(col_sums,                                                                                  \
      (const hl_real *dy, const hl_real *x, size_t ld, size_t rows, const double *mean,          \
       const double *rstd, size_t step, double *sum_dy, double *sum_dxhat, size_t n),            \
      (dy, x, ld, rows, mean, rstd, step, sum_dy, sum_dxhat, n))

#define HL_VMATH_FIELD_F(name, type, params, args) type(*name) params;
#define HL_VMATH_FIELD_P(name, params, args) void(*name) params;
typedef struct {
    HL_VMATH_KERNELS(HL_VMATH_FIELD_F, HL_VMATH_FIELD_P)
} hl_vmath_kernels;
#undef HL_VMATH_FIELD_F
#undef HL_VMATH_FIELD_P

/* ---- The rotary row kernel (see ops/rope.c): for i < half,
 *     y[i]      (+)= x[i]·c[i] - x[half + i]·(sign·s[i])
 *     y[half+i] (+)= x[half + i]·c[i] + x[i]·(sign·s[i])
 * sign +1 rotates by the angles, -1 back (the transpose, for backward). */
typedef void hl_rope_row_fn(const hl_real *x, const hl_real *cosines, const hl_real *sines,
                            hl_real sign, hl_real *y, size_t half, bool accumulate);

/* ---- Row kernels of LayerNorm and RMSNorm (ops/kernels/norm.c), in double.
 * sum: Σ (x - shift), or Σ (x - shift)² when square.
 * scale: y = (x - mean)·rstd·gamma + beta (gamma, beta may be NULL).
 * grad_sums: with d = dy·gamma and x̂ = (x - mean)·rstd, Σ d and Σ d·x̂.
 * grad: dx (+)= rstd·(d - mean_d - x̂·mean_dxhat).
 * RMSNorm is the case mean = 0 (and mean_d = 0). */
typedef struct {
    double (*sum)(const hl_real *x, double shift, bool square, size_t n);
    void (*scale)(const hl_real *x, double mean, double rstd, const hl_real *gamma,
                  const hl_real *beta, hl_real *y, size_t n);
    void (*grad_sums)(const hl_real *x, const hl_real *dy, const hl_real *gamma, double mean,
                      double rstd, size_t n, double *sum_d, double *sum_dxhat);
    void (*grad)(const hl_real *x, const hl_real *dy, const hl_real *gamma, double mean,
                 double rstd, double mean_d, double mean_dxhat, hl_real *dx, size_t n,
                 bool overwrite);
} hl_norm_kernels;

/* ---- One AdamW step over n parameters (ops/kernels/optim.c), in the order
 * of torch.optim.AdamW's formula with each operation rounded once (no FMA),
 * so every set gives the same bits:
 *     g = grad·grad_scale;  w = w·decay;  m = b1·m + (1 - b1)·g;
 *     v = b2·v + (1 - b2)·g·g;  w = w - step_size·m / (√v / sqrt_bc2 + eps)  */
typedef struct {
    hl_real grad_scale, decay, b1, b2, step_size, sqrt_bc2, eps;
} hl_adamw_args;
typedef void hl_adamw_fn(hl_real *w, const hl_real *grad, hl_real *m, hl_real *v, size_t n,
                         const hl_adamw_args *a);

typedef struct hl_kernel_set {
    hl_isa isa;
    bool fma; /* multiply-adds round once: the bits every FMA set shares */
    const hl_gemm_kernel *gemm; /* the one for large products first; ends with fn NULL */
    hl_gemm_pack_fn *gemm_pack, *gemm_pack_transposed;
    hl_tile_gemm_fn *tile_gemm;
    hl_vmath_kernels vmath;
    hl_rope_row_fn *rope_row;
    hl_norm_kernels norm;
    hl_adamw_fn *adamw;
    /* iterations of independent FMAs on the calling thread, *flops set to
     * their floating-point operations (2 per lane): a benchmark's yardstick
     * of the core's peak (bench's peak row). Returns a value to keep. */
    double (*fma_peak)(long iterations, double *flops);
} hl_kernel_set;

/* The set in use: chosen at the first call (HL_ISA, else the best the CPU
 * has), changed only by hl_isa_use. */
const hl_kernel_set *hl_kernels(void);

/* The table of a set this build has (supported by the CPU or not), or NULL. */
const hl_kernel_set *hl_kernels_of(hl_isa isa);

/* One table per compiled set (ops/kernels/set.c); the x86 ones exist only in
 * x86-64 builds. */
extern const hl_kernel_set hl_kernel_set_portable;
#if defined(__x86_64__)
extern const hl_kernel_set hl_kernel_set_avx2;
extern const hl_kernel_set hl_kernel_set_avx512;
#endif

/* ---- An op's own kernels, outside the table.
 *
 * A kernel that one op alone calls lives with that op: its code in
 * ops/kernels/<op>.c (compiled once per set like every file there, each
 * function named through HL_SIMD_FN) and its declaration in
 * ops/kernels/<op>.h, which both that file and the op's file include. The op
 * calls it through the set in use with HL_KERNEL, so no list here grows:
 *
 *     HL_KERNEL_DECLARE(void, hl_relu2_row, (const hl_real *x, hl_real *y, size_t n));
 *     HL_KERNEL(hl_relu2_row)(x, y, n);        // hl_relu2_row_avx2, ... as the set is
 *
 * The choice costs one load of the active set per call: call it per row or
 * chunk, not per element. */
#if defined(__x86_64__)
#define HL_KERNEL_DECLARE(type, name, params)                                                     \
    type name##_portable params;                                                                  \
    type name##_avx2 params;                                                                      \
    type name##_avx512 params
#define HL_KERNEL(name)                                                                           \
    (hl_isa_active() == HL_ISA_AVX512 ? name##_avx512                                             \
     : hl_isa_active() == HL_ISA_AVX2 ? name##_avx2                                               \
                                      : name##_portable)
#else
#define HL_KERNEL_DECLARE(type, name, params) type name##_portable params
#define HL_KERNEL(name) name##_portable
#endif

#endif
