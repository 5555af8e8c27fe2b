/*
 * safetensors.h: reading and writing .safetensors files, the tensor format of
 * PyTorch checkpoints (huggingface/safetensors).
 *
 * A file is an 8-byte little-endian length N, N bytes of JSON (padded with
 * spaces) and a data buffer. The JSON maps each tensor name to
 * {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]} (offsets into
 * the data buffer), plus an optional "__metadata__" object of strings.
 *
 * The reader checks every rule of the format (sizes, ranges that tile the data
 * buffer exactly, no duplicate names, no unknown fields) and fails with
 * HL_ERR_FORMAT or HL_ERR_IO and a message naming the file, the tensor and the
 * rule. Values are decoded from little-endian bytes whatever the host. Every
 * function taking an hl_error records into it (err must not be NULL).
 *
 *     hl_error err = {0};
 *     hl_safetensors *f = NULL;
 *     if (hl_safetensors_read("model.safetensors", &f, &err) != HL_OK) { ...err.message... }
 *     hl_tensor *w = hl_safetensors_load(f, "fc.weight", true, &err);   // NULL on error
 *     hl_safetensors_copy_to(f, "fc.bias", bias, &err);                  // into an existing tensor
 *     const char *heads = hl_safetensors_metadata(f, "heads");           // NULL when absent
 *     hl_safetensors_free(f);
 *
 * A large file's metadata alone: hl_safetensors_read_header, the same checks
 * without reading the values.
 *
 * The writer copies tensors as they are added and writes them in name order,
 * atomically (a temporary file in the same directory, renamed over the path):
 *
 *     hl_safetensors_writer *w = hl_safetensors_writer_new();
 *     hl_safetensors_writer_add(w, "fc.weight", weight, HL_DTYPE_F32, &err);
 *     hl_safetensors_writer_set_metadata(w, "step", "1000", &err);
 *     hl_safetensors_writer_save(w, "model.safetensors", &err);
 *     hl_safetensors_writer_free(w);
 */
#ifndef HL_SAFETENSORS_H
#define HL_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"

/* The element types headlab reads (file names "F32", "F64", ...) and, but
 * for F16 and BF16 (read only, converted exactly: Hugging Face checkpoints
 * are often 16-bit), writes. Other safetensors types (I8, F8_E4M3, ...) are
 * rejected as unsupported. */
typedef enum hl_dtype {
    HL_DTYPE_F32,
    HL_DTYPE_F64,
    HL_DTYPE_I64,
    HL_DTYPE_I32,
    HL_DTYPE_U8,
    HL_DTYPE_BOOL,
    HL_DTYPE_F16,  /* IEEE half */
    HL_DTYPE_BF16, /* bfloat16: a float's top 16 bits */
} hl_dtype;

#define HL_DTYPE_COUNT 8

/* The file's name of a dtype ("F32"), or "?" for a value outside the enum. */
const char *hl_dtype_name(hl_dtype dtype);
/* Bytes per element, or 0 for a value outside the enum. */
size_t hl_dtype_size(hl_dtype dtype);
/* Whether a dtype holds floating-point numbers (F32, F64, F16, BF16): the
 * ones weights and data are read from. */
bool hl_dtype_is_float(hl_dtype dtype);

/* Largest rank a file may hold (headlab tensors themselves stop at 4). */
#define HL_ST_MAX_RANK 8
/* Largest JSON header accepted, as in the reference implementation. */
#define HL_ST_MAX_HEADER 100000000u

/* One tensor of a file, valid until hl_safetensors_free(). */
typedef struct hl_safetensors_entry_info {
    const char *name;
    hl_dtype dtype;
    int rank;                         /* 0..HL_ST_MAX_RANK; 0 is a scalar */
    int64_t shape[HL_ST_MAX_RANK];    /* dims >= 0; unused entries are 0 */
    const unsigned char *data;        /* nbytes little-endian bytes, not aligned;
                                         NULL after hl_safetensors_read_header */
    size_t nbytes;                    /* product(shape) * hl_dtype_size(dtype) */
    uint64_t offset;                  /* where data begins in the file's data buffer */
} hl_safetensors_entry_info;

