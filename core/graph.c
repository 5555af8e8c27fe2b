#include "core/graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/profile.h"

/* AddressSanitizer is told that a released gradient buffer, past the pool's
 * header, is off limits until it is handed out again, so a backward kernel
 * reading a gradient after its release is an error in `make asan`, not a
 * silently wrong number. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* A released gradient buffer: the header lives in the buffer itself, which
 * the arena's rounding makes at least HL_ARENA_ALIGN bytes. */
struct hl_grad_block {
    struct hl_grad_block *next;
    size_t bytes;
};

static size_t grad_bytes(const hl_tensor *t)
{
    return (t->numel * sizeof(hl_real) + HL_ARENA_ALIGN - 1) / HL_ARENA_ALIGN * HL_ARENA_ALIGN;
}

/* Back to the arena: nothing in the pool may stay poisoned for ASan. */
static void grad_pool_drop(hl_graph *g)
{
    for (struct hl_grad_block *b = g->grad_pool; b; b = b->next)
        UNPOISON(b, b->bytes);
    g->grad_pool = NULL;
}

hl_graph *hl_graph_new(size_t arena_bytes)
{
    hl_graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    hl_arena_init(&g->arena, arena_bytes);
    g->grad_enabled = true;
    g->training = true;
    hl_rng_seed(&g->rng, 0);
    hl_tensor_set_name(&g->poison, "poisoned");
    return g;
}

void hl_graph_free(hl_graph *g)
{
    if (!g)
        return;
    grad_pool_drop(g);
    hl_arena_free(&g->arena);
    free(g);
}

void hl_graph_reset(hl_graph *g)
{
    grad_pool_drop(g);
    hl_arena_reset(&g->arena);
    g->tail = NULL;
    g->n_nodes = 0;
    hl_error_clear(&g->error);
}

void hl_graph_set_profile(hl_graph *g, struct hl_profile *profile) { g->profile = profile; }

bool hl_graph_set_grad_enabled(hl_graph *g, bool enabled)
{
    bool previous = g->grad_enabled;
    g->grad_enabled = enabled;
    return previous;
}

bool hl_graph_set_training(hl_graph *g, bool training)
{
    bool previous = g->training;
    g->training = training;
    return previous;
}

void hl_graph_seed(hl_graph *g, uint64_t seed) { hl_rng_seed(&g->rng, seed); }

void *hl_graph_alloc(hl_graph *g, size_t bytes)
{
    void *p = hl_arena_alloc(&g->arena, bytes);
    if (!p)
        hl_error_set(&g->error, HL_ERR_NOMEM,
                     "arena: out of memory allocating %zu bytes (%zu in use this step)", bytes,
                     g->arena.used);
    return p;
}

void *hl_graph_calloc(hl_graph *g, size_t bytes)
{
    void *p = hl_graph_alloc(g, bytes);
    if (p)
        memset(p, 0, bytes);
    return p;
}

hl_real *hl_graph_grad_alloc(hl_graph *g, const hl_tensor *t, bool zeroed)
{
    const size_t bytes = grad_bytes(t);
    for (struct hl_grad_block **at = &g->grad_pool; *at; at = &(*at)->next) {
        struct hl_grad_block *b = *at;
        if (b->bytes != bytes)
            continue;
        *at = b->next;
        UNPOISON(b, bytes);
        if (zeroed)
            memset(b, 0, bytes);
        return (hl_real *)b;
    }
    return zeroed ? hl_graph_calloc(g, bytes) : hl_graph_alloc(g, bytes);
}

void hl_graph_grad_release(hl_graph *g, const hl_tensor *t, hl_real *buf)
{
    struct hl_grad_block *b = (struct hl_grad_block *)buf;
    if (!b)
        return;
    b->bytes = grad_bytes(t);
    b->next = g->grad_pool;
    g->grad_pool = b;
    POISON(b + 1, b->bytes - sizeof *b);
}

void hl_tensor_retain_grad(hl_tensor *t)
{
    if (t)
        t->retain_grad = true;
}

static hl_tensor *graph_tensor(hl_graph *g, const char *name, int rank, const int *shape,
                               bool zeroed)
{
    if (hl_graph_failed(g))
        return &g->poison;
    hl_tensor *t = hl_graph_calloc(g, sizeof *t);
    if (!t)
        return &g->poison;
    hl_tensor_set_name(t, name);
    if (!hl_tensor_set_shape(t, rank, shape)) {
        hl_error_set(&g->error, HL_ERR_SHAPE, "%s: bad shape (rank %d, dims must be >= 1)",
                     t->name, rank);
        return &g->poison;
    }
    size_t bytes = t->numel * sizeof(hl_real);
    t->data = zeroed ? hl_graph_calloc(g, bytes) : hl_graph_alloc(g, bytes);
    return t->data ? t : &g->poison;
}

hl_tensor *hl_graph_tensor(hl_graph *g, const char *name, int rank, const int *shape)
{
    return graph_tensor(g, name, rank, shape, true);
}

