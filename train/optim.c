#include "train/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/pages.h"
#include "ops/kernels.h"
#include "train/muon.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* Kernels go parallel above this many values (cf. HL_PARALLEL_MIN_WORK). */
#define OPTIM_PARALLEL_MIN 32768

/* Parameters per parallel chunk of the elementwise steps: whole vectors and pages. */
#define ADAMW_CHUNK 8192

/* Muon's matrices are orthogonalised one per thread, in parallel, when every
 * thread's Newton–Schulz work fits in this much memory together; above it,
 * one after another, each on the whole team. */
#define MUON_TEAM_WORK_BYTES ((size_t)256 << 20)

/* A run of values one elementwise group updates (AdamW, SGD). */
typedef struct {
    size_t at, len;
    int group;
} segment;

/* A matrix Muon orthogonalises: a tensor, or one of its row blocks. */
typedef struct {
    size_t at;
    int rows, cols, group;
} matrix;

struct hl_optim_plan {
    segment *segments;
    size_t n_segments, elementwise; /* segments, and the values they cover */
    matrix *matrices;
    size_t n_matrices;
    /* Muon: per thread, the update direction (largest matrix), then
     * Newton–Schulz's work; `slots` such areas `slot` values apart. */
    hl_real *work;
    size_t slot;
    int slots;
};

static hl_status check_config(const hl_optim_config *c, int group, hl_error *err)
{
    bool ok = c->lr >= 0 && isfinite(c->lr) && c->weight_decay >= 0 && isfinite(c->weight_decay);
    switch (c->kind) {
    case HL_OPTIM_ADAMW:
        ok = ok && c->beta1 >= 0 && c->beta1 < 1 && c->beta2 >= 0 && c->beta2 < 1 && c->eps > 0 &&
             isfinite(c->eps);
        break;
    case HL_OPTIM_SGD:
        ok = ok && c->momentum >= 0 && c->momentum < 1;
        break;
    case HL_OPTIM_MUON:
        ok = ok && c->momentum >= 0 && c->momentum < 1 && c->ns_steps >= 0 && c->ns_steps <= 100;
        break;
    default:
        return hl_error_set(err, HL_ERR_ARG, "optim: group %d has an unknown kind %d", group,
                            (int)c->kind);
    }
    if (!ok)
        return hl_error_set(err, HL_ERR_ARG,
                            "optim: group %d (%s): bad hyper-parameters (lr %g, betas %g %g, "
                            "eps %g, momentum %g, weight decay %g, Newton-Schulz steps %d)",
                            group, hl_optim_kind_name(c->kind), c->lr, c->beta1, c->beta2,
                            c->eps, c->momentum, c->weight_decay, c->ns_steps);
    return HL_OK;
}

/* The values tensor i spans in the block, its padding included. */
static size_t tensor_span(const hl_params *p, size_t i)
{
    const hl_real *at = hl_params_tensor(p, i)->data;
    const hl_real *end = i + 1 < hl_params_n_tensors(p) ? hl_params_tensor(p, i + 1)->data
                                                        : hl_params_values(p) + hl_params_count(p);
    return (size_t)(end - at);
}

/* Elementwise tensors become chunks of at most ADAMW_CHUNK values, neighbours
 * of one group merged; Muon tensors become their row blocks. Counts first
 * (lists NULL), then fills. */
