#include "io/safetensors.h"
#include "io/internal.h"
#include "text/json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct hl_safetensors {
    char *what;             /* the file name used in messages */
    unsigned char *bytes;   /* the whole file, or its header alone */
    bool header_only;       /* hl_safetensors_read_header's: no values */
    cJSON *header;          /* owns the tensor names and metadata strings */
    hl_safetensors_entry_info *entries; /* n_entries, sorted by name */
    size_t n_entries;
    const cJSON **metadata; /* n_metadata string items, sorted by key */
    size_t n_metadata;
};

// ----------------------------------------------------------------------------
// dtypes and small helpers

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [HL_DTYPE_F32] = {"F32", 4}, [HL_DTYPE_F64] = {"F64", 8}, [HL_DTYPE_I64] = {"I64", 8},
    [HL_DTYPE_I32] = {"I32", 4}, [HL_DTYPE_U8] = {"U8", 1},   [HL_DTYPE_BOOL] = {"BOOL", 1},
    [HL_DTYPE_F16] = {"F16", 2}, [HL_DTYPE_BF16] = {"BF16", 2},
};
_Static_assert(sizeof dtypes / sizeof dtypes[0] == HL_DTYPE_COUNT, "one row per hl_dtype");

/* Types of the format that headlab does not read, named so the message can
 * say "unsupported" rather than "unknown". */
static const char *const unsupported_dtypes[] = {"I16", "I8", "U16", "U32",
                                                 "U64", "F8_E4M3", "F8_E5M2"};

const char *hl_dtype_name(hl_dtype dtype)
{
    return (unsigned)dtype < HL_DTYPE_COUNT ? dtypes[dtype].name : "?";
}

size_t hl_dtype_size(hl_dtype dtype)
{
    return (unsigned)dtype < HL_DTYPE_COUNT ? dtypes[dtype].size : 0;
}

bool hl_dtype_is_float(hl_dtype dtype)
{
    return dtype == HL_DTYPE_F32 || dtype == HL_DTYPE_F64 || dtype == HL_DTYPE_F16 ||
           dtype == HL_DTYPE_BF16;
}

bool hl_safetensors_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t len;
        uint32_t min;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            len = 2, min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            len = 3, min = 0x800;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4, min = 0x10000;
        } else {
            return false;
        }
        if (n - i < len)
            return false;
        uint32_t cp = c & (0x7Fu >> len);
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (p[i + k] & 0x3Fu);
        }
        /* Overlong forms, surrogates and code points past U+10FFFF are not UTF-8. */
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

static uint64_t load_le(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = v << 8 | p[i];
    return v;
}

/* Records "safetensors <what>: <message>". */
__attribute__((format(printf, 4, 5))) static hl_status fail(hl_error *err, hl_status status,
                                                            const char *what, const char *fmt,
                                                            ...)
{
    char message[HL_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    return hl_error_set(err, status, "safetensors %s: %s", what, message);
}

static const char *json_kind(const cJSON *item)
{
    if (cJSON_IsBool(item))
        return "a boolean";
    if (cJSON_IsNull(item))
        return "null";
    if (cJSON_IsNumber(item))
        return "a number";
    if (cJSON_IsString(item))
        return "a string";
    if (cJSON_IsArray(item))
        return "an array";
    return "an object";
}

/* A JSON number that is a whole number in [0, 2^53], where doubles (cJSON's
 * numbers) are still exact. */
static bool json_uint(const cJSON *item, uint64_t *out)
{
    if (!cJSON_IsNumber(item))
        return false;
    double d = item->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || (double)(uint64_t)d != d)
        return false;
    *out = (uint64_t)d;
    return true;
}

/* Describes a value that should have been a non-negative integer. */
static const char *describe(const cJSON *item, char *buf, size_t size)
{
    if (cJSON_IsNumber(item))
        snprintf(buf, size, "%.17g", item->valuedouble);
    else
        snprintf(buf, size, "%s", json_kind(item));
    return buf;
}

/* Room for "(d0,...,d7)" with 16-digit dims. */
#define SHAPE_TEXT_MAX HL_ST_SHAPE_STR_MAX

