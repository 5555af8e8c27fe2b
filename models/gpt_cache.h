/*
 * gpt_cache.h: generation with a key/value cache. Each layer keeps the keys
 * (smeared and rotated, as attention reads them) and values of every
 * position seen, so a new token costs one position's projections and MLP
 * and one row of attention over the cache instead of a forward pass over the
 * whole context.
 *
 * The products, norms and MLP are the model's ops on the new positions
 * alone, in a graph without gradients, each product reading a transposed
 * copy of its weight made once (a product of one row then reads the weight
 * in place instead of packing it for every token; the cache holds a second
 * copy of the model's matrices); attention over the cache is a plain loop
 * (no trace, gate or patch: analysis runs hl_gpt_forward). Logits agree with
 * hl_gpt_forward's to rounding. The model must not change while a cache of
 * it is in use.
 *
 *     hl_gpt_cache *c = hl_gpt_cache_new(m, 0, &err);     // 0: n_ctx positions
 *     hl_gpt_cache_feed(c, prompt, n, &logits, &err);      // logits of the last position
 *     for (...) {
 *         int32_t next = hl_gpt_sample(logits, V, temperature, top_k, &rng);
 *         hl_gpt_cache_feed(c, &next, 1, &logits, &err);
 *     }
 *     hl_gpt_cache_free(c);
 */
#ifndef HL_GPT_CACHE_H
#define HL_GPT_CACHE_H

#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"
#include "models/gpt.h"

typedef struct hl_gpt_cache hl_gpt_cache;

/* An empty cache of capacity positions (0: m's n_ctx; at most n_ctx), for
 * one sequence; m must outlive it and stay unchanged. NULL with the reason
 * in err. */
hl_gpt_cache *hl_gpt_cache_new(const hl_gpt *m, int capacity, hl_error *err);
void hl_gpt_cache_free(hl_gpt_cache *c);
/* Positions held so far. */
int hl_gpt_cache_length(const hl_gpt_cache *c);
/* Forgets every position: the next feed starts a new sequence. */
void hl_gpt_cache_reset(hl_gpt_cache *c);

/* Runs n more tokens through the model after those already cached and
 * points *logits at the last one's vocab_out logits (valid until the next
 * call), soft-capped as the loss reads them when the model has a softcap
 * (hl_gpt_logit). HL_ERR_ARG, the cache unchanged, when it would pass its
 * capacity or a token is outside the vocabulary. */
hl_status hl_gpt_cache_feed(hl_gpt_cache *c, const int32_t *tokens, int n,
                            const hl_real **logits, hl_error *err);

/* A token drawn from softmax(logits / temperature) over the top_k largest
 * (all when top_k <= 0; ties with the k-th kept); the argmax (the first on
 * ties) when temperature is 0, rng then unused (it may be NULL). */
int32_t hl_gpt_sample(const hl_real *logits, int V, double temperature, int top_k, hl_rng *rng);

#endif