hl_tensor *hl_graph_tensor_uninit(hl_graph *g, const char *name, int rank, const int *shape)
{
    return graph_tensor(g, name, rank, shape, false);
}

/* A node's output gradient belongs to one backward pass: a second pass must
 * not push the first one's values through the tape again. Dropping the
 * buffers (arena memory, reclaimed at reset) also marks every node as not yet
 * reached from the new seed. */
static void forget_intermediate_grads(hl_graph *g)
{
    for (hl_node *n = g->tail; n; n = n->prev) {
        n->out->grad = NULL;
        for (int i = 0; i < HL_NODE_MAX_EXTRA_OUTPUTS && n->extra_out[i]; i++)
            n->extra_out[i]->grad = NULL;
    }
}

/* Once a node's backward has run, its output's gradient is complete and
 * used: the buffer goes back to the pool unless the caller asked to keep it. */
static void release_grad(hl_graph *g, hl_tensor *out)
{
    if (!out->retain_grad) {
        hl_graph_grad_release(g, out, out->grad);
        out->grad = NULL;
    }
}

/* Whether a gradient has reached any of the node's outputs. */
static bool reached(const hl_node *n)
{
    bool any = n->out->grad != NULL;
    for (int i = 0; i < HL_NODE_MAX_EXTRA_OUTPUTS && n->extra_out[i]; i++)
        any |= n->extra_out[i]->grad != NULL;
    return any;
}

static hl_status run_backward(hl_graph *g)
{
    if (g->profile)
        hl_profile_stop(g->profile); /* the forward's last op ends here */
    for (hl_node *n = g->tail; n && !hl_graph_failed(g); n = n->prev) {
        if (!reached(n))
            continue; /* not on a path from the loss */
        const double start = g->profile ? hl_profile_clock() : 0;
        n->info->backward(g, n);
        if (g->profile)
            hl_profile_backward(g->profile, n->op, start);
        release_grad(g, n->out);
        for (int i = 0; i < HL_NODE_MAX_EXTRA_OUTPUTS && n->extra_out[i]; i++)
            release_grad(g, n->extra_out[i]);
    }
    return hl_graph_status(g);
}

hl_status hl_graph_backward_from(hl_graph *g, hl_tensor *out, const hl_real *grad_out)
{
    if (hl_graph_failed(g))
        return hl_graph_status(g);
    if (hl_tensor_is_poison(out) || !grad_out)
        return hl_error_set(&g->error, HL_ERR_ARG, "backward: NULL or poisoned tensor");
    if (!out->requires_grad)
        return hl_error_set(&g->error, HL_ERR_ARG,
                            "backward: %s does not require grad (no recorded op leads to it)",
                            out->name);
    if (out->node && out->node->graph != g)
        return hl_error_set(&g->error, HL_ERR_ARG,
                            "backward: %s was recorded on another graph", out->name);
    forget_intermediate_grads(g);
    if (!out->grad) {
        out->grad = hl_graph_grad_alloc(g, out, true);
        if (!out->grad)
            return hl_graph_status(g);
    }
    for (size_t i = 0; i < out->numel; i++)
        out->grad[i] += grad_out[i];
    return run_backward(g);
}

hl_status hl_graph_backward(hl_graph *g, hl_tensor *loss)
{
    if (hl_graph_failed(g))
        return hl_graph_status(g);
    if (hl_tensor_is_poison(loss))
        return hl_error_set(&g->error, HL_ERR_ARG, "backward: NULL or poisoned loss");
    if (loss->numel != 1) {
        char s[HL_SHAPE_STR_MAX];
        return hl_error_set(&g->error, HL_ERR_SHAPE,
                            "backward: loss %s has shape %s; it must have one element "
                            "(use hl_graph_backward_from for others)",
                            loss->name, hl_shape_str(loss, s));
    }
    const hl_real one = 1;
    return hl_graph_backward_from(g, loss, &one);
}

static bool all_finite(const hl_tensor *t)
{
    for (size_t i = 0; i < t->numel; i++)
        if (!isfinite(t->data[i]))
            return false;
    return true;
}

const hl_node *hl_graph_first_nonfinite(const hl_graph *g)
{
    const hl_node *first = NULL;
    for (const hl_node *n = g->tail; n; n = n->prev) {
        if (n->info->flags & HL_OP_EMITS_INF)
            continue;
        bool finite = all_finite(n->out);
        for (int i = 0; i < HL_NODE_MAX_EXTRA_OUTPUTS && n->extra_out[i]; i++)
            finite = finite && all_finite(n->extra_out[i]);
        if (!finite)
            first = n;
    }
    return first;
}

const char *hl_node_name(const hl_node *n) { return n->info->name; }

const char *hl_op_name(hl_op op)
{
#define HL_OP_NAME(e, name, n_inputs, backward, flags) #name,
    static const char *const names[HL_OP_COUNT] = {HL_OP_LIST(HL_OP_NAME)};
#undef HL_OP_NAME
    return (unsigned)op < HL_OP_COUNT ? names[op] : "?";
}
