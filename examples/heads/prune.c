/* heads prune: removes a set of heads from the weights. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/heads/heads.h"

/* Largest |logit difference| between two models (a run with its ablation) on
 * the set's first batch. */
static double logit_difference(const hl_gpt *a, const hl_gpt_run *a_run, const hl_gpt *b,
                               const hl_eval_set *set)
{
    hl_graph *g = hl_graph_new(0);
    if (!g)
        return NAN;
    hl_graph_set_grad_enabled(g, false);
    hl_graph_set_training(g, false);
    int B = set->n < set->batch ? set->n : set->batch;
    hl_tensor *x = hl_gpt_forward(g, a, set->tokens, B, set->T, a_run);
    hl_tensor *y = hl_gpt_forward(g, b, set->tokens, B, set->T, NULL);
    double worst = hl_graph_failed(g) ? NAN : 0;
    for (size_t i = 0; !hl_graph_failed(g) && i < x->numel; i++)
        worst = fmax(worst, fabs((double)x->data[i] - y->data[i]));
    hl_graph_free(g);
    return worst;
}

static int save_pruned(const options *o, const hl_gpt *m, const hl_gpt_meta *meta)
{
    hl_error err = {0};
    char path[4200];
    snprintf(path, sizeof path, "%s/pruned.safetensors", o->out);
    if (hl_gpt_save_meta(path, m, meta, &err) != HL_OK)
        heads_fail(&err); /* 2 for a file that cannot be written */
    printf("wrote %s\n", path);
    return 0;
}

int heads_run_prune_once(const options *o, study *s)
{
    hl_error err = {0};
    hl_head_set remove = heads_parse_list(s->m, o->heads);
    hl_gpt_meta meta = s->meta;
    hl_gpt *small = hl_prune_heads(s->m, &remove, &meta.pruned, &err);
    if (!small)
        heads_bad_input("%s", err.message);
    heads_make_out_dir(o);
    heads_print_model(s, o->model);
    hl_eval_result gated, after;
    if (hl_heads_evaluate(s->m, s->set, &remove, NULL, &gated, &err) ||
        hl_heads_evaluate(small, s->set, NULL, NULL, &after, &err))
        heads_fail(&err);
    hl_heads_run gated_run;
    if (hl_heads_run_ablate(&gated_run, s->m, s->set->T, &remove, NULL, &err))
        heads_fail(&err);
    double diff = logit_difference(s->m, &gated_run.run, small, s->set);
    hl_heads_run_free(&gated_run);
    double t_before = heads_forward_seconds(s->m, s->set, o->timing_runs, &err);
    double t_after = heads_forward_seconds(small, s->set, o->timing_runs, &err);
    char record[1024];
    hl_pruned_heads_format(&meta.pruned, &small->cfg, record, sizeof record);
    printf("pruned %d heads (record \"%s\"): %zu -> %zu parameters, forward pass over the set "
           "%.2f -> %.2f ms (median of %d)\n",
           hl_head_set_count(&remove), record, hl_params_n_values(s->m->params),
           hl_params_n_values(small->params), t_before * 1e3, t_after * 1e3, o->timing_runs);
    heads_print_result(s->set, "heads gated to 0", &gated);
    heads_print_result(s->set, "pruned model    ", &after);
    printf("largest logit difference, pruned vs gated, on the first batch: %.3g\n", diff);
    int rc = save_pruned(o, small, &meta);
    hl_gpt_free(small);
    return rc;
}