static const char *shape_text(int rank, const int64_t *shape, char *buf)
{
    int n = snprintf(buf, SHAPE_TEXT_MAX, "(");
    for (int i = 0; i < rank; i++)
        n += snprintf(buf + n, (size_t)(SHAPE_TEXT_MAX - n), i ? ",%" PRId64 : "%" PRId64,
                      shape[i]);
    snprintf(buf + n, (size_t)(SHAPE_TEXT_MAX - n), ")");
    return buf;
}

const char *hl_safetensors_shape_str(const hl_safetensors_entry_info *e, char *buf)
{
    return shape_text(e->rank, e->shape, buf);
}

// ----------------------------------------------------------------------------
// parsing

static bool parse_dtype(const char *text, hl_dtype *out)
{
    for (int i = 0; i < HL_DTYPE_COUNT; i++)
        if (strcmp(text, dtypes[i].name) == 0) {
            *out = (hl_dtype)i;
            return true;
        }
    return false;
}

static bool is_unsupported_dtype(const char *text)
{
    for (size_t i = 0; i < sizeof unsupported_dtypes / sizeof unsupported_dtypes[0]; i++)
        if (strcmp(text, unsupported_dtypes[i]) == 0)
            return true;
    return false;
}

/* Finds the three fields of a tensor entry: each exactly once, nothing else. */
static hl_status entry_fields(const cJSON *obj, const char *what, const cJSON *fields[3],
                              hl_error *err)
{
    static const char *const names[3] = {"dtype", "shape", "data_offsets"};
    const char *name = obj->string;
    fields[0] = fields[1] = fields[2] = NULL;
    for (const cJSON *c = obj->child; c; c = c->next) {
        int k = 0;
        while (k < 3 && strcmp(c->string, names[k]) != 0)
            k++;
        if (k == 3)
            return fail(err, HL_ERR_FORMAT, what,
                        "tensor \"%s\": unknown field \"%s\" (allowed: dtype, shape, "
                        "data_offsets)", name, c->string);
        fields[k] = c; /* once: hl_json_parse refused a key given twice */
    }
    for (int k = 0; k < 3; k++)
        if (!fields[k])
            return fail(err, HL_ERR_FORMAT, what, "tensor \"%s\": missing field \"%s\"", name,
                        names[k]);
    return HL_OK;
}

/* Checks one tensor entry against the data buffer (data, data_len bytes;
 * data NULL when only the header was read). */
