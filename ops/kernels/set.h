/*
 * set.h: the functions one compilation of ops/kernels/ defines, named for its
 * set by HL_SIMD_FN (hl_tile_gemm_avx2, ...); set.c gathers them into that
 * set's hl_kernel_set. Include after ops/simd.h.
 */
#ifndef HL_OPS_KERNELS_SET_H
#define HL_OPS_KERNELS_SET_H

#include "ops/kernels.h"
#include "ops/simd.h"

extern const hl_gemm_kernel HL_SIMD_FN(hl_gemm_kernels)[];
hl_gemm_pack_fn HL_SIMD_FN(hl_gemm_pack);
hl_gemm_pack_fn HL_SIMD_FN(hl_gemm_pack_transposed);

hl_tile_gemm_fn HL_SIMD_FN(hl_tile_gemm);

#define SET_VMATH_F(name, type, params, args) type HL_SIMD_FN(hl_vmath_##name) params;
#define SET_VMATH_P(name, params, args) void HL_SIMD_FN(hl_vmath_##name) params;
HL_VMATH_KERNELS(SET_VMATH_F, SET_VMATH_P)
#undef SET_VMATH_F
#undef SET_VMATH_P
void HL_SIMD_FN(hl_rope_row)(const hl_real *x, const hl_real *cosines, const hl_real *sines,
                             hl_real sign, hl_real *y, size_t half, bool accumulate);

double HL_SIMD_FN(hl_norm_sum)(const hl_real *x, double shift, bool square, size_t n);
void HL_SIMD_FN(hl_norm_scale)(const hl_real *x, double mean, double rstd, const hl_real *gamma,
                               const hl_real *beta, hl_real *y, size_t n);
void HL_SIMD_FN(hl_norm_grad_sums)(const hl_real *x, const hl_real *dy, const hl_real *gamma,
                                   double mean, double rstd, size_t n, double *sum_d,
                                   double *sum_dxhat);
void HL_SIMD_FN(hl_norm_grad)(const hl_real *x, const hl_real *dy, const hl_real *gamma,
                              double mean, double rstd, double mean_d, double mean_dxhat,
                              hl_real *dx, size_t n, bool overwrite);
hl_adamw_fn HL_SIMD_FN(hl_adamw);
double HL_SIMD_FN(hl_fma_peak)(long iterations, double *flops);

extern const hl_kernel_set HL_SIMD_FN(hl_kernel_set);

#endif
