/* The vocabulary: pieces, their lookup, encoding and decoding (vocab.h). */
#include "text/vocab.h"

#include <stdlib.h>
#include <string.h>

#include "text/hash.h"
#include "text/pretrained_impl.h"
#include "text/vocab_impl.h"

/* The slot holding the learnt piece s, or the empty slot where it would go. */
static size_t find_slot(const hl_vocab *v, const unsigned char *s, size_t len)
{
    size_t i = (size_t)hl_text_hash(s, len) & (v->n_slots - 1);
    for (;; i = (i + 1) & (v->n_slots - 1)) {
        const int32_t t = v->slot[i];
        if (t < 0)
            return i;
        const size_t at = v->offset[t], tlen = v->offset[t + 1] - at;
        if (tlen == len && memcmp(v->bytes + at, s, len) == 0)
            return i;
    }
}

/* The token of a word: its piece when learnt, -1 otherwise. */
static int32_t lookup(const hl_vocab *v, const unsigned char *s, size_t len)
{
    if (v->size == HL_VOCAB_BYTES || len < 2 || len > HL_VOCAB_PIECE_MAX)
        return -1;
    return v->slot[find_slot(v, s, len)];
}

hl_vocab *hl_vocab_from_pieces(const unsigned char *const *pieces, const size_t *lens, int n,
                               hl_error *err)
{
    if (n < 0 || n > HL_VOCAB_MAX - HL_VOCAB_BYTES) {
        hl_error_set(err, HL_ERR_ARG, "vocab: %d pieces; at most %d fit", n,
                     HL_VOCAB_MAX - HL_VOCAB_BYTES);
        return NULL;
    }
    size_t total = HL_VOCAB_BYTES;
    for (int i = 0; i < n; i++) {
        if (lens[i] < 2 || lens[i] > HL_VOCAB_PIECE_MAX) {
            hl_error_set(err, HL_ERR_ARG, "vocab: piece %d has %zu bytes (2..%d)",
                         HL_VOCAB_BYTES + i, lens[i], HL_VOCAB_PIECE_MAX);
            return NULL;
        }
        total += lens[i];
    }
    hl_vocab *v = calloc(1, sizeof *v);
    if (!v) {
        hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory");
        return NULL;
    }
    v->size = HL_VOCAB_BYTES + n;
    v->n_slots = 1;
    while (v->n_slots < 2 * (size_t)n + 2)
        v->n_slots *= 2;
    v->bytes = malloc(total);
    v->offset = malloc(sizeof *v->offset * ((size_t)v->size + 1));
    v->slot = malloc(sizeof *v->slot * v->n_slots);
    if (!v->bytes || !v->offset || !v->slot) {
        hl_vocab_free(v);
        hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory");
        return NULL;
    }
    memset(v->slot, 0xff, sizeof *v->slot * v->n_slots); /* every slot -1 */
    for (int b = 0; b < HL_VOCAB_BYTES; b++) {
        v->bytes[b] = (unsigned char)b;
        v->offset[b] = (size_t)b;
    }
    size_t at = HL_VOCAB_BYTES;
    for (int i = 0; i < n; i++) {
        const int32_t t = HL_VOCAB_BYTES + i;
        memcpy(v->bytes + at, pieces[i], lens[i]);
        v->offset[t] = at;
        v->offset[t + 1] = at + lens[i];
        const size_t s = find_slot(v, pieces[i], lens[i]);
        if (v->slot[s] >= 0) {
            hl_error_set(err, HL_ERR_ARG, "vocab: pieces %d and %d are the same bytes",
                         v->slot[s], t);
            hl_vocab_free(v);
            return NULL;
        }
        v->slot[s] = t;
        at += lens[i];
    }
    v->offset[v->size] = at;
    return v;
}

hl_vocab *hl_vocab_bytes(void)
{
    hl_error ignored = {0};
    return hl_vocab_from_pieces(NULL, NULL, 0, &ignored);
}

void hl_vocab_free(hl_vocab *v)
{
    if (!v)
        return;
    free(v->bytes);
    free(v->offset);
    free(v->slot);
    free(v->merge);
    free(v->pair_slot);
    hl_pretrained_free(v->pretrained);
    free(v);
}

int hl_vocab_size(const hl_vocab *v) { return v->size; }

const char *hl_vocab_kind(const hl_vocab *v)
{
    if (v->pretrained)
        return "pretrained";
    if (v->size == HL_VOCAB_BYTES)
        return "bytes";
    return v->merge ? "bpe" : "words";
}

