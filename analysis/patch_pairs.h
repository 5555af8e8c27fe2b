/*
 * patch_pairs.h: a dataset of clean/corrupted pairs for patching (patching.h),
 * read from a text file of one pair a line:
 *
 *     clean<TAB>corrupt[<TAB>positions]
 *
 * A text model's texts go through its vocabulary (hl_vocab_encode), with the
 * escapes \t, \n, \\ and \xNN (any byte); other bytes 0x20 and up stand for
 * themselves, bytes below 0x20 and 0x7f must be escaped. A model without a
 * vocabulary takes token numbers separated by spaces or commas ("16 3 7 1").
 * The two inputs of a pair have the same number of tokens, 2 to n_ctx.
 * positions ("3,7") are where the metric reads, each in 0..tokens-2 (the
 * answer is the clean input's next token, the wrong one the corrupted
 * input's); without them, the last position with a next token. Lines that are
 * empty or start with '#' are skipped (a text starting with '#' writes it
 * \x23), a line may end in \r\n, and a line holds at most
 * HL_PATCH_PAIRS_LINE_MAX bytes.
 *
 * Pairs may differ in length: each is padded on the right, with its own last
 * token, to the longest, and the padding is never scored. The model is causal,
 * so no position sees the padding after it: every pair's metric (and every
 * patch's effect on it) is what it would be alone, and the task's metric is
 * the mean over all pairs' scored positions, normalised as patching.h does.
 *
 *     hl_patch_pairs p;
 *     if (hl_patch_pairs_parse(text, n, "pairs.tsv", vocab, &m->cfg, HL_METRIC_LOSS, &p,
 *                              &err) == HL_OK) {
 *         hl_patch_heads(m, &p.task, HL_ACT_Z, false, score, &err);
 *         hl_patch_pairs_free(&p);
 *     }
 */
#ifndef HL_PATCH_PAIRS_H
#define HL_PATCH_PAIRS_H

#include <stddef.h>
#include <stdint.h>

#include "analysis/patching.h"
#include "core/error.h"
#include "models/gpt.h"
#include "text/vocab.h"

#define HL_PATCH_PAIRS_LINE_MAX (1 << 20) /* bytes in a line, the newline not counted */
#define HL_PATCH_PAIRS_MAX 1024           /* pairs in a file: they run as one batch */

typedef struct hl_patch_pairs {
    hl_patch_task task; /* every pair, padded to the longest: (n, T) */
    int n;              /* pairs */
    int *line;          /* (n): the line of the file each pair is on (from 1) */
    int *length;        /* (n): its tokens before the padding */
    int *scored;        /* (n): its scored positions */
    void *buf;          /* holds all of the above */
} hl_patch_pairs;

/* Parses n bytes of text (need not end in NUL) as above, for a model of
 * config cfg (vocab_in, vocab_out, n_ctx) whose vocabulary is vocab (NULL:
 * token numbers), into *out with task.metric = metric (a logit difference also
 * refuses a position where both inputs continue with the same token). On
 * error (HL_ERR_FORMAT; HL_ERR_NOMEM) *out is empty and the message begins
 * "<name> line <n>: " and names the problem: a bad escape or unescaped byte,
 * too few or too many fields, a token outside the model's vocabulary, inputs
 * of different lengths or outside 2..n_ctx tokens, a bad or out-of-range
 * position, a line too long; or "<name>: " a file without pairs or with more
 * than HL_PATCH_PAIRS_MAX. */
hl_status hl_patch_pairs_parse(const char *text, size_t n, const char *name,
                               const hl_vocab *vocab, const hl_gpt_config *cfg,
                               hl_patch_metric metric, hl_patch_pairs *out, hl_error *err);

/* Frees what a successful parse holds; safe on an empty (zeroed) one. */
void hl_patch_pairs_free(hl_patch_pairs *p);

#endif