static hl_status parse_entry(const cJSON *obj, const unsigned char *data, uint64_t data_len,
                             const char *what, hl_safetensors_entry_info *e, hl_error *err)
{
    const char *name = obj->string;
    char text[64];
    if (!cJSON_IsObject(obj))
        return fail(err, HL_ERR_FORMAT, what, "tensor \"%s\": entry is %s, not an object", name,
                    json_kind(obj));
    const cJSON *fields[3];
    if (entry_fields(obj, what, fields, err) != HL_OK)
        return err->status;
    const cJSON *dtype = fields[0], *shape = fields[1], *offsets = fields[2];

    if (!cJSON_IsString(dtype))
        return fail(err, HL_ERR_FORMAT, what, "tensor \"%s\": dtype is %s, not a string", name,
                    json_kind(dtype));
    if (!parse_dtype(dtype->valuestring, &e->dtype)) {
        if (is_unsupported_dtype(dtype->valuestring))
            return fail(err, HL_ERR_FORMAT, what,
                        "tensor \"%s\": dtype %s is not supported (headlab reads F32, F64, "
                        "F16, BF16, I64, I32, U8, BOOL)", name, dtype->valuestring);
        return fail(err, HL_ERR_FORMAT, what, "tensor \"%s\": unknown dtype \"%s\"", name,
                    dtype->valuestring);
    }

    if (!cJSON_IsArray(shape))
        return fail(err, HL_ERR_FORMAT, what, "tensor \"%s\": shape is %s, not an array", name,
                    json_kind(shape));
    int rank = cJSON_GetArraySize(shape);
    if (rank > HL_ST_MAX_RANK)
        return fail(err, HL_ERR_FORMAT, what, "tensor \"%s\": shape has rank %d, more than %d",
                    name, rank, HL_ST_MAX_RANK);
    e->name = name;
    e->rank = rank;
    uint64_t numel = 1;
    bool overflow = false;
    const cJSON *dim = shape->child;
    for (int i = 0; i < rank; i++, dim = dim->next) {
        uint64_t d;
        if (!json_uint(dim, &d))
            return fail(err, HL_ERR_FORMAT, what,
                        "tensor \"%s\": shape[%d] is %s, not an integer in 0..2^53", name, i,
                        describe(dim, text, sizeof text));
        e->shape[i] = (int64_t)d;
        /* A zero anywhere makes the product zero, even after an overflow. */
        if (d == 0 || numel == 0)
            numel = 0, overflow = false;
        else if (numel > UINT64_MAX / d)
            overflow = true;
        else
            numel *= d;
    }
    char dims[SHAPE_TEXT_MAX];
    size_t size = dtypes[e->dtype].size;
    if (overflow || numel > UINT64_MAX / size)
        return fail(err, HL_ERR_FORMAT, what, "tensor \"%s\": shape %s of %s overflows 64 bits",
                    name, shape_text(rank, e->shape, dims), dtypes[e->dtype].name);

    uint64_t begin, end;
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 ||
        !json_uint(offsets->child, &begin) || !json_uint(offsets->child->next, &end))
        return fail(err, HL_ERR_FORMAT, what,
                    "tensor \"%s\": data_offsets must be two integers in 0..2^53", name);
    if (begin > end)
        return fail(err, HL_ERR_FORMAT, what,
                    "tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] end before they begin",
                    name, begin, end);
    if (end - begin != numel * size)
        return fail(err, HL_ERR_FORMAT, what,
                    "tensor \"%s\": shape %s of %s needs %" PRIu64 " bytes but data_offsets [%"
                    PRIu64 ", %" PRIu64 "] hold %" PRIu64, name, shape_text(rank, e->shape, dims),
                    dtypes[e->dtype].name, numel * size, begin, end, end - begin);
    if (end > data_len)
        return fail(err, HL_ERR_FORMAT, what,
                    "tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] go past the end of the "
                    "%" PRIu64 "-byte data buffer", name, begin, end, data_len);
    e->data = data ? data + begin : NULL;
    e->offset = begin;
    e->nbytes = (size_t)(end - begin);
    return HL_OK;
}

static int by_key(const void *a, const void *b)
{
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

static hl_status parse_metadata(hl_safetensors *f, const cJSON *obj, hl_error *err)
{
    if (!cJSON_IsObject(obj))
        return fail(err, HL_ERR_FORMAT, f->what, "__metadata__ is %s, not an object",
                    json_kind(obj));
    size_t n = (size_t)cJSON_GetArraySize(obj);
    f->metadata = malloc((n ? n : 1) * sizeof *f->metadata);
    if (!f->metadata)
        return fail(err, HL_ERR_NOMEM, f->what, "out of memory");
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (!cJSON_IsString(c))
            return fail(err, HL_ERR_FORMAT, f->what,
                        "__metadata__ value of \"%s\" is %s, not a string", c->string,
                        json_kind(c));
        f->metadata[f->n_metadata++] = c;
    }
    /* sorted for lookups; hl_json_parse refused a key given twice */
    qsort(f->metadata, n, sizeof *f->metadata, by_key);
    return HL_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const hl_safetensors_entry_info *)a)->name,
                  ((const hl_safetensors_entry_info *)b)->name);
}

