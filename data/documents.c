/* The documents of a text: see documents.h. */
#include "data/documents.h"

#include <stdlib.h>
#include <string.h>

size_t hl_docs_form_feed_end(const unsigned char *text, size_t n, bool line_start, size_t *safe)
{
    *safe = n;
    for (size_t i = 0; i < n; i++) {
        if (text[i] != '\f' || !(i ? text[i - 1] == '\n' : line_start))
            continue;
        const size_t eol = i + 1 < n && text[i + 1] == '\r' ? i + 2 : i + 1; /* "\f\r\n" too */
        if (eol == n) { /* the line's end is not in the text yet */
            *safe = i;
            return 0;
        }
        if (text[eol] == '\n')
            return eol + 1;
    }
    return 0;
}

/* Appends x to a growing array of uint64. */
static bool push(uint64_t **a, size_t *n, size_t *cap, uint64_t x)
{
    if (*n == *cap) {
        const size_t grown = *cap ? 2 * *cap : 64;
        uint64_t *p = realloc(*a, grown * sizeof *p);
        if (!p)
            return false;
        *a = p;
        *cap = grown;
    }
    (*a)[(*n)++] = x;
    return true;
}

hl_status hl_docs_encode(const hl_vocab *v, const unsigned char *text, size_t size,
                         int32_t **tokens, size_t *n, uint64_t **starts, size_t *n_docs,
                         hl_error *err)
{
    *tokens = NULL, *starts = NULL, *n = 0, *n_docs = 0;
    size_t cap_tokens = 0, cap_docs = 0;
    for (size_t at = 0; at < size;) {
        size_t safe;
        const size_t end = hl_docs_form_feed_end(text + at, size - at, true, &safe);
        const size_t len = end ? end : size - at;
        int32_t *part;
        size_t got;
        if (hl_vocab_encode(v, text + at, len, &part, &got, err) != HL_OK)
            goto fail;
        if (*n + got > cap_tokens) {
            cap_tokens = 2 * (*n + got);
            int32_t *grown = realloc(*tokens, cap_tokens * sizeof *grown);
            if (!grown) {
                free(part);
                goto nomem;
            }
            *tokens = grown;
        }
        if (got && !push(starts, n_docs, &cap_docs, *n)) {
            free(part);
            goto nomem;
        }
        memcpy(*tokens + *n, part, got * sizeof *part);
        *n += got;
        free(part);
        at += len;
    }
    return HL_OK;
nomem:
    hl_error_set(err, HL_ERR_NOMEM, "documents: out of memory");
fail:
    free(*tokens);
    free(*starts);
    *tokens = NULL, *starts = NULL, *n = 0, *n_docs = 0;
    return err->status;
}

size_t hl_docs_window_starts(const uint64_t *starts, size_t n_docs, size_t size, size_t window)
{
    if (size < window)
        return 0;
    /* The starts ascend: the first one past size - window, by bisection. */
    size_t lo = 0, hi = n_docs;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (starts[mid] + window <= size)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

uint64_t hl_docs_window_coverage(const uint64_t *starts, size_t k, size_t size, size_t window)
{
    uint64_t covered = 0, end = 0; /* the union of [start, start + window) */
    for (size_t i = 0; i < k; i++) {
        const uint64_t from = starts[i] > end ? starts[i] : end;
        const uint64_t to = starts[i] + window < size ? starts[i] + window : size;
        covered += to > from ? to - from : 0;
        end = to > end ? to : end;
    }
    return covered;
}

size_t hl_docs_draw(size_t k, double u)
{
    const size_t i = (size_t)(u * (double)k);
    return i < k ? i : k - 1;
}

void hl_docs_ids(const uint64_t *starts, size_t n_docs, uint64_t at, int T, hl_real *ids)
{
    /* The first start after position at. */
    size_t lo = 0, hi = n_docs;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (starts[mid] <= at)
            lo = mid + 1;
        else
            hi = mid;
    }
    hl_real id = 0;
    for (int t = 0; t < T; t++) {
        if (lo < n_docs && starts[lo] == at + (uint64_t)t) {
            id += 1;
            lo++;
        }
        ids[t] = id;
    }
}
