/* One kernel set's table (see ops/kernels.h), compiled once per set. */
#include "ops/kernels/set.h"

#if defined(HL_SIMD_AVX512)
#define SET_ISA HL_ISA_AVX512
#elif defined(HL_SIMD_AVX2)
#define SET_ISA HL_ISA_AVX2
#else
#define SET_ISA HL_ISA_PORTABLE
#endif

const hl_kernel_set HL_SIMD_FN(hl_kernel_set) = {
    .isa = SET_ISA,
    .fma = HL_SIMD_HAS_FMA,
    .gemm = HL_SIMD_FN(hl_gemm_kernels),
    .gemm_pack = HL_SIMD_FN(hl_gemm_pack),
    .gemm_pack_transposed = HL_SIMD_FN(hl_gemm_pack_transposed),
    .tile_gemm = HL_SIMD_FN(hl_tile_gemm),
    .vmath =
        {
            .max = HL_SIMD_FN(hl_vmath_max),
            .exp_sum = HL_SIMD_FN(hl_vmath_exp_sum),
            .exp = HL_SIMD_FN(hl_vmath_exp),
            .erf = HL_SIMD_FN(hl_vmath_erf),
            .gelu = HL_SIMD_FN(hl_vmath_gelu),
            .gelu_grad = HL_SIMD_FN(hl_vmath_gelu_grad),
            .gelu_tanh = HL_SIMD_FN(hl_vmath_gelu_tanh),
            .gelu_tanh_grad = HL_SIMD_FN(hl_vmath_gelu_tanh_grad),
            .swiglu = HL_SIMD_FN(hl_vmath_swiglu),
            .swiglu_grad = HL_SIMD_FN(hl_vmath_swiglu_grad),
            .xent_grad = HL_SIMD_FN(hl_vmath_xent_grad),
            .relu2 = HL_SIMD_FN(hl_vmath_relu2),
            .relu2_grad = HL_SIMD_FN(hl_vmath_relu2_grad),
            .softcap = HL_SIMD_FN(hl_vmath_softcap),
            .softcap_xent_grad = HL_SIMD_FN(hl_vmath_softcap_xent_grad),
            .add = HL_SIMD_FN(hl_vmath_add),
        },
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