static hl_status plan_tensors(hl_optim *opt, const hl_optim_groups *gs, hl_optim_plan *plan,
                              size_t *work, hl_error *err)
{
    const hl_params *p = opt->params;
    const hl_real *base = hl_params_values(p);
    size_t n_seg = 0, n_mat = 0, run_at = 0, run_len = 0;
    int run_group = -1;
    *work = 0;
    for (size_t i = 0; i <= hl_params_n_tensors(p); i++) {
        const hl_tensor *t = i < hl_params_n_tensors(p) ? hl_params_tensor(p, i) : NULL;
        int rows[HL_OPTIM_MAX_BLOCKS] = {0}, n_blocks = 0, group = -1;
        if (t) {
            group = gs->group_of ? gs->group_of(gs->ctx, t, &n_blocks, rows) : 0;
            if (group < 0 || group >= gs->n)
                return hl_error_set(err, HL_ERR_ARG, "optim: %s is in group %d of %d", t->name,
                                    group, gs->n);
            opt->group[i] = (unsigned char)group;
        }
        const bool muon = t && gs->cfg[group].kind == HL_OPTIM_MUON;
        /* Close the running elementwise segment at a change of group. */
        if (run_len && (!t || muon || group != run_group)) {
            for (size_t at = 0; at < run_len; at += ADAMW_CHUNK, n_seg++)
                if (plan->segments)
                    plan->segments[n_seg] = (segment){
                        .at = run_at + at, .group = run_group,
                        .len = run_len - at < ADAMW_CHUNK ? run_len - at : ADAMW_CHUNK};
            plan->elementwise += plan->segments ? run_len : 0;
            run_len = 0;
        }
        if (!t)
            break;
        const size_t at = (size_t)(t->data - base);
        if (!muon) {
            if (!run_len) {
                run_at = at;
                run_group = group;
            }
            run_len += tensor_span(p, i);
            continue;
        }
        if (t->rank < 2)
            return hl_error_set(err, HL_ERR_ARG, "optim: %s (rank %d) in Muon group %d: Muon "
                                "updates matrices", t->name, t->rank, group);
        if (n_blocks < 0 || n_blocks > HL_OPTIM_MAX_BLOCKS)
            return hl_error_set(err, HL_ERR_ARG, "optim: %s cut into %d row blocks (at most %d)",
                                t->name, n_blocks, HL_OPTIM_MAX_BLOCKS);
        if (n_blocks == 0) {
            n_blocks = 1;
            rows[0] = t->shape[0];
        }
        const int cols = (int)(t->numel / (size_t)t->shape[0]);
        int sum = 0;
        for (int b = 0; b < n_blocks; b++) {
            if (rows[b] <= 0 || rows[b] > t->shape[0] - sum)
                return hl_error_set(err, HL_ERR_ARG, "optim: %s: row blocks that do not sum to "
                                    "its %d rows", t->name, t->shape[0]);
            const size_t size = (size_t)rows[b] * cols;
            const size_t need = size + hl_muon_work_size(rows[b], cols);
            *work = need > *work ? need : *work;
            if (plan->matrices)
                plan->matrices[n_mat] = (matrix){.at = at + (size_t)sum * cols, .rows = rows[b],
                                                 .cols = cols, .group = group};
            n_mat++;
            sum += rows[b];
        }
        if (sum != t->shape[0])
            return hl_error_set(err, HL_ERR_ARG, "optim: %s: row blocks that do not sum to its "
                                "%d rows", t->name, t->shape[0]);
    }
    plan->n_segments = n_seg;
    plan->n_matrices = n_mat;
    return HL_OK;
}

/* Newton–Schulz's multiply-adds grow as r²·c for r rows by c columns, r the
 * shorter side. */
static double muon_cost(const matrix *x)
{
    const double r = x->rows < x->cols ? x->rows : x->cols, c = x->rows + x->cols - r;
    return r * r * c;
}

/* The costliest matrix first, then by place in the parameters. */
static int by_cost(const void *pa, const void *pb)
{
    const matrix *a = pa, *b = pb;
    const double ca = muon_cost(a), cb = muon_cost(b);
    if (ca != cb)
        return ca > cb ? -1 : 1;
    return a->at < b->at ? -1 : a->at > b->at;
}

#ifdef _OPENMP
/* The work areas a team of `threads` gets: one each when they fit in
 * MUON_TEAM_WORK_BYTES together, else one. */
static int team_slots(const hl_optim_plan *plan, int threads)
{
    return threads > 1 && plan->n_matrices > 1 &&
                   plan->slot * sizeof(hl_real) * (size_t)threads <= MUON_TEAM_WORK_BYTES
               ? threads
               : 1;
}
#endif

