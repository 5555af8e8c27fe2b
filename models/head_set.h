/*
 * head_set.h: naming heads of a GPT, and the record of the heads pruned away.
 *
 * A head set marks heads by layer and index in the model at hand
 * (0..layer_heads-1), as the gates are:
 *
 *     hl_head_set off = {0};
 *     off.on[1][3] = true;                    // layer 1, head 3
 *
 * A pruned model keeps its remaining heads in their original order, so a
 * record of the ORIGINAL indices removed (the "pruned_heads" metadata of its
 * checkpoint, e.g. "0:1,3;1:" = heads 1 and 3 of layer 0) maps current
 * indices back (hl_head_original) and forth (hl_head_current). A loaded or
 * pruned model carries the mapping itself (hl_gpt.head_original), and users
 * name heads by their index as trained, which pruning does not change:
 *
 *     int h = hl_gpt_head_current(m, 1, 3);   // "L1H3" in m, or -1 if pruned
 */
#ifndef HL_HEAD_SET_H
#define HL_HEAD_SET_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "models/gpt.h"

typedef struct hl_head_set {
    bool on[HL_GPT_MAX_LAYERS][HL_HEADS_MAX];
} hl_head_set;

/* Heads in the set (over every layer). */
int hl_head_set_count(const hl_head_set *s);

/* The original index of head `current` of layer l, given the original heads
 * removed (NULL: none); -1 when out of range. */
int hl_head_original(const hl_head_set *pruned, int n_heads, int l, int current);
/* The current index of original head `original` of layer l; -1 when it was
 * pruned or is out of range. */
int hl_head_current(const hl_head_set *pruned, int n_heads, int l, int original);

/* Sets m->head_original (and, with grouped-query attention, m->kv_of: a
 * key/value head stays while a query head of its group does) from the record
 * of the original heads removed, and back: the record of m. HL_ERR_ARG, m
 * unchanged, when a layer keeps another number of heads than m has there. */
hl_status hl_gpt_set_pruned(hl_gpt *m, const hl_head_set *pruned, hl_error *err);
void hl_gpt_pruned_heads(const hl_gpt *m, hl_head_set *pruned);
/* The current index in m of the head trained as `original` in layer l; -1
 * when it was pruned or is out of range. */
int hl_gpt_head_current(const hl_gpt *m, int l, int original);

/* "0:1,3;1:": per layer its number, a colon and the pruned original heads,
 * layers separated by semicolons. Returns what snprintf returns. */
int hl_pruned_heads_format(const hl_head_set *pruned, const hl_gpt_config *cfg, char *buf,
                           size_t size);
/* Parses that text and checks it against cfg: every layer listed once in
 * order, heads in range, ascending, and as many per layer as the config says
 * were pruned. NULL text means nothing pruned (then no layer may be short). */
hl_status hl_pruned_heads_parse(const char *text, const hl_gpt_config *cfg, hl_head_set *pruned,
                                hl_error *err);

#endif
