/* Importing a pretrained tokenizer from its folder (vocab.h): which files it
 * has, the vocab.json + merges.txt pair (encoder.json + vocab.bpe, the same
 * format), and the helpers the tokenizer.json reader shares. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "text/hash.h"
#include "text/json.h"
#include "text/lines.h"
#include "text/pretrained_impl.h"

char *hl_pretrained_read_file(const char *path, size_t *n, hl_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        hl_error_set(err, HL_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *s = malloc(cap);
    for (size_t got = 1; s && got;) {
        if (len + 1 == cap) {
            char *grown = realloc(s, 2 * cap);
            if (!grown) {
                free(s);
                s = NULL;
                break;
            }
            s = grown;
            cap *= 2;
        }
        len += got = fread(s + len, 1, cap - 1 - len, f);
    }
    const bool failed = ferror(f);
    fclose(f);
    if (!s || failed) {
        free(s);
        hl_error_set(err, failed ? HL_ERR_IO : HL_ERR_NOMEM, "%s: %s", path,
                     failed ? "cannot read" : "out of memory");
        return NULL;
    }
    s[len] = 0;
    *n = len;
    return s;
}

hl_status hl_pretrained_check_nul(const char *path, const char *text, size_t n, hl_error *err)
{
    const char *nul = memchr(text, 0, n);
    const size_t at = nul ? (size_t)(nul - text) : 0;
    if (nul)
        return hl_error_set(err, HL_ERR_FORMAT, "%s line %zu: a NUL byte (at byte %zu); a "
                            "tokenizer file is text", path, hl_lines_number(text, at), at);
    return HL_OK;
}

cJSON *hl_pretrained_parse_json(const char *path, const char *text, size_t n, hl_error *err)
{
    char why[HL_JSON_WHY_MAX];
    cJSON *json;
    const hl_status st = hl_json_parse(text, n, &json, why);
    if (st == HL_ERR_NOMEM)
        hl_error_set(err, st, "%s: %s", path, why);
    else if (st != HL_OK)
        hl_error_set(err, st, "%s: not valid JSON (%s)", path, why);
    return json;
}

/* ---- GPT-2's byte-to-unicode alphabet ---- */

/* The byte a character of the alphabet stands for, or -1. The printable
 * bytes ('!'..'~', 0xa1..0xac, 0xae..0xff) stand for themselves; the other
 * 68 (0x00..0x20, 0x7f..0xa0, 0xad), in order, are U+0100 onwards. */
static int alphabet_byte(unsigned long c)
{
    if ((c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff))
        return (int)c;
    if (c < 0x100 || c >= 0x100 + 68)
        return -1;
    const int k = (int)(c - 0x100);
    return k < 33 ? k : k < 67 ? 0x7f + (k - 33) : 0xad;
}

/* The character at s[*i] (UTF-8), moved past; -1 when not UTF-8. */
static long next_char(const unsigned char *s, size_t len, size_t *i)
{
    const unsigned char c = s[*i];
    const int extra = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2
                    : (c & 0xf8) == 0xf0 ? 3 : -1;
    if (extra < 0 || *i + (size_t)extra >= len)
        return -1;
    long cp = extra ? c & (0x3f >> extra) : c;
    for (int k = 1; k <= extra; k++) {
        if ((s[*i + (size_t)k] & 0xc0) != 0x80)
            return -1;
        cp = cp << 6 | (s[*i + (size_t)k] & 0x3f);
    }
    *i += 1 + (size_t)extra;
    return cp;
}

size_t hl_pretrained_decode_name(const char *name, size_t len, unsigned char *out)
{
    const unsigned char *s = (const unsigned char *)name;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        const long c = next_char(s, len, &i);
        const int b = c < 0 ? -1 : alphabet_byte((unsigned long)c);
        if (b < 0) { /* not in the alphabet: the name's own bytes */
            memcpy(out, name, len);
            return len;
        }
        out[n++] = (unsigned char)b;
    }
    return n;
}

/* ---- the pieces by name ---- */

struct hl_pretrained_names {
    const char **name;  /* (n_slots) the names, NULL for an empty slot */
    size_t *len;
    int32_t *id;
    size_t n_slots;     /* a power of two, at least twice the names */
};

