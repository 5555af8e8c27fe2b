/*
 * internal.h: what io/'s files share and its tests check, not part of the
 * public API (not installed).
 */
#ifndef HL_IO_INTERNAL_H
#define HL_IO_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

/* True when s[0..n) is well-formed UTF-8, as the format requires of the
 * header (shared by the reader and the writer). */
bool hl_safetensors_utf8_valid(const char *s, size_t n);

/* Room for hl_io_json_parse's reason. */
#define HL_IO_JSON_WHY_MAX 64

/* The one JSON value of text[0..n) (need not be NUL-terminated) into *out
 * (cJSON_Delete it): HL_OK, or HL_ERR_FORMAT or HL_ERR_NOMEM with *out NULL
 * and the reason in why ("error near byte 7", "text after the value at byte
 * 40", "control byte 0x01 at byte 3"). cJSON alone accepts text after the
 * value and control bytes that JSON forbids; io/'s JSON files are read
 * through here so that none of them does. */
hl_status hl_io_json_parse(const char *text, size_t n, cJSON **out,
                           char why[HL_IO_JSON_WHY_MAX]);

#endif
