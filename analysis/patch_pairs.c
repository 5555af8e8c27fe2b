/* A file of clean/corrupted pairs as one patching task: see patch_pairs.h. */
#include "analysis/patch_pairs.h"

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One pair as read, before the padding. */
typedef struct {
    int line, T;
    int32_t *tokens;   /* (2, T): clean, then corrupted */
    unsigned char *at; /* (T): 1 where the metric reads */
} pair;

/* What a line's parse needs to know and to name in its errors. */
typedef struct {
    const char *name;
    int line;
    const hl_vocab *vocab;
    const hl_gpt_config *cfg;
    hl_error *err;
} reader;

typedef struct {
    const char *s;
    size_t n;
} field;

static hl_status line_error(const reader *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static hl_status line_error(const reader *r, const char *fmt, ...)
{
    char what[HL_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return hl_error_set(r->err, HL_ERR_FORMAT, "%s line %d: %s", r->name, r->line, what);
}

static hl_status out_of_memory(const reader *r)
{
    return hl_error_set(r->err, HL_ERR_NOMEM, "%s: out of memory", r->name);
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The number of the digits at f.s[*i..] (at least one), *i moved past them;
 * saturated above INT_MAX, so it stays out of any range the caller checks. */
static long long digits(field f, size_t *i)
{
    long long v = 0;
    for (; *i < f.n && f.s[*i] >= '0' && f.s[*i] <= '9'; (*i)++)
        v = v > INT_MAX ? v : v * 10 + (f.s[*i] - '0');
    return v;
}

/* A text field's bytes with its escapes undone, into out (room for f.n). */
static hl_status unescape(const reader *r, const char *which, field f, unsigned char *out,
                          size_t *len)
{
    size_t k = 0;
    for (size_t i = 0; i < f.n; i++) {
        unsigned char b = (unsigned char)f.s[i];
        if (b < 0x20 || b == 0x7f)
            return line_error(r, "byte 0x%02x in the %s text must be escaped (\\xNN)", b, which);
        if (b == '\\') {
            const char e = i + 1 < f.n ? f.s[i + 1] : 0;
            int hi, lo;
            if (e == 't' || e == 'n' || e == '\\') {
                b = e == 't' ? '\t' : e == 'n' ? '\n' : '\\';
                i++;
            } else if (e == 'x' && i + 3 < f.n && (hi = hex_value(f.s[i + 2])) >= 0 &&
                       (lo = hex_value(f.s[i + 3])) >= 0) {
                b = (unsigned char)(hi * 16 + lo);
                i += 3;
            } else {
                return line_error(r, "a backslash in the %s text must begin \\t, \\n, \\\\ or "
                                  "\\xNN", which);
            }
        }
        out[k++] = b;
    }
    *len = k;
    return HL_OK;
}

/* A text field through the vocabulary, into *tokens (malloc'ed), *count. */
static hl_status text_tokens(const reader *r, const char *which, field f, int32_t **tokens,
                             size_t *count)
{
    unsigned char *bytes = malloc(f.n ? f.n : 1);
    size_t len = 0;
    if (!bytes)
        return out_of_memory(r);
    hl_status s = unescape(r, which, f, bytes, &len);
    if (s == HL_OK && len == 0)
        s = line_error(r, "the %s text is empty", which);
    hl_error local = {0};
    if (s == HL_OK && hl_vocab_encode(r->vocab, bytes, len, tokens, count, &local) != HL_OK)
        s = hl_error_set(r->err, local.status, "%s line %d: %s", r->name, r->line,
                         local.message);
    free(bytes);
    return s;
}

/* A field of token numbers separated by spaces or commas, into *tokens
 * (malloc'ed, at most n_ctx + 1 of them: one more says "too long"), *count. */
static hl_status number_tokens(const reader *r, const char *which, field f, int32_t **tokens,
                               size_t *count)
{
    const int V = r->cfg->vocab_in, max = r->cfg->n_ctx;
    int32_t *x = malloc(sizeof *x * ((size_t)max + 1));
    if (!x)
        return out_of_memory(r);
    size_t k = 0, i = 0;
    for (;;) {
        while (i < f.n && (f.s[i] == ' ' || f.s[i] == ','))
            i++;
        if (i == f.n || k > (size_t)max)
            break;
        if (f.s[i] < '0' || f.s[i] > '9') {
            free(x);
            return line_error(r, "the %s input is token numbers 0..%d separated by spaces, "
                              "not \"%.*s\"", which, V - 1, f.n > 60 ? 60 : (int)f.n, f.s);
        }
        const size_t first = i;
        const long long v = digits(f, &i);
        if (v >= V) {
            free(x);
            return line_error(r, "the %s input's token %.*s is not in the model's vocabulary "
                              "(0..%d)", which, (int)(i - first), f.s + first, V - 1);
        }
        x[k++] = (int32_t)v;
    }
    *tokens = x;
    *count = k;
    return HL_OK;
}

/* One input of a pair as tokens, each an input token of the model, 1..n_ctx
 * of them. */
static hl_status input_tokens(const reader *r, const char *which, field f, int32_t **tokens,
                              size_t *count)
{
    *tokens = NULL;
    hl_status s = r->vocab ? text_tokens(r, which, f, tokens, count)
                           : number_tokens(r, which, f, tokens, count);
    if (s != HL_OK)
        return s;
    if (*count == 0)
        return line_error(r, "the %s input is empty", which);
    if (*count > (size_t)r->cfg->n_ctx)
        return line_error(r, "the %s input is %s%zu tokens, longer than the model's context "
                          "of %d", which, r->vocab ? "" : "more than ", r->vocab ? *count
                          : (size_t)r->cfg->n_ctx, r->cfg->n_ctx);
    for (size_t i = 0; i < *count; i++)
        if ((*tokens)[i] < 0 || (*tokens)[i] >= r->cfg->vocab_in)
            return line_error(r, "the %s input's token %d is not in the model's vocabulary "
                              "(0..%d)", which, (int)(*tokens)[i], r->cfg->vocab_in - 1);
    return HL_OK;
}

/* "3,7" -> at[3] = at[7] = 1, each in 0..T-2; empty: the last, T-2. */
static hl_status parse_positions(const reader *r, field f, int T, unsigned char *at)
{
    if (f.n == 0) {
        at[T - 2] = 1;
        return HL_OK;
    }
    for (size_t i = 0; i < f.n;) {
        const size_t first = i;
        const long long v = digits(f, &i);
        const bool comma = i < f.n && f.s[i] == ',';
        if (i == first || (i < f.n && !comma) || (comma && i + 1 == f.n))
            return line_error(r, "positions are numbers separated by commas, not \"%.*s\"",
                              f.n > 60 ? 60 : (int)f.n, f.s);
        if (v > T - 2)
            return line_error(r, "position %.*s is out of range: the pair has %d tokens, so "
                              "positions 0..%d have a next one to read", (int)(i - first),
                              f.s + first, T, T - 2);
        at[v] = 1;
        i += comma;
    }
    return HL_OK;
}

/* One line's fields (1..3 of them) into *p. */
static hl_status parse_pair(const reader *r, const field *fields, int n_fields,
                            hl_patch_metric metric, pair *p)
{
    *p = (pair){.line = r->line};
    int32_t *clean = NULL, *corrupt = NULL;
    size_t n_clean = 0, n_corrupt = 0;
    hl_status s = HL_OK;
    if (n_fields < 2)
        s = line_error(r, "one field; a pair is clean<TAB>corrupt[<TAB>positions]");
    if (s == HL_OK)
        s = input_tokens(r, "clean", fields[0], &clean, &n_clean);
    if (s == HL_OK)
        s = input_tokens(r, "corrupted", fields[1], &corrupt, &n_corrupt);
    if (s == HL_OK && n_clean != n_corrupt)
        s = line_error(r, "the clean input has %zu tokens and the corrupted %zu: the two "
                       "inputs of a pair need one length", n_clean, n_corrupt);
    if (s == HL_OK && n_clean < 2)
        s = line_error(r, "the inputs have 1 token; they need 2 or more (a position and the "
                       "token after it)");
    const int T = (int)n_clean;
    if (s == HL_OK) {
        p->T = T;
        p->tokens = malloc(sizeof *p->tokens * 2 * (size_t)T);
        p->at = calloc((size_t)T, 1);
        if (!p->tokens || !p->at)
            s = out_of_memory(r);
    }
    if (s == HL_OK) {
        memcpy(p->tokens, clean, sizeof *clean * (size_t)T);
        memcpy(p->tokens + T, corrupt, sizeof *corrupt * (size_t)T);
        s = parse_positions(r, n_fields > 2 ? fields[2] : (field){"", 0}, T, p->at);
    }
    const int V = r->cfg->vocab_out;
    for (int t = 0; s == HL_OK && t < T - 1; t++) {
        if (!p->at[t])
            continue;
        const int32_t a = clean[t + 1], w = corrupt[t + 1];
        if (a >= V || w >= V)
            s = line_error(r, "position %d: token %d is not an output token (vocab_out %d)", t,
                           a >= V ? a : w, V);
        else if (metric == HL_METRIC_LOGIT_DIFF && a == w)
            s = line_error(r, "position %d: both inputs continue with token %d, so the logit "
                           "difference there is 0 by construction", t, a);
    }
    free(clean);
    free(corrupt);
    if (s != HL_OK) {
        free(p->tokens);
        free(p->at);
        *p = (pair){0};
    }
    return s;
}

/* The pairs padded to the longest, as one task, into *out. */
static hl_status assemble(const reader *r, const pair *pairs, int n, hl_patch_metric metric,
                          hl_patch_pairs *out)
{
    int T = 0;
    for (int i = 0; i < n; i++)
        T = pairs[i].T > T ? pairs[i].T : T;
    const size_t NT = (size_t)n * T;
    int32_t *x = malloc(sizeof *x * 4 * NT + sizeof(int) * 3 * (size_t)n);
    if (!x)
        return out_of_memory(r);
    int32_t *clean = x, *corrupt = x + NT, *answer = x + 2 * NT, *wrong = x + 3 * NT;
    int *line = (int *)(x + 4 * NT), *length = line + n, *scored = length + n;
    for (int i = 0; i < n; i++) {
        const pair *p = &pairs[i];
        const int32_t *pc = p->tokens, *px = p->tokens + p->T;
        line[i] = p->line;
        length[i] = p->T;
        scored[i] = 0;
        for (int t = 0; t < T; t++) {
            /* Padding repeats the last token: any input token would do, as no
             * earlier position sees it and it is never scored. */
            const int u = t < p->T ? t : p->T - 1;
            const bool at = t < p->T - 1 && p->at[t];
            clean[(size_t)i * T + t] = pc[u];
            corrupt[(size_t)i * T + t] = px[u];
            answer[(size_t)i * T + t] = at ? pc[t + 1] : -1;
            wrong[(size_t)i * T + t] = at ? px[t + 1] : -1;
            scored[i] += at;
        }
    }
    *out = (hl_patch_pairs){
        .task = {.B = n, .T = T, .clean = clean, .corrupt = corrupt, .answer = answer,
                 .wrong = wrong, .metric = metric},
        .n = n, .line = line, .length = length, .scored = scored, .buf = x};
    return HL_OK;
}

/* Splits a line at its tabs; the count of fields, or 4 for "more than 3". */
static int split_fields(const char *s, size_t n, field *fields)
{
    int k = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++)
        if (i == n || s[i] == '\t') {
            if (k == 3)
                return 4;
            fields[k++] = (field){s + start, i - start};
            start = i + 1;
        }
    return k;
}

hl_status hl_patch_pairs_parse(const char *text, size_t n, const char *name,
                               const hl_vocab *vocab, const hl_gpt_config *cfg,
                               hl_patch_metric metric, hl_patch_pairs *out, hl_error *err)
{
    *out = (hl_patch_pairs){0};
    reader r = {.name = name ? name : "pairs", .vocab = vocab, .cfg = cfg, .err = err};
    if (!cfg || cfg->n_ctx < 2 || cfg->vocab_in < 1 || cfg->vocab_out < 1 || (!text && n))
        return hl_error_set(err, HL_ERR_ARG, "%s: patching pairs need text and a model of "
                            "context 2 or more", r.name);
    pair *pairs = NULL;
    int count = 0, cap = 0;
    hl_status s = HL_OK;
    for (size_t start = 0; s == HL_OK && start < n;) {
        const char *nl = memchr(text + start, '\n', n - start);
        size_t len = nl ? (size_t)(nl - (text + start)) : n - start;
        const char *line = text + start;
        start += len + 1;
        if (r.line == INT_MAX) {
            s = hl_error_set(err, HL_ERR_FORMAT, "%s: more than %d lines", r.name, INT_MAX - 1);
            break;
        }
        r.line++;
        if (len > HL_PATCH_PAIRS_LINE_MAX) {
            s = line_error(&r, "longer than %d bytes", HL_PATCH_PAIRS_LINE_MAX);
            break;
        }
        if (len && line[len - 1] == '\r')
            len--;
        if (len == 0 || line[0] == '#')
            continue;
        field fields[3];
        const int n_fields = split_fields(line, len, fields);
        if (n_fields > 3) {
            s = line_error(&r, "more than 3 fields; a pair is clean<TAB>corrupt[<TAB>positions] "
                           "(a tab inside a text is written \\t)");
            break;
        }
        if (count == HL_PATCH_PAIRS_MAX) {
            s = line_error(&r, "more than %d pairs in one file", HL_PATCH_PAIRS_MAX);
            break;
        }
        if (count == cap) {
            cap = cap ? 2 * cap : 16;
            pair *grown = realloc(pairs, sizeof *pairs * (size_t)cap);
            if (!grown) {
                s = out_of_memory(&r);
                break;
            }
            pairs = grown;
        }
        s = parse_pair(&r, fields, n_fields, metric, &pairs[count]);
        count += s == HL_OK;
    }
    if (s == HL_OK && count == 0)
        s = hl_error_set(err, HL_ERR_FORMAT, "%s: no pairs (a pair is a line "
                         "clean<TAB>corrupt[<TAB>positions]; empty lines and lines starting "
                         "with # are skipped)", r.name);
    if (s == HL_OK)
        s = assemble(&r, pairs, count, metric, out);
    for (int i = 0; i < count; i++) {
        free(pairs[i].tokens);
        free(pairs[i].at);
    }
    free(pairs);
    return s;
}

void hl_patch_pairs_free(hl_patch_pairs *p)
{
    free(p->buf);
    *p = (hl_patch_pairs){0};
}
