/* Gradient checks of ops/gather_heads.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

/* 5 heads from 3, repeated out of order, head 1 read twice. */
static hl_tensor *build_gather_heads(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    static const int src[] = {2, 1, 0, 1, 2};
    return hl_gather_heads(g, in[0], src, 5);
}

HL_GRADCHECK_CASES(gather_heads) = {
    {.name = "gather_heads", .fn = build_gather_heads, .n_inputs = 1,
     .in = {IN("x", 4, 2, 3, 5, 3)}},
    {0},
};
