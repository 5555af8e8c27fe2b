#include "io/safetensors.h"
#include "io/internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files/atomic.h"

/* cJSON prints numbers with "%1.15g": integers below 10^15 come out as exact
 * digits, larger ones in exponent form that other readers reject. */
#define JSON_INT_LIMIT 1000000000000000ull

typedef struct {
    char *name;
    hl_dtype dtype;
    int rank;
    int64_t shape[HL_ST_MAX_RANK];
    unsigned char *bytes;   /* nbytes, little-endian */
    size_t nbytes;
} st_item;

typedef struct {
    char *key;
    char *value;
} st_meta;

struct hl_safetensors_writer {
    st_item *items;
    size_t n_items, cap_items;
    st_meta *meta;
    size_t n_meta, cap_meta;
};

hl_safetensors_writer *hl_safetensors_writer_new(void)
{
    return calloc(1, sizeof(hl_safetensors_writer));
}

void hl_safetensors_writer_free(hl_safetensors_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_items; i++) {
        free(w->items[i].name);
        free(w->items[i].bytes);
    }
    for (size_t i = 0; i < w->n_meta; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->items);
    free(w->meta);
    free(w);
}

static void store_le(unsigned char *p, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++, v >>= 8)
        p[i] = (unsigned char)(v & 0xFF);
}

static bool host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* Grows *array (of elem-size items) so one more fits. */
static bool reserve(void **array, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return true;
    size_t new_cap = *cap ? 2 * *cap : 16;
    void *grown = realloc(*array, new_cap * elem);
    if (!grown)
        return false;
    *array = grown;
    *cap = new_cap;
    return true;
}

/* Checks a tensor's name, dtype and shape; sets *nbytes to its data size. */
static hl_status check_item(const hl_safetensors_writer *w, const char *name, hl_dtype dtype,
                            int rank, const int64_t *shape, size_t *nbytes, hl_error *err)
{
    if (!w || !name)
        return hl_error_set(err, HL_ERR_ARG, "safetensors writer: NULL writer or name");
    if (!hl_safetensors_utf8_valid(name, strlen(name)) || strcmp(name, "__metadata__") == 0)
        return hl_error_set(err, HL_ERR_ARG,
                            "safetensors writer: tensor \"%s\": the name must be UTF-8 and not "
                            "__metadata__", name);
    for (size_t i = 0; i < w->n_items; i++)
        if (strcmp(w->items[i].name, name) == 0)
            return hl_error_set(err, HL_ERR_ARG,
                                "safetensors writer: tensor \"%s\" added twice", name);
    uint64_t size = hl_dtype_size(dtype);
    if (size == 0)
        return hl_error_set(err, HL_ERR_ARG, "safetensors writer: tensor \"%s\": bad dtype %d",
                            name, (int)dtype);
    if (rank < 0 || rank > HL_ST_MAX_RANK || (rank > 0 && !shape))
        return hl_error_set(err, HL_ERR_SHAPE, "safetensors writer: tensor \"%s\": rank %d "
                            "is not in 0..%d", name, rank, HL_ST_MAX_RANK);
    /* The product saturates at the limit, unless a later zero dim clears it. */
    uint64_t total = size;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0 || (uint64_t)shape[i] >= JSON_INT_LIMIT)
            return hl_error_set(err, HL_ERR_SHAPE, "safetensors writer: tensor \"%s\": "
                                "dimension %d is %lld", name, i, (long long)shape[i]);
        uint64_t d = (uint64_t)shape[i];
        total = d == 0 ? 0 : total > JSON_INT_LIMIT / d ? JSON_INT_LIMIT : total * d;
    }
    if (total >= JSON_INT_LIMIT || total > SIZE_MAX)
        return hl_error_set(err, HL_ERR_SHAPE, "safetensors writer: tensor \"%s\" is too large",
                            name);
    *nbytes = (size_t)total;
    return HL_OK;
}

/* Appends a checked item with room for its bytes (uninitialised). */
static st_item *append_item(hl_safetensors_writer *w, const char *name, hl_dtype dtype, int rank,
                            const int64_t *shape, size_t nbytes, hl_error *err)
{
    st_item item = {.dtype = dtype, .rank = rank, .nbytes = nbytes};
    for (int i = 0; i < rank; i++)
        item.shape[i] = shape[i];
    item.name = strdup(name);
    item.bytes = malloc(nbytes ? nbytes : 1);
    if (!item.name || !item.bytes ||
        !reserve((void **)&w->items, &w->cap_items, w->n_items, sizeof *w->items)) {
        free(item.name);
        free(item.bytes);
        hl_error_set(err, HL_ERR_NOMEM, "safetensors writer: tensor \"%s\": out of memory", name);
        return NULL;
    }
    w->items[w->n_items] = item;
    return &w->items[w->n_items++];
}