static hl_status plan_new(hl_optim *opt, const hl_optim_groups *gs, hl_error *err)
{
    hl_optim_plan *plan = opt->plan = calloc(1, sizeof *plan);
    size_t work = 0;
    if (!plan)
        return hl_error_set(err, HL_ERR_NOMEM, "optim: out of memory for the optimizer state");
    if (plan_tensors(opt, gs, plan, &work, err) != HL_OK)
        return err->status;
    plan->segments = malloc((plan->n_segments ? plan->n_segments : 1) * sizeof *plan->segments);
    plan->matrices = malloc((plan->n_matrices ? plan->n_matrices : 1) * sizeof *plan->matrices);
    /* Small products waste most of a team on fork, join and split packing: a
     * slot per thread lets each orthogonalise whole matrices (same bits). */
    plan->slot = (work * sizeof(hl_real) + HL_ARENA_ALIGN - 1) / HL_ARENA_ALIGN * HL_ARENA_ALIGN /
                 sizeof(hl_real);
    plan->slots = 1;
#ifdef _OPENMP
    plan->slots = team_slots(plan, omp_get_max_threads());
#endif
    plan->work = work ? aligned_alloc(HL_ARENA_ALIGN, plan->slot * sizeof(hl_real) *
                                                          (size_t)plan->slots)
                      : NULL;
    if (!plan->segments || !plan->matrices || (work && !plan->work))
        return hl_error_set(err, HL_ERR_NOMEM, "optim: out of memory for the optimizer state");
    if (plan_tensors(opt, gs, plan, &work, err) != HL_OK)
        return err->status;
    /* A team hands out matrices in this order as its threads come free:
     * largest first, the last ones to start are the smallest, and the threads
     * finish closer together than in the model's order, whose last matrices
     * are a layer's MLP, its largest. */
    qsort(plan->matrices, plan->n_matrices, sizeof *plan->matrices, by_cost);
    return HL_OK;
}

static void plan_free(hl_optim_plan *plan)
{
    if (!plan)
        return;
    free(plan->segments);
    free(plan->matrices);
    free(plan->work);
    free(plan);
}

hl_optim *hl_optim_new_groups(hl_params *params, const hl_optim_groups *groups, hl_error *err)
{
    hl_error local = {0};
    if (!err)
        err = &local;
    if (!params || !groups || !hl_params_values(params)) {
        hl_error_set(err, HL_ERR_ARG, "optim: needs a committed parameter block and a config");
        return NULL;
    }
    if (groups->n < 1 || groups->n > HL_OPTIM_MAX_GROUPS) {
        hl_error_set(err, HL_ERR_ARG, "optim: %d groups (1 to %d)", groups->n,
                     HL_OPTIM_MAX_GROUPS);
        return NULL;
    }
    bool adamw = false;
    for (int k = 0; k < groups->n; k++) {
        if (check_config(&groups->cfg[k], k, err) != HL_OK)
            return NULL;
        adamw |= groups->cfg[k].kind == HL_OPTIM_ADAMW;
    }
    hl_optim *opt = calloc(1, sizeof *opt);
    const size_t bytes = (hl_params_count(params) ? hl_params_count(params) : 1) * sizeof(hl_real);
    const size_t tensors = hl_params_n_tensors(params);
    if (opt) {
        memcpy(opt->cfg, groups->cfg, sizeof opt->cfg);
        opt->n_groups = groups->n;
        opt->params = params;
        opt->m = hl_pages_alloc(bytes);
        opt->v = adamw ? hl_pages_alloc(bytes) : NULL;
        opt->group = calloc(tensors ? tensors : 1, 1);
    }
    if (!opt || !opt->m || (adamw && !opt->v) || !opt->group) {
        hl_optim_free(opt);
        hl_error_set(err, HL_ERR_NOMEM, "optim: out of memory for the optimizer state");
        return NULL;
    }
    if (plan_new(opt, groups, err) != HL_OK) {
        hl_optim_free(opt);
        return NULL;
    }
    memset(opt->m, 0, bytes);
    if (opt->v)
        memset(opt->v, 0, bytes);
    return opt;
}

