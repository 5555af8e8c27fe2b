/* A pretrained vocabulary as one printable string and back (vocab.h), so a
 * token file or a model file holds it whole, with no need of the folder it
 * was imported from:
 *
 *     headlab-pretrained-1
 *     pattern REGEX
 *     ignore_merges 0|1
 *     normalizer NFC   only for a tokenizer that normalizes (a reader that
 *                      does not know the line refuses it)
 *     template ITEMS   only for a tokenizer whose post-processor adds tokens:
 *                      their ids in order, "A" where the input goes
 *                      ("template 128000 A")
 *     tokens N
 *     t PIECE        N lines, token 0 first; "a PIECE" for an added token
 *     merges M
 *     LEFT RIGHT     M lines, rank 0 first
 *
 * REGEX and each PIECE (raw bytes) are escaped as the words form does:
 * \\, \n and \xNN for the bytes outside 0x20..0x7e. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/pretrained_impl.h"

char *hl_pretrained_format(const hl_vocab *v, bool with_template)
{
    const struct hl_pretrained *p = v->pretrained;
    const size_t pattern_len = strlen(p->pattern);
    /* Every byte escaped at worst; ids of at most 7 digits (HL_VOCAB_MAX). */
    const size_t room = 256 + 4 * pattern_len + 4 * v->offset[v->size] + 3 * (size_t)v->size +
                        16 * (size_t)p->n_merges;
    char *s = malloc(room), *at = s;
    if (!s)
        return NULL;
    at += sprintf(at, "%s\npattern ", HL_PRETRAINED_HEADER);
    at = hl_vocab_escape(at, (const unsigned char *)p->pattern, pattern_len);
    at += sprintf(at, "\nignore_merges %d%s", p->ignore_merges ? 1 : 0,
                  p->nfc ? "\nnormalizer NFC" : "");
    const hl_pretrained_template *tp = &p->template;
    if (tp->n && with_template) {
        at += sprintf(at, "\ntemplate");
        for (int i = 0; i <= tp->n; i++) {
            if (i == tp->before)
                at += sprintf(at, " A");
            if (i < tp->n)
                at += sprintf(at, " %ld", (long)tp->ids[i]);
        }
    }
    at += sprintf(at, "\ntokens %d", v->size);
    bool *added = calloc((size_t)v->size, sizeof *added);
    if (!added) {
        free(s);
        return NULL;
    }
    for (int k = 0; k < p->n_added; k++)
        added[p->added[k]] = true;
    for (int t = 0; t < v->size; t++) {
        at += sprintf(at, "\n%c ", added[t] ? 'a' : 't');
        at = hl_vocab_escape(at, v->bytes + v->offset[t], v->offset[t + 1] - v->offset[t]);
    }
    free(added);
    at += sprintf(at, "\nmerges %d", p->n_merges);
    for (int r = 0; r < p->n_merges; r++)
        at += sprintf(at, "\n%ld %ld", (long)p->merge[2 * r], (long)p->merge[2 * r + 1]);
    return s;
}

/* ---- parsing ---- */

typedef struct {
    const char *at; /* the next line */
    int line;       /* its number, from 1 */
    hl_error *err;
} reader;

/* The next line (without its newline) into *start, *len; false at the end. */
static bool next_line(reader *r, const char **start, size_t *len)
{
    if (!r->at)
        return false;
    const char *end = strchr(r->at, '\n');
    *start = r->at;
    *len = end ? (size_t)(end - r->at) : strlen(r->at);
    r->at = end ? end + 1 : NULL;
    r->line++;
    return true;
}

/* A line "KEY VALUE": its value's start and length; false (with the reason)
 * when the line is missing or has another key. */
static bool keyed_line(reader *r, const char *key, const char **value, size_t *len)
{
    const char *line;
    size_t line_len;
    const size_t key_len = strlen(key);
    if (!next_line(r, &line, &line_len) || line_len <= key_len ||
        strncmp(line, key, key_len) != 0 || line[key_len] != ' ') {
        hl_error_set(r->err, HL_ERR_FORMAT, "vocab line %d: expected \"%s ...\"", r->line, key);
        return false;
    }
    *value = line + key_len + 1;
    *len = line_len - key_len - 1;
    return true;
}

/* A count of 0..max after key; -1 (with the reason) otherwise. */
static long keyed_count(reader *r, const char *key, long max)
{
    const char *value;
    size_t len;
    if (!keyed_line(r, key, &value, &len))
        return -1;
    long n = 0;
    for (size_t i = 0; i < len && n <= max; i++) {
        if (value[i] < '0' || value[i] > '9')
            n = max + 1;
        else
            n = 10 * n + (value[i] - '0');
    }
    if (n > max) {
        hl_error_set(r->err, HL_ERR_FORMAT, "vocab line %d: \"%s\" needs a count of 0..%ld",
                     r->line, key, max);
        return -1;
    }
    return n;
}

