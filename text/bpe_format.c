/* A BPE vocabulary as "headlab-bpe-1" and a merge a line, and back
 * (vocab.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/vocab_impl.h"

char *hl_bpe_format(const hl_vocab *v)
{
    const int n = v->size - HL_VOCAB_BYTES;
    /* Two ids of at most 7 digits (HL_VOCAB_MAX), a space and a newline. */
    char *s = malloc(sizeof HL_BPE_HEADER + 16 * (size_t)n), *at = s;
    if (!s)
        return NULL;
    at += sprintf(at, "%s", HL_BPE_HEADER);
    for (int i = 0; i < n; i++)
        at += sprintf(at, "\n%ld %ld", (long)v->merge[2 * i], (long)v->merge[2 * i + 1]);
    return s;
}

/* A token id of 1..7 digits at *p, moved past it; -1 when there is none. */
static long read_id(const char **p)
{
    long id = 0;
    int digits = 0;
    for (; **p >= '0' && **p <= '9' && digits < 8; (*p)++, digits++)
        id = 10 * id + (**p - '0');
    return digits >= 1 && digits <= 7 ? id : -1;
}

hl_vocab *hl_bpe_parse(const char *s, hl_error *err)
{
    const size_t header_len = strlen(HL_BPE_HEADER);
    size_t n = 0;
    for (const char *c = s + header_len; *c; c++)
        n += *c == '\n';
    if (n > HL_VOCAB_MAX - HL_VOCAB_BYTES) {
        hl_error_set(err, HL_ERR_FORMAT, "vocab: %zu merges; at most %d fit", n,
                     HL_VOCAB_MAX - HL_VOCAB_BYTES);
        return NULL;
    }
    int32_t *merges = malloc(sizeof *merges * (2 * n + 2));
    if (!merges) {
        hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory for %zu merges", n);
        return NULL;
    }
    const char *line = s + header_len;
    for (size_t i = 0; i < n; i++) {
        line++; /* past the newline */
        const char *p = line;
        const long left = read_id(&p);
        const long right = *p == ' ' ? (p++, read_id(&p)) : -1;
        if (left < 0 || right < 0 || (*p && *p != '\n')) {
            const char *end = strchr(line, '\n');
            const int len = end ? (int)(end - line) : (int)strlen(line);
            hl_error_set(err, HL_ERR_FORMAT,
                         "vocab line %zu: \"%.*s\" is not two token ids \"left right\"", i + 2,
                         len > 40 ? 40 : len, line);
            free(merges);
            return NULL;
        }
        merges[2 * i] = (int32_t)left;
        merges[2 * i + 1] = (int32_t)right;
        line = p;
    }
    hl_error local = {0};
    hl_vocab *v = hl_bpe_build(merges, (int)n, 2, &local);
    if (!v)
        hl_error_set(err, local.status == HL_ERR_NOMEM ? HL_ERR_NOMEM : HL_ERR_FORMAT, "%s",
                     local.message);
    free(merges);
    return v;
}
