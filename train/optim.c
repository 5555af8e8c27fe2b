#include "train/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "ops/kernels.h"

/* Kernels go parallel above this many values (cf. HL_PARALLEL_MIN_WORK). */
#define OPTIM_PARALLEL_MIN 32768

hl_optim *hl_optim_new(hl_params *params, const hl_optim_config *cfg, hl_error *err)
{
    if (!params || !cfg || !hl_params_values(params)) {
        hl_error_set(err, HL_ERR_ARG, "optim: needs a committed parameter block and a config");
        return NULL;
    }
    if (!(cfg->lr >= 0) || !(cfg->weight_decay >= 0) ||
        (cfg->kind == HL_OPTIM_ADAMW &&
         (!(cfg->beta1 >= 0 && cfg->beta1 < 1) || !(cfg->beta2 >= 0 && cfg->beta2 < 1) ||
          !(cfg->eps > 0))) ||
        (cfg->kind == HL_OPTIM_SGD && !(cfg->momentum >= 0 && cfg->momentum < 1))) {
        hl_error_set(err, HL_ERR_ARG,
                     "optim: bad hyper-parameters (lr %g, betas %g %g, eps %g, momentum %g, "
                     "weight decay %g)",
                     cfg->lr, cfg->beta1, cfg->beta2, cfg->eps, cfg->momentum, cfg->weight_decay);
        return NULL;
    }
    hl_optim *opt = calloc(1, sizeof *opt);
    size_t bytes = (hl_params_count(params) ? hl_params_count(params) : 1) * sizeof(hl_real);
    if (opt) {
        opt->m = aligned_alloc(HL_ARENA_ALIGN, bytes);
        opt->v = cfg->kind == HL_OPTIM_ADAMW ? aligned_alloc(HL_ARENA_ALIGN, bytes) : NULL;
    }
    if (!opt || !opt->m || (cfg->kind == HL_OPTIM_ADAMW && !opt->v)) {
        hl_optim_free(opt);
        hl_error_set(err, HL_ERR_NOMEM, "optim: out of memory for the optimizer state");
        return NULL;
    }
    memset(opt->m, 0, bytes);
    if (opt->v)
        memset(opt->v, 0, bytes);
    opt->cfg = *cfg;
    opt->params = params;
    return opt;
}

void hl_optim_free(hl_optim *opt)
{
    if (!opt)
        return;
    free(opt->m);
    free(opt->v);
    free(opt);
}

/* Parameters per parallel chunk of the AdamW step: whole vectors and pages. */
#define ADAMW_CHUNK 8192

static void adamw_step(hl_optim *opt, double lr, hl_real scale)
{
    const size_t n = hl_params_count(opt->params);
    hl_real *w = hl_params_values(opt->params);
    const hl_real *grad = hl_params_grads(opt->params);
    hl_real *m = opt->m, *v = opt->v;
    const double t = (double)opt->step;
    /* torch.optim.AdamW: decay, then p -= lr/bc1 · m / (sqrt(v)/sqrt(bc2) + eps). */
    const hl_adamw_args a = {
        .grad_scale = scale,
        .decay = (hl_real)(1 - lr * opt->cfg.weight_decay),
        .b1 = (hl_real)opt->cfg.beta1,
        .b2 = (hl_real)opt->cfg.beta2,
        .step_size = (hl_real)(lr / (1 - pow(opt->cfg.beta1, t))),
        .sqrt_bc2 = (hl_real)sqrt(1 - pow(opt->cfg.beta2, t)),
        .eps = (hl_real)opt->cfg.eps,
    };
    hl_adamw_fn *step = hl_kernels()->adamw;
    const size_t chunks = (n + ADAMW_CHUNK - 1) / ADAMW_CHUNK;
#pragma omp parallel for if (n >= OPTIM_PARALLEL_MIN) schedule(static)
    for (size_t c = 0; c < chunks; c++) {
        const size_t at = c * ADAMW_CHUNK, len = n - at < ADAMW_CHUNK ? n - at : ADAMW_CHUNK;
        step(w + at, grad + at, m + at, v + at, len, &a);
    }
}

