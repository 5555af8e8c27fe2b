/*
 * json.h: JSON files read strictly, for the tokenizer readers here and io/'s
 * config, index and safetensors header (internal, not installed).
 *
 * cJSON alone is lax in ways that lose data without a word: it stops after
 * the first value (two files run together read as the first), skips control
 * bytes, keeps them raw in strings, keeps a NUL (a raw byte or "\u0000")
 * inside a string, where the C string then ends ("a\u0000b" reads as "a"),
 * keeps a key given twice in one object (its lookups find the first, where
 * Python's json and Hugging Face keep the last), and reads 1e999 as inf.
 * hl_json_parse refuses each.
 *
 *     char why[HL_JSON_WHY_MAX];
 *     cJSON *root;
 *     if (hl_json_parse(text, n, &root, why) != HL_OK) { ...why... }
 *     cJSON_Delete(root);
 */
#ifndef HL_TEXT_JSON_H
#define HL_TEXT_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "core/error.h"

/* Room for hl_json_parse's reason. */
#define HL_JSON_WHY_MAX 160

/* The one JSON value of text[0..n) (need not be NUL-terminated) into *out
 * (cJSON_Delete it): HL_OK, or HL_ERR_FORMAT or HL_ERR_NOMEM with *out NULL
 * and the reason in why, which says where: "error near byte 7, line 1", "text
 * after the value at byte 40, line 3", "control byte 0x01 at byte 3, line 1",
 * "NUL byte at byte 9, line 1", "string "a\u0000b" holds \u0000 (byte 1, line
 * 1)", "the key "a" is given twice in one object", "a number past a double's
 * range (rope_theta)". */
hl_status hl_json_parse(const char *text, size_t n, cJSON **out, char why[HL_JSON_WHY_MAX]);

#endif