hl_optim *hl_optim_new(hl_params *params, const hl_optim_config *cfg, hl_error *err)
{
    if (!cfg) {
        hl_error_set(err, HL_ERR_ARG, "optim: needs a committed parameter block and a config");
        return NULL;
    }
    return hl_optim_new_groups(params, &(hl_optim_groups){.n = 1, .cfg = {*cfg}}, err);
}

void hl_optim_free(hl_optim *opt)
{
    if (!opt)
        return;
    free(opt->m);
    free(opt->v);
    free(opt->group);
    plan_free(opt->plan);
    free(opt);
}

hl_optim_kind hl_optim_tensor_kind(const hl_optim *opt, size_t i)
{
    return opt->cfg[opt->group[i]].kind;
}

const char *hl_optim_kind_name(hl_optim_kind kind)
{
    return kind == HL_OPTIM_ADAMW ? "adamw" : kind == HL_OPTIM_SGD ? "sgd" : "muon";
}

/* torch.optim.AdamW: decay, then p -= lr/bc1 · m / (sqrt(v)/sqrt(bc2) + eps). */
static hl_adamw_args adamw_args(const hl_optim_config *c, double lr, double t, hl_real scale)
{
    return (hl_adamw_args){
        .grad_scale = scale,
        .decay = (hl_real)(1 - lr * c->weight_decay),
        .b1 = (hl_real)c->beta1,
        .b2 = (hl_real)c->beta2,
        .step_size = (hl_real)(lr / (1 - pow(c->beta1, t))),
        .sqrt_bc2 = (hl_real)sqrt(1 - pow(c->beta2, t)),
        .eps = (hl_real)c->eps,
    };
}

/* torch.optim.SGD: g += wd·p; buf = g on the first step, else mu·buf + g. */
static void sgd_run(const hl_optim_config *c, double lr, bool first, hl_real scale,
                    hl_real *w, const hl_real *grad, hl_real *buf, size_t n)
{
    const hl_real wd = (hl_real)c->weight_decay, mu = (hl_real)c->momentum;
    const hl_real rate = (hl_real)lr;
    const bool scaled = scale != 1;
    for (size_t i = 0; i < n; i++) {
        hl_real g = (scaled ? grad[i] * scale : grad[i]) + wd * w[i];
        if (mu != 0) {
            buf[i] = first ? g : mu * buf[i] + g;
            g = buf[i];
        }
        w[i] -= rate * g;
    }
}

static void elementwise_step(hl_optim *opt, double lr_scale, hl_real scale)
{
    const hl_optim_plan *plan = opt->plan;
    hl_real *w = hl_params_values(opt->params), *m = opt->m, *v = opt->v;
    const hl_real *grad = hl_params_grads(opt->params);
    hl_adamw_args args[HL_OPTIM_MAX_GROUPS];
    for (int k = 0; k < opt->n_groups; k++)
        if (opt->cfg[k].kind == HL_OPTIM_ADAMW)
            args[k] = adamw_args(&opt->cfg[k], opt->cfg[k].lr * lr_scale, (double)opt->step,
                                 scale);
    hl_adamw_fn *adamw = hl_kernels()->adamw;
    const bool first = opt->step == 1;
#pragma omp parallel for if (plan->elementwise >= OPTIM_PARALLEL_MIN) schedule(static)
    for (size_t s = 0; s < plan->n_segments; s++) {
        const segment *seg = &plan->segments[s];
        const hl_optim_config *c = &opt->cfg[seg->group];
        const size_t at = seg->at;
        if (c->kind == HL_OPTIM_ADAMW)
            adamw(w + at, grad + at, m + at, v + at, seg->len, &args[seg->group]);
        else
            sgd_run(c, c->lr * lr_scale, first, scale, w + at, grad + at, m + at, seg->len);
    }
}

/* One matrix's Muon update (see optim.h), with work (plan->slot values) of
 * its own. */
