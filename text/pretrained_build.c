/* A pretrained vocabulary from what an importer read, checked, and its
 * lookups (pretrained_impl.h). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/hash.h"
#include "text/pretrained_impl.h"

/* Llama 3's and Qwen2's Split regexes: with GPT-2's, the patterns whose
 * pre-tokens hl_vocab_cut's places are known not to cross (vocab_cut.c). */
static const char *const known_patterns[] = {
    HL_PRETRAINED_GPT2_PATTERN,
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

bool hl_pretrained_spec_reserve(hl_pretrained_spec *spec, int32_t id)
{
    if (id < 0 || id >= HL_VOCAB_MAX)
        return false; /* the importers check the range first */
    if (id >= spec->cap_ids) {
        int cap = spec->cap_ids ? spec->cap_ids : 1024;
        while (cap <= id)
            cap *= 2;
        size_t *start = realloc(spec->start, sizeof *start * (size_t)cap);
        if (start)
            spec->start = start;
        size_t *len = realloc(spec->len, sizeof *len * (size_t)cap);
        if (len)
            spec->len = len;
        bool *present = realloc(spec->present, sizeof *present * (size_t)cap);
        if (present)
            spec->present = present;
        bool *added = realloc(spec->added, sizeof *added * (size_t)cap);
        if (added)
            spec->added = added;
        if (!start || !len || !present || !added)
            return false;
        for (int t = spec->cap_ids; t < cap; t++) {
            start[t] = len[t] = 0;
            present[t] = added[t] = false;
        }
        spec->cap_ids = cap;
    }
    if (id >= spec->size)
        spec->size = id + 1;
    return true;
}

bool hl_pretrained_spec_set(hl_pretrained_spec *spec, int32_t id, const unsigned char *bytes,
                            size_t len)
{
    if (!hl_pretrained_spec_reserve(spec, id))
        return false;
    if (spec->n_bytes + len > spec->cap_bytes) {
        size_t cap = spec->cap_bytes ? spec->cap_bytes : 1 << 16;
        while (cap < spec->n_bytes + len)
            cap *= 2;
        unsigned char *grown = realloc(spec->bytes, cap);
        if (!grown)
            return false;
        spec->bytes = grown;
        spec->cap_bytes = cap;
    }
    if (len) /* an empty token may come before any bytes, with spec->bytes still NULL */
        memcpy(spec->bytes + spec->n_bytes, bytes, len);
    spec->start[id] = spec->n_bytes;
    spec->len[id] = len;
    spec->present[id] = true;
    spec->n_bytes += len;
    return true;
}

void hl_pretrained_spec_free(hl_pretrained_spec *spec)
{
    free(spec->bytes);
    free(spec->start);
    free(spec->len);
    free(spec->present);
    free(spec->added);
    free(spec->merges);
    free(spec->pattern);
    *spec = (hl_pretrained_spec){0};
}

void hl_pretrained_free(struct hl_pretrained *p)
{
    if (!p)
        return;
    pcre2_code_free(p->code);
    free(p->pattern);
    free(p->merge);
    free(p->merge_token);
    free(p->pair_slot);
    free(p->piece_slot);
    free(p->added);
    free(p);
}

/* ---- the lookups ---- */

static size_t pair_hash(int32_t left, int32_t right)
{
    const uint64_t h = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) * 0x9e3779b97f4a7c15u;
    return (size_t)(h >> 17);
}

/* The slot of the rank merging left and right, or the empty one where it goes. */
static size_t find_pair(const struct hl_pretrained *p, int32_t left, int32_t right)
{
    size_t i = pair_hash(left, right) & (p->n_pair_slots - 1);
    for (;; i = (i + 1) & (p->n_pair_slots - 1)) {
        const int32_t r = p->pair_slot[i];
        if (r < 0 || (p->merge[2 * r] == left && p->merge[2 * r + 1] == right))
            return i;
    }
}

int32_t hl_pretrained_pair_rank(const struct hl_pretrained *p, int32_t left, int32_t right)
{
    return p->pair_slot[find_pair(p, left, right)];
}

/* The slot of the token with these bytes, or the empty one where it goes. */
static size_t find_piece(const hl_vocab *v, const unsigned char *s, size_t len)
{
    const struct hl_pretrained *p = v->pretrained;
    size_t i = (size_t)hl_text_hash(s, len) & (p->n_piece_slots - 1);
    for (;; i = (i + 1) & (p->n_piece_slots - 1)) {
        const int32_t t = p->piece_slot[i];
        if (t < 0)
            return i;
        const size_t at = v->offset[t];
        if (v->offset[t + 1] - at == len && memcmp(v->bytes + at, s, len) == 0)
            return i;
    }
}

