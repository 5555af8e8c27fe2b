/* JSON read strictly: see json.h. */
#include "text/json.h"

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

/* JSON allows no control characters besides whitespace, even in strings;
 * cJSON is laxer (and skips them as whitespace after the value). */
static bool control_byte(const char *text, size_t n, char why[HL_JSON_WHY_MAX])
{
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)text[i];
        if (c == 0)
            snprintf(why, HL_JSON_WHY_MAX, "NUL byte at byte %zu, line %zu", i,
                     hl_lines_number(text, i));
        else if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
            snprintf(why, HL_JSON_WHY_MAX, "control byte 0x%02x at byte %zu, line %zu", c, i,
                     hl_lines_number(text, i));
        else
            continue;
        return true;
    }
    return false;
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
    if (stop == n && !(nul = string_with_nul(text, n, &len))) {
        *out = root;
        return HL_OK;
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