static size_t find_name(const hl_pretrained_names *t, const char *name, size_t len)
{
    size_t i = (size_t)hl_text_hash((const unsigned char *)name, len) & (t->n_slots - 1);
    while (t->name[i] && (t->len[i] != len || memcmp(t->name[i], name, len) != 0))
        i = (i + 1) & (t->n_slots - 1);
    return i;
}

int32_t hl_pretrained_names_id(const hl_pretrained_names *t, const char *name, size_t len)
{
    const size_t i = find_name(t, name, len);
    return t->name[i] ? t->id[i] : -1;
}

void hl_pretrained_names_free(hl_pretrained_names *t)
{
    if (!t)
        return;
    free(t->name);
    free(t->len);
    free(t->id);
    free(t);
}

hl_pretrained_names *hl_pretrained_names_read(const void *object, hl_pretrained_spec *spec,
                                              const char *at, hl_error *err)
{
    const cJSON *vocab = object;
    if (!cJSON_IsObject(vocab)) {
        hl_error_set(err, HL_ERR_FORMAT, "%s: not a JSON object of pieces and their ids", at);
        return NULL;
    }
    const int count = cJSON_GetArraySize(vocab);
    hl_pretrained_names *t = calloc(1, sizeof *t);
    if (!t)
        goto nomem;
    t->n_slots = 1;
    while (t->n_slots < 2 * (size_t)count + 2)
        t->n_slots *= 2;
    t->name = calloc(t->n_slots, sizeof *t->name);
    t->len = malloc(sizeof *t->len * t->n_slots);
    t->id = malloc(sizeof *t->id * t->n_slots);
    if (!t->name || !t->len || !t->id)
        goto nomem;
    unsigned char *raw = NULL;
    size_t raw_cap = 0;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        const size_t len = strlen(e->string);
        const double id = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!(id >= 0 && id < HL_VOCAB_MAX && id == (double)(int32_t)id)) {
            hl_error_set(err, HL_ERR_FORMAT, "%s: \"%.40s\" has no id in 0..%d", at, e->string,
                         HL_VOCAB_MAX - 1);
            goto fail;
        }
        const int32_t token = (int32_t)id;
        if (token < spec->size && spec->present[token]) {
            hl_error_set(err, HL_ERR_FORMAT, "%s: id %ld is given twice (the second to "
                         "\"%.40s\")", at, (long)token, e->string);
            goto fail;
        }
        const size_t slot = find_name(t, e->string, len);
        if (t->name[slot]) { /* cJSON keeps both of a key given twice */
            hl_error_set(err, HL_ERR_FORMAT, "%s: \"%.40s\" is given twice", at, e->string);
            goto fail;
        }
        if (len > raw_cap) {
            unsigned char *grown = realloc(raw, len);
            if (!grown)
                goto nomem_raw;
            raw = grown;
            raw_cap = len;
        }
        t->name[slot] = e->string;
        t->len[slot] = len;
        t->id[slot] = token;
        if (!hl_pretrained_spec_set(spec, token, raw, hl_pretrained_decode_name(e->string, len,
                                                                                raw)))
            goto nomem_raw;
    }
    free(raw);
    return t;
nomem_raw:
    free(raw);
nomem:
    hl_pretrained_names_free(t);
    hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", at);
    return NULL;
fail:
    free(raw);
    hl_pretrained_names_free(t);
    return NULL;
}

/* ---- vocab.json + merges.txt ---- */

/* The merges of a merges.txt (after an optional "#version" line), by name,
 * into spec->merges. */
