/* heads prune --curve: prunes the least important heads step by step,
 * optionally fine-tuning after each step, and records what is left. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/heads/heads.h"

/* ---- fine-tuning data ------------------------------------------------------ */

typedef struct {
    bool toy;
    hl_rng rng;
    hl_toy_batch *toy_batch;
    int32_t *text;       /* charlm: --finetune-data's tokens */
    size_t size;
    int B, T, n_groups;
    int32_t *x, *y;
    const int32_t *tokens, *targets[2]; /* the current batch */
    const hl_gpt *m;                     /* the model being fine-tuned */
} train_source;

static void source_close(train_source *src)
{
    hl_toy_batch_free(src->toy_batch);
    free(src->text);
    free(src->x);
    free(src->y);
}

/* The fine-tuning data of the study's kind; exits 2 on bad input, 1 when out
 * of memory. */
static void source_open(train_source *src, const options *o, const study *s)
{
    *src = (train_source){.toy = s->toy, .T = s->set->T, .B = s->toy ? 32 : 16,
                          .n_groups = s->set->n_groups};
    hl_rng_seed(&src->rng, FINETUNE_SEED);
    if (o->finetune > 0 && !s->toy) {
        if (!o->finetune_data)
            heads_bad_input("--finetune on a charlm model needs --finetune-data FILE (the text "
                            "to train on; keep it apart from the --data evaluation text)");
        src->text = heads_read_tokens(o->finetune_data, s->meta.vocab, &src->size);
        if (src->size < (size_t)src->T + 2)
            heads_bad_input("%s is too short to fine-tune on (%zu tokens)", o->finetune_data,
                            src->size);
    }
    src->toy_batch = s->toy ? hl_toy_batch_new(src->B) : NULL;
    src->x = malloc(sizeof *src->x * (size_t)src->B * src->T);
    src->y = malloc(sizeof *src->y * (size_t)src->B * src->T);
    if (!src->x || !src->y || (s->toy && !src->toy_batch)) {
        fprintf(stderr, "heads: out of memory\n");
        exit(1);
    }
}

/* One fine-tuning batch: tokens and the targets of each group. */
static void next_batch(train_source *src)
{
    if (src->toy) {
        hl_toy_sample(src->toy_batch, &src->rng);
        src->tokens = src->toy_batch->tokens;
        src->targets[0] = src->toy_batch->scored;
        src->targets[1] = src->toy_batch->other;
        return;
    }
    for (int b = 0; b < src->B; b++) {
        size_t at = (size_t)(hl_rng_uniform(&src->rng) * (double)(src->size - (size_t)src->T - 1));
        for (int t = 0; t < src->T; t++) {
            src->x[b * src->T + t] = src->text[at + t];
            src->y[b * src->T + t] = src->text[at + t + 1];
        }
    }
    src->tokens = src->x;
    src->targets[0] = src->y;
}

/* The sum of the groups' mean losses, soft-capped as the model's are (an
 * hl_loss_fn). */
static hl_tensor *finetune_loss(hl_graph *g, void *ctx)
{
    const train_source *src = ctx;
    hl_tensor *logits = hl_gpt_forward(g, src->m, src->tokens, src->B, src->T, NULL);
    hl_tensor *loss = NULL;
    for (int k = 0; k < src->n_groups; k++) {
        hl_tensor *ce = hl_gpt_loss(g, src->m, logits, src->targets[k], HL_EVAL_IGNORE);
        loss = loss ? hl_add(g, loss, ce) : ce;
    }
    return loss;
}

/* Fine-tunes every weight for `steps` AdamW steps, gradients clipped at 1
 * (fresh optimizer state: the weights changed shape). */
static hl_status finetune(hl_gpt *m, train_source *src, int steps, double lr, hl_error *err)
{
    const hl_optim_config adamw = {.kind = HL_OPTIM_ADAMW, .lr = lr, .beta1 = 0.9,
                                   .beta2 = 0.98, .eps = 1e-8, .weight_decay = 0.01};
    hl_optim *opt = hl_optim_new(m->params, &adamw, err);
    hl_graph *g = hl_graph_new(0);
    hl_status s = opt && g ? HL_OK : hl_error_set(err, HL_ERR_NOMEM, "out of memory");
    if (g)
        hl_graph_seed(g, FINETUNE_SEED);
    src->m = m;
    for (int step = 0; s == HL_OK && step < steps; step++) {
        next_batch(src);
        hl_step one = {.index = step, .lr_scale = 1.0, .clip = 1.0};
        hl_step_result result;
        s = hl_train_step(g, m->params, opt, &one, finetune_loss, src, &result, err);
    }
    hl_params_zero_grad(m->params);
    hl_optim_free(opt);
    hl_graph_free(g);
    return s;
}

