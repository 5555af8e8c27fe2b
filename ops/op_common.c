/* Helpers every op uses: input checks, outputs, node recording, gradients. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/profile.h"
#include "ops/internal.h"

static void record_failure(hl_graph *g, const char *name, hl_status status, const char *fmt,
                           va_list ap)
{
    char message[HL_ERROR_MESSAGE_MAX];
    vsnprintf(message, sizeof message, fmt, ap);
    hl_error_set(&g->error, status, "%s: %s", name, message);
}

hl_tensor *hl_op_fail(hl_graph *g, hl_op op, hl_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record_failure(g, hl_op_get(op)->name, status, fmt, ap);
    va_end(ap);
    return &g->poison;
}

hl_tensor *hl_op_fail_as(hl_graph *g, const char *name, hl_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record_failure(g, name, status, fmt, ap);
    va_end(ap);
    return &g->poison;
}

bool hl_op_inputs_ok_as(hl_graph *g, const char *name, int n, hl_tensor *const *inputs)
{
    if (hl_graph_failed(g))
        return false;
    for (int i = 0; i < n; i++) {
        const hl_tensor *t = inputs[i];
        if (!t)
            hl_op_fail_as(g, name, HL_ERR_ARG, "input %d is NULL", i);
        else if (hl_tensor_is_poison(t))
            hl_op_fail_as(g, name, HL_ERR_ARG, "input %d is a poisoned tensor", i);
        else if (!t->data)
            hl_op_fail_as(g, name, HL_ERR_STATE,
                          "input %d (%s) has no data (a parameter used before hl_params_commit?)",
                          i, t->name);
        else if (t->node && t->node->graph != g) /* its backward would never run */
            hl_op_fail_as(g, name, HL_ERR_ARG, "input %d (%s) was recorded on another graph", i,
                          t->name);
        if (hl_graph_failed(g))
            return false;
    }
    return true;
}

bool hl_op_inputs_ok(hl_graph *g, hl_op op, int n, hl_tensor *const *inputs)
{
    return hl_op_inputs_ok_as(g, hl_op_get(op)->name, n, inputs);
}

hl_tensor *hl_op_output(hl_graph *g, hl_op op, int rank, const int *shape)
{
    if (g->profile)
        hl_profile_enter(g->profile, op);
    return hl_graph_tensor_uninit(g, hl_op_get(op)->name, rank, shape);
}

hl_node *hl_op_record(hl_graph *g, hl_op op, hl_tensor *out, int n, hl_tensor *const *inputs)
{
    if (hl_graph_failed(g) || !g->grad_enabled)
        return NULL;
    bool needs_grad = false;
    for (int i = 0; i < n; i++)
        needs_grad |= inputs[i] && inputs[i]->requires_grad;
    if (!needs_grad)
        return NULL;
    if (!hl_op_get(op)->backward) {
        hl_op_fail(g, op, HL_ERR_STATE,
                   "has no backward, but its input %s requires grad; call it with grad "
                   "disabled (hl_graph_set_grad_enabled) or on a tensor without grad",
                   inputs[0]->name);
        return NULL;
    }
    hl_node *node = hl_graph_calloc(g, sizeof *node);
    if (!node)
        return NULL;
    node->op = op;
    node->info = hl_op_get(op);
    node->n_inputs = n;
    for (int i = 0; i < n; i++)
        node->inputs[i] = inputs[i];
    node->out = out;
    node->graph = g;
    node->prev = g->tail;
    g->tail = node;
    g->n_nodes++;
    out->requires_grad = true;
    out->node = node;
    if (g->profile)
        g->profile->forward_calls[op]++;
    return node;
}

void hl_op_record_output(hl_node *n, hl_tensor *t)
{
    if (!n)
        return;
    int i = 0;
    while (i < HL_NODE_MAX_EXTRA_OUTPUTS && n->extra_out[i])
        i++;
    assert(i < HL_NODE_MAX_EXTRA_OUTPUTS);
    n->extra_out[i] = t;
    t->requires_grad = true;
    t->node = n;
}

hl_real *hl_op_grad(hl_graph *g, hl_tensor *t)
{
    if (!t || !t->requires_grad)
        return NULL;
    if (!t->grad)
        t->grad = hl_graph_grad_alloc(g, t, true);
    return t->grad;
}

hl_real *hl_op_grad_first(hl_graph *g, hl_tensor *t, bool *overwrite)
{
    *overwrite = false;
    if (!t || !t->requires_grad)
        return NULL;
    if (!t->grad) {
        t->grad = hl_graph_grad_alloc(g, t, false);
        *overwrite = t->grad != NULL;
    }
    return t->grad;
}

int32_t *hl_op_save_ints(hl_graph *g, const int32_t *values, size_t n)
{
    int32_t *copy = hl_graph_alloc(g, n * sizeof *copy);
    if (copy)
        memcpy(copy, values, n * sizeof *copy);
    return copy;
}
