/*
 * optim.h: optimizers over a committed parameter block (AdamW and SGD with
 * PyTorch's update rules, Muon as published), parameter groups, a
 * learning-rate schedule and gradient-norm clipping.
 *
 * State (AdamW moments, SGD and Muon momentum) lives in blocks as long as the
 * parameter block, allocated once with Muon's work buffers; a step allocates
 * nothing. AdamW and SGD are one parallel elementwise loop, Muon's
 * orthogonalisation is a few GEMMs per matrix (train/muon.h); both are
 * bitwise the same for any thread count.
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
 *
 * Groups: Muon for a GPT's hidden matrices, AdamW for the rest
 * (models/gpt_groups.h says which is which):
 *
 *     hl_optim_groups groups = {
 *         .n = 2, .group_of = hl_gpt_param_group, .ctx = model,
 *         .cfg = {[HL_GPT_GROUP_OTHER] = {.kind = HL_OPTIM_ADAMW, .lr = 1e-3, ...},
 *                 [HL_GPT_GROUP_HIDDEN] = {.kind = HL_OPTIM_MUON, .lr = 0.02,
 *                                          .momentum = 0.95}}};
 *     hl_optim *opt = hl_optim_new_groups(model->params, &groups, &err);
 */
#ifndef HL_OPTIM_H
#define HL_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/params.h"

/* Muon (Jordan et al. 2024) updates a matrix W (rows,cols), gradient G, as
 *     buf = μ·buf + G;  U = G + μ·buf                 (Nesterov momentum)
 *     O = NewtonSchulz(U) · √max(1, rows/cols)         (train/muon.h)
 *     W = W − lr·(O + weight_decay·W)                  (decoupled decay)
 * A tensor of rank > 2 is a matrix of its first dimension's rows. */
typedef enum hl_optim_kind { HL_OPTIM_ADAMW, HL_OPTIM_SGD, HL_OPTIM_MUON } hl_optim_kind;

typedef struct hl_optim_config {
    hl_optim_kind kind;
    double lr;           /* base learning rate; hl_optim_step scales it */
    double beta1, beta2; /* AdamW */
    double eps;          /* AdamW */
    double momentum;     /* SGD (0: plain SGD); Muon's μ (0.95 in the paper) */
    double weight_decay; /* AdamW, Muon: decoupled; SGD: added to the gradient */
    int ns_steps;        /* Muon: Newton–Schulz steps; 0 means 5 */
} hl_optim_config;

#define HL_OPTIM_MAX_GROUPS 4
/* Row blocks one tensor may be cut into for Muon. */
#define HL_OPTIM_MAX_BLOCKS 4

typedef struct hl_optim_groups {
    int n;                                  /* 1 .. HL_OPTIM_MAX_GROUPS */
    hl_optim_config cfg[HL_OPTIM_MAX_GROUPS];
    /* The group of parameter t (0 .. n-1). For a Muon group it may cut t's
     * rows into blocks orthogonalised apart (a packed q, k, v projection):
     * *n_blocks (≤ HL_OPTIM_MAX_BLOCKS) counts in rows[], summing to t's
     * rows; left 0, t is one block. NULL: every tensor in group 0. */
    int (*group_of)(void *ctx, const hl_tensor *t, int *n_blocks, int *rows);
    void *ctx;
} hl_optim_groups;

typedef struct hl_optim_plan hl_optim_plan; /* the step's work lists and Muon's buffers */

typedef struct hl_optim {
    hl_optim_config cfg[HL_OPTIM_MAX_GROUPS];
    int n_groups;
    hl_params *params;
    int64_t step;        /* updates done so far */
    /* AdamW moments; SGD and Muon momentum in m. v is NULL without an AdamW
     * group, and 0 outside AdamW's tensors. */
    hl_real *m, *v;
    unsigned char *group; /* (tensors): the group of parameter tensor i */
    hl_optim_plan *plan;
} hl_optim;

/* One group of every tensor. NULL on a bad configuration or out of memory
 * (reason in err). */
hl_optim *hl_optim_new(hl_params *params, const hl_optim_config *cfg, hl_error *err);
/* Groups, each with its kind, learning rate and settings. NULL on a bad
 * configuration (the error names the group or tensor), a Muon tensor of rank
 * below 2, or out of memory. */
hl_optim *hl_optim_new_groups(hl_params *params, const hl_optim_groups *groups, hl_error *err);
void hl_optim_free(hl_optim *opt);
/* The kind that updates parameter tensor i (hl_params_tensor's index). */
hl_optim_kind hl_optim_tensor_kind(const hl_optim *opt, size_t i);
/* "adamw", "sgd" or "muon". */
const char *hl_optim_kind_name(hl_optim_kind kind);
/* One update with learning rate cfg.lr * lr_scale. */
void hl_optim_step(hl_optim *opt, double lr_scale);
/* The same with every gradient read as gradient · grad_scale (rounded to
 * hl_real once, as hl_clip_grad_norm's scaling is): clipping fused into the
 * update, one pass over the parameters fewer, the same bits as
 * hl_clip_grad_norm followed by hl_optim_step. The gradients are left as
 * they were. */
void hl_optim_step_scaled(hl_optim *opt, double lr_scale, double grad_scale);

/* Linear warm-up over warmup_steps, then constant or cosine decay to
 * min_scale at total_steps, or warm-up, stable, decay (WSD): constant, then
 * linear decay to 0 over the final decay_frac of total_steps, the multiplier
 * min(1, (total_steps − k) / (decay_frac·total_steps)). During warm-up the
 * multiplier is the smaller of the ramp (k + 1) / warmup_steps and WSD's.
 * Returns the multiplier for step k (0-based). */
typedef struct hl_lr_schedule {
    int64_t warmup_steps;
    int64_t total_steps;
    bool cosine;         /* false: constant after warm-up */
    double min_scale;
    double decay_frac;   /* > 0: WSD with this decay fraction (cosine is ignored) */
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
