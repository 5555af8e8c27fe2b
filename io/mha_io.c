/* Loading an MHA module from PyTorch-named safetensors weights: see model_io.h. */
#include <stdio.h>
#include <string.h>

#include "io/internal.h"
#include "io/model_io.h"

static const hl_safetensors_entry_info *find(const hl_safetensors *f, const char *prefix,
                                             const char *name)
{
    char full[HL_NAME_MAX];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return hl_safetensors_find(f, full);
}

/* The 2-d weight's dims, or an error naming it. */
static hl_status matrix_dims(const hl_safetensors_entry_info *e, const char *what, int *rows,
                             int *cols, hl_error *err)
{
    if (!e)
        return hl_error_set(err, HL_ERR_FORMAT, "mha: the weights have no %s", what);
    if (e->rank != 2)
        return hl_error_set(err, HL_ERR_SHAPE, "mha: %s must be a matrix, it has rank %d", what,
                            e->rank);
    if (e->shape[0] < 1 || e->shape[1] < 1 || e->shape[0] > 1 << 20 || e->shape[1] > 1 << 20) {
        char shape[HL_SHAPE_STR_MAX];
        return hl_error_set(err, HL_ERR_SHAPE, "mha: %s is %s, not 1 to 2^20 rows and columns",
                            what, hl_safetensors_shape_str(e, shape));
    }
    *rows = (int)e->shape[0];
    *cols = (int)e->shape[1];
    return HL_OK;
}

hl_status hl_mha_load(hl_mha *m, hl_params *p, const hl_safetensors *f, const char *prefix,
                      int num_heads, hl_error *err)
{
    prefix = prefix ? prefix : "";
    hl_mha_config cfg = {.num_heads = num_heads};
    int rows = 0, cols = 0;
    if (matrix_dims(find(f, prefix, "out_proj.weight"), "out_proj.weight", &rows, &cols, err))
        return err->status;
    cfg.embed_dim = rows;
    /* out_proj.weight is (E, H·D): its width gives D, also after pruning. */
    if (num_heads < 1 || cols % num_heads != 0)
        return hl_error_set(err, HL_ERR_ARG,
                            "mha: out_proj.weight (%d,%d) does not split into %d heads", rows,
                            cols, num_heads);
    cfg.head_dim = cols / num_heads;
    const hl_safetensors_entry_info *packed = find(f, prefix, "in_proj_weight");
    if (!packed) {
        int r = 0;
        if (matrix_dims(find(f, prefix, "k_proj_weight"), "in_proj_weight or k_proj_weight", &r,
                        &cfg.kdim, err) ||
            matrix_dims(find(f, prefix, "v_proj_weight"), "v_proj_weight", &r, &cfg.vdim, err))
            return err->status;
    }
    cfg.bias = find(f, prefix, "in_proj_bias") != NULL;
    if (hl_mha_declare(m, p, prefix, &cfg, err) != HL_OK)
        return err->status;
    if (hl_params_commit(p) != HL_OK)
        return hl_error_set(err, hl_params_error(p)->status, "%s", hl_params_error(p)->message);
    hl_tensor *tensors[] = {m->in_proj_weight, m->q_proj_weight, m->k_proj_weight,
                            m->v_proj_weight, m->in_proj_bias,   m->out_proj_weight,
                            m->out_proj_bias};
    const size_t n = sizeof tensors / sizeof tensors[0];
    for (size_t i = 0; i < n; i++) {
        hl_tensor *t = tensors[i];
        /* (an integer tensor would load as numbers that were never weights) */
        const hl_safetensors_entry_info *e = t ? hl_safetensors_find(f, t->name) : NULL;
        if (e && !hl_dtype_is_float(e->dtype))
            return hl_error_set(err, HL_ERR_FORMAT, "%s: tensor \"%s\" is %s; weights are "
                                "float tensors", hl_safetensors_what(f), t->name,
                                hl_dtype_name(e->dtype));
        if (t && (hl_io_check_tensor(f, hl_safetensors_what(f), t->name, t, HL_IO_FINITE,
                                     err) != HL_OK ||
                  hl_safetensors_copy_to(f, t->name, t, err) != HL_OK))
            return err->status;
    }
    /* A tensor under prefix with no place in the module (an out_proj.bias
     * without in_proj_bias, q, k and v weights beside a packed one) is
     * refused, not ignored. */
    const size_t plen = strlen(prefix);
    for (size_t i = 0; i < hl_safetensors_count(f); i++) {
        const char *name = hl_safetensors_entry(f, i)->name;
        bool known = strncmp(name, prefix, plen) != 0;
        for (size_t j = 0; j < n && !known; j++)
            known = tensors[j] && !strcmp(tensors[j]->name, name);
        const size_t len = strlen(name);
        const bool out_bias = len >= 13 && !strcmp(name + len - 13, "out_proj.bias");
        if (!known)
            return hl_error_set(err, HL_ERR_FORMAT, "%s: tensor \"%s\" has no place in the "
                                "module (%s)", hl_safetensors_what(f), name,
                                out_bias ? "its in_proj_bias is missing"
                                         : "a file of another module?");
    }
    return HL_OK;
}