int32_t hl_pretrained_piece_token(const hl_vocab *v, const unsigned char *s, size_t len)
{
    return v->pretrained->piece_slot[find_piece(v, s, len)];
}

bool hl_pretrained_merge(const hl_vocab *v, int32_t token, int32_t *left, int32_t *right)
{
    const struct hl_pretrained *p = v->pretrained;
    for (int r = 0; r < p->n_merges; r++)
        if (p->merge_token[r] == token) {
            *left = p->merge[2 * r];
            *right = p->merge[2 * r + 1];
            return true;
        }
    return false;
}

/* ---- building ---- */

static size_t table_size(size_t n)
{
    size_t slots = 1;
    while (slots < 2 * n + 2)
        slots *= 2;
    return slots;
}

/* An added token and its length, to sort them longest first (ties by id), the
 * order the matcher tries them in. */
typedef struct {
    size_t len;
    int32_t id;
} added_entry;

static int longer_first(const void *a, const void *b)
{
    const added_entry *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Unicode's White_Space, what \s means to the regex engines of Hugging Face's
 * tokenizers (Oniguruma) and tiktoken (Rust's regex). PCRE2 10.42's \s with
 * Unicode properties also takes U+180E (MONGOLIAN VOWEL SEPARATOR, a format
 * character since Unicode 6.3), which split " \u180E" where they keep it. */
#define WHITE_SPACE "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}" \
                    "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

/* pattern with \s spelt as WHITE_SPACE (in a class, its members) and \S
 * outside a class as its complement (malloc'd; NULL when out of memory). A
 * \S inside a class is left to PCRE2: no tokenizer's regex has one. POSIX
 * classes ([:alpha:]) in a class and \Q...\E quoting are stepped over. */
static char *spell_white_space(const char *pattern)
{
    const size_t n = strlen(pattern), ws = strlen(WHITE_SPACE);
    char *out = malloc(n / 2 * (ws + 3) + n + 1), *at = out; /* each \s at worst */
    if (!out)
        return NULL;
    bool in_class = false;
    for (size_t i = 0; i < n; i++) {
        const char c = pattern[i];
        if (c == '\\' && pattern[i + 1] == 'Q') { /* quoted to \E (or the end) as it is */
            const char *end = strstr(pattern + i + 2, "\\E");
            const size_t len = end ? (size_t)(end - pattern) + 2 - i : n - i;
            memcpy(at, pattern + i, len);
            at += len;
            i += len - 1;
            continue;
        }
        if (c == '[' && in_class && pattern[i + 1] == ':') { /* a POSIX class, whole */
            const char *end = strstr(pattern + i + 2, ":]");
            const size_t len = end ? (size_t)(end - pattern) + 2 - i : 1;
            memcpy(at, pattern + i, len);
            at += len;
            i += len - 1;
            continue;
        }
        if (c == '\\' && i + 1 < n) {
            const char e = pattern[++i];
            if (e == 's' || (e == 'S' && !in_class))
                at += sprintf(at, in_class ? "%s" : e == 's' ? "[%s]" : "[^%s]", WHITE_SPACE);
            else
                at += sprintf(at, "\\%c", e);
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = true;
            *at++ = c;
            if (pattern[i + 1] == '^') /* a ] first in a class is a member */
                *at++ = pattern[++i];
            if (pattern[i + 1] == ']')
                *at++ = pattern[++i];
            continue;
        }
        if (c == ']' && in_class)
            in_class = false;
        *at++ = c;
    }
    *at = 0;
    return out;
}

static hl_status compile_pattern(struct hl_pretrained *p, const char *pattern, const char *at,
                                 hl_error *err)
{
    int code;
    PCRE2_SIZE offset;
    /* PCRE2_MATCH_INVALID_UTF: bytes that are not UTF-8 match nothing, so they
     * fall between the matches, into pre-tokens of their own (vocab.h). The
     * pattern as given is compiled first, for the offset of an error in it. */
    const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
    pcre2_code *given = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, options, &code,
                                      &offset, NULL);
    p->code = NULL;
    if (given) {
        /* A spelling that does not compile (a construct spell_white_space
         * does not follow) leaves PCRE2's own \s. */
        char *spelt = spell_white_space(pattern);
        if (!spelt) {
            pcre2_code_free(given);
            return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", at);
        }
        int spelt_code;
        p->code = pcre2_compile((PCRE2_SPTR)spelt, PCRE2_ZERO_TERMINATED, options, &spelt_code,
                                &offset, NULL);
        free(spelt);
        if (p->code)
            pcre2_code_free(given);
        else
            p->code = given;
    }
    if (!p->code) {
        PCRE2_UCHAR why[160];
        pcre2_get_error_message(code, why, sizeof why);
        return hl_error_set(err, HL_ERR_FORMAT, "%s: the regex does not compile at offset %zu: %s",
                            at, (size_t)offset, (const char *)why);
    }
    pcre2_jit_compile(p->code, PCRE2_JIT_COMPLETE); /* the interpreter when JIT is missing */
    p->pattern = strdup(pattern);
    if (!p->pattern)
        return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", at);
    for (size_t i = 0; i < sizeof known_patterns / sizeof known_patterns[0]; i++)
        p->known_pattern |= strcmp(pattern, known_patterns[i]) == 0;
    return HL_OK;
}

/* The pieces in id order into v, and their table. */
static hl_status build_pieces(hl_vocab *v, const hl_pretrained_spec *spec, hl_error *err)
{
    struct hl_pretrained *p = v->pretrained;
    v->offset = malloc(sizeof *v->offset * ((size_t)spec->size + 1));
    v->bytes = malloc(spec->n_bytes ? spec->n_bytes : 1);
    p->n_piece_slots = table_size((size_t)spec->size);
    p->piece_slot = malloc(sizeof *p->piece_slot * p->n_piece_slots);
    p->added = malloc(sizeof *p->added * (size_t)spec->size);
    if (!v->offset || !v->bytes || !p->piece_slot || !p->added)
        return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", spec->vocab_at);
    memset(p->piece_slot, 0xff, sizeof *p->piece_slot * p->n_piece_slots); /* every slot -1 */
    size_t at = 0;
    for (int t = 0; t < spec->size; t++) {
        if (!spec->present[t])
            return hl_error_set(err, HL_ERR_FORMAT, "%s: no token has id %d (the ids must run "
                                "0..%d without a gap)", spec->vocab_at, t, spec->size - 1);
        if (!spec->len[t])
            return hl_error_set(err, HL_ERR_FORMAT, "%s: token %d is empty", spec->vocab_at, t);
        v->offset[t] = at;
        memcpy(v->bytes + at, spec->bytes + spec->start[t], spec->len[t]);
        at += spec->len[t];
    }
    v->offset[spec->size] = at;
    for (int t = 0; t < spec->size; t++) {
        if (spec->added[t])
            p->added[p->n_added++] = t;
        /* Of two tokens with the same bytes (an added token that is also
         * a piece), the lower id is the one merges and lookups find. */
        const size_t s = find_piece(v, v->bytes + v->offset[t], v->offset[t + 1] - v->offset[t]);
        if (p->piece_slot[s] < 0)
            p->piece_slot[s] = t;
    }
    added_entry *order = malloc(sizeof *order * ((size_t)p->n_added + 1));
    if (!order)
        return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", spec->vocab_at);
    for (int i = 0; i < p->n_added; i++)
        order[i] = (added_entry){v->offset[p->added[i] + 1] - v->offset[p->added[i]], p->added[i]};
    qsort(order, (size_t)p->n_added, sizeof *order, longer_first);
    for (int i = 0; i < p->n_added; i++)
        p->added[i] = order[i].id;
    free(order);
    for (int b = 0; b < 256; b++) {
        const unsigned char byte = (unsigned char)b;
        if ((p->byte_token[b] = hl_pretrained_piece_token(v, &byte, 1)) < 0)
            return hl_error_set(err, HL_ERR_FORMAT, "%s: no token for the byte 0x%02x (a "
                                "byte-level vocabulary has all 256)", spec->vocab_at, b);
    }
    return HL_OK;
}

static hl_status build_merges(hl_vocab *v, const hl_pretrained_spec *spec, hl_error *err)
{
    struct hl_pretrained *p = v->pretrained;
    const int n = spec->n_merges;
    p->n_merges = n;
    p->n_pair_slots = table_size((size_t)n);
    p->merge = malloc(sizeof *p->merge * (2 * (size_t)n + 2));
    p->merge_token = malloc(sizeof *p->merge_token * ((size_t)n + 1));
    p->pair_slot = malloc(sizeof *p->pair_slot * p->n_pair_slots);
    /* A merge that makes a token makes at most the longest piece. */
    size_t longest = 0;
    for (int t = 0; t < v->size; t++)
        if (v->offset[t + 1] - v->offset[t] > longest)
            longest = v->offset[t + 1] - v->offset[t];
    unsigned char *joined = malloc(longest + 1);
    if (!p->merge || !p->merge_token || !p->pair_slot || !joined) {
        free(joined);
        return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", spec->merges_at);
    }
    memset(p->pair_slot, 0xff, sizeof *p->pair_slot * p->n_pair_slots); /* every slot -1 */
    hl_status st = HL_OK;
    for (int r = 0; r < n && st == HL_OK; r++) {
        const int32_t left = spec->merges[2 * r], right = spec->merges[2 * r + 1];
        if (left < 0 || left >= v->size || right < 0 || right >= v->size) {
            st = hl_error_set(err, HL_ERR_FORMAT, "%s: merge %d names token %ld, outside "
                              "0..%d", spec->merges_at, r, (long)(left < 0 || left >= v->size
                                                                    ? left : right),
                              v->size - 1);
            break;
        }
        size_t left_len, right_len;
        const unsigned char *a = hl_vocab_piece(v, left, &left_len);
        const unsigned char *b = hl_vocab_piece(v, right, &right_len);
        if (left_len + right_len > longest) {
            st = hl_error_set(err, HL_ERR_FORMAT, "%s: merge %d (tokens %ld and %ld) makes a "
                              "piece of %zu bytes, longer than any token", spec->merges_at, r,
                              (long)left, (long)right, left_len + right_len);
            break;
        }
        memcpy(joined, a, left_len);
        memcpy(joined + left_len, b, right_len);
        p->merge[2 * r] = left;
        p->merge[2 * r + 1] = right;
        p->merge_token[r] = hl_pretrained_piece_token(v, joined, left_len + right_len);
        const size_t s = find_pair(p, left, right);
        if (p->merge_token[r] < 0)
            st = hl_error_set(err, HL_ERR_FORMAT, "%s: merge %d (tokens %ld and %ld) makes "
                              "\"%.*s\", which is no token", spec->merges_at, r, (long)left,
                              (long)right, (int)(left_len + right_len > 40 ? 40
                                                                            : left_len + right_len),
                              (const char *)joined);
        else if (p->pair_slot[s] >= 0)
            st = hl_error_set(err, HL_ERR_FORMAT, "%s: merges %d and %d merge the same pair",
                              spec->merges_at, p->pair_slot[s], r);
        else
            p->pair_slot[s] = r;
    }
    free(joined);
    return st;
}

hl_vocab *hl_pretrained_build(const hl_pretrained_spec *spec, hl_error *err)
{
    if (spec->size < 1 || spec->size > HL_VOCAB_MAX) {
        hl_error_set(err, HL_ERR_FORMAT, "%s: %d tokens (1..%d)", spec->vocab_at, spec->size,
                     HL_VOCAB_MAX);
        return NULL;
    }
    if (spec->n_merges < 0 || spec->n_merges > HL_VOCAB_MAX) {
        hl_error_set(err, HL_ERR_FORMAT, "%s: %d merges (at most %d)", spec->merges_at,
                     spec->n_merges, HL_VOCAB_MAX);
        return NULL;
    }
    hl_vocab *v = calloc(1, sizeof *v);
    if (!v || !(v->pretrained = calloc(1, sizeof *v->pretrained))) {
        free(v);
        hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", spec->vocab_at);
        return NULL;
    }
    v->size = spec->size;
    v->pretrained->ignore_merges = spec->ignore_merges;
    v->pretrained->nfc = spec->nfc;
    const hl_pretrained_template *t = &spec->template;
    for (int i = 0; i < t->n; i++)
        if (t->ids[i] < 0 || t->ids[i] >= spec->size) {
            hl_error_set(err, HL_ERR_FORMAT, "%s: id %ld is not a token of 0..%d",
                         spec->template_at ? spec->template_at : spec->vocab_at,
                         (long)t->ids[i], spec->size - 1);
            hl_vocab_free(v);
            return NULL;
        }
    v->pretrained->template = *t;
    if (build_pieces(v, spec, err) != HL_OK || build_merges(v, spec, err) != HL_OK ||
        compile_pattern(v->pretrained, spec->pattern ? spec->pattern : "", spec->pattern_at,
                        err) != HL_OK) {
        hl_vocab_free(v);
        return NULL;
    }
    return v;
}
