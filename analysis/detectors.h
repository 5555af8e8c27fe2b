/*
 * detectors.h: what each attention head does, measured — previous-token,
 * duplicate-token, induction, copying, first-token, local, self, entropy —
 * for any headlab GPT (toy_heads, charlm, pruned).
 *
 * The attention detectors average a head's attention probabilities A[t,·]
 * over query positions t >= 1 of a set of sequences x:
 *   previous_token   A[t,t-1]
 *   duplicate_token  Σ A[t,j] over j < t with x_j = x_t (queries with such a j)
 *   induction        on the probe (below): A[t, t-n+1] for t in the second half,
 *                    attention to the token right after the query's first
 *                    occurrence (prefix matching); on text: Σ A[t,j+1] over
 *                    j < t-1 with x_j = x_t (queries with such a j)
 *   first_token      A[t,0]
 *   local            Σ A[t,j] over t-3 <= j <= t-1 (within 3 back, not self)
 *   self             A[t,t]
 *   entropy          -Σ_j A[t,j] ln A[t,j], in nats
 * The probe is the standard induction test: n random tokens repeated once,
 * after an optional BOS token. Copying is measured on the weights, as Olsson
 * et al. (2022) do: the full OV circuit C = W_U·W_O·W_V·W_E over the tokens
 * that are both inputs and outputs, and copying = Σλ/Σ|λ| over its
 * eigenvalues λ (in [-1, 1]; 1 when every eigenvalue is positive: attending
 * to a token raises that token's logit). C's nonzero eigenvalues are those of
 * the (d_head,d_head) matrix (W_V·W_Eᵀ)(W_U·W_O). The weights are those of
 * hl_head_weights_get (LayerNorm gains folded), W_U times the final LayerNorm
 * gain and centred over the vocabulary (logits are shift invariant).
 *
 *     hl_probe probe;
 *     hl_probe_new(m, &(hl_probe_opts){.bos = 16}, &probe, &err);
 *     hl_head_scores s[L * n_heads];                    // row stride cfg.n_heads
 *     hl_heads_detect(m, probe.set, probe.start, NULL, s, &err);
 *     hl_probe_free(&probe);
 */
#ifndef HL_DETECTORS_H
#define HL_DETECTORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"
#include "models/gpt.h"
#include "models/head_set.h"
#include "train/eval.h"

typedef enum hl_detector {
    HL_DETECT_PREVIOUS,
    HL_DETECT_DUPLICATE,
    HL_DETECT_INDUCTION,
    HL_DETECT_COPYING,
    HL_DETECT_FIRST,
    HL_DETECT_LOCAL,
    HL_DETECT_SELF,
    HL_DETECT_ENTROPY,
    HL_DETECTORS
} hl_detector;

/* "previous_token", ... as in scores.csv; short: "prev", "dup", ... (<= 8). */
const char *hl_detector_name(hl_detector d);
const char *hl_detector_short(hl_detector d);

typedef struct hl_head_scores {
    double v[HL_DETECTORS]; /* NaN where nothing was measured */
} hl_head_scores;

/* ---- attention detectors from maps (no model) --------------------------- */

typedef struct hl_detector_sums {
    int H;
    double sum[HL_HEADS_MAX][HL_DETECTORS];
    double count[HL_DETECTORS];
} hl_detector_sums;

void hl_detector_sums_begin(hl_detector_sums *s, int H);
/* tokens (B,T) and their attention attn (B,H,T,T); probe_start >= 0 marks the
 * probe (n = (T - probe_start) / 2 tokens from probe_start, then the same n
 * again), -1 a text. */
hl_status hl_detector_sums_add(hl_detector_sums *s, const int32_t *tokens, const hl_tensor *attn,
                               int probe_start, hl_error *err);
/* The means of the attention detectors; copying is left NaN. */
void hl_detector_sums_finish(const hl_detector_sums *s, hl_head_scores *out /* H */);

/* ---- the induction probe -------------------------------------------------- */

typedef struct hl_probe_opts {
    int sequences;          /* 0: 100 */
    int half;               /* n, tokens per half; 0: as many as fit in n_ctx */
    int bos;                /* token put first, or < 0 for none */
    int token_lo, token_hi; /* tokens uniform in [lo, hi); both 0: [0, min(vocab_in, vocab_out)) */
    int batch;              /* sequences per forward pass; 0: 50 */
    uint64_t seed;
} hl_probe_opts;

typedef struct hl_probe {
    hl_eval_set *set; /* (sequences, start + 2n); one target group, the second half */
    int start, half;  /* first token of the first half (1 with a BOS, else 0), n */
} hl_probe;

hl_status hl_probe_new(const hl_gpt *m, const hl_probe_opts *opts, hl_probe *p, hl_error *err);
void hl_probe_free(hl_probe *p);

/* Evenly spaced windows of T+1 bytes of a text as an evaluation set (inputs
 * and next bytes, one group "text"). HL_ERR_ARG when the text is shorter than
 * T+1 bytes. */
hl_eval_set *hl_text_windows(const unsigned char *text, size_t size, int windows, int T,
                             int batch, hl_error *err);

/* ---- every head of a model ----------------------------------------------- */

/* Every head's detectors on set (probe_start as in hl_detector_sums_add) with
 * the run's gates and offsets (run may be NULL; its trace is ignored), and its
 * copying score. out has cfg.n_layers * cfg.n_heads entries, row stride
 * cfg.n_heads; entries past a pruned layer's heads are NaN. */
hl_status hl_heads_detect(const hl_gpt *m, const hl_eval_set *set, int probe_start,
                          const hl_gpt_run *run, hl_head_scores *out, hl_error *err);

/* The copying score alone (same layout, one double per head). */
hl_status hl_heads_copying(const hl_gpt *m, double *out, hl_error *err);

/* ---- roles ------------------------------------------------------------------ */

/* A head takes every role whose detector reaches its threshold. */
#define HL_ROLE_PREVIOUS 0.5   /* previous_token */
#define HL_ROLE_DUPLICATE 0.5  /* duplicate_token */
#define HL_ROLE_INDUCTION 0.3  /* induction */
#define HL_ROLE_COPYING 0.5    /* copying */
#define HL_ROLE_FIRST 0.5      /* first_token */
#define HL_ROLE_LOCAL 0.7      /* local, when not previous-token */
#define HL_ROLE_SELF 0.5       /* self */

/* "induction+copying", "previous-token", ... or "-" (no role), into buf. */
const char *hl_head_roles(const hl_head_scores *s, char *buf, size_t size);

/* The detector a head is known by: induction when it reaches the induction
 * threshold, else the largest of previous, duplicate, induction, first and
 * self (local is left out: it contains previous). */
hl_detector hl_head_main_detector(const hl_head_scores *s);

#endif