static void sgd_step(hl_optim *opt, double lr, hl_real scale)
{
    const size_t n = hl_params_count(opt->params);
    hl_real *w = hl_params_values(opt->params);
    const hl_real *grad = hl_params_grads(opt->params);
    hl_real *buf = opt->m;
    const hl_real wd = (hl_real)opt->cfg.weight_decay, mu = (hl_real)opt->cfg.momentum;
    const hl_real rate = (hl_real)lr;
    const int first = opt->step == 1;
    const bool scaled = scale != 1;
    /* torch.optim.SGD: g += wd·p; buf = g on the first step, else mu·buf + g. */
#pragma omp parallel for if (n >= OPTIM_PARALLEL_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        hl_real g = (scaled ? grad[i] * scale : grad[i]) + wd * w[i];
        if (mu != 0) {
            buf[i] = first ? g : mu * buf[i] + g;
            g = buf[i];
        }
        w[i] -= rate * g;
    }
}

void hl_optim_step_scaled(hl_optim *opt, double lr_scale, double grad_scale)
{
    opt->step++;
    const double lr = opt->cfg.lr * lr_scale;
    if (opt->cfg.kind == HL_OPTIM_ADAMW)
        adamw_step(opt, lr, (hl_real)grad_scale);
    else
        sgd_step(opt, lr, (hl_real)grad_scale);
}

void hl_optim_step(hl_optim *opt, double lr_scale) { hl_optim_step_scaled(opt, lr_scale, 1); }

double hl_lr_scale(const hl_lr_schedule *s, int64_t k)
{
    if (s->warmup_steps > 0 && k < s->warmup_steps)
        return (double)(k + 1) / (double)s->warmup_steps;
    if (!s->cosine || s->total_steps <= s->warmup_steps)
        return 1.0;
    double progress = (double)(k - s->warmup_steps) / (double)(s->total_steps - s->warmup_steps);
    if (progress > 1)
        progress = 1;
    return s->min_scale + (1 - s->min_scale) * 0.5 * (1 + cos(3.14159265358979323846 * progress));
}

/* The squared norm in GRAD_NORM_CHUNKS fixed chunks, each summed in element
 * order, the chunks' sums then added in chunk order: the same bits for any
 * thread count. GRAD_NORM_LANES chunks advance in lockstep, so their additions
 * overlap instead of each waiting for the one before (a lone running sum goes
 * at one element per add latency). */
#define GRAD_NORM_CHUNKS 256
#define GRAD_NORM_LANES 8
_Static_assert(GRAD_NORM_CHUNKS % GRAD_NORM_LANES == 0, "whole groups of chunks");

double hl_grad_norm(const hl_params *params)
{
    const size_t n = hl_params_count(params);
    const hl_real *grad = hl_params_grads(params);
    const size_t chunk = n / GRAD_NORM_CHUNKS + 1;
    double partial[GRAD_NORM_CHUNKS];
#pragma omp parallel for if (n >= OPTIM_PARALLEL_MIN) schedule(static)
    for (int c0 = 0; c0 < GRAD_NORM_CHUNKS; c0 += GRAD_NORM_LANES) {
        const hl_real *at[GRAD_NORM_LANES];
        size_t len[GRAD_NORM_LANES], common = chunk;
        for (int l = 0; l < GRAD_NORM_LANES; l++) {
            const size_t begin = (size_t)(c0 + l) * chunk < n ? (size_t)(c0 + l) * chunk : n;
            at[l] = grad + begin;
            len[l] = n - begin < chunk ? n - begin : chunk;
            common = len[l] < common ? len[l] : common;
        }
        double s[GRAD_NORM_LANES] = {0};
        for (size_t i = 0; i < common; i++)
            for (int l = 0; l < GRAD_NORM_LANES; l++)
                s[l] += (double)at[l][i] * at[l][i];
        for (int l = 0; l < GRAD_NORM_LANES; l++) {
            for (size_t i = common; i < len[l]; i++)
                s[l] += (double)at[l][i] * at[l][i];
            partial[c0 + l] = s[l];
        }
    }
    double total = 0;
    for (int c = 0; c < GRAD_NORM_CHUNKS; c++)
        total += partial[c];
    return sqrt(total);
}

double hl_clip_scale(double norm, double max_norm)
{
    return max_norm > 0 && norm > max_norm ? max_norm / (norm + 1e-6) : 1;
}

double hl_clip_grad_norm(hl_params *params, double max_norm)
{
    const double norm = hl_grad_norm(params);
    const double scale = hl_clip_scale(norm, max_norm);
    if (scale != 1) {
        const size_t n = hl_params_count(params);
        hl_real *grad = hl_params_grads(params);
        const hl_real coef = (hl_real)scale;
#pragma omp parallel for if (n >= OPTIM_PARALLEL_MIN) schedule(static)
        for (size_t i = 0; i < n; i++)
            grad[i] *= coef;
    }
    return norm;
}