const unsigned char *hl_vocab_piece(const hl_vocab *v, int32_t token, size_t *len)
{
    if (token < 0 || token >= v->size)
        return NULL;
    *len = v->offset[token + 1] - v->offset[token];
    return v->bytes + v->offset[token];
}

void hl_vocab_token_bytes(const hl_vocab *v, double *bytes)
{
    for (int t = 0; t < v->size; t++)
        bytes[t] = (double)(v->offset[t + 1] - v->offset[t]);
}

static int is_letter(unsigned char c)
{
    /* ASCII letters, the apostrophe of "LORD's", and every byte of a UTF-8
     * multi-byte character, so that words of other scripts stay whole. */
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '\'' || c >= 0x80;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

size_t hl_vocab_next_word(const unsigned char *text, size_t n, size_t i)
{
    size_t j = i;
    if (text[j] == ' ' && j + 1 < n && is_letter(text[j + 1]))
        j++;
    if (is_letter(text[j])) {
        while (j < n && is_letter(text[j]))
            j++;
        return j;
    }
    if (is_digit(text[j])) {
        while (j < n && is_digit(text[j]))
            j++;
        return j;
    }
    return j + 1;
}

bool hl_vocab_same_tokens(const hl_vocab *a, const hl_vocab *b)
{
    char *x = a->pretrained ? hl_pretrained_format(a, false) : hl_vocab_format(a);
    char *y = b->pretrained ? hl_pretrained_format(b, false) : hl_vocab_format(b);
    const bool same = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return same;
}

hl_status hl_vocab_encode_input(const hl_vocab *v, const unsigned char *text, size_t n,
                                int32_t **tokens, size_t *n_tokens, hl_error *err)
{
    const hl_pretrained_template *t = v->pretrained ? &v->pretrained->template : NULL;
    const hl_status st = hl_vocab_encode(v, text, n, tokens, n_tokens, err);
    if (st != HL_OK || !t || !t->n)
        return st;
    int32_t *out = malloc(sizeof *out * (*n_tokens + (size_t)t->n));
    if (!out) {
        free(*tokens);
        *tokens = NULL;
        return hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory encoding %zu bytes", n);
    }
    memcpy(out, t->ids, sizeof *out * (size_t)t->before);
    memcpy(out + t->before, *tokens, sizeof *out * *n_tokens);
    memcpy(out + t->before + *n_tokens, t->ids + t->before,
           sizeof *out * (size_t)(t->n - t->before));
    free(*tokens);
    *tokens = out;
    *n_tokens += (size_t)t->n;
    return HL_OK;
}

hl_status hl_vocab_encode(const hl_vocab *v, const unsigned char *text, size_t n,
                          int32_t **tokens, size_t *n_tokens, hl_error *err)
{
    if (v->pretrained)
        return hl_pretrained_encode(v, text, n, tokens, n_tokens, err);
    if (v->merge)
        return hl_bpe_encode(v, text, n, tokens, n_tokens, err);
    *tokens = NULL;
    *n_tokens = 0;
    int32_t *out = malloc(sizeof *out * (n ? n : 1)); /* a token per byte at most */
    if (!out)
        return hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory encoding %zu bytes", n);
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        const size_t end = hl_vocab_next_word(text, n, i);
        const int32_t t = lookup(v, text + i, end - i);
        if (t >= 0)
            out[k++] = t;
        else
            for (size_t j = i; j < end; j++)
                out[k++] = text[j];
        i = end;
    }
    int32_t *fit = realloc(out, sizeof *out * (k ? k : 1));
    *tokens = fit ? fit : out;
    *n_tokens = k;
    return HL_OK;
}

hl_status hl_vocab_decode(const hl_vocab *v, const int32_t *tokens, size_t n,
                          unsigned char **text, size_t *len, hl_error *err)
{
    *text = NULL;
    *len = 0;
    size_t total = 0, piece_len;
    for (size_t i = 0; i < n; i++) {
        if (!hl_vocab_piece(v, tokens[i], &piece_len))
            return hl_error_set(err, HL_ERR_ARG,
                                "vocab: token %ld at position %zu is outside the vocabulary "
                                "(0..%d)",
                                (long)tokens[i], i, v->size - 1);
        total += piece_len;
    }
    unsigned char *out = malloc(total + 1);
    if (!out)
        return hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory decoding %zu tokens", n);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = hl_vocab_piece(v, tokens[i], &piece_len);
        memcpy(out + at, p, piece_len);
        at += piece_len;
    }
    out[at] = 0;
    *text = out;
    *len = at;
    return HL_OK;
}
