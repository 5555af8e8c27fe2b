/*
 * internal.h: the engine's internals, what core/ and ops/ share and their
 * tests check, not part of the public API (not installed).
 *
 * A node is one entry of a graph's tape. The op that records it
 * (hl_op_record, ops/internal.h) fills in its inputs, its output and what its
 * backward kernel needs; core/graph.c walks the tape from g->tail through
 * prev and calls info->backward on each node. Outside core/ and ops/ a node
 * is opaque: hl_node_name (core/graph.h) is what programs may ask of one.
 */
#ifndef HL_CORE_INTERNAL_H
#define HL_CORE_INTERNAL_H

#include "core/graph.h"

#define HL_NODE_MAX_INPUTS 4
#define HL_NODE_MAX_EXTRA_OUTPUTS 2
#define HL_NODE_MAX_INTS 8
#define HL_NODE_MAX_REALS 2

struct hl_node {
    hl_op op;
    const hl_op_info *info;             /* the op's table entry, set by the op that records it */
    int n_inputs;
    hl_tensor *inputs[HL_NODE_MAX_INPUTS];
    hl_tensor *out;
    hl_tensor *extra_out[HL_NODE_MAX_EXTRA_OUTPUTS]; /* further outputs, NULL when unused:
                                         * the residual sum of the fused add + norm ops, k and v
                                         * of hl_qkv_heads; backward takes them all */
    void *saved;                        /* op-specific state in the arena */
    int ints[HL_NODE_MAX_INTS];         /* op-specific integer parameters */
    hl_real reals[HL_NODE_MAX_REALS];   /* op-specific scalar parameters */
    struct hl_node *prev;               /* the node recorded before this one */
    const struct hl_graph *graph;       /* the graph it was recorded on */
};

/* A gradient buffer of t->numel values for backward: one that an earlier
 * node's backward is done with, when one of the same size is free, or arena
 * memory. Zero-filled when zeroed; NULL (with the graph's error set) when out
 * of memory. */
hl_real *hl_graph_grad_alloc(hl_graph *g, const hl_tensor *t, bool zeroed);
/* Gives back buf, from hl_graph_grad_alloc(g, t, ...), for a later gradient
 * of t's size; buf may no longer be read. */
void hl_graph_grad_release(hl_graph *g, const hl_tensor *t, hl_real *buf);

#endif