static int by_offset(const void *a, const void *b)
{
    const hl_safetensors_entry_info *x = *(const hl_safetensors_entry_info *const *)a,
                                    *y = *(const hl_safetensors_entry_info *const *)b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

/* The sorted ranges must cover the data buffer exactly: no overlap, no hole,
 * nothing after the last tensor. */
static hl_status check_tiling(hl_safetensors *f, uint64_t data_len, hl_error *err)
{
    size_t n = f->n_entries;
    const hl_safetensors_entry_info **order = malloc((n ? n : 1) * sizeof *order);
    if (!order)
        return fail(err, HL_ERR_NOMEM, f->what, "out of memory");
    for (size_t i = 0; i < n; i++)
        order[i] = &f->entries[i];
    qsort(order, n, sizeof *order, by_offset);
    uint64_t covered = 0;
    hl_status s = HL_OK;
    for (size_t i = 0; i < n && s == HL_OK; i++) {
        uint64_t begin = order[i]->offset, end = begin + order[i]->nbytes;
        if (begin < covered)
            s = fail(err, HL_ERR_FORMAT, f->what,
                     "tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] overlap tensor "
                     "\"%s\" (which ends at %" PRIu64 ")", order[i]->name, begin, end,
                     order[i - 1]->name, covered);
        else if (begin > covered)
            s = fail(err, HL_ERR_FORMAT, f->what,
                     "hole in the data buffer: bytes [%" PRIu64 ", %" PRIu64 ") before tensor "
                     "\"%s\" belong to no tensor", covered, begin, order[i]->name);
        covered = end;
    }
    free(order);
    if (s != HL_OK)
        return s;
    if (covered < data_len)
        return fail(err, HL_ERR_FORMAT, f->what,
                    "%" PRIu64 " trailing bytes after the last tensor (the data buffer ends at "
                    "%" PRIu64 ")", data_len - covered, covered);
    return HL_OK;
}

/* Parses the header text (n bytes, not NUL-terminated) into f->header. */
static hl_status parse_json(hl_safetensors *f, const char *header, size_t n, hl_error *err)
{
    if (!hl_safetensors_utf8_valid(header, n))
        return fail(err, HL_ERR_FORMAT, f->what, "header is not valid UTF-8");
    char why[HL_JSON_WHY_MAX];
    hl_status st = hl_json_parse(header, n, &f->header, why);
    if (st == HL_ERR_NOMEM)
        return fail(err, st, f->what, "header: %s", why);
    if (st != HL_OK)
        return fail(err, st, f->what, "header is not valid JSON (%s)", why);
    if (!cJSON_IsObject(f->header))
        return fail(err, HL_ERR_FORMAT, f->what, "header is %s, not a JSON object",
                    json_kind(f->header));
    return HL_OK;
}

/* The length of the header of a file of len bytes whose first 8 are p;
 * HL_OK when it is within the limit and the file. */
static hl_status header_length(const char *what, const unsigned char *p, uint64_t len,
                               uint64_t *n, hl_error *err)
{
    if (len < 8)
        return fail(err, HL_ERR_FORMAT, what,
                    "%" PRIu64 " bytes, too short for the 8-byte header length", len);
    *n = load_le(p, 8);
    if (*n > HL_ST_MAX_HEADER)
        return fail(err, HL_ERR_FORMAT, what,
                    "header length %" PRIu64 " is over the limit of %u bytes", *n,
                    HL_ST_MAX_HEADER);
    if (*n > len - 8)
        return fail(err, HL_ERR_FORMAT, what,
                    "header length %" PRIu64 " is more than the %" PRIu64 " bytes after it", *n,
                    len - 8);
    return HL_OK;
}

/* f->bytes: a file of len bytes, whole or (header_only) its first 8 + n. */
static hl_status parse(hl_safetensors *f, uint64_t len, hl_error *err)
{
    uint64_t n;
    if (header_length(f->what, f->bytes, len, &n, err) != HL_OK)
        return err->status;
    if (parse_json(f, (const char *)f->bytes + 8, (size_t)n, err) != HL_OK)
        return err->status;

    const unsigned char *data = f->header_only ? NULL : f->bytes + 8 + n;
    uint64_t data_len = len - 8 - n;
    size_t count = (size_t)cJSON_GetArraySize(f->header);
    f->entries = calloc(count ? count : 1, sizeof *f->entries);
    if (!f->entries)
        return fail(err, HL_ERR_NOMEM, f->what, "out of memory");
    for (const cJSON *c = f->header->child; c; c = c->next) {
        if (strcmp(c->string, "__metadata__") == 0) {
            if (parse_metadata(f, c, err) != HL_OK)
                return err->status;
        } else if (parse_entry(c, data, data_len, f->what, &f->entries[f->n_entries++], err) !=
                   HL_OK) {
            return err->status;
        }
    }
    /* sorted for lookups (hl_json_parse refused a name given twice) */
    qsort(f->entries, f->n_entries, sizeof *f->entries, by_name);
    return check_tiling(f, data_len, err);
}

/* Parses bytes (malloc'd: the file of len bytes, or its header alone), which
 * the result then owns; frees them on failure. */
static hl_status parse_owned(unsigned char *bytes, uint64_t len, bool header_only,
                             const char *what, hl_safetensors **out, hl_error *err)
{
    *out = NULL;
    hl_safetensors *f = calloc(1, sizeof *f);
    char *name = strdup(what);
    if (!f || !name) {
        free(f);
        free(name);
        free(bytes);
        return fail(err, HL_ERR_NOMEM, what, "out of memory");
    }
    f->what = name;
    f->bytes = bytes;
    f->header_only = header_only;
    if (parse(f, len, err) != HL_OK) {
        hl_safetensors_free(f);
        return err->status;
    }
    *out = f;
    return HL_OK;
}

// ----------------------------------------------------------------------------
// public: reading

hl_status hl_safetensors_parse(const void *bytes, size_t len, const char *what_for_messages,
                               hl_safetensors **out, hl_error *err)
{
    const char *what = what_for_messages ? what_for_messages : "(memory)";
    *out = NULL;
    if (!bytes && len > 0)
        return fail(err, HL_ERR_ARG, what, "NULL bytes");
    unsigned char *copy = malloc(len ? len : 1);
    if (!copy)
        return fail(err, HL_ERR_NOMEM, what, "out of memory for %zu bytes", len);
    if (len > 0)
        memcpy(copy, bytes, len);
    return parse_owned(copy, len, false, what, out, err);
}

/* path opened for reading, a regular file of *len bytes. */
static hl_status open_regular(const char *path, int *fd, uint64_t *len, hl_error *err)
{
    if (!path)
        return hl_error_set(err, HL_ERR_ARG, "safetensors: NULL path");
    *fd = open(path, O_RDONLY);
    if (*fd < 0)
        return fail(err, HL_ERR_IO, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(*fd, &st) != 0 || !S_ISREG(st.st_mode) || (uintmax_t)st.st_size > SIZE_MAX) {
        close(*fd);
        return fail(err, HL_ERR_IO, path, "not a regular file of a readable size");
    }
    *len = (uint64_t)st.st_size;
    return HL_OK;
}

/* n bytes from fd into buf; from, the bytes read before, for the message. */
static hl_status read_exact(int fd, unsigned char *buf, size_t n, size_t from, uint64_t len,
                            const char *path, hl_error *err)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            const int e = r < 0 ? errno : 0;
            return fail(err, HL_ERR_IO, path, "read failed after %zu of %" PRIu64 " bytes%s%s",
                        from + got, len, e ? ": " : " (file shrank)", e ? strerror(e) : "");
        }
        got += (size_t)r;
    }
    return HL_OK;
}