hl_status hl_safetensors_writer_add(hl_safetensors_writer *w, const char *name, const hl_tensor *t,
                                    hl_dtype dtype, hl_error *err)
{
    if (!t || !t->data || t->rank < 1 || t->rank > HL_MAX_RANK)
        return hl_error_set(err, HL_ERR_ARG, "safetensors writer: tensor \"%s\" is NULL or "
                            "poisoned", name ? name : "");
    if (dtype != HL_DTYPE_F32 && dtype != HL_DTYPE_F64)
        return hl_error_set(err, HL_ERR_ARG, "safetensors writer: tensor \"%s\": dtype %s; "
                            "hl_real values are written as F32 or F64", name ? name : "",
                            hl_dtype_name(dtype));
    int64_t shape[HL_MAX_RANK];
    for (int i = 0; i < t->rank; i++)
        shape[i] = t->shape[i];
    size_t nbytes;
    if (check_item(w, name, dtype, t->rank, shape, &nbytes, err) != HL_OK)
        return err->status;
    st_item *item = append_item(w, name, dtype, t->rank, shape, nbytes, err);
    if (!item)
        return err->status;
    for (size_t i = 0; i < t->numel; i++) {
        if (dtype == HL_DTYPE_F32) {
            float x = (float)t->data[i];
            uint32_t bits;
            memcpy(&bits, &x, sizeof bits);
            store_le(item->bytes + 4 * i, bits, 4);
        } else {
            double x = (double)t->data[i];
            uint64_t bits;
            memcpy(&bits, &x, sizeof bits);
            store_le(item->bytes + 8 * i, bits, 8);
        }
    }
    return HL_OK;
}

hl_status hl_safetensors_writer_add_raw(hl_safetensors_writer *w, const char *name, hl_dtype dtype,
                                        int rank, const int64_t *shape, const void *bytes,
                                        hl_error *err)
{
    size_t nbytes;
    if (check_item(w, name, dtype, rank, shape, &nbytes, err) != HL_OK)
        return err->status;
    const unsigned char *src = bytes;
    if (nbytes > 0 && !src)
        return hl_error_set(err, HL_ERR_ARG, "safetensors writer: tensor \"%s\": NULL bytes",
                            name);
    for (size_t i = 0; dtype == HL_DTYPE_BOOL && i < nbytes; i++)
        if (src[i] > 1)
            return hl_error_set(err, HL_ERR_ARG, "safetensors writer: tensor \"%s\": BOOL "
                                "byte %zu is %d, not 0 or 1", name, i, src[i]);
    st_item *item = append_item(w, name, dtype, rank, shape, nbytes, err);
    if (!item)
        return err->status;
    size_t size = hl_dtype_size(dtype);
    if (nbytes == 0)
        return HL_OK;
    if (size == 1 || host_is_little_endian()) {
        memcpy(item->bytes, src, nbytes);
    } else {
        for (size_t i = 0; i < nbytes; i += size)
            for (size_t k = 0; k < size; k++)
                item->bytes[i + k] = src[i + size - 1 - k];
    }
    return HL_OK;
}

hl_status hl_safetensors_writer_set_metadata(hl_safetensors_writer *w, const char *key,
                                             const char *value, hl_error *err)
{
    if (!w || !key || !value)
        return hl_error_set(err, HL_ERR_ARG, "safetensors writer: NULL writer, key or value");
    if (!hl_safetensors_utf8_valid(key, strlen(key)) ||
        !hl_safetensors_utf8_valid(value, strlen(value)))
        return hl_error_set(err, HL_ERR_ARG,
                            "safetensors writer: metadata \"%s\" is not valid UTF-8", key);
    char *copy = strdup(value);
    if (!copy)
        return hl_error_set(err, HL_ERR_NOMEM, "safetensors writer: out of memory");
    for (size_t i = 0; i < w->n_meta; i++)
        if (strcmp(w->meta[i].key, key) == 0) {
            free(w->meta[i].value);
            w->meta[i].value = copy;
            return HL_OK;
        }
    char *key_copy = strdup(key);
    if (!key_copy || !reserve((void **)&w->meta, &w->cap_meta, w->n_meta, sizeof *w->meta)) {
        free(copy);
        free(key_copy);
        return hl_error_set(err, HL_ERR_NOMEM, "safetensors writer: out of memory");
    }
    w->meta[w->n_meta++] = (st_meta){key_copy, copy};
    return HL_OK;
}

