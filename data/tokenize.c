/* Text into a token file in parallel chunks: see tokenize.h. */
#include "data/tokenize.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    size_t begin, end;   /* the chunk's bytes */
    int32_t *tokens;     /* its tokens, malloc'd */
    size_t n_tokens;
    hl_error err;
} piece;

/* The chunks' ends: every chunk but the last of a block that is not the last
 * ends at a cut; returns their count, or 0 when none fits. */
static size_t cut_chunks(const hl_vocab *v, const unsigned char *text, size_t n, size_t chunk,
                         bool last, piece *out, size_t max)
{
    size_t k = 0, at = 0;
    while (at < n && k < max) {
        size_t end = at + chunk < n ? hl_vocab_cut(v, text, n, at + chunk) : n;
        if (end == n && !last)
            break; /* the rest waits for more text */
        out[k++] = (piece){.begin = at, .end = end};
        at = end;
    }
    return k;
}

hl_status hl_tokenize_block(const hl_vocab *v, const unsigned char *text, size_t n, size_t chunk,
                            bool last, hl_token_writer *w, size_t *used, hl_error *err)
{
    *used = 0;
    if (chunk < 1)
        chunk = 1;
    const size_t max = n / chunk + 2;
    piece *p = calloc(max, sizeof *p);
    if (!p)
        return hl_error_set(err, HL_ERR_NOMEM, "tokenize: out of memory");
    const size_t k = cut_chunks(v, text, n, chunk, last, p, max);
    /* The chunks' sizes are alike, so a dynamic schedule keeps both threads
     * busy; the tokens do not depend on which thread encoded them. A block
     * of one chunk (a short document) runs without waking the team. */
#pragma omp parallel for schedule(dynamic, 1) if (k > 1)
    for (long i = 0; i < (long)k; i++)
        hl_vocab_encode(v, text + p[i].begin, p[i].end - p[i].begin, &p[i].tokens,
                        &p[i].n_tokens, &p[i].err);
    hl_status st = HL_OK;
    for (size_t i = 0; i < k; i++) {
        if (st == HL_OK && hl_error_failed(&p[i].err))
            st = hl_error_set(err, p[i].err.status, "tokenize: %s", p[i].err.message);
        if (st == HL_OK)
            st = hl_token_writer_put(w, p[i].tokens, p[i].n_tokens, p[i].end - p[i].begin, err);
        free(p[i].tokens);
    }
    if (st == HL_OK)
        *used = k ? p[k - 1].end : 0;
    free(p);
    return st;
}

/* F as p/10⁹. Each term fits in 64 bits: q·p ≤ size, and r·p < 10¹⁸. */
#define VAL_PLACES 1000000000ULL

uint64_t hl_tokenize_val_bytes(uint64_t size, double fraction)
{
    const uint64_t p = (uint64_t)llround(fraction * (double)VAL_PLACES);
    const uint64_t q = size / VAL_PLACES, r = size % VAL_PLACES;
    return q * p + r * p / VAL_PLACES;
}
