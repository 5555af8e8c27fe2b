/*
 * checkpoint.h: training checkpoints as safetensors files.
 *
 * A checkpoint holds every parameter under its own name (F32, or F64 in the
 * double build, so saving and loading is exact), the optimizer state as
 * `optim.m.<name>` and `optim.v.<name>`, and in the metadata the step, the
 * optimizer's settings and step count, named RNG states and whatever
 * key/value pairs the caller adds (e.g. the model config). Resuming from it
 * continues bitwise as if the run had never stopped. Files are written
 * atomically (temporary file, then rename).
 *
 *     hl_checkpoint_rng rngs[] = {{"data", &data_rng}};
 *     hl_checkpoint_meta meta[] = {{"config", config_text}};
 *     hl_checkpoint_save("ckpt.safetensors", params, opt, step, rngs, 1, meta, 1, &err);
 *     ...
 *     hl_checkpoint_load("ckpt.safetensors", params, opt, &step, rngs, 1, &err);
 */
#ifndef HL_CHECKPOINT_H
#define HL_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "train/optim.h"
#include "core/params.h"
#include "core/rng.h"

typedef struct hl_checkpoint_rng {
    const char *name;
    hl_rng *rng;
    /* On load: NULL, the state must be in the file; else the state is
     * optional and *found says whether it was there (rng untouched if not). */
    bool *found;
} hl_checkpoint_rng;

typedef struct hl_checkpoint_meta {
    const char *key;
    const char *value;
} hl_checkpoint_meta;

/* opt may be NULL (weights only). */
hl_status hl_checkpoint_save(const char *path, const hl_params *params, const hl_optim *opt,
                             int64_t step, const hl_checkpoint_rng *rngs, int n_rngs,
                             const hl_checkpoint_meta *meta, int n_meta, hl_error *err);

/* Loads into an already built model: every parameter must be in the file with
 * its shape and finite values (else an error naming it and the first bad
 * element, and the model is left untouched). opt, step and rngs may be
 * NULL/0; when given, their state must be in the file (but optional RNGs').
 * RNGs are set in the order given: a later one of the same rng wins. */
hl_status hl_checkpoint_load(const char *path, hl_params *params, hl_optim *opt, int64_t *step,
                             const hl_checkpoint_rng *rngs, int n_rngs, hl_error *err);

/* hl_checkpoint_load for a run that continues to total_steps: also an error
 * (HL_ERR_ARG, "checkpoint is at step K; nothing to train") when the
 * checkpoint is already there, so the caller writes nothing. */
hl_status hl_checkpoint_resume(const char *path, hl_params *params, hl_optim *opt,
                               int64_t total_steps, int64_t *step, const hl_checkpoint_rng *rngs,
                               int n_rngs, hl_error *err);

#endif
