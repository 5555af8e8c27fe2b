/*
 * op_list.h: every op of the graph, one line each. The enum hl_op
 * (core/op.h), the op table (ops/op_table.c) and the backward prototypes
 * (ops/internal.h) are all generated from this list, so registering an op is
 * one line here plus its file in ops/:
 *
 *     X(ENUM, name, n_inputs, backward, flags)
 *
 *   ENUM      the suffix of its enum value: HL_OP_ENUM
 *   name      what error messages, tensor names and profiles call it
 *   n_inputs  the tensor inputs its node records (1..HL_NODE_MAX_INPUTS)
 *   backward  its backward kernel, or NULL: not differentiable
 *   flags     hl_op_info.flags (HL_OP_EMITS_INF, ...), or 0
 *
 * It lives in core/ because the enum does, and core/ may not include ops/
 * (tools/check_layers.sh); the backward names are only tokens here, expanded
 * into declarations and table entries by ops/ alone.
 */
#ifndef HL_OP_LIST_H
#define HL_OP_LIST_H

#define HL_OP_LIST(X)                                                                    \
    X(LINEAR, linear, 3, hl_linear_backward, 0)                                          \
    X(LINEAR_GELU, linear_gelu, 3, hl_linear_gelu_backward, 0)                           \
    X(LINEAR_GELU_TANH, linear_gelu_tanh, 3, hl_linear_gelu_tanh_backward, 0)            \
    X(MATMUL, matmul, 2, hl_matmul_backward, 0)                                          \
    X(RESHAPE, reshape, 1, hl_reshape_backward, 0)                                       \
    X(PERMUTE, permute, 1, hl_permute_backward, 0)                                       \
    X(QKV_HEADS, qkv_heads, 1, hl_qkv_heads_backward, 0)                                 \
    X(GATHER_HEADS, gather_heads, 1, hl_gather_heads_backward, 0)                        \
    X(NARROW, narrow, 1, hl_narrow_backward, 0)                                          \
    X(SCALE, scale, 1, hl_scale_backward, 0)                                             \
    X(ADD, add, 2, hl_add_backward, 0)                                                   \
    X(MUL, mul, 2, hl_mul_backward, 0)                                                   \
    X(SUM, sum, 1, hl_sum_backward, 0)                                                   \
    X(MEAN, mean, 1, hl_mean_backward, 0)                                                \
    X(SOFTMAX, softmax, 1, hl_softmax_backward, 0)                                       \
    X(MASK_CAUSAL, mask_causal, 1, hl_mask_backward, HL_OP_EMITS_INF)                    \
    X(MASK_KEY_PADDING, mask_key_padding, 1, hl_mask_backward, HL_OP_EMITS_INF)          \
    X(MASK_BLOCKED, mask_blocked, 1, hl_mask_backward, HL_OP_EMITS_INF)                  \
    X(MASK_ADDITIVE, mask_additive, 1, hl_mask_backward, HL_OP_EMITS_INF)                \
    X(MASK_DOCUMENTS, mask_documents, 1, hl_mask_backward, HL_OP_EMITS_INF)              \
    X(ATTENTION, attention, 3, hl_attention_backward, 0)                                 \
    X(EMBEDDING, embedding, 1, hl_embedding_backward, 0)                                 \
    X(LAYERNORM, layernorm, 3, hl_layernorm_backward, 0)                                 \
    X(RMSNORM, rmsnorm, 2, hl_rmsnorm_backward, 0)                                       \
    X(ADD_LAYERNORM, add_layernorm, 4, hl_add_layernorm_backward, 0)                     \
    X(ADD_RMSNORM, add_rmsnorm, 3, hl_add_rmsnorm_backward, 0)                           \
    X(GELU, gelu, 1, hl_gelu_backward, 0)                                                \
    X(GELU_TANH, gelu_tanh, 1, hl_gelu_tanh_backward, 0)                                 \
    X(SWIGLU, swiglu, 1, hl_swiglu_backward, 0)                                          \
    X(RELU2, relu2, 1, hl_relu2_backward, 0)                                             \
    X(ROPE, rope, 1, hl_rope_backward, 0)                                                \
    X(SMEAR, smear, 2, hl_smear_backward, 0)                                             \
    X(DROPOUT, dropout, 1, hl_dropout_backward, 0)                                       \
    X(CROSS_ENTROPY, cross_entropy, 1, hl_cross_entropy_backward, 0)                     \
    X(CROSS_ENTROPY_SOFTCAP, cross_entropy_softcap, 1, hl_cross_entropy_backward, 0)     \
    X(ARGMAX, argmax, 1, NULL, 0)

#endif
