/* One kernel set's table (see ops/kernels.h), compiled once per set. */
#include "ops/kernels/set.h"

#if defined(HL_SIMD_AVX512)
#define SET_ISA HL_ISA_AVX512
#elif defined(HL_SIMD_AVX2)
#define SET_ISA HL_ISA_AVX2
#else
#define SET_ISA HL_ISA_PORTABLE
#endif

#define SET_ENTRY_F(name, type, params, args) .name = HL_SIMD_FN(hl_vmath_##name),
#define SET_ENTRY_P(name, params, args) .name = HL_SIMD_FN(hl_vmath_##name),

const hl_kernel_set HL_SIMD_FN(hl_kernel_set) = {
    .isa = SET_ISA,
    .fma = HL_SIMD_HAS_FMA,
    .gemm = HL_SIMD_FN(hl_gemm_kernels),
    .gemm_pack = HL_SIMD_FN(hl_gemm_pack),
    .gemm_pack_transposed = HL_SIMD_FN(hl_gemm_pack_transposed),
    .tile_gemm = HL_SIMD_FN(hl_tile_gemm),
    .vmath = {HL_VMATH_KERNELS(SET_ENTRY_F, SET_ENTRY_P)},
    .rope_row = HL_SIMD_FN(hl_rope_row),
    .norm =
        {
            .sum = HL_SIMD_FN(hl_norm_sum),
            .scale = HL_SIMD_FN(hl_norm_scale),
            .grad_sums = HL_SIMD_FN(hl_norm_grad_sums),
            .grad = HL_SIMD_FN(hl_norm_grad),
        },
    .adamw = HL_SIMD_FN(hl_adamw),
    .fma_peak = HL_SIMD_FN(hl_fma_peak),
};

#undef SET_ENTRY_F
#undef SET_ENTRY_P