hl_status hl_safetensors_read(const char *path, hl_safetensors **out, hl_error *err)
{
    *out = NULL;
    int fd = -1;
    uint64_t len = 0;
    if (open_regular(path, &fd, &len, err) != HL_OK)
        return err->status;
    unsigned char *bytes = malloc(len ? (size_t)len : 1);
    hl_status s = bytes ? read_exact(fd, bytes, (size_t)len, 0, len, path, err)
                        : fail(err, HL_ERR_NOMEM, path, "out of memory for %" PRIu64 " bytes",
                               len);
    close(fd);
    if (s != HL_OK) {
        free(bytes);
        return s;
    }
    return parse_owned(bytes, len, false, path, out, err);
}

hl_status hl_safetensors_read_header(const char *path, hl_safetensors **out, hl_error *err)
{
    *out = NULL;
    int fd = -1;
    uint64_t len = 0, n = 0;
    if (open_regular(path, &fd, &len, err) != HL_OK)
        return err->status;
    unsigned char head[8] = {0}, *bytes = NULL;
    hl_status s = read_exact(fd, head, len < 8 ? (size_t)len : 8, 0, len, path, err);
    if (s == HL_OK)
        s = header_length(path, head, len, &n, err);
    if (s == HL_OK && !(bytes = malloc(8 + (size_t)n)))
        s = fail(err, HL_ERR_NOMEM, path, "out of memory for %" PRIu64 " bytes", 8 + n);
    if (s == HL_OK) {
        memcpy(bytes, head, 8);
        s = read_exact(fd, bytes + 8, (size_t)n, 8, len, path, err);
    }
    close(fd);
    if (s != HL_OK) {
        free(bytes);
        return s;
    }
    return parse_owned(bytes, len, true, path, out, err);
}

