/* The toy task's sequences and per-head scores: see toy_task.h. */
#include "tasks/toy_task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hl_toy_batch *hl_toy_batch_new(int B)
{
    hl_toy_batch *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->B = B;
    size_t n = (size_t)B * HL_TOY_T;
    b->tokens = malloc(n * sizeof *b->tokens);
    b->scored = malloc(n * sizeof *b->scored);
    b->other = malloc(n * sizeof *b->other);
    b->src = malloc((size_t)B * sizeof *b->src);
    b->dst = malloc((size_t)B * sizeof *b->dst);
    b->len = malloc((size_t)B * sizeof *b->len);
    if (!b->tokens || !b->scored || !b->other || !b->src || !b->dst || !b->len) {
        hl_toy_batch_free(b);
        return NULL;
    }
    return b;
}

void hl_toy_batch_free(hl_toy_batch *b)
{
    if (!b)
        return;
    free(b->tokens);
    free(b->scored);
    free(b->other);
    free(b->src);
    free(b->dst);
    free(b->len);
    free(b);
}

/* Uniform over lo..hi inclusive. */
static int uniform_int(hl_rng *rng, int lo, int hi)
{
    return lo + (int)hl_rng_below(rng, (uint32_t)(hi - lo + 1));
}

void hl_toy_sample(hl_toy_batch *b, hl_rng *rng)
{
    const int T = HL_TOY_T;
    for (int i = 0; i < b->B; i++) {
        int32_t *x = b->tokens + (size_t)i * T;
        x[0] = HL_TOY_BOS;
        for (int t = 1; t < T; t++)
            x[t] = (int32_t)hl_rng_below(rng, HL_TOY_VOCAB);
        int L = uniform_int(rng, 4, 12);
        int s = uniform_int(rng, 1, T - 2 * L);
        int d = uniform_int(rng, s + L, T - L);
        for (int k = 0; k < L; k++)
            x[d + k] = x[s + k];
        b->src[i] = s;
        b->dst[i] = d;
        b->len[i] = L;
        int32_t *scored = b->scored + (size_t)i * T, *other = b->other + (size_t)i * T;
        for (int p = 0; p < T; p++) {
            bool has_target = p + 1 < T;
            bool is_scored = p >= d && p <= d + L - 2;
            scored[p] = has_target && is_scored ? x[p + 1] : HL_TOY_IGNORE;
            other[p] = has_target && !is_scored ? x[p + 1] : HL_TOY_IGNORE;
        }
    }
}

hl_toy_batch hl_toy_batch_rows(const hl_toy_batch *b, int begin, int end)
{
    hl_toy_batch rows = *b;
    const size_t at = (size_t)begin * HL_TOY_T;
    rows.B = end - begin;
    rows.tokens += at;
    rows.scored += at;
    rows.other += at;
    rows.src += begin;
    rows.dst += begin;
    rows.len += begin;
    return rows;
}

hl_repeat hl_toy_repeat(const hl_toy_batch *b, int i)
{
    return (hl_repeat){.begin = b->dst[i], .end = b->dst[i] + b->len[i] - 1,
                       .lag = b->dst[i] - b->src[i]};
}

hl_eval_set *hl_toy_eval_set(const hl_toy_batch *b, int batch, hl_error *err)
{
    hl_eval_set *set = hl_eval_set_new(b->B, HL_TOY_T, 2, batch, err);
    if (set && hl_eval_set_add_repeats(set, err) != HL_OK) {
        hl_eval_set_free(set);
        return NULL;
    }
    if (!set)
        return NULL;
    for (int i = 0; i < b->B; i++)
        set->repeats[i] = hl_toy_repeat(b, i);
    const size_t n = (size_t)b->B * HL_TOY_T;
    memcpy(set->tokens, b->tokens, n * sizeof *set->tokens);
    memcpy(set->targets[0], b->scored, n * sizeof *set->targets[0]);
    memcpy(set->targets[1], b->other, n * sizeof *set->targets[1]);
    snprintf(set->group_names[0], sizeof set->group_names[0], "scored");
    snprintf(set->group_names[1], sizeof set->group_names[1], "other");
    return set;
}

hl_gpt_config hl_toy_gpt_config(void)
{
    return (hl_gpt_config){.vocab_in = HL_TOY_VOCAB + 1, .vocab_out = HL_TOY_VOCAB,
                           .n_ctx = HL_TOY_T, .d_model = 64, .n_heads = 4, .n_layers = 2,
                           .emb_std = 1.0};
}
