/*
 * probe.h: the standard induction test as an evaluation set: n random tokens
 * repeated once, after an optional BOS token, the targets on the second half
 * (predictable only by looking back at the first), the repeat marked in the
 * set's repeats.
 *
 *     hl_probe probe;
 *     hl_probe_new(m, &(hl_probe_opts){.bos = 16}, &probe, &err);
 *     hl_heads_detect(m, probe.set, NULL, scores, &err);   // analysis/detectors.h
 *     hl_probe_free(&probe);
 */
#ifndef HL_PROBE_H
#define HL_PROBE_H

#include <stdint.h>

#include "core/error.h"
#include "models/gpt.h"
#include "text/vocab.h"
#include "train/eval.h"

typedef struct hl_probe_opts {
    int sequences;          /* 0: 100, or for T > 256 positions max(8, 25600 / T) */
    int half;               /* n, tokens per half; 0: as many as fit in n_ctx, at most
                             * HL_REPEAT_HALF_MAX (train/eval.h) */
    int bos;                /* token put first, or < 0 for none */
    int token_lo, token_hi; /* tokens uniform in [lo, hi); both 0: [0, min(vocab_in, vocab_out)) */
    int batch;              /* sequences per forward pass; 0: 50 */
    uint64_t seed;
} hl_probe_opts;

typedef struct hl_probe {
    hl_eval_set *set; /* (sequences, start + 2n); one target group, the second half;
                         repeats: queries start+n.. repeat the token n back */
    int start, half;  /* first token of the first half (1 with a BOS, else 0), n */
} hl_probe;

hl_status hl_probe_new(const hl_gpt *m, const hl_probe_opts *opts, hl_probe *p, hl_error *err);
/* The probe of a text model: random letters a..z for a byte-level one,
 * random learnt words (tokens 256..) for one with a learnt vocabulary. No BOS,
 * every program's seed (12345). */
hl_probe_opts hl_probe_text_opts(const hl_vocab *vocab);
void hl_probe_free(hl_probe *p);

#endif