static void muon_step(hl_optim *opt, const matrix *x, double lr_scale, hl_real scale,
                      hl_real *u)
{
    const hl_optim_config *c = &opt->cfg[x->group];
    const size_t n = (size_t)x->rows * x->cols;
    hl_real *w = hl_params_values(opt->params) + x->at, *buf = opt->m + x->at;
    const hl_real *grad = hl_params_grads(opt->params) + x->at;
    const hl_real mu = (hl_real)c->momentum;
#pragma omp parallel for if (n >= OPTIM_PARALLEL_MIN) schedule(static)
    for (size_t i = 0; i < n; i++) {
        const hl_real g = grad[i] * scale;
        buf[i] = mu * buf[i] + g;
        u[i] = g + mu * buf[i];
    }
    hl_muon_orthogonalize(u, x->rows, x->cols, c->ns_steps ? c->ns_steps : 5, u + n);
    const hl_real rate = (hl_real)(c->lr * lr_scale), decay = (hl_real)c->weight_decay;
    const hl_real stretch = (hl_real)sqrt(x->rows > x->cols ? (double)x->rows / x->cols : 1);
#pragma omp parallel for if (n >= OPTIM_PARALLEL_MIN) schedule(static)
    for (size_t i = 0; i < n; i++)
        w[i] -= rate * (stretch * u[i] + decay * w[i]);
}

/* Every Muon matrix: with a slot per thread, the team shares out whole
 * matrices (each one's update is computed by one thread, in one order, so the
 * bits do not depend on which thread or how many); else one after another,
 * each on the whole team. */
static void muon_steps(hl_optim *opt, double lr_scale, hl_real scale)
{
    hl_optim_plan *plan = opt->plan;
    const int n = (int)plan->n_matrices;
    int team = 1;
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
    /* More threads than at creation: their work areas, once. Without the
     * memory the team stays as large as it was. */
    if (team_slots(plan, threads) > plan->slots) {
        hl_real *more = aligned_alloc(HL_ARENA_ALIGN, plan->slot * sizeof(hl_real) *
                                                          (size_t)threads);
        if (more) {
            free(plan->work);
            plan->work = more;
            plan->slots = threads;
        }
    }
    team = threads < plan->slots ? threads : plan->slots;
#endif
    if (team > 1 && n >= team) {
#pragma omp parallel for num_threads(team) schedule(dynamic, 1)
        for (int k = 0; k < n; k++) {
            int slot = 0;
#ifdef _OPENMP
            slot = omp_get_thread_num();
#endif
            muon_step(opt, &plan->matrices[k], lr_scale, scale, plan->work + plan->slot * slot);
        }
        return;
    }
    for (int k = 0; k < n; k++)
        muon_step(opt, &plan->matrices[k], lr_scale, scale, plan->work);
}

void hl_optim_step_scaled(hl_optim *opt, double lr_scale, double grad_scale)
{
    opt->step++;
    const hl_real scale = (hl_real)grad_scale;
    elementwise_step(opt, lr_scale, scale);
    muon_steps(opt, lr_scale, scale);
}

void hl_optim_step(hl_optim *opt, double lr_scale) { hl_optim_step_scaled(opt, lr_scale, 1); }

/* The schedule's multiplier for step k, before the warm-up ramp. */
static double decay_scale(const hl_lr_schedule *s, int64_t k)
{
    if (s->decay_frac > 0) {
        const double left = (double)(s->total_steps - k) / (s->decay_frac * (double)s->total_steps);
        return left >= 1 ? 1 : left > 0 ? left : 0;
    }
    if (!s->cosine || s->total_steps <= s->warmup_steps || k <= s->warmup_steps)
        return 1.0;
    double progress = (double)(k - s->warmup_steps) / (double)(s->total_steps - s->warmup_steps);
    if (progress > 1)
        progress = 1;
    return s->min_scale + (1 - s->min_scale) * 0.5 * (1 + cos(3.14159265358979323846 * progress));
}

/* The ramp caps the schedule rather than replacing it: in a run so short
 * that WSD's decay starts inside the warm-up, the rate still falls to 0. */
double hl_lr_scale(const hl_lr_schedule *s, int64_t k)
{
    const double scale = decay_scale(s, k);
    if (s->warmup_steps > 0 && k < s->warmup_steps) {
        const double ramp = (double)(k + 1) / (double)s->warmup_steps;
        return ramp < scale ? ramp : scale;
    }
    return scale;
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
