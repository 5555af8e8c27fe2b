/* The op table: name, recorded inputs and backward kernel of every hl_op. */
#include "core/op.h"
#include "ops/internal.h"

static const hl_op_info op_table[] = {
    [HL_OP_LINEAR] = {"linear", 3, hl_linear_backward},
    [HL_OP_LINEAR_GELU] = {"linear_gelu", 3, hl_linear_gelu_backward},
    [HL_OP_MATMUL] = {"matmul", 2, hl_matmul_backward},
    [HL_OP_RESHAPE] = {"reshape", 1, hl_reshape_backward},
    [HL_OP_PERMUTE] = {"permute", 1, hl_permute_backward},
    [HL_OP_QKV_HEADS] = {"qkv_heads", 1, hl_qkv_heads_backward},
    [HL_OP_NARROW] = {"narrow", 1, hl_narrow_backward},
    [HL_OP_SCALE] = {"scale", 1, hl_scale_backward},
    [HL_OP_ADD] = {"add", 2, hl_add_backward},
    [HL_OP_MUL] = {"mul", 2, hl_mul_backward},
    [HL_OP_SUM] = {"sum", 1, hl_sum_backward},
    [HL_OP_MEAN] = {"mean", 1, hl_mean_backward},
    [HL_OP_SOFTMAX] = {"softmax", 1, hl_softmax_backward},
    [HL_OP_MASK_CAUSAL] = {"mask_causal", 1, hl_mask_backward, HL_OP_EMITS_INF},
    [HL_OP_MASK_KEY_PADDING] = {"mask_key_padding", 1, hl_mask_backward, HL_OP_EMITS_INF},
    [HL_OP_MASK_BLOCKED] = {"mask_blocked", 1, hl_mask_backward, HL_OP_EMITS_INF},
    [HL_OP_MASK_ADDITIVE] = {"mask_additive", 1, hl_mask_backward, HL_OP_EMITS_INF},
    [HL_OP_ATTENTION] = {"attention", 3, hl_attention_backward},
    [HL_OP_EMBEDDING] = {"embedding", 1, hl_embedding_backward},
    [HL_OP_LAYERNORM] = {"layernorm", 3, hl_layernorm_backward},
    [HL_OP_RMSNORM] = {"rmsnorm", 2, hl_rmsnorm_backward},
    [HL_OP_ADD_LAYERNORM] = {"add_layernorm", 4, hl_add_layernorm_backward},
    [HL_OP_ADD_RMSNORM] = {"add_rmsnorm", 3, hl_add_rmsnorm_backward},
    [HL_OP_GELU] = {"gelu", 1, hl_gelu_backward},
    [HL_OP_SWIGLU] = {"swiglu", 1, hl_swiglu_backward},
    [HL_OP_ROPE] = {"rope", 1, hl_rope_backward},
    [HL_OP_SMEAR] = {"smear", 2, hl_smear_backward},
    [HL_OP_DROPOUT] = {"dropout", 1, hl_dropout_backward},
    [HL_OP_CROSS_ENTROPY] = {"cross_entropy", 1, hl_cross_entropy_backward},
    [HL_OP_ARGMAX] = {"argmax", 1, NULL},
};

_Static_assert(sizeof op_table / sizeof op_table[0] == HL_OP_COUNT,
               "op_table needs one entry per hl_op");

const hl_op_info *hl_op_get(hl_op op) { return &op_table[op]; }
