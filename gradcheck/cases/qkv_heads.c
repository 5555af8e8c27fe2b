/* Gradient checks of ops/qkv_heads.c: see gradcheck/cases.h. */
#include "gradcheck/case.h"

/* The three heads weighted apart, so each output's gradient is checked. */
static hl_tensor *build_qkv_heads(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    hl_tensor *k, *v;
    hl_tensor *q = hl_qkv_heads(g, in[0], 2, (hl_real)10000, &k, &v);
    return hl_add(g, hl_add(g, q, hl_scale(g, k, (hl_real)0.5)), hl_scale(g, v, (hl_real)0.25));
}

/* 3 query heads on 1 key/value head of width 6, 4 of it rotated. */
static hl_tensor *build_qkv_heads_grouped(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    hl_tensor *k, *v;
    hl_tensor *q = hl_qkv_heads_grouped(g, in[0], 3, 1, (hl_real)100, 4, &k, &v);
    hl_tensor *kv = hl_add(g, hl_scale(g, k, (hl_real)0.5), hl_scale(g, v, (hl_real)0.25));
    return hl_add(g, q, kv); /* k and v broadcast over the query heads */
}

HL_GRADCHECK_CASES(qkv_heads) = {
    {.name = "qkv_heads", .fn = build_qkv_heads, .n_inputs = 1, .in = {IN("qkv", 3, 2, 5, 12)}},
    {.name = "qkv_heads_grouped", .fn = build_qkv_heads_grouped, .n_inputs = 1,
     .in = {IN("qkv", 3, 2, 5, 30)}},
    {0},
};
