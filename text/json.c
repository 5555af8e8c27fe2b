/* JSON read strictly: see json.h. */
#include "text/json.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/lines.h"

/* The first string of valid JSON text[0..n) that holds \u0000, its length in
 * the text (quotes included) in *len; NULL when none. An escaped backslash
 * before "u0000" is no NUL: each escape is stepped over whole. */
static const char *string_with_nul(const char *text, size_t n, size_t *len)
{
    const char *start = NULL;
    bool nul = false;
    for (size_t i = 0; i < n; i++) {
        if (!start) {
            if (text[i] == '"')
                start = text + i, nul = false;
        } else if (text[i] == '\\') {
            nul = nul || (i + 5 < n && !memcmp(text + i + 1, "u0000", 5));
            i++; /* the escaped character, which may be a quote */
        } else if (text[i] == '"') {
            if (nul) {
                *len = (size_t)(text + i + 1 - start);
                return start;
            }
            start = NULL;
        }
    }
    return NULL;
}

/* Whether text[i] is a byte JSON refuses there (the reason into why). */
static bool bad_byte(const char *text, size_t i, bool in_string, char why[HL_JSON_WHY_MAX])
{
    const unsigned char c = (unsigned char)text[i];
    if (c == 0)
        snprintf(why, HL_JSON_WHY_MAX, "NUL byte at byte %zu, line %zu", i,
                 hl_lines_number(text, i));
    else if (c < 0x20 && (in_string || (c != '\t' && c != '\n' && c != '\r')))
        snprintf(why, HL_JSON_WHY_MAX, "control byte 0x%02x at byte %zu, line %zu%s", c, i,
                 hl_lines_number(text, i), in_string ? ", in a string" : "");
    else
        return false;
    return true;
}

/* JSON allows no control characters but whitespace between values, and none
 * inside a string; cJSON is laxer (it keeps them in strings, and skips them
 * as whitespace after the value). */
static bool control_byte(const char *text, size_t n, char why[HL_JSON_WHY_MAX])
{
    bool in_string = false;
    for (size_t i = 0; i < n; i++) {
        if (bad_byte(text, i, in_string, why))
            return true;
        if (in_string && text[i] == '\\' && i + 1 < n) {
            i++; /* the escaped character, which may be a quote */
            if (bad_byte(text, i, true, why))
                return true;
        } else if (text[i] == '"') {
            in_string = !in_string;
        }
    }
    return false;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

/* What the tree must not hold that cJSON takes without a word: a key given
 * twice in one object (cJSON finds the first, Python's json and Hugging Face
 * keep the last) and a number past a double's range (1e999 reads as inf).
 * False with the reason in why; *nomem when out of memory. */
static bool tree_ok(const cJSON *node, char why[HL_JSON_WHY_MAX], bool *nomem)
{
    if (cJSON_IsNumber(node) && !isfinite(node->valuedouble)) {
        snprintf(why, HL_JSON_WHY_MAX, "a number past a double's range (%s)",
                 node->string ? node->string : "in an array");
        return false;
    }
    size_t count = 0;
    for (const cJSON *c = node->child; c; c = c->next)
        count++;
    if (cJSON_IsObject(node) && count > 1) {
        const cJSON **keys = malloc(count * sizeof *keys);
        if (!keys) {
            *nomem = true;
            snprintf(why, HL_JSON_WHY_MAX, "out of memory for an object of %zu keys", count);
            return false;
        }
        size_t k = 0;
        for (const cJSON *c = node->child; c; c = c->next)
            keys[k++] = c;
        qsort(keys, count, sizeof *keys, by_name);
        for (k = 1; k < count && strcmp(keys[k - 1]->string, keys[k]->string); k++)
            ;
        if (k < count)
            snprintf(why, HL_JSON_WHY_MAX, "the key \"%.60s\" is given twice in one object",
                     keys[k]->string);
        free(keys);
        if (k < count)
            return false;
    }
    for (const cJSON *c = node->child; c; c = c->next)
        if (!tree_ok(c, why, nomem))
            return false;
    return true;
}

hl_status hl_json_parse(const char *text, size_t n, cJSON **out, char why[HL_JSON_WHY_MAX])
{
    *out = NULL;
    if (control_byte(text, n, why))
        return HL_ERR_FORMAT;
    /* A copy ending in NUL: cJSON's number parsing may look one byte past. */
    char *copy = malloc(n + 1);
    if (!copy) {
        snprintf(why, HL_JSON_WHY_MAX, "out of memory for %zu bytes", n);
        return HL_ERR_NOMEM;
    }
    memcpy(copy, text, n);
    copy[n] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(copy, n, &end, false);
    size_t stop = end && end >= copy && end <= copy + n ? (size_t)(end - copy) : 0;
    if (root)
        while (stop < n && strchr(" \t\n\r", copy[stop]))
            stop++;
    free(copy);
    if (!root) {
        snprintf(why, HL_JSON_WHY_MAX, "error near byte %zu, line %zu", stop,
                 hl_lines_number(text, stop));
        return HL_ERR_FORMAT;
    }
    size_t len = 0;
    const char *nul = NULL;
    bool nomem = false;
    if (stop == n && !(nul = string_with_nul(text, n, &len))) {
        if (tree_ok(root, why, &nomem)) {
            *out = root;
            return HL_OK;
        }
        cJSON_Delete(root);
        return nomem ? HL_ERR_NOMEM : HL_ERR_FORMAT;
    }
    cJSON_Delete(root);
    if (stop < n)
        snprintf(why, HL_JSON_WHY_MAX, "text after the value at byte %zu, line %zu", stop,
                 hl_lines_number(text, stop));
    else
        snprintf(why, HL_JSON_WHY_MAX, "string %.*s%s holds \\u0000 (byte %zu, line %zu)",
                 len > 80 ? 80 : (int)len, nul, len > 80 ? "..." : "", (size_t)(nul - text),
                 hl_lines_number(text, (size_t)(nul - text)));
    return HL_ERR_FORMAT;
}