/* ---- the curve -------------------------------------------------------------- */

typedef struct {
    int step, heads_left, params;
    double fraction, forward_ms;
    char pruned_now[512];
    hl_eval_result r;
} curve_point;

/* The n least important heads that may go (a layer keeps at least one). */
static int choose_heads(const study *s, const double *raw, const double *norm, int n,
                        hl_head_set *remove, char *names, size_t size)
{
    const hl_gpt_config *c = &s->m->cfg;
    scored_head *ranked = malloc(sizeof *ranked * (size_t)c->n_layers * c->n_heads);
    if (!ranked)
        return -1;
    int total = heads_rank(s, raw, norm, ranked), left[HL_GPT_MAX_LAYERS], chosen = 0;
    for (int l = 0; l < c->n_layers; l++)
        left[l] = hl_gpt_layer_heads(c, l);
    memset(remove, 0, sizeof *remove);
    names[0] = '\0';
    for (int i = total - 1; i >= 0 && chosen < n; i--) {
        const scored_head *h = &ranked[i];
        if (left[h->layer] <= 1)
            continue;
        left[h->layer]--;
        remove->on[h->layer][h->head] = true;
        char name[HL_HEAD_NAME_MAX];
        size_t used = strlen(names);
        snprintf(names + used, size - used, "%s%s", chosen ? " " : "",
                 hl_head_name(s->m, h->layer, h->head, name));
        chosen++;
    }
    free(ranked);
    return chosen;
}

static void print_point(const hl_eval_set *set, const curve_point *p)
{
    printf("%4d  %10d  %8.3f  %8d  %10.2f", p->step, p->heads_left, p->fraction, p->params,
           p->forward_ms);
    for (int k = 0; k < set->n_groups; k++)
        printf("  %8.4f  %8.4f", p->r.loss[k], p->r.accuracy[k]);
    printf("  %s\n", p->pruned_now);
}

static int write_curve_plot(const study *s, const curve_point *pts, int n, int finetune,
                            const char *dir, hl_error *err)
{
    const hl_eval_set *set = s->set;
    double *buf = malloc(sizeof *buf * (size_t)n * (3 + 2 * HL_EVAL_MAX_GROUPS));
    if (!buf)
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory"), -1;
    double *x = buf, *params = buf + n, *time = buf + 2 * n;
    char labels[2][HL_EVAL_MAX_GROUPS][48];
    hl_plot_series loss[HL_EVAL_MAX_GROUPS], acc[HL_EVAL_MAX_GROUPS], cost[2];
    for (int i = 0; i < n; i++) {
        x[i] = pts[i].fraction;
        params[i] = (double)pts[i].params / pts[0].params;
        time[i] = pts[i].forward_ms / pts[0].forward_ms;
    }
    for (int k = 0; k < set->n_groups; k++) {
        double *l = buf + (3 + 2 * k) * n, *a = l + n;
        for (int i = 0; i < n; i++) {
            l[i] = pts[i].r.loss[k];
            a[i] = pts[i].r.accuracy[k];
        }
        snprintf(labels[0][k], sizeof labels[0][k], "%s loss", set->group_names[k]);
        snprintf(labels[1][k], sizeof labels[1][k], "%s accuracy", set->group_names[k]);
        loss[k] = (hl_plot_series){labels[0][k], x, l, n};
        acc[k] = (hl_plot_series){labels[1][k], x, a, n};
    }
    cost[0] = (hl_plot_series){"parameters", x, params, n};
    cost[1] = (hl_plot_series){"forward time", x, time, n};
    hl_plot_panel panels[] = {
        {.y_label = "loss (nats)", .series = loss, .n_series = set->n_groups},
        {.y_label = "accuracy", .series = acc, .n_series = set->n_groups, .y_max = 1},
        {.y_label = "vs unpruned", .series = cost, .n_series = 2}};
    char title[160];
    int len = snprintf(title, sizeof title, "pruning %d heads, least important first",
                       s->m->cfg.n_layers * s->m->cfg.n_heads);
    if (finetune)
        snprintf(title + len, sizeof title - (size_t)len, ", %d fine-tuning steps after each",
                 finetune);
    hl_plot_opts opts = {.title = title, .x_label = "fraction of heads pruned", .x_max = 1};
    char path[4200];
    snprintf(path, sizeof path, "%s/prune_curve.png", dir);
    int rc = hl_plot_write(panels, 3, path, &opts, err) == HL_OK ? 0 : -1;
    free(buf);
    return rc;
}

