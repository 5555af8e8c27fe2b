/*
 * graph.h: the autograd graph (tape) and the step context every op runs in.
 *
 * A graph owns a step arena. Calling an op computes its result into the arena
 * and, when gradients are wanted, appends a node (op, inputs, saved state) to
 * the tape. The tape is in creation order, so walking it backwards is a valid
 * reverse topological order: hl_graph_backward() runs each node's backward
 * kernel, which adds into its inputs' gradients, so a tensor used several times
 * receives the sum of its uses.
 *
 * Errors are sticky. The first op that fails (bad shapes, NULL input, out of
 * memory) records a message naming the op and the shapes; it and every later op
 * return the graph's poisoned tensor (rank 0, no data) instead of computing.
 * Check once, at the end:
 *
 *     hl_graph *g = hl_graph_new(0);
 *     for (int step = 0; step < n; step++) {
 *         hl_tensor *y = hl_linear(g, x, w, b);
 *         hl_tensor *loss = hl_mean(g, hl_mul(g, y, y));
 *         if (hl_graph_backward(g, loss) != HL_OK) {
 *             fprintf(stderr, "%s\n", hl_graph_message(g));
 *             break;
 *         }
 *         ...optimizer step...
 *         hl_graph_reset(g);       // frees nothing: the arena is reused
 *     }
 *     hl_graph_free(g);
 */
#ifndef HL_GRAPH_H
#define HL_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/op.h"
#include "core/rng.h"
#include "core/tensor.h"

/* One recorded op on the tape. Its fields are the engine's (core/internal.h);
 * hl_node_name says which op it is. */
typedef struct hl_node hl_node;

struct hl_grad_block;
struct hl_profile;

typedef struct hl_graph {
    hl_arena arena;
    struct hl_grad_block *grad_pool; /* gradient buffers backward is done with */
    hl_node *tail;      /* the last recorded node */
    size_t n_nodes;
    hl_error error;
    bool grad_enabled;  /* false: record nothing (evaluation) */
    bool training;      /* false: dropout is the identity */
    hl_rng rng;         /* dropout masks */
    hl_tensor poison;   /* what ops return after an error */
    struct hl_profile *profile; /* per-op times (core/profile.h), or NULL */
} hl_graph;

/* A graph whose arena starts with arena_bytes (0: 1 MiB) and grows as needed.
 * NULL only when the system is out of memory. */
hl_graph *hl_graph_new(size_t arena_bytes);
void hl_graph_free(hl_graph *g);

/* Forgets the tape, every arena tensor and any error; keeps the arena's memory. */
void hl_graph_reset(hl_graph *g);

static inline bool hl_graph_failed(const hl_graph *g) { return g->error.status != HL_OK; }
static inline hl_status hl_graph_status(const hl_graph *g) { return g->error.status; }
static inline const char *hl_graph_message(const hl_graph *g) { return g->error.message; }

/* Adds each op's forward time and each backward kernel's time to profile
 * (core/profile.h) from now on; NULL stops it. The caller keeps
 * profile alive while it is set; hl_graph_reset keeps the setting. */
void hl_graph_set_profile(hl_graph *g, struct hl_profile *profile);

/* Returns the previous setting. */
bool hl_graph_set_grad_enabled(hl_graph *g, bool enabled);
bool hl_graph_set_training(hl_graph *g, bool training);
void hl_graph_seed(hl_graph *g, uint64_t seed);

/* Backward from a one-element loss (its gradient seeded with 1).
 *
 * Gradients of leaves (parameters, hl_tensor_new inputs: tensors no recorded op
 * produced) accumulate: each call adds its own gradient to what they hold, so
 * zero them (hl_params_zero_grad, hl_tensor_zero_grad) between steps. Gradients
 * of intermediate tensors (outputs of recorded ops) belong to one call: each
 * call first drops them, so calling backward twice on the same tape, or again
 * after recording more ops, adds exactly the new loss's gradient to the leaves
 * (backward of sum(2x), then of sum(5x), leaves 7 in x->grad).
 *
 * As in PyTorch, an intermediate's gradient is not kept: once its op's backward
 * has run, the buffer goes back to the graph for a later gradient of the same
 * size, and the tensor's grad is NULL after the call, unless
 * hl_tensor_retain_grad marked it. A step then holds only the gradients still
 * to be used, not one for every activation: less memory to fault in on the
 * first step, and buffers still in cache. */
hl_status hl_graph_backward(hl_graph *g, hl_tensor *loss);
/* Backward from any tensor, its gradient seeded with grad_out (out->numel values). */
hl_status hl_graph_backward_from(hl_graph *g, hl_tensor *out, const hl_real *grad_out);
/* Keeps t's gradient after backward (t an op's output), for a caller that reads
 * it, as torch.Tensor.retain_grad(). */
void hl_tensor_retain_grad(hl_tensor *t);

/* An arena tensor, zero-filled, without gradient: for constants and masks built
 * during a step. Returns the poisoned tensor on error. */
hl_tensor *hl_graph_tensor(hl_graph *g, const char *name, int rank, const int *shape);
/* The same without zero-filling, for a caller that writes every element. */
hl_tensor *hl_graph_tensor_uninit(hl_graph *g, const char *name, int rank, const int *shape);

/* Arena memory; records an error and returns NULL when out of memory. */
void *hl_graph_alloc(hl_graph *g, size_t bytes);
void *hl_graph_calloc(hl_graph *g, size_t bytes);

/* The earliest recorded node whose output holds a NaN or an infinity, or NULL:
 * after a non-finite loss, names the op where the numbers first went bad.
 * Masks produce -inf on purpose, so their outputs are not counted. */
const hl_node *hl_graph_first_nonfinite(const hl_graph *g);

/* The name of the node's op ("scale", "linear", ...), as in error messages. */
const char *hl_node_name(const hl_node *n);

/* True when t is the poisoned tensor (of any graph). */
static inline bool hl_tensor_is_poison(const hl_tensor *t) { return !t || t->rank == 0; }

#endif