/* Room for an entry's shape printed as "(d0,...,d7)". */
#define HL_ST_SHAPE_STR_MAX 160
/* Writes e's shape, e.g. "(3,4)" ("()" for a scalar), into buf and returns buf. */
const char *hl_safetensors_shape_str(const hl_safetensors_entry_info *e, char *buf);

typedef struct hl_safetensors hl_safetensors;

/* Reads and checks a whole file. On error *out is NULL. */
hl_status hl_safetensors_read(const char *path, hl_safetensors **out, hl_error *err);
/* A file's header alone (names, dtypes, shapes, metadata), read without its
 * data: every check of hl_safetensors_read, the entries against the file's
 * size, but no values (entries' data are NULL; hl_safetensors_copy_to and
 * hl_safetensors_load refuse the file). For metadata of a large file. */
hl_status hl_safetensors_read_header(const char *path, hl_safetensors **out, hl_error *err);
/* The same checks on bytes in memory (copied); what_for_messages stands for
 * the file name in error messages (NULL: "(memory)"). */
hl_status hl_safetensors_parse(const void *bytes, size_t len, const char *what_for_messages,
                               hl_safetensors **out, hl_error *err);
void hl_safetensors_free(hl_safetensors *f);

/* Entries are ordered by name (byte order); i >= count gives NULL. */
size_t hl_safetensors_count(const hl_safetensors *f);
const hl_safetensors_entry_info *hl_safetensors_entry(const hl_safetensors *f, size_t i);
const hl_safetensors_entry_info *hl_safetensors_find(const hl_safetensors *f, const char *name);
/* The value of a "__metadata__" key, or NULL when absent. */
const char *hl_safetensors_metadata(const hl_safetensors *f, const char *key);

/* Converts tensor `name` (any dtype; BOOL and integers become 0/1 and their
 * values) into dst->data. Fails when the tensor is missing (HL_ERR_ARG), has
 * rank > 4 or a shape other than dst's (HL_ERR_SHAPE; a scalar matches (1)). */
hl_status hl_safetensors_copy_to(const hl_safetensors *f, const char *name, hl_tensor *dst,
                                 hl_error *err);
/* A new heap tensor (hl_tensor_free) named and shaped as in the file, holding
 * its values; a scalar loads as shape (1). NULL, with the reason in err, when
 * the tensor is missing, has rank > 4 or a dimension of 0. */
hl_tensor *hl_safetensors_load(const hl_safetensors *f, const char *name, bool requires_grad,
                               hl_error *err);

typedef struct hl_safetensors_writer hl_safetensors_writer;

/* NULL when out of memory. */
hl_safetensors_writer *hl_safetensors_writer_new(void);
void hl_safetensors_writer_free(hl_safetensors_writer *w);

/* Copies t's values now, converted to dtype (HL_DTYPE_F32 or HL_DTYPE_F64).
 * Names must be valid UTF-8, unique and not "__metadata__" (HL_ERR_ARG). */
hl_status hl_safetensors_writer_add(hl_safetensors_writer *w, const char *name, const hl_tensor *t,
                                    hl_dtype dtype, hl_error *err);
/* Copies product(shape) elements of any dtype from bytes, given in the host's
 * byte order (e.g. an int32_t array for I32); BOOL bytes must be 0 or 1. */
hl_status hl_safetensors_writer_add_raw(hl_safetensors_writer *w, const char *name, hl_dtype dtype,
                                        int rank, const int64_t *shape, const void *bytes,
                                        hl_error *err);
/* Sets (or replaces) a "__metadata__" string. */
hl_status hl_safetensors_writer_set_metadata(hl_safetensors_writer *w, const char *key,
                                             const char *value, hl_error *err);
/* Writes "<path>.tmp.<pid>", flushes it to disk and renames it over path; on
 * failure removes the temporary file and leaves path as it was. */
hl_status hl_safetensors_writer_save(hl_safetensors_writer *w, const char *path, hl_error *err);

#endif
