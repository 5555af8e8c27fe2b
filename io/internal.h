/*
 * internal.h: what io/'s files share and its tests check, not part of the
 * public API (not installed).
 */
#ifndef HL_IO_INTERNAL_H
#define HL_IO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

/* True when s[0..n) is well-formed UTF-8, as the format requires of the
 * header (shared by the reader and the writer). */
bool hl_safetensors_utf8_valid(const char *s, size_t n);

#endif
