/*
 * vocab_impl.h: the layout of hl_vocab and the byte-level BPE parts that
 * vocab.c, vocab_format.c, bpe_*.c and pretrained_*.c share; internal to
 * text/.
 */
#ifndef HL_TEXT_VOCAB_IMPL_H
#define HL_TEXT_VOCAB_IMPL_H

#include "text/vocab.h"

struct hl_vocab {
    int size;                /* tokens */
    unsigned char *bytes;    /* every piece, back to back */
    size_t *offset;          /* (size+1): piece t is bytes[offset[t]..offset[t+1]) */
    /* words: the learnt pieces by their bytes */
    int32_t *slot;           /* open-addressing table of the learnt pieces; -1 empty */
    size_t n_slots;          /* a power of two, at least twice the learnt pieces */
    /* bpe: token 256+i merges merge[2i] and merge[2i+1]; NULL for words */
    int32_t *merge;          /* (2*(size-256)) */
    int32_t *pair_slot;      /* open-addressing table of the merged tokens by their
                              * pair; -1 empty */
    size_t n_pair_slots;     /* a power of two, at least twice the merges */
    /* pretrained (hl_vocab_load_pretrained): its merges by rank, pre-tokenizer
     * and added tokens (pretrained_impl.h); NULL for the others, and then
     * merge, slot and pair_slot are unused */
    struct hl_pretrained *pretrained;
};

#define HL_BPE_HEADER "headlab-bpe-1" /* the stored form's first line */

/* The token that merges left and right, or -1 when no merge does. */
int32_t hl_bpe_pair_token(const hl_vocab *v, int32_t left, int32_t right);

/* The BPE vocabulary of n merges (merges[2i], merges[2i+1] make token 256+i),
 * checked: each id below the token it defines, no pair twice, no piece over
 * HL_VOCAB_PIECE_MAX bytes, n within HL_VOCAB_MAX. Messages name merge i as
 * "line first_line+i" when first_line > 0 (the parser), else as "token 256+i".
 * HL_ERR_ARG (HL_ERR_NOMEM when out of memory). */
hl_vocab *hl_bpe_build(const int32_t *merges, int n, int first_line, hl_error *err);

/* hl_vocab_encode for a BPE vocabulary (bpe_encode.c). */
hl_status hl_bpe_encode(const hl_vocab *v, const unsigned char *text, size_t n,
                        int32_t **tokens, size_t *n_tokens, hl_error *err);

/* A pre-tokenizer for hl_bpe_encode_with: the end (> i) of the chunk that
 * starts at text[i] (i < n), with *whole the one token the chunk is as a
 * whole (an added token, a piece kept whole) or -1 to merge its bytes; 0 on
 * failure, with the reason in err. */
typedef size_t (*hl_bpe_next_fn)(void *ctx, const unsigned char *text, size_t n, size_t i,
                                 int32_t *whole, hl_error *err);

/* hl_bpe_encode with another pre-tokenizer; for a pretrained vocabulary the
 * merges are applied by rank (pretrained_impl.h). */
hl_status hl_bpe_encode_with(const hl_vocab *v, const unsigned char *text, size_t n,
                             hl_bpe_next_fn next, void *ctx, int32_t **tokens, size_t *n_tokens,
                             hl_error *err);

/* The stored form of a BPE vocabulary and its parser (bpe_format.c): see
 * hl_vocab_format. */
char *hl_bpe_format(const hl_vocab *v);
hl_vocab *hl_bpe_parse(const char *s, hl_error *err);

/* The escaping of the stored forms' pieces (vocab_escape.c): a backslash
 * as \\, a newline as \n, other bytes outside 0x20..0x7e as \xNN.
 * hl_vocab_escape writes p[0..len) escaped at `at` (room for 4·len) and
 * returns the end. hl_vocab_unescape reads s[0..len), line `line` of the
 * form, into out (room for len, or max when smaller) and returns its length;
 * -1 with the reason in err (an unescaped control byte, a stray backslash,
 * more than max bytes). */
char *hl_vocab_escape(char *at, const unsigned char *p, size_t len);
long hl_vocab_unescape(const char *s, size_t len, size_t max, int line, unsigned char *out,
                       hl_error *err);

#endif
