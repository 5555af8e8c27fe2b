#include "core/tensor.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

void hl_tensor_set_name(hl_tensor *t, const char *name)
{
    if (t)
        snprintf(t->name, sizeof t->name, "%s", name ? name : "");
}

bool hl_tensor_set_shape(hl_tensor *t, int rank, const int *shape)
{
    if (rank < 1 || rank > HL_MAX_RANK || !shape)
        return false;
    size_t numel = 1;
    for (int i = 0; i < HL_MAX_RANK; i++) {
        int d = i < rank ? shape[i] : 1;
        if (d < 1 || numel > SIZE_MAX / sizeof(hl_real) / (size_t)d)
            return false;
        numel *= (size_t)d;
    }
    t->rank = rank;
    for (int i = 0; i < HL_MAX_RANK; i++)
        t->shape[i] = i < rank ? shape[i] : 1;
    t->numel = numel;
    return true;
}

hl_tensor *hl_tensor_new_checked(const char *name, int rank, const int *shape,
                                 bool requires_grad, hl_error *err)
{
    hl_error ignored = {0};
    if (!err)
        err = &ignored;
    hl_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        hl_error_set(err, HL_ERR_NOMEM, "tensor %s: out of memory", name ? name : "");
        return NULL;
    }
    hl_tensor_set_name(t, name);
    if (!hl_tensor_set_shape(t, rank, shape)) {
        hl_error_set(err, HL_ERR_SHAPE, "tensor %s: bad shape (rank %d, dims must be >= 1)",
                     t->name, rank);
        free(t);
        return NULL;
    }
    t->data = calloc(t->numel, sizeof(hl_real));
    t->requires_grad = requires_grad;
    if (requires_grad)
        t->grad = calloc(t->numel, sizeof(hl_real));
    if (!t->data || (requires_grad && !t->grad)) {
        hl_error_set(err, HL_ERR_NOMEM, "tensor %s: out of memory for %zu values", t->name,
                     t->numel);
        hl_tensor_free(t);
        return NULL;
    }
    return t;
}

hl_tensor *hl_tensor_new(const char *name, int rank, const int *shape, bool requires_grad)
{
    return hl_tensor_new_checked(name, rank, shape, requires_grad, NULL);
}

void hl_tensor_free(hl_tensor *t)
{
    if (!t)
        return;
    free(t->data);
    free(t->grad);
    free(t);
}

const char *hl_shape_str(const hl_tensor *t, char *buf)
{
    int n = snprintf(buf, HL_SHAPE_STR_MAX, "(");
    for (int i = 0; i < t->rank && n < HL_SHAPE_STR_MAX; i++)
        n += snprintf(buf + n, (size_t)(HL_SHAPE_STR_MAX - n), i ? ",%d" : "%d", t->shape[i]);
    if (n < HL_SHAPE_STR_MAX)
        snprintf(buf + n, (size_t)(HL_SHAPE_STR_MAX - n), ")");
    return buf;
}

bool hl_tensor_same_shape(const hl_tensor *a, const hl_tensor *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i])
            return false;
    return true;
}

size_t hl_tensor_span(const hl_tensor *t, int from, int to)
{
    size_t n = 1;
    for (int i = from; i < to; i++)
        n *= (size_t)t->shape[i];
    return n;
}

void hl_tensor_fill(hl_tensor *t, hl_real value)
{
    for (size_t i = 0; t && t->data && i < t->numel; i++)
        t->data[i] = value;
}

void hl_tensor_zero_grad(hl_tensor *t)
{
    if (t && t->grad)
        memset(t->grad, 0, t->numel * sizeof(hl_real));
}
