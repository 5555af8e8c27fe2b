/* heads importance: |dL/dgate| per head (Michel et al. 2019), ranked and drawn. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/heads/heads.h"

/* Every current head with its scores, most important first. */
int heads_rank(const study *s, const double *raw, const double *norm, scored_head *out)
{
    const hl_gpt_config *c = &s->m->cfg;
    int *order = malloc(sizeof *order * (size_t)c->n_layers * c->n_heads);
    if (!order) {
        fprintf(stderr, "heads: out of memory\n");
        exit(1);
    }
    const int n = hl_heads_importance_order(c, norm, order);
    for (int i = 0; i < n; i++)
        out[i] = (scored_head){order[i] / c->n_heads, order[i] % c->n_heads, norm[order[i]],
                               raw[order[i]]};
    free(order);
    return n;
}

/* (L, n_heads) by original head index; pruned heads are NaN (drawn red). */
static int write_heatmap(const study *s, const double *norm, const char *dir, hl_error *err)
{
    const hl_gpt_config *c = &s->m->cfg;
    hl_tensor *map = hl_tensor_new_checked("importance", 2, (int[]){c->n_layers, c->n_heads},
                                           false, err);
    char (*names)[16] = malloc(sizeof *names * (size_t)(c->n_layers + c->n_heads));
    const char **rows = malloc(sizeof *rows * (size_t)(c->n_layers + c->n_heads));
    if (!map || !names || !rows) {
        hl_tensor_free(map);
        free(names);
        free(rows);
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory"), -1;
    }
    for (int l = 0; l < c->n_layers; l++)
        for (int h = 0; h < c->n_heads; h++) {
            int current = hl_head_current(&s->meta.pruned, c->n_heads, l, h);
            map->data[l * c->n_heads + h] =
                current < 0 ? (hl_real)NAN : (hl_real)norm[l * c->n_heads + current];
        }
    for (int i = 0; i < c->n_layers + c->n_heads; i++) {
        snprintf(names[i], sizeof names[i], i < c->n_layers ? "L%d" : "H%d",
                 i < c->n_layers ? i : i - c->n_layers);
        rows[i] = names[i];
    }
    int side = c->n_layers > c->n_heads ? c->n_layers : c->n_heads;
    int cell = 480 / side < 12 ? 12 : 480 / side > 64 ? 64 : 480 / side;
    const char *label[] = {hl_head_set_count(&s->meta.pruned)
                               ? "importance, L2-normalised per layer (red: pruned)"
                               : "importance, L2-normalised per layer"};
    hl_heatmap_opts opts = {.cell_px = cell, .range = HL_HEATMAP_RANGE_UNIT, .labels = label,
                            .title = "head importance (Michel et al. 2019)",
                            .row_labels = rows, .col_labels = rows + c->n_layers};
    char path[4200];
    snprintf(path, sizeof path, "%s/importance.png", dir);
    int rc = hl_heatmap_write(map, path, &opts, err) == HL_OK ? 0 : -1;
    hl_tensor_free(map);
    free(names);
    free(rows);
    return rc;
}

int heads_run_importance(const options *o, study *s)
{
    hl_error err = {0};
    const hl_gpt_config *c = &s->m->cfg;
    const size_t cells = (size_t)c->n_layers * c->n_heads;
    double *raw = malloc(cells * sizeof *raw), *norm = malloc(cells * sizeof *norm);
    scored_head *ranked = malloc(cells * sizeof *ranked);
    if (!raw || !norm || !ranked)
        return fprintf(stderr, "heads: out of memory\n"), 1;
    heads_make_out_dir(o);
    heads_print_model(s, o->model);
    if (hl_heads_importance(s->m, s->set, raw, norm, &err))
        heads_fail(&err);
    int n = heads_rank(s, raw, norm, ranked);
    printf("\nimportance = mean |dL/dgate| over %d batches (L = the sum of the %d group "
           "losses), L2-normalised per layer\n",
           (s->set->n + s->set->batch - 1) / s->set->batch, s->set->n_groups);
    printf("rank  head    importance   raw |dL/dg|\n");
    for (int i = 0; i < n; i++) {
        char name[HL_HEAD_NAME_MAX];
        printf("%4d  %-6s  %10.4f   %11.5f\n", i + 1,
               hl_head_name(s->m, ranked[i].layer, ranked[i].head, name), ranked[i].norm,
               ranked[i].raw);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/importance.csv", o->out);
    if (hl_importance_write_csv(path, s->m, raw, norm, &err) != HL_OK ||
        write_heatmap(s, norm, o->out, &err) != HL_OK)
        heads_fail(&err);
    printf("wrote %s/importance.csv, %s/importance.png\n", o->out, o->out);
    free(raw);
    free(norm);
    free(ranked);
    return 0;
}
