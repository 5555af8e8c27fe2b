/* Hand-built models for the head-study tests: heads whose behaviour is forced
 * by their weights. */
#ifndef HL_TEST_HEAD_MODELS_H
#define HL_TEST_HEAD_MODELS_H

#include <stdbool.h>
#include <stdint.h>

#include "models/gpt.h"

enum { HM_VOCAB = 8, HM_CTX = 8, HM_D = 16 };

/* layers layers of one head each, no MLP, no LayerNorm, d_model 16, 8 tokens
 * and 8 positions. Position t is one-hot in dims 0..7, token v in dims 8+v.
 * Every head's query·key is 25 when the key is the previous position and 0
 * otherwise, so it attends to t-1 (> 0.99); its OV circuit maps token v's
 * dims to `sign` times themselves and the unembedding reads token v from
 * dim 8+v, so copying is +1 (sign 1) or -1 (sign -1). */
hl_gpt *hm_previous_token_model(int layers, double sign);

/* A random model (seeded) with MLP and LayerNorm, random LayerNorm gains. */
hl_gpt *hm_random_model(int layers, int heads, int d_model, uint64_t seed);

/* twin (made with m's config but n_kv_heads 0) set to m without grouped-query
 * attention: the same function, each query head's k and v rows of the
 * in-projection copied from its group's key/value head. */
void hm_ungrouped_twin(const hl_gpt *m, hl_gpt *twin);

/* A grouped-query model of cfg (cfg->n_kv_heads set) with seeded weights, its
 * LayerNorm gains in [0.5, 1.5) when random_gains, and in *twin the same
 * model ungrouped (hm_ungrouped_twin). */
hl_gpt *hm_grouped_model(const hl_gpt_config *cfg, uint64_t seed, bool random_gains,
                         hl_gpt **twin);

#endif
