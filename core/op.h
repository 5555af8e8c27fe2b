/*
 * op.h: the vocabulary of the graph, one enum value per op of the list in
 * core/op_list.h.
 *
 *     X(SOFTMAX, softmax, 1, hl_softmax_backward, 0)   // core/op_list.h: HL_OP_SOFTMAX
 *
 * The table that maps each op to its name and backward kernel is generated
 * from the same list in ops/op_table.c (hl_op_get, ops/internal.h). The op
 * that records a node stores its entry in the node (hl_node.info,
 * core/internal.h), so the engine runs backward without calling into ops/. An
 * op whose backward is NULL may not be recorded on a path that needs
 * gradients.
 */
#ifndef HL_OP_H
#define HL_OP_H

#include "core/op_list.h"

struct hl_graph;
struct hl_node;

#define HL_OP_ENUM_VALUE(e, name, n_inputs, backward, flags) HL_OP_##e,
typedef enum hl_op { HL_OP_LIST(HL_OP_ENUM_VALUE) HL_OP_COUNT } hl_op;
#undef HL_OP_ENUM_VALUE

/* The op's name as core/op_list.h gives it ("linear", "softmax", ...), or
 * "?" for a value outside the list. */
const char *hl_op_name(hl_op op);

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
