/*
 * op.h: the vocabulary of the graph, one enum value per differentiable op.
 *
 * The table that maps each op to its name and backward kernel lives in
 * ops/op_table.c (hl_op_get, ops/internal.h) and is checked against
 * HL_OP_COUNT at compile time. The op that records a node stores its entry in
 * the node (hl_node.info, core/internal.h), so the engine runs backward
 * without calling into ops/. An op whose backward is NULL may not be recorded
 * on a path that needs gradients.
 */
#ifndef HL_OP_H
#define HL_OP_H

struct hl_graph;
struct hl_node;

typedef enum hl_op {
    HL_OP_LINEAR,
    HL_OP_LINEAR_GELU,
    HL_OP_MATMUL,
    HL_OP_RESHAPE,
    HL_OP_PERMUTE,
    HL_OP_QKV_HEADS,
    HL_OP_NARROW,
    HL_OP_SCALE,
    HL_OP_ADD,
    HL_OP_MUL,
    HL_OP_SUM,
    HL_OP_MEAN,
    HL_OP_SOFTMAX,
    HL_OP_MASK_CAUSAL,
    HL_OP_MASK_KEY_PADDING,
    HL_OP_MASK_BLOCKED,
    HL_OP_MASK_ADDITIVE,
    HL_OP_ATTENTION,
    HL_OP_EMBEDDING,
    HL_OP_LAYERNORM,
    HL_OP_RMSNORM,
    HL_OP_ADD_LAYERNORM,
    HL_OP_ADD_RMSNORM,
    HL_OP_GELU,
    HL_OP_SWIGLU,
    HL_OP_ROPE,
    HL_OP_SMEAR,
    HL_OP_DROPOUT,
    HL_OP_CROSS_ENTROPY,
    HL_OP_ARGMAX,
    HL_OP_COUNT
} hl_op;

/* Adds the gradient of node->out into the gradients of the node's inputs. */
typedef void (*hl_backward_fn)(struct hl_graph *g, struct hl_node *node);

/* What the engine may assume of an op's output (hl_op_info.flags). */
enum {
    /* -inf is a meaningful output (a mask), not a numerical failure: such an
     * op is never blamed by hl_graph_first_nonfinite. */
    HL_OP_EMITS_INF = 1 << 0,
};

typedef struct hl_op_info {
    const char *name;
    int n_inputs;           /* tensor inputs recorded on the node */
    hl_backward_fn backward; /* NULL: not differentiable */
    unsigned flags;          /* HL_OP_EMITS_INF, ... */
} hl_op_info;

#endif