static int measure_point(study *s, const options *o, curve_point *p, hl_error *err)
{
    const int original = s->m->cfg.n_layers * s->m->cfg.n_heads;
    p->heads_left = heads_total(s->m);
    p->fraction = (double)(original - p->heads_left) / original;
    p->params = (int)hl_params_n_values(s->m->params);
    p->forward_ms = heads_forward_seconds(s->m, s->set, o->timing_runs, err) * 1e3;
    return hl_heads_evaluate(s->m, s->set, NULL, NULL, &p->r, err) == HL_OK ? 0 : -1;
}

/* Re-scores importance, prunes the least important share of the remaining
 * heads (s->m is replaced) and names them in next->pruned_now; 1 when no
 * head can go (each layer keeps one). */
static int prune_step(study *s, const options *o, double *raw, double *norm, curve_point *next,
                      hl_error *err)
{
    int left = heads_total(s->m);
    if (left - s->m->cfg.n_layers <= 0)
        return 1;
    int want = (int)lround(o->step_fraction * left);
    hl_head_set remove;
    if (hl_heads_importance(s->m, s->set, raw, norm, err) != HL_OK)
        heads_fail(err);
    if (choose_heads(s, raw, norm, want < 1 ? 1 : want, &remove, next->pruned_now,
                     sizeof next->pruned_now) < 0) {
        fprintf(stderr, "heads: out of memory\n");
        exit(1);
    }
    hl_gpt *small = hl_prune_heads(s->m, &remove, &s->meta.pruned, err);
    if (!small)
        heads_fail(err);
    hl_gpt_free(s->m);
    s->m = small;
    return 0;
}

static int write_curve_csv(const hl_eval_set *set, const curve_point *pts, int n, const char *dir)
{
    text_out csv;
    FILE *f = heads_text_begin(&csv);
    fprintf(f, "step,heads_left,fraction_pruned,pruned_now,params,forward_ms");
    for (int k = 0; k < set->n_groups; k++)
        fprintf(f, ",%s_loss,%s_accuracy", set->group_names[k], set->group_names[k]);
    fprintf(f, "\n");
    for (int i = 0; i < n; i++) {
        fprintf(f, "%d,%d,%.6f,%s,%d,%.4f", pts[i].step, pts[i].heads_left, pts[i].fraction,
                pts[i].pruned_now, pts[i].params, pts[i].forward_ms);
        for (int k = 0; k < set->n_groups; k++)
            fprintf(f, ",%.6f,%.6f", pts[i].r.loss[k], pts[i].r.accuracy[k]);
        fprintf(f, "\n");
    }
    return heads_text_save(&csv, dir, "prune_curve.csv");
}

static void print_header(const options *o, const study *s, const train_source *src)
{
    heads_print_model(s, o->model);
    printf("pruning %.0f%% of the remaining heads per step%s\n", o->step_fraction * 100,
           o->finetune ? ", then fine-tuning" : "");
    if (o->finetune)
        printf("fine-tuning: %d AdamW steps of %d sequences, lr %g\n", o->finetune, src->B,
               o->lr);
    printf("step  heads_left  fraction    params  forward_ms");
    for (int k = 0; k < s->set->n_groups; k++)
        printf("  %8.8s  %8.8s", s->set->group_names[k], "accuracy");
    printf("  pruned\n");
}

int heads_run_prune_curve(const options *o, study *s)
{
    hl_error err = {0};
    train_source src;
    source_open(&src, o, s);
    const size_t cells = (size_t)s->m->cfg.n_layers * s->m->cfg.n_heads;
    double *raw = malloc(cells * sizeof *raw), *norm = malloc(cells * sizeof *norm);
    curve_point *pts = calloc((size_t)heads_total(s->m) + 1, sizeof *pts);
    int n = 0, rc = raw && norm && pts ? 0 : 1;
    if (rc)
        fprintf(stderr, "heads: out of memory\n");
    if (!rc) {
        heads_make_out_dir(o);
        print_header(o, s, &src);
    }
    for (bool more = !rc; more; n++) {
        pts[n].step = n;
        if (measure_point(s, o, &pts[n], &err))
            heads_fail(&err);
        print_point(s->set, &pts[n]);
        more = prune_step(s, o, raw, norm, &pts[n + 1], &err) == 0;
        if (more && o->finetune && finetune(s->m, &src, o->finetune, o->lr, &err) != HL_OK) {
            fprintf(stderr, "heads: fine-tuning: %s\n", err.message);
            exit(1);
        }
    }
    /* A file that cannot be written exits 2, as in every command. */
    if (!rc && (rc = write_curve_csv(s->set, pts, n, o->out)) == 0) {
        if (write_curve_plot(s, pts, n, o->finetune, o->out, &err))
            heads_fail(&err);
        printf("wrote %s/prune_curve.csv, %s/prune_curve.png\n", o->out, o->out);
    }
    free(raw);
    free(norm);
    free(pts);
    source_close(&src);
    return rc;
}