/* The tokens and merges lines into spec. */
static bool parse_body(reader *r, hl_pretrained_spec *spec, unsigned char *scratch)
{
    const long n_tokens = keyed_count(r, "tokens", HL_VOCAB_MAX);
    if (n_tokens < 0)
        return false;
    for (long t = 0; t < n_tokens; t++) {
        const char *line;
        size_t len;
        if (!next_line(r, &line, &len) || len < 2 || (line[0] != 't' && line[0] != 'a') ||
            line[1] != ' ') {
            hl_error_set(r->err, HL_ERR_FORMAT, "vocab line %d: expected token %ld as \"t "
                         "PIECE\" or \"a PIECE\"", r->line, t);
            return false;
        }
        const long piece_len =
            hl_vocab_unescape(line + 2, len - 2, SIZE_MAX, r->line, scratch, r->err);
        if (piece_len < 0)
            return false;
        if (!hl_pretrained_spec_set(spec, (int32_t)t, scratch, (size_t)piece_len)) {
            hl_error_set(r->err, HL_ERR_NOMEM, "vocab: out of memory");
            return false;
        }
        spec->added[t] = line[0] == 'a';
    }
    const long n_merges = keyed_count(r, "merges", HL_VOCAB_MAX);
    if (n_merges < 0)
        return false;
    spec->merges = malloc(sizeof *spec->merges * (2 * (size_t)n_merges + 2));
    if (!spec->merges) {
        hl_error_set(r->err, HL_ERR_NOMEM, "vocab: out of memory");
        return false;
    }
    for (long i = 0; i < n_merges; i++) {
        const char *line;
        size_t len;
        long left = -1, right = -1;
        int used = 0;
        if (!next_line(r, &line, &len) || len > 20 ||
            sscanf(line, "%7ld %7ld%n", &left, &right, &used) != 2 || (size_t)used != len ||
            left < 0 || right < 0) {
            hl_error_set(r->err, HL_ERR_FORMAT, "vocab line %d: expected merge %ld as two "
                         "token ids \"left right\"", r->line, i);
            return false;
        }
        spec->merges[2 * i] = (int32_t)left;
        spec->merges[2 * i + 1] = (int32_t)right;
        spec->n_merges++;
    }
    if (r->at) {
        hl_error_set(r->err, HL_ERR_FORMAT, "vocab line %d: more lines than the %ld merges",
                     r->line + 1, n_merges);
        return false;
    }
    return true;
}

/* The "template" line: up to HL_PRETRAINED_TEMPLATE_MAX ids of 1..7 digits
 * and "A" once, one space apart. */
static bool parse_template(reader *r, hl_pretrained_template *t)
{
    const char *value;
    size_t len;
    if (!keyed_line(r, "template", &value, &len))
        return false;
    *t = (hl_pretrained_template){.before = -1};
    const char *end = value + len;
    for (const char *at = value; at <= end;) {
        const char *stop = memchr(at, ' ', (size_t)(end - at));
        stop = stop ? stop : end;
        const size_t n = (size_t)(stop - at);
        if (n == 1 && *at == 'A' && t->before < 0) {
            t->before = t->n;
        } else {
            size_t k = 0;
            long id = 0;
            while (k < n && k < 7 && at[k] >= '0' && at[k] <= '9')
                id = 10 * id + (at[k++] - '0');
            if (n == 0 || k != n || t->n == HL_PRETRAINED_TEMPLATE_MAX)
                break;
            t->ids[t->n++] = (int32_t)id;
        }
        at = stop + 1;
        if (stop == end) {
            if (t->before >= 0)
                return true;
            break;
        }
    }
    hl_error_set(r->err, HL_ERR_FORMAT, "vocab line %d: a template is at most %d token ids and "
                 "A once, one space apart", r->line, HL_PRETRAINED_TEMPLATE_MAX);
    return false;
}

hl_vocab *hl_pretrained_parse(const char *s, hl_error *err)
{
    reader r = {.at = s, .err = err};
    hl_pretrained_spec spec = {.vocab_at = "vocab", .merges_at = "vocab", .pattern_at = "vocab"};
    const char *line, *pattern;
    size_t len, pattern_len, flag_len;
    const char *flag;
    hl_vocab *v = NULL;
    /* Unescaped, a line is never longer than it was. */
    unsigned char *scratch = malloc(strlen(s) + 1);
    if (!scratch) {
        hl_error_set(err, HL_ERR_NOMEM, "vocab: out of memory");
        return NULL;
    }
    next_line(&r, &line, &len); /* the header, checked by hl_vocab_parse */
    if (!keyed_line(&r, "pattern", &pattern, &pattern_len))
        goto done;
    const long n = hl_vocab_unescape(pattern, pattern_len, SIZE_MAX, r.line, scratch, err);
    if (n < 0)
        goto done;
    if (memchr(scratch, 0, (size_t)n) || !(spec.pattern = malloc((size_t)n + 1))) {
        hl_error_set(err, memchr(scratch, 0, (size_t)n) ? HL_ERR_FORMAT : HL_ERR_NOMEM,
                     "vocab line %d: a NUL byte in the pattern, or out of memory", r.line);
        goto done;
    }
    memcpy(spec.pattern, scratch, (size_t)n);
    spec.pattern[n] = 0;
    if (!keyed_line(&r, "ignore_merges", &flag, &flag_len))
        goto done;
    if (flag_len != 1 || (flag[0] != '0' && flag[0] != '1')) {
        hl_error_set(err, HL_ERR_FORMAT, "vocab line %d: ignore_merges is 0 or 1", r.line);
        goto done;
    }
    spec.ignore_merges = flag[0] == '1';
    if (r.at && !strncmp(r.at, "normalizer ", 11)) {
        if (!keyed_line(&r, "normalizer", &flag, &flag_len))
            goto done;
        if (flag_len != 3 || strncmp(flag, "NFC", 3)) {
            hl_error_set(err, HL_ERR_FORMAT, "vocab line %d: the normalizer is NFC", r.line);
            goto done;
        }
        spec.nfc = true;
    }
    if (r.at && !strncmp(r.at, "template ", 9) && !parse_template(&r, &spec.template))
        goto done;
    if (parse_body(&r, &spec, scratch))
        v = hl_pretrained_build(&spec, err);
done:
    free(scratch);
    hl_pretrained_spec_free(&spec);
    return v;
}
