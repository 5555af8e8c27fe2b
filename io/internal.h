/*
 * internal.h: what io/'s files share and its tests check, not part of the
 * public API (not installed).
 */
#ifndef HL_IO_INTERNAL_H
#define HL_IO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "core/params.h"
#include "io/safetensors.h"

/* True when s[0..n) is well-formed UTF-8, as the format requires of the
 * header (shared by the reader and the writer). */
bool hl_safetensors_utf8_valid(const char *s, size_t n);

/* Element i (< the number of values) of e, in row-major order, as a
 * double: exact for every dtype but I64 beyond 2^53. */
double hl_safetensors_value(const hl_safetensors_entry_info *e, size_t i);

/* What a loader accepts in a tensor's values, once converted to hl_real. */
typedef enum hl_io_values {
    HL_IO_FINITE,        /* weights, first moments, data: no NaN, no infinity
                            (in the float build no F64 beyond float's range) */
    HL_IO_SECOND_MOMENT, /* >= 0, no NaN: +inf is a state AdamW's second
                            moment reaches when a gradient's square overflows,
                            and a run resumes from it */
    HL_IO_ADDITIVE_MASK, /* no NaN, no +inf: -inf blocks */
} hl_io_values;

/* The index of e's first value the rule refuses; the number of values when
 * it refuses none. */
size_t hl_io_first_refused(const hl_safetensors_entry_info *e, hl_io_values rule);
/* HL_OK when the rule refuses none of e's values; otherwise HL_ERR_FORMAT and
 * "<what>: tensor "<name>" holds NaN at element 12 (values must be finite)"
 * (no "<what>: " when what is NULL). The model and checkpoint loaders check
 * each tensor before taking it: a model with a NaN weight would otherwise
 * load, and fail at its first loss or give NaN scores. */
hl_status hl_io_check_values(const hl_safetensors_entry_info *e, const char *what,
                             hl_io_values rule, hl_error *err);
/* HL_OK when f holds tensor name with t's shape (a scalar for a (1) tensor)
 * and values the rule accepts, so that copying it into t cannot fail;
 * otherwise HL_ERR_FORMAT or HL_ERR_SHAPE and a message after "<what>: "
 * (nothing before it when what is NULL). */
hl_status hl_io_check_tensor(const hl_safetensors *f, const char *what, const char *name,
                             const hl_tensor *t, hl_io_values rule, hl_error *err);
/* HL_OK when every tensor of f is one of params or its optimizer state
 * (optim.m.<name>, optim.v.<name>); otherwise HL_ERR_FORMAT naming the
 * first other one after "<what>: ". A bigger model's file holds all of a
 * smaller one's tensors, and one whose config says less (a tied head, no
 * learned positions) holds tensors its model has no place for: neither may
 * load as if it fitted. */
hl_status hl_io_check_no_extra(const hl_safetensors *f, const char *what,
                               const hl_params *params, hl_error *err);
/* Adds "bos_token_id", "eos_token_id" and "pad_token_id" to a JSON object
 * (hf.h's hl_hf_token_ids): false when out of memory. */
struct cJSON;
struct hl_hf_token_ids;
bool hl_hf_token_ids_add(struct cJSON *obj, const struct hl_hf_token_ids *ids);

/* The name a file's messages give it: its path, or what hl_safetensors_parse
 * was told. */
const char *hl_safetensors_what(const hl_safetensors *f);

#endif
