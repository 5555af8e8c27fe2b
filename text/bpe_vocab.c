/* A BPE vocabulary from its merges, checked, and its pair lookup (vocab.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/pretrained_impl.h"
#include "text/vocab_impl.h"

static size_t pair_hash(int32_t left, int32_t right)
{
    uint64_t h = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) * 0x9e3779b97f4a7c15u;
    return (size_t)(h >> 17);
}

/* The slot of the token merging left and right, or the empty slot where it
 * would go. */
static size_t find_pair(const hl_vocab *v, int32_t left, int32_t right)
{
    size_t i = pair_hash(left, right) & (v->n_pair_slots - 1);
    for (;; i = (i + 1) & (v->n_pair_slots - 1)) {
        const int32_t t = v->pair_slot[i];
        if (t < 0)
            return i;
        const int32_t *m = v->merge + 2 * (t - HL_VOCAB_BYTES);
        if (m[0] == left && m[1] == right)
            return i;
    }
}

int32_t hl_bpe_pair_token(const hl_vocab *v, int32_t left, int32_t right)
{
    return v->pair_slot[find_pair(v, left, right)];
}

bool hl_vocab_merge(const hl_vocab *v, int32_t token, int32_t *left, int32_t *right)
{
    if (v->pretrained)
        return hl_pretrained_merge(v, token, left, right);
    if (!v->merge || token < HL_VOCAB_BYTES || token >= v->size)
        return false;
    *left = v->merge[2 * (token - HL_VOCAB_BYTES)];
    *right = v->merge[2 * (token - HL_VOCAB_BYTES) + 1];
    return true;
}

/* "vocab line L" for the parser, "vocab token T" otherwise (vocab_impl.h). */
static const char *name_of(char *buf, size_t room, int i, int first_line)
{
    if (first_line > 0)
        snprintf(buf, room, "vocab line %d", first_line + i);
    else
        snprintf(buf, room, "vocab token %d", HL_VOCAB_BYTES + i);
    return buf;
}

hl_vocab *hl_bpe_build(const int32_t *merges, int n, int first_line, hl_error *err)
{
    char name[48];
    if (n < 0 || n > HL_VOCAB_MAX - HL_VOCAB_BYTES) {
        hl_error_set(err, HL_ERR_ARG, "vocab: %d merges; at most %d fit", n,
                     HL_VOCAB_MAX - HL_VOCAB_BYTES);
        return NULL;
    }
    hl_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory");
        return NULL;
    }
    v->size = HL_VOCAB_BYTES + n;
    v->n_pair_slots = 1;
    while (v->n_pair_slots < 2 * (size_t)n + 2)
        v->n_pair_slots *= 2;
    v->offset = malloc(sizeof *v->offset * ((size_t)v->size + 1));
    v->merge = malloc(sizeof *v->merge * (2 * (size_t)n + 2));
    v->pair_slot = malloc(sizeof *v->pair_slot * v->n_pair_slots);
    if (!v->offset || !v->merge || !v->pair_slot)
        goto nomem;
    memset(v->pair_slot, 0xff, sizeof *v->pair_slot * v->n_pair_slots); /* every slot -1 */
    /* The checks and the pieces' lengths first, then their bytes. */
    for (int b = 0; b <= HL_VOCAB_BYTES; b++)
        v->offset[b] = (size_t)b;
    for (int i = 0; i < n; i++) {
        const int32_t t = HL_VOCAB_BYTES + i, left = merges[2 * i], right = merges[2 * i + 1];
        if (left < 0 || left >= t || right < 0 || right >= t) {
            hl_error_set(err, HL_ERR_ARG, "%s: merges %ld and %ld, but token %ld can merge "
                         "only tokens 0..%ld", name_of(name, sizeof name, i, first_line),
                         (long)left, (long)right, (long)t, (long)t - 1);
            goto fail;
        }
        const size_t len = (v->offset[left + 1] - v->offset[left]) +
                           (v->offset[right + 1] - v->offset[right]);
        if (len > HL_VOCAB_PIECE_MAX) {
            hl_error_set(err, HL_ERR_ARG, "%s: a piece of %zu bytes; at most %d",
                         name_of(name, sizeof name, i, first_line), len, HL_VOCAB_PIECE_MAX);
            goto fail;
        }
        v->merge[2 * i] = left;
        v->merge[2 * i + 1] = right;
        const size_t s = find_pair(v, left, right);
        if (v->pair_slot[s] >= 0) {
            const int j = v->pair_slot[s] - HL_VOCAB_BYTES;
            const int base = first_line > 0 ? first_line : HL_VOCAB_BYTES;
            hl_error_set(err, HL_ERR_ARG, "vocab %s %d and %d merge the same pair (%ld %ld)",
                         first_line > 0 ? "lines" : "tokens", base + j, base + i, (long)left,
                         (long)right);
            goto fail;
        }
        v->pair_slot[s] = t;
        v->offset[t + 1] = v->offset[t] + len;
    }
    v->bytes = malloc(v->offset[v->size]);
    if (!v->bytes)
        goto nomem;
    for (int b = 0; b < HL_VOCAB_BYTES; b++)
        v->bytes[b] = (unsigned char)b;
    for (int t = HL_VOCAB_BYTES; t < v->size; t++) {
        const int32_t left = v->merge[2 * (t - HL_VOCAB_BYTES)];
        const int32_t right = v->merge[2 * (t - HL_VOCAB_BYTES) + 1];
        const size_t left_len = v->offset[left + 1] - v->offset[left];
        memcpy(v->bytes + v->offset[t], v->bytes + v->offset[left], left_len);
        memcpy(v->bytes + v->offset[t] + left_len, v->bytes + v->offset[right],
               v->offset[right + 1] - v->offset[right]);
    }
    return v;
nomem:
    hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory for %d merges", n);
fail:
    hl_vocab_free(v);
    return NULL;
}

hl_vocab *hl_vocab_from_merges(const int32_t *merges, int n, hl_error *err)
{
    return hl_bpe_build(merges, n, 0, err);
}
