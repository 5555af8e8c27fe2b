/* Gradient checks of ops/rope.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

/* A small base, so that positions far apart turn by visibly different angles. */
static hl_tensor *build_rope(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_rope(g, in[0], 100);
}

/* 4 of each row of 7 rotated, 3 passed through. */
static hl_tensor *build_rope_partial(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_rope_partial(g, in[0], 100, 4);
}

HL_GRADCHECK_CASES(rope) = {
    {.name = "rope", .fn = build_rope, .n_inputs = 1, .in = {IN("x", 4, 2, 3, 7, 6)}},
    {.name = "rope_partial", .fn = build_rope_partial, .n_inputs = 1,
     .in = {IN("x", 4, 2, 3, 5, 7)}},
    {0},
};
