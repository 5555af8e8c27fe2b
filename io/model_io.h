/*
 * model_io.h: models to and from safetensors files. MHA weights use
 * PyTorch's nn.MultiheadAttention names; a GPT file carries its config (and
 * its task, step and pruning record) in the metadata, so it loads alone.
 *
 *     hl_gpt *m = hl_gpt_load("out/toy_heads/model.safetensors", &err);
 *
 *     hl_gpt_meta meta;
 *     hl_gpt *m = hl_gpt_load_meta("model.safetensors", &meta, &err);
 *     hl_gpt_save_meta("copy.safetensors", m, &meta, &err);
 */
#ifndef HL_MODEL_IO_H
#define HL_MODEL_IO_H

#include <stdint.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/gpt.h"
#include "models/head_set.h"
#include "models/mha.h"

/* Builds a module from PyTorch-named weights in f (under prefix), deducing E,
 * kdim, vdim and bias from the shapes found; declares its parameters in p and
 * commits p, then copies the values in. Errors name the missing or misshapen
 * tensor. */
hl_status hl_mha_load(hl_mha *m, hl_params *p, const hl_safetensors *f, const char *prefix,
                      int num_heads, hl_error *err);

/* A model built from the "config" metadata of a safetensors file (a
 * checkpoint or a model.safetensors) with every parameter copied from it.
 * NULL, with the reason in err, when the file, the config or a parameter is
 * missing or misshapen. */
hl_gpt *hl_gpt_load(const char *path, hl_error *err);

/* What a model file says besides its weights. */
typedef struct hl_gpt_meta {
    char task[32];      /* metadata "task" ("toy_heads", "charlm"), "" when absent */
    int64_t step;       /* metadata "step", 0 when absent */
    hl_head_set pruned; /* original heads removed ("pruned_heads") */
} hl_gpt_meta;

/* hl_gpt_load, and the metadata above, checked against the config. */
hl_gpt *hl_gpt_load_meta(const char *path, hl_gpt_meta *meta, hl_error *err);
/* Weights, config, task, step and pruned_heads, written atomically; loads
 * back with hl_gpt_load or hl_gpt_load_meta. */
hl_status hl_gpt_save_meta(const char *path, const hl_gpt *m, const hl_gpt_meta *meta,
                           hl_error *err);

#endif
