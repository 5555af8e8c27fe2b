/*
 * optim.h: optimizers over a committed parameter block, with PyTorch's update
 * rules, a learning-rate schedule and gradient-norm clipping.
 *
 * State (AdamW moments, SGD momentum) lives in blocks as long as the
 * parameter block, allocated once; a step allocates nothing and is one
 * parallel loop, elementwise, so it is bitwise the same for any thread count.
 *
 *     hl_optim *opt = hl_optim_new(params, &(hl_optim_config){
 *         .kind = HL_OPTIM_ADAMW, .lr = 3e-3, .beta1 = 0.9, .beta2 = 0.98,
 *         .eps = 1e-8, .weight_decay = 0.01});
 *     ...backward...
 *     double norm = hl_clip_grad_norm(params, 1.0);      // optional
 *     hl_optim_step(opt, hl_lr_scale(&sched, step));
 *     // or, clipping inside the update's pass:
 *     double norm = hl_grad_norm(params);
 *     hl_optim_step_scaled(opt, hl_lr_scale(&sched, step), hl_clip_scale(norm, 1.0));
 */
#ifndef HL_OPTIM_H
#define HL_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/params.h"

typedef enum hl_optim_kind { HL_OPTIM_ADAMW, HL_OPTIM_SGD } hl_optim_kind;

typedef struct hl_optim_config {
    hl_optim_kind kind;
    double lr;           /* base learning rate; hl_optim_step scales it */
    double beta1, beta2; /* AdamW */
    double eps;          /* AdamW */
    double momentum;     /* SGD (0: plain SGD) */
    double weight_decay; /* AdamW: decoupled; SGD: added to the gradient */
} hl_optim_config;

typedef struct hl_optim {
    hl_optim_config cfg;
    hl_params *params;
    int64_t step;        /* updates done so far */
    hl_real *m, *v;      /* AdamW moments, or SGD momentum in m */
} hl_optim;

/* NULL on a bad configuration or out of memory (reason in err). */
hl_optim *hl_optim_new(hl_params *params, const hl_optim_config *cfg, hl_error *err);
void hl_optim_free(hl_optim *opt);
/* One update with learning rate cfg.lr * lr_scale. */
void hl_optim_step(hl_optim *opt, double lr_scale);
/* The same with every gradient read as gradient · grad_scale (rounded to
 * hl_real once, as hl_clip_grad_norm's scaling is): clipping fused into the
 * update, one pass over the parameters fewer, the same bits as
 * hl_clip_grad_norm followed by hl_optim_step. The gradients are left as
 * they were. */
void hl_optim_step_scaled(hl_optim *opt, double lr_scale, double grad_scale);

/* Linear warm-up over warmup_steps, then constant or cosine decay to
 * min_scale at total_steps. Returns the multiplier for step k (0-based). */
typedef struct hl_lr_schedule {
    int64_t warmup_steps;
    int64_t total_steps;
    bool cosine;         /* false: constant after warm-up */
    double min_scale;
} hl_lr_schedule;
double hl_lr_scale(const hl_lr_schedule *s, int64_t k);

/* The global L2 norm of all gradients; when max_norm > 0 and the norm is
 * larger, scales every gradient by hl_clip_scale(norm, max_norm), as
 * torch.nn.utils.clip_grad_norm_. */
double hl_clip_grad_norm(hl_params *params, double max_norm);
/* The norm alone: the squares summed in double in 256 fixed chunks, each in
 * element order, and the chunks' sums in chunk order (the same number for
 * any thread count). */
double hl_grad_norm(const hl_params *params);
/* max_norm / (norm + 1e-6) when max_norm > 0 and norm > max_norm, else 1. */
double hl_clip_scale(double norm, double max_norm);

#endif
