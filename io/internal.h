/*
 * internal.h: what io/'s files share and its tests check, not part of the
 * public API (not installed).
 */
#ifndef HL_IO_INTERNAL_H
#define HL_IO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "io/safetensors.h"

/* True when s[0..n) is well-formed UTF-8, as the format requires of the
 * header (shared by the reader and the writer). */
bool hl_safetensors_utf8_valid(const char *s, size_t n);

/* HL_OK when every value of e is finite as an hl_real (see
 * hl_safetensors_first_nonfinite); otherwise HL_ERR_FORMAT and "<what>:
 * tensor "<name>" holds NaN at element 12 (weights must be finite)" (no
 * "<what>: " when what is NULL). The model and checkpoint loaders check each
 * tensor before taking it: a model with a NaN weight would otherwise load,
 * and fail at its first loss or give NaN scores. */
hl_status hl_io_check_finite(const hl_safetensors_entry_info *e, const char *what,
                             hl_error *err);
/* HL_OK when f holds tensor name with t's shape (a scalar for a (1) tensor)
 * and finite values, so that copying it into t cannot fail; otherwise
 * HL_ERR_FORMAT or HL_ERR_SHAPE and a message after "<what>: " (nothing
 * before it when what is NULL). */
hl_status hl_io_check_tensor(const hl_safetensors *f, const char *what, const char *name,
                             const hl_tensor *t, hl_error *err);

#endif