// ----------------------------------------------------------------------------
// saving

static int by_name(const void *a, const void *b)
{
    return strcmp(((const st_item *)a)->name, ((const st_item *)b)->name);
}

static bool add_ints(cJSON *obj, const char *key, const int64_t *values, int n)
{
    cJSON *array = cJSON_AddArrayToObject(obj, key);
    for (int i = 0; array && i < n; i++) {
        cJSON *number = cJSON_CreateNumber((double)values[i]);
        if (!number || !cJSON_AddItemToArray(array, number)) {
            cJSON_Delete(number);
            return false;
        }
    }
    return array != NULL;
}

/* The JSON header (malloc'd, unpadded): the items in their order, then the metadata;
 * NULL when out of memory. */
static char *header_json(const hl_safetensors_writer *w)
{
    cJSON *root = cJSON_CreateObject();
    bool ok = root != NULL;
    int64_t offset = 0;
    for (size_t i = 0; ok && i < w->n_items; i++) {
        const st_item *it = &w->items[i];
        int64_t range[2] = {offset, offset + (int64_t)it->nbytes};
        cJSON *entry = cJSON_AddObjectToObject(root, it->name);
        ok = entry && cJSON_AddStringToObject(entry, "dtype", hl_dtype_name(it->dtype)) &&
             add_ints(entry, "shape", it->shape, it->rank) &&
             add_ints(entry, "data_offsets", range, 2);
        offset = range[1];
    }
    if (ok && w->n_meta > 0) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        ok = meta != NULL;
        for (size_t i = 0; ok && i < w->n_meta; i++)
            ok = cJSON_AddStringToObject(meta, w->meta[i].key, w->meta[i].value) != NULL;
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

/* Writes the whole file to fp; false (with errno set) on a failed write. */
static bool write_all(FILE *fp, const hl_safetensors_writer *w, const char *header,
                      size_t header_len, size_t padded_len)
{
    unsigned char length[8];
    store_le(length, padded_len, 8);
    if (fwrite(length, 1, 8, fp) != 8 || fwrite(header, 1, header_len, fp) != header_len)
        return false;
    for (size_t i = header_len; i < padded_len; i++)
        if (fputc(' ', fp) == EOF)
            return false;
    for (size_t i = 0; i < w->n_items; i++)
        if (fwrite(w->items[i].bytes, 1, w->items[i].nbytes, fp) != w->items[i].nbytes)
            return false;
    return true;
}

/* Writes the file whole or not at all (files/atomic.h). */
static hl_status write_file(const hl_safetensors_writer *w, const char *path, const char *header,
                            hl_error *err)
{
    size_t header_len = strlen(header), padded_len = (header_len + 7) / 8 * 8;
    if (padded_len > HL_ST_MAX_HEADER)
        return hl_error_set(err, HL_ERR_ARG, "safetensors %s: the header would be %zu bytes, "
                            "over the limit of %u", path, padded_len, HL_ST_MAX_HEADER);
    hl_atomic_file out;
    if (hl_atomic_begin(&out, path, err) != HL_OK)
        return err->status;
    if (!write_all(out.f, w, header, header_len, padded_len)) {
        int saved = errno;
        hl_atomic_abort(&out);
        return hl_error_set(err, HL_ERR_IO, "cannot write %s: %s", path, strerror(saved));
    }
    return hl_atomic_commit(&out, err);
}

hl_status hl_safetensors_writer_save(hl_safetensors_writer *w, const char *path, hl_error *err)
{
    if (!w || !path)
        return hl_error_set(err, HL_ERR_ARG, "safetensors writer: NULL writer or path");
    uint64_t total = 0;
    for (size_t i = 0; i < w->n_items; i++)
        total += w->items[i].nbytes;
    if (total >= JSON_INT_LIMIT)
        return hl_error_set(err, HL_ERR_ARG, "safetensors %s: %llu bytes of tensors is too "
                            "much", path, (unsigned long long)total);
    /* Name order, as the Python library writes. */
    qsort(w->items, w->n_items, sizeof *w->items, by_name);
    char *header = header_json(w);
    if (!header)
        return hl_error_set(err, HL_ERR_NOMEM, "safetensors %s: out of memory", path);
    hl_status s = write_file(w, path, header, err);
    free(header);
    return s;
}
