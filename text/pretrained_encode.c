/* Encoding with a pretrained vocabulary: the normalizer (NFC) if it has one,
 * added tokens, then the pre-tokenizer's regex on the text between them, then
 * the merges by rank on each pre-token (vocab.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/pretrained_impl.h"

/* Where the pre-tokenizer is in the text. The text is cut at each added
 * token into segments, and the regex sees one segment at a time, as Hugging
 * Face's tokenizers does: a match never crosses an added token. */
typedef struct {
    const hl_vocab *v;
    bool starts[256];           /* whether an added token begins with the byte */
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *stack;
    size_t seg_start, seg_end;  /* the segment holding the position; seg_end is
                                 * where the next added token starts (or n) */
    int32_t added;              /* the added token at seg_end, -1 at n */
    size_t match_start, match_end; /* a match found past a gap, not yet used */
} chunker;

/* The next added token at or after text[from]: the leftmost, and of those
 * the longest, into c->seg_end and c->added. */
static void find_added(chunker *c, const unsigned char *text, size_t n, size_t from)
{
    const struct hl_pretrained *p = c->v->pretrained;
    for (size_t j = from; j < n; j++) {
        if (!c->starts[text[j]])
            continue;
        for (int k = 0; k < p->n_added; k++) { /* longest first */
            size_t len;
            const unsigned char *s = hl_vocab_piece(c->v, p->added[k], &len);
            if (len <= n - j && memcmp(text + j, s, len) == 0) {
                c->seg_end = j;
                c->added = p->added[k];
                return;
            }
        }
    }
    c->seg_end = n;
    c->added = -1;
}

/* A pre-token [i, end) as one token when ignore_merges finds it whole. */
static int32_t whole_piece(const chunker *c, const unsigned char *text, size_t i, size_t end)
{
    return c->v->pretrained->ignore_merges ? hl_pretrained_piece_token(c->v, text + i, end - i)
                                           : -1;
}

static size_t next_chunk(void *ctx, const unsigned char *text, size_t n, size_t i,
                         int32_t *whole, hl_error *err)
{
    chunker *c = ctx;
    *whole = -1;
    if (i == c->seg_end) { /* an added token */
        size_t len;
        hl_vocab_piece(c->v, c->added, &len);
        *whole = c->added;
        c->seg_start = i + len;
        c->match_start = c->match_end = SIZE_MAX;
        find_added(c, text, n, c->seg_start);
        return i + len;
    }
    if (c->match_start == i) { /* the match after a gap */
        const size_t end = c->match_end;
        c->match_start = c->match_end = SIZE_MAX;
        *whole = whole_piece(c, text, i, end);
        return end;
    }
    if (c->match_start != SIZE_MAX) /* inside a gap, before a match */
        return c->match_start;
    const int rc = pcre2_match(c->v->pretrained->code, text + c->seg_start,
                               c->seg_end - c->seg_start, i - c->seg_start, PCRE2_NOTEMPTY, c->md,
                               c->mc);
    if (rc == PCRE2_ERROR_NOMATCH) { /* the rest of the segment is a gap */
        *whole = whole_piece(c, text, i, c->seg_end);
        return c->seg_end;
    }
    if (rc < 0) {
        PCRE2_UCHAR why[160];
        pcre2_get_error_message(rc, why, sizeof why);
        hl_error_set(err, HL_ERR_ARG, "vocab: the pre-tokenizer's regex failed at byte %zu: %s",
                     i, (const char *)why);
        return 0;
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
    const size_t start = c->seg_start + ov[0], end = c->seg_start + ov[1];
    if (start > i) { /* bytes no match takes: a pre-token of their own */
        c->match_start = start;
        c->match_end = end;
        *whole = whole_piece(c, text, i, start);
        return start;
    }
    *whole = whole_piece(c, text, i, end);
    return end;
}

/* The text as the normalizer leaves it, encoded. */
static hl_status encode_normal(const hl_vocab *v, const unsigned char *text, size_t n,
                               int32_t **tokens, size_t *n_tokens, hl_error *err)
{
    const struct hl_pretrained *p = v->pretrained;
    chunker c = {.v = v, .match_start = SIZE_MAX, .match_end = SIZE_MAX};
    for (int k = 0; k < p->n_added; k++)
        c.starts[v->bytes[v->offset[p->added[k]]]] = true;
    c.md = pcre2_match_data_create_from_pattern(p->code, NULL);
    c.mc = pcre2_match_context_create(NULL);
    /* JIT's default stack is 32 KiB; a long pre-token may need more. */
    c.stack = pcre2_jit_stack_create(32 << 10, 8 << 20, NULL);
    hl_status st;
    if (!c.md || !c.mc || !c.stack) {
        *tokens = NULL;
        *n_tokens = 0;
        st = hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory encoding %zu bytes", n);
    } else {
        pcre2_jit_stack_assign(c.mc, NULL, c.stack);
        find_added(&c, text, n, 0);
        st = hl_bpe_encode_with(v, text, n, next_chunk, &c, tokens, n_tokens, err);
    }
    pcre2_jit_stack_free(c.stack);
    pcre2_match_context_free(c.mc);
    pcre2_match_data_free(c.md);
    return st;
}

hl_status hl_pretrained_encode(const hl_vocab *v, const unsigned char *text, size_t n,
                               int32_t **tokens, size_t *n_tokens, hl_error *err)
{
    if (!v->pretrained->nfc)
        return encode_normal(v, text, n, tokens, n_tokens, err);
    unsigned char *normal;
    size_t len;
    if (!hl_pretrained_normalize(text, n, &normal, &len)) {
        *tokens = NULL;
        *n_tokens = 0;
        return hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory normalizing %zu bytes", n);
    }
    const hl_status st = encode_normal(v, normal, len, tokens, n_tokens, err);
    free(normal);
    return st;
}

bool hl_pretrained_cut_ok(const hl_vocab *v, const unsigned char *text, size_t n, size_t p)
{
    const struct hl_pretrained *pre = v->pretrained;
    for (int k = 0; k < pre->n_added; k++) {
        size_t len;
        const unsigned char *s = hl_vocab_piece(v, pre->added[k], &len);
        for (size_t j = p >= len ? p - len + 1 : 0; j < p; j++)
            if (len <= n - j && memcmp(text + j, s, len) == 0)
                return false;
    }
    return true;
}