void hl_safetensors_free(hl_safetensors *f)
{
    if (!f)
        return;
    cJSON_Delete(f->header);
    free(f->entries);
    free(f->metadata);
    free(f->bytes);
    free(f->what);
    free(f);
}

const char *hl_safetensors_what(const hl_safetensors *f) { return f->what; }

size_t hl_safetensors_count(const hl_safetensors *f) { return f ? f->n_entries : 0; }

const hl_safetensors_entry_info *hl_safetensors_entry(const hl_safetensors *f, size_t i)
{
    return f && i < f->n_entries ? &f->entries[i] : NULL;
}

const hl_safetensors_entry_info *hl_safetensors_find(const hl_safetensors *f, const char *name)
{
    if (!f || !name || f->n_entries == 0) /* bsearch may not take a NULL array */
        return NULL;
    hl_safetensors_entry_info key = {.name = name};
    return bsearch(&key, f->entries, f->n_entries, sizeof key, by_name);
}

const char *hl_safetensors_metadata(const hl_safetensors *f, const char *key)
{
    if (!f || !key || f->n_metadata == 0)
        return NULL;
    cJSON item = {.string = (char *)key};
    const cJSON *want = &item;
    const cJSON **hit = bsearch(&want, f->metadata, f->n_metadata, sizeof want, by_key);
    return hit ? (*hit)->valuestring : NULL;
}

// ----------------------------------------------------------------------------
// public: conversion to hl_real

/* An IEEE half's value: 1 sign, 5 exponent and 10 fraction bits; exact in a
 * double (subnormals, infinities and NaN included). */
static double half_value(uint16_t h)
{
    const int exponent = (h >> 10) & 0x1f, fraction = h & 0x3ff;
    const double sign = h >> 15 ? -1 : 1;
    if (exponent == 0x1f)
        return fraction ? NAN : sign * INFINITY;
    if (exponent == 0)
        return sign * ldexp(fraction, -24);
    return sign * ldexp(fraction + 1024, exponent - 25);
}

static double element(const unsigned char *p, hl_dtype dtype)
{
    switch (dtype) {
    case HL_DTYPE_F32: {
        uint32_t bits = (uint32_t)load_le(p, 4);
        float x;
        memcpy(&x, &bits, sizeof x);
        return x;
    }
    case HL_DTYPE_F64: {
        uint64_t bits = load_le(p, 8);
        double x;
        memcpy(&x, &bits, sizeof x);
        return x;
    }
    case HL_DTYPE_I64: return (double)(int64_t)load_le(p, 8);
    case HL_DTYPE_I32: return (int32_t)(uint32_t)load_le(p, 4);
    case HL_DTYPE_U8: return p[0];
    case HL_DTYPE_BOOL: return p[0] != 0;
    case HL_DTYPE_F16: return half_value((uint16_t)load_le(p, 2));
    case HL_DTYPE_BF16: { /* the top half of a float's bits */
        uint32_t bits = (uint32_t)load_le(p, 2) << 16;
        float x;
        memcpy(&x, &bits, sizeof x);
        return x;
    }
    }
    return 0;
}