static hl_status read_merges(char *text, size_t n, const char *path,
                             const hl_pretrained_names *names, hl_pretrained_spec *spec,
                             hl_error *err)
{
    /* The lines are found with strchr and strlen, which would stop at a NUL
     * and drop every merge after it without a word. */
    if (hl_pretrained_check_nul(path, text, n, err) != HL_OK)
        return err->status;
    /* A file cut to nothing, which would tokenize byte by byte without a
     * word; a file of merges starts with its "#version" line at least. */
    if (strspn(text, " \t\r\n") == n)
        return hl_error_set(err, HL_ERR_FORMAT, "%s: empty (no \"#version\" line, no merges)",
                            path);
    size_t lines = 1;
    for (const char *c = text; *c; c++)
        lines += *c == '\n';
    if (!(spec->merges = malloc(sizeof *spec->merges * 2 * lines)))
        return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", path);
    char *line = text;
    for (size_t no = 1; line; no++) {
        char *end = strchr(line, '\n');
        if (end)
            *end = 0;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r')
            line[--len] = 0;
        if (len && !(no == 1 && strncmp(line, "#version", 8) == 0)) {
            char *space = strchr(line, ' ');
            const int32_t left = space ? hl_pretrained_names_id(names, line,
                                                                 (size_t)(space - line)) : -1;
            const int32_t right = space ? hl_pretrained_names_id(names, space + 1,
                                                                 strlen(space + 1)) : -1;
            if (!space || strchr(space + 1, ' '))
                return hl_error_set(err, HL_ERR_FORMAT, "%s line %zu: not two pieces \"a b\"",
                                    path, no);
            if (left < 0 || right < 0)
                return hl_error_set(err, HL_ERR_FORMAT, "%s line %zu: \"%.40s\" is not a piece "
                                    "of the vocabulary", path, no, left < 0 ? line : space + 1);
            spec->merges[2 * spec->n_merges] = left;
            spec->merges[2 * spec->n_merges + 1] = right;
            spec->n_merges++;
        }
        line = end ? end + 1 : NULL;
    }
    return HL_OK;
}

static hl_vocab *load_pair(const char *vocab_path, const char *merges_path, hl_error *err)
{
    hl_pretrained_spec spec = {.vocab_at = vocab_path, .merges_at = merges_path,
                               .pattern_at = "GPT-2's pattern"};
    hl_pretrained_names *names = NULL;
    hl_vocab *v = NULL;
    size_t n, merges_n;
    char *vocab_text = hl_pretrained_read_file(vocab_path, &n, err);
    char *merges_text = vocab_text ? hl_pretrained_read_file(merges_path, &merges_n, err) : NULL;
    cJSON *json = merges_text ? hl_pretrained_parse_json(vocab_path, vocab_text, n, err) : NULL;
    if (!json || !(names = hl_pretrained_names_read(json, &spec, vocab_path, err)) ||
        read_merges(merges_text, merges_n, merges_path, names, &spec, err) != HL_OK)
        goto done;
    if (!(spec.pattern = strdup(HL_PRETRAINED_GPT2_PATTERN))) {
        hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", vocab_path);
        goto done;
    }
    v = hl_pretrained_build(&spec, err);
done:
    hl_pretrained_names_free(names);
    cJSON_Delete(json);
    free(vocab_text);
    free(merges_text);
    hl_pretrained_spec_free(&spec);
    return v;
}

/* ---- the folder ---- */

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

hl_vocab *hl_vocab_load_pretrained(const char *dir, hl_error *err)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        hl_error_set(err, HL_ERR_IO, "%s: %s", dir, strerror(errno));
        return NULL;
    }
    char a[4096], b[4096];
    if (S_ISDIR(st.st_mode)) {
        snprintf(a, sizeof a, "%s/tokenizer.json", dir);
        if (!is_file(a)) {
            /* The two pairs, Hugging Face's names first; with one file of a
             * pair present, the other is the one missing. */
            static const char *const pairs[][2] = {{"vocab.json", "merges.txt"},
                                                   {"encoder.json", "vocab.bpe"}};
            for (int i = 0; i < 2; i++) {
                snprintf(a, sizeof a, "%s/%s", dir, pairs[i][0]);
                snprintf(b, sizeof b, "%s/%s", dir, pairs[i][1]);
                if (is_file(a) || is_file(b)) {
                    if (!is_file(a) || !is_file(b)) {
                        hl_error_set(err, HL_ERR_FORMAT, "%s: missing, needed with %s",
                                     is_file(a) ? b : a, is_file(a) ? a : b);
                        return NULL;
                    }
                    return load_pair(a, b, err);
                }
            }
            hl_error_set(err, HL_ERR_FORMAT, "%s: no tokenizer.json, vocab.json + merges.txt or "
                         "encoder.json + vocab.bpe", dir);
            return NULL;
        }
    } else {
        snprintf(a, sizeof a, "%s", dir);
    }
    size_t n;
    char *text = hl_pretrained_read_file(a, &n, err);
    if (!text)
        return NULL;
    hl_vocab *v = hl_pretrained_load_json(a, text, n, err);
    free(text);
    return v;
}
