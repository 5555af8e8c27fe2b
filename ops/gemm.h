/*
 * gemm.h: the one matrix-multiply kernel behind linear, matmul and their
 * backward passes (internal: not part of the public API).
 *
 * Row-major, with op(X) either X or its transpose, read in place:
 *     C (M,N) = alpha · op(A) (M,K) · op(B) (K,N) + beta · C
 * A is stored (M,K) with row stride lda, or (K,M) when trans_a; B is stored
 * (K,N) with row stride ldb, or (N,K) when trans_b; C has row stride ldc.
 * beta 0 overwrites C without reading it, so stale values (even NaN) vanish.
 *
 *     hl_gemm(false, true, rows, N, K, 1, x, K, w, K, 0, y, N);    // y = x·wᵀ
 *     hl_gemm(true, false, N, K, rows, 1, dy, N, x, K, 1, dw, K);  // dw += dyᵀ·x
 *
 * Work is split over disjoint blocks of C, and every element of C is summed
 * in the same order whatever the split, so results are bitwise identical for
 * any thread count.
 */
#ifndef HL_OPS_GEMM_H
#define HL_OPS_GEMM_H

#include <stdbool.h>
#include <stddef.h>

#include "core/real.h"

void hl_gemm(bool trans_a, bool trans_b, int M, int N, int K, hl_real alpha, const hl_real *A,
             int lda, const hl_real *B, int ldb, hl_real beta, hl_real *C, int ldc);

/* C (N,N) = beta·C + alpha·op(A)·op(B) on and above the diagonal, for a
 * product the caller knows to be symmetric (X·Xᵀ, or two commuting symmetric
 * matrices): micro-tiles wholly below the diagonal are skipped, about half
 * the multiply-adds. Every element on or above it has hl_gemm's bits; those
 * below are left unspecified (a tile across the diagonal writes some). */
void hl_gemm_upper(bool trans_a, bool trans_b, int N, int K, hl_real alpha, const hl_real *A,
                   int lda, const hl_real *B, int ldb, hl_real beta, hl_real *C, int ldc);

/* batch independent products; matrix i of each operand starts at
 * X + i·stride_x. A stride of 0 shares A or B between all batches (e.g. one
 * weight B for a batch of A); C's batches must not overlap. */
void hl_gemm_batched(bool trans_a, bool trans_b, int M, int N, int K, hl_real alpha,
                     const hl_real *A, int lda, const hl_real *B, int ldb, hl_real beta,
                     hl_real *C, int ldc, int batch, size_t stride_a, size_t stride_b,
                     size_t stride_c);

/* A row kernel y[i] = f(x[i]) for i < n: the kernel set's GELU of either
 * form (hl_vmath_kernels.gelu, .gelu_tanh). */
typedef void hl_gemm_act_fn(const hl_real *x, hl_real *y, size_t n);

/* C (M,N) = bias + op(A)·op(B), bias one value per column (NULL: C is
 * overwritten, as beta 0), and when gelu is not NULL also gelu (M,N, row
 * stride ldc) = act(C). Each tile starts from the bias and has act taken
 * while it is in cache, with the same bits as filling C with the bias, hl_gemm
 * with beta 1, then act over C's rows (hl_gelu or hl_gelu_tanh). */
void hl_gemm_bias_gelu(bool trans_a, bool trans_b, int M, int N, int K, const hl_real *A,
                       int lda, const hl_real *B, int ldb, const hl_real *bias, hl_real *C,
                       hl_gemm_act_fn *act, hl_real *gelu, int ldc);

#endif