static void convert(const hl_safetensors_entry_info *e, hl_real *dst)
{
    size_t size = dtypes[e->dtype].size, n = e->nbytes / size;
    for (size_t i = 0; i < n; i++)
        dst[i] = (hl_real)element(e->data + i * size, e->dtype);
}

double hl_safetensors_value(const hl_safetensors_entry_info *e, size_t i)
{
    return element(e->data + i * dtypes[e->dtype].size, e->dtype);
}

/* The entry's shape as a headlab tensor's (a scalar becomes (1)); false when
 * the rank is over HL_MAX_RANK or a dim over INT_MAX. */
static bool tensor_shape(const hl_safetensors_entry_info *e, int *rank, int shape[HL_MAX_RANK])
{
    if (e->rank > HL_MAX_RANK)
        return false;
    *rank = e->rank ? e->rank : 1;
    shape[0] = 1;
    for (int i = 0; i < e->rank; i++) {
        if (e->shape[i] > INT_MAX)
            return false;
        shape[i] = (int)e->shape[i];
    }
    return true;
}

static const hl_safetensors_entry_info *find_for(const hl_safetensors *f, const char *name,
                                                 hl_error *err)
{
    if (!f || !name) {
        hl_error_set(err, HL_ERR_ARG, "safetensors: NULL file or tensor name");
        return NULL;
    }
    const hl_safetensors_entry_info *e = hl_safetensors_find(f, name);
    if (!e)
        fail(err, HL_ERR_ARG, f->what, "no tensor named \"%s\"", name);
    return e;
}

hl_status hl_safetensors_copy_to(const hl_safetensors *f, const char *name, hl_tensor *dst,
                                 hl_error *err)
{
    const hl_safetensors_entry_info *e = find_for(f, name, err);
    if (!e)
        return err->status;
    if (!dst || !dst->data)
        return fail(err, HL_ERR_ARG, f->what, "tensor \"%s\": destination is NULL or poisoned",
                    name);
    if (f->header_only)
        return fail(err, HL_ERR_ARG, f->what, "tensor \"%s\": only the header was read", name);
    char file_shape[SHAPE_TEXT_MAX], dst_shape[HL_SHAPE_STR_MAX];
    int rank, shape[HL_MAX_RANK];
    if (!tensor_shape(e, &rank, shape))
        return fail(err, HL_ERR_SHAPE, f->what,
                    "tensor \"%s\": shape %s does not fit a headlab tensor (rank <= %d)", name,
                    shape_text(e->rank, e->shape, file_shape), HL_MAX_RANK);
    bool same = rank == dst->rank;
    for (int i = 0; same && i < rank; i++)
        same = shape[i] == dst->shape[i];
    if (!same)
        return fail(err, HL_ERR_SHAPE, f->what,
                    "tensor \"%s\" has shape %s but the destination \"%s\" has shape %s", name,
                    shape_text(e->rank, e->shape, file_shape), dst->name,
                    hl_shape_str(dst, dst_shape));
    convert(e, dst->data);
    return HL_OK;
}

hl_tensor *hl_safetensors_load(const hl_safetensors *f, const char *name, bool requires_grad,
                               hl_error *err)
{
    const hl_safetensors_entry_info *e = find_for(f, name, err);
    if (!e)
        return NULL;
    if (f->header_only) {
        fail(err, HL_ERR_ARG, f->what, "tensor \"%s\": only the header was read", name);
        return NULL;
    }
    char text[SHAPE_TEXT_MAX];
    int rank, shape[HL_MAX_RANK];
    bool fits = tensor_shape(e, &rank, shape);
    for (int i = 0; fits && i < rank; i++)
        fits = shape[i] > 0;
    if (!fits) {
        fail(err, HL_ERR_SHAPE, f->what,
             "tensor \"%s\": shape %s does not fit a headlab tensor (rank <= %d, dims >= 1)",
             name, shape_text(e->rank, e->shape, text), HL_MAX_RANK);
        return NULL;
    }
    hl_tensor *t = hl_tensor_new_checked(name, rank, shape, requires_grad, err);
    if (t)
        convert(e, t->data);
    return t;
}
