/* Sequences of token ids as text: see data/token_ids.h. */
#include "data/token_ids.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* Appends id to (*ids)[0..*n), growing it; false when out of memory. */
static bool append(int32_t **ids, size_t *n, size_t *cap, int32_t id)
{
    if (*n == *cap) {
        const size_t grown_cap = *cap ? 2 * *cap : 1024;
        int32_t *grown = realloc(*ids, grown_cap * sizeof *grown);
        if (!grown)
            return false;
        *ids = grown;
        *cap = grown_cap;
    }
    (*ids)[(*n)++] = id;
    return true;
}

/* The ids of one line p[0..end) appended to *ids, their count in *count. */
static hl_status parse_line(const char *p, const char *end, const char *name, int line,
                            int vocab, int32_t **ids, size_t *n, size_t *cap, int *count,
                            hl_error *err)
{
    *count = 0;
    for (const char *q = p; q < end;) {
        while (q < end && is_blank(*q))
            q++;
        if (q == end)
            break;
        const char *stop = q;
        while (stop < end && !is_blank(*stop))
            stop++;
        /* Digits only, stopping at the first value past the vocabulary, so a
         * long word cannot overflow. */
        long id = 0;
        const char *d = q;
        for (; d < stop && *d >= '0' && *d <= '9' && id < vocab; d++)
            id = 10 * id + (*d - '0');
        if (d < stop || id >= vocab) {
            const int shown = stop - q > 40 ? 40 : (int)(stop - q);
            return hl_error_set(err, HL_ERR_FORMAT, "%s line %d: \"%.*s%s\" is not a token id "
                                "of 0..%d", name, line, shown, q, stop - q > 40 ? "..." : "",
                                vocab - 1);
        }
        if (!append(ids, n, cap, (int32_t)id))
            return hl_error_set(err, HL_ERR_NOMEM, "out of memory reading %s", name);
        ++*count;
        q = stop;
    }
    return HL_OK;
}

hl_status hl_token_ids_parse(const char *text, size_t n, const char *name, int vocab,
                             int32_t **ids, int *rows, int *cols, hl_error *err)
{
    *ids = NULL;
    *rows = *cols = 0;
    size_t count_all = 0, cap = 0;
    int width = -1, kept = 0;
    hl_status s = HL_OK;
    for (int line = 1; s == HL_OK && n > 0; line++) {
        const char *end = memchr(text, '\n', n);
        if (!end)
            end = text + n;
        int count;
        s = parse_line(text, end, name, line, vocab, ids, &count_all, &cap, &count, err);
        if (s == HL_OK && count && width >= 0 && count != width)
            s = hl_error_set(err, HL_ERR_FORMAT, "%s line %d has %d ids; the lines before have "
                             "%d (one length for every sequence)", name, line, count, width);
        if (s == HL_OK && count) {
            width = count;
            kept++;
        }
        const size_t used = (size_t)(end - text) + (end < text + n);
        text += used;
        n -= used;
    }
    if (s == HL_OK && width < 0)
        s = hl_error_set(err, HL_ERR_FORMAT, "%s holds no token ids", name);
    if (s != HL_OK) {
        free(*ids);
        *ids = NULL;
        return s;
    }
    *rows = kept;
    *cols = width;
    return HL_OK;
}
