/* The toy task's sequences and per-head scores: see toy_task.h. */
#include "tasks/toy_task.h"

#include <math.h>
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

hl_eval_set *hl_toy_eval_set(const hl_toy_batch *b, int batch, hl_error *err)
{
    hl_eval_set *set = hl_eval_set_new(b->B, HL_TOY_T, 2, batch, err);
    if (!set)
        return NULL;
    const size_t n = (size_t)b->B * HL_TOY_T;
    memcpy(set->tokens, b->tokens, n * sizeof *set->tokens);
    memcpy(set->targets[0], b->scored, n * sizeof *set->targets[0]);
    memcpy(set->targets[1], b->other, n * sizeof *set->targets[1]);
    snprintf(set->group_names[0], sizeof set->group_names[0], "scored");
    snprintf(set->group_names[1], sizeof set->group_names[1], "other");
    return set;
}

enum { PREV, TWO_BACK, INDUCTION, FIRST, ENTROPY };

hl_status hl_toy_scores_begin(hl_toy_score_sums *s, int H, hl_error *err)
{
    memset(s, 0, sizeof *s);
    if (H < 1 || H > HL_TOY_MAX_HEADS)
        return hl_error_set(err, HL_ERR_ARG, "toy scores: %d heads per layer; the scorer takes "
                            "1 to %d (HL_TOY_MAX_HEADS)", H, HL_TOY_MAX_HEADS);
    s->H = H;
    return HL_OK;
}

void hl_toy_scores_add(hl_toy_score_sums *s, const hl_toy_batch *b, const hl_tensor *attn)
{
    const int T = HL_TOY_T, H = s->H;
    for (int i = 0; i < b->B; i++) {
        const int src = b->src[i], dst = b->dst[i], L = b->len[i];
        for (int h = 0; h < H; h++) {
            const hl_real *A = attn->data + ((size_t)i * H + h) * T * T;
            double *sum = s->sums[h];
            for (int t = 1; t < T; t++) {
                const hl_real *row = A + (size_t)t * T;
                sum[PREV] += row[t - 1];
                sum[FIRST] += row[0];
                if (t >= 2)
                    sum[TWO_BACK] += row[t - 2];
                double entropy = 0;
                for (int j = 0; j <= t; j++)
                    if (row[j] > 0)
                        entropy -= row[j] * log(row[j]);
                sum[ENTROPY] += entropy;
            }
            for (int t = dst; t <= dst + L - 2; t++)
                sum[INDUCTION] += A[(size_t)t * T + src + (t - dst) + 1];
        }
        s->counts[PREV] += T - 1;
        s->counts[FIRST] += T - 1;
        s->counts[ENTROPY] += T - 1;
        s->counts[TWO_BACK] += T - 2;
        s->counts[INDUCTION] += L - 1;
    }
}

void hl_toy_scores_finish(const hl_toy_score_sums *s, hl_toy_head_scores *out)
{
    for (int h = 0; h < s->H; h++) {
        const double *sum = s->sums[h];
        out[h] = (hl_toy_head_scores){
            .previous_token = sum[PREV] / s->counts[PREV],
            .two_back = sum[TWO_BACK] / s->counts[TWO_BACK],
            .induction = sum[INDUCTION] / s->counts[INDUCTION],
            .first_token = sum[FIRST] / s->counts[FIRST],
            .entropy = sum[ENTROPY] / s->counts[ENTROPY],
        };
    }
}

hl_gpt_config hl_toy_gpt_config(void)
{
    return (hl_gpt_config){.vocab_in = HL_TOY_VOCAB + 1, .vocab_out = HL_TOY_VOCAB,
                           .n_ctx = HL_TOY_T, .d_model = 64, .n_heads = 4, .n_layers = 2,
                           .emb_std = 1.0};
}
