/* CSV tables and PNG pictures of a head study: see head_files.h. */
#include "report/head_files.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/head_maps.h"
#include "analysis/heads.h"
#include "analysis/roles.h"
#include "files/atomic.h"
#include "viz/diagram.h"
#include "viz/heatmap.h"

const char *hl_head_name(const hl_gpt *m, int l, int h, char buf[HL_HEAD_NAME_MAX])
{
    snprintf(buf, HL_HEAD_NAME_MAX, "L%dH%d", l, m->head_original[l][h]);
    return buf;
}

/* ---- detectors ------------------------------------------------------------ */

hl_status hl_detectors_write_csv(const char *path, const hl_gpt *m, const hl_head_scores *scores,
                                 hl_error *err)
{
    hl_atomic_file t;
    if (hl_atomic_begin(&t, path, err) != HL_OK)
        return err->status;
    fputs("layer,head", t.f);
    for (int d = 0; d < HL_DETECTORS; d++)
        fprintf(t.f, ",%s", hl_detector_name(d));
    fputc('\n', t.f);
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++) {
            fprintf(t.f, "%d,%d", l, m->head_original[l][h]);
            for (int d = 0; d < HL_DETECTORS; d++)
                fprintf(t.f, ",%.6f", scores[l * m->cfg.n_heads + h].v[d]);
            fputc('\n', t.f);
        }
    return hl_atomic_commit(&t, err);
}

hl_status hl_detectors_write_png(const char *path, const hl_gpt *m, const hl_head_scores *scores,
                                 double entropy_max, const char *title, hl_error *err)
{
    const int N = hl_gpt_total_heads(&m->cfg);
    hl_tensor *grid = hl_tensor_new_checked("detectors", 2, (int[]){N, HL_DETECTORS}, false, err);
    char (*names)[HL_HEAD_NAME_MAX] = malloc(sizeof *names * (size_t)N);
    const char **rows = malloc(sizeof *rows * (size_t)N);
    const char *cols[HL_DETECTORS];
    hl_status s = grid && names && rows ? HL_OK
                                        : hl_error_set(err, HL_ERR_NOMEM, "detectors: out of memory");
    for (int l = 0, i = 0; s == HL_OK && l < m->cfg.n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++, i++) {
            rows[i] = hl_head_name(m, l, h, names[i]);
            for (int d = 0; d < HL_DETECTORS; d++) {
                double v = scores[l * m->cfg.n_heads + h].v[d];
                if (d == HL_DETECT_ENTROPY)
                    v = entropy_max > 0 ? v / entropy_max : v;
                grid->data[i * HL_DETECTORS + d] = (hl_real)(d == HL_DETECT_COPYING && v < 0 ? 0 : v);
            }
        }
    for (int d = 0; d < HL_DETECTORS; d++)
        cols[d] = hl_detector_short(d);
    hl_heatmap_opts opts = {.cell_px = 24, .range = HL_HEATMAP_RANGE_UNIT, .title = title,
                            .row_labels = rows, .col_labels = cols,
                            .labels = (const char *[]){"entropy / ln T; copying < 0 as 0"}};
    if (s == HL_OK)
        s = hl_heatmap_write(grid, path, &opts, err);
    hl_tensor_free(grid);
    free(names);
    free(rows);
    return s;
}

/* ---- composition ------------------------------------------------------------ */

hl_status hl_composition_write_csv(const char *path, const hl_gpt *m,
                                   const double *const scores[HL_COMPOSE_KINDS], hl_error *err)
{
    hl_atomic_file t;
    if (hl_atomic_begin(&t, path, err) != HL_OK)
        return err->status;
    fputs("kind,src,dst,score\n", t.f);
    const hl_gpt_config *c = &m->cfg;
    const int N = hl_gpt_total_heads(c);
    for (int k = 0; k < HL_COMPOSE_KINDS; k++)
        for (int sl = 0; sl < c->n_layers; sl++)
            for (int sh = 0; sh < hl_gpt_layer_heads(c, sl); sh++)
                for (int dl = sl + 1; dl < c->n_layers; dl++)
                    for (int dh = 0; dh < hl_gpt_layer_heads(c, dl); dh++) {
                        char a[HL_HEAD_NAME_MAX], b[HL_HEAD_NAME_MAX];
                        const int i = hl_gpt_head_index(c, sl, sh), j = hl_gpt_head_index(c, dl, dh);
                        fprintf(t.f, "%s,%s,%s,%.6f\n", hl_compose_kind_name(k),
                                hl_head_name(m, sl, sh, a), hl_head_name(m, dl, dh, b),
                                scores[k][(size_t)i * N + j]);
                    }
    return hl_atomic_commit(&t, err);
}

hl_status hl_importance_write_csv(const char *path, const hl_gpt *m, const double *raw,
                                  const double *norm, hl_error *err)
{
    const hl_gpt_config *c = &m->cfg;
    const size_t cells = (size_t)c->n_layers * c->n_heads;
    int *order = malloc(sizeof *order * cells), *rank = malloc(sizeof *rank * cells);
    if (!order || !rank) {
        free(order);
        free(rank);
        return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", path);
    }
    const int n = hl_heads_importance_order(c, norm, order);
    for (int i = 0; i < n; i++)
        rank[order[i]] = i + 1;
    hl_atomic_file t;
    hl_status st = hl_atomic_begin(&t, path, err);
    if (st == HL_OK) {
        fputs("layer,head,importance,raw,rank\n", t.f);
        for (int l = 0; l < c->n_layers; l++)
            for (int h = 0; h < hl_gpt_layer_heads(c, l); h++) {
                const int k = l * c->n_heads + h;
                fprintf(t.f, "%d,%d,%.6f,%.8f,%d\n", l, m->head_original[l][h], norm[k], raw[k],
                        rank[k]);
            }
        st = hl_atomic_commit(&t, err);
    }
    free(order);
    free(rank);
    return st;
}

/* Every head's name, in flat order; *names and *labels are malloc'ed. */
static hl_status head_names(const hl_gpt *m, char (**names)[HL_HEAD_NAME_MAX], const char ***labels,
                            hl_error *err)
{
    const int N = hl_gpt_total_heads(&m->cfg);
    *names = malloc(sizeof **names * (size_t)N);
    *labels = malloc(sizeof **labels * (size_t)N);
    if (!*names || !*labels) {
        free(*names);
        free(*labels);
        return hl_error_set(err, HL_ERR_NOMEM, "out of memory");
    }
    for (int l = 0, i = 0; l < m->cfg.n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++, i++)
            (*labels)[i] = hl_head_name(m, l, h, (*names)[i]);
    return HL_OK;
}

hl_status hl_composition_write_png(const char *path, const hl_gpt *m, hl_compose_kind kind,
                                   const double *scores, double baseline, hl_error *err)
{
    const int N = hl_gpt_total_heads(&m->cfg);
    char (*names)[HL_HEAD_NAME_MAX];
    const char **labels;
    if (head_names(m, &names, &labels, err) != HL_OK)
        return err->status;
    hl_tensor *grid = hl_tensor_new_checked("composition", 2, (int[]){N, N}, false, err);
    for (size_t i = 0; grid && i < (size_t)N * N; i++)
        grid->data[i] = isnan(scores[i]) ? 0 : (hl_real)scores[i];
    char title[96], label[96];
    snprintf(title, sizeof title, "%c-composition (rows: source, columns: destination)",
             hl_compose_kind_name(kind)[0] - 'a' + 'A');
    snprintf(label, sizeof label, "random baseline %.3f", baseline);
    hl_heatmap_opts opts = {.cell_px = 24, .title = title, .row_labels = labels,
                            .col_labels = labels, .labels = (const char *[]){label}};
    hl_status s = grid ? hl_heatmap_write(grid, path, &opts, err) : err->status;
    hl_tensor_free(grid);
    free(names);
    free(labels);
    return s;
}

hl_status hl_ablation_effects_write_csv(const char *path, const hl_gpt *m,
                                        const hl_ablation_effect *rows, int n, hl_error *err)
{
    hl_atomic_file t;
    if (hl_atomic_begin(&t, path, err) != HL_OK)
        return err->status;
    fputs("src,dst,detector,before,after\n", t.f);
    for (int i = 0; i < n; i++) {
        char a[HL_HEAD_NAME_MAX], b[HL_HEAD_NAME_MAX];
        fprintf(t.f, "%s,%s,%s,%.6f,%.6f\n", hl_head_name(m, rows[i].src_layer, rows[i].src_head, a),
                hl_head_name(m, rows[i].dst_layer, rows[i].dst_head, b),
                hl_detector_name(rows[i].detector), rows[i].before, rows[i].after);
    }
    return hl_atomic_commit(&t, err);
}

/* ---- attention maps ----------------------------------------------------------- */

/* "L1H3 induction 0.81" (main detector and its score), or "L1H3". */
static void map_label(char *buf, size_t size, const hl_gpt *m, int l, int h,
                      const hl_head_scores *s)
{
    char name[HL_HEAD_NAME_MAX];
    hl_head_name(m, l, h, name);
    if (!s) {
        snprintf(buf, size, "%s", name);
        return;
    }
    const hl_detector d = hl_head_main_detector(s);
    snprintf(buf, size, "%s %s %.2f", name, hl_detector_short(d), s->v[d]);
}

typedef struct {
    int n;                  /* heads chosen */
    int *flat;              /* their flat indices */
    char (*labels)[48];
    const char **label_ptr;
    char (*tokens)[HL_TOKEN_LABEL_MAX];
    const char **token_ptr;
} map_plan;

static void map_plan_free(map_plan *p)
{
    free(p->flat);
    free(p->labels);
    free(p->label_ptr);
    free(p->tokens);
    free(p->token_ptr);
}

static hl_status map_plan_make(map_plan *p, const hl_gpt *m, const int32_t *tokens, int T,
                               const hl_vocab *vocab, const hl_head_set *which,
                               const hl_head_scores *scores,
                               hl_error *err)
{
    const int N = hl_gpt_total_heads(&m->cfg);
    memset(p, 0, sizeof *p);
    p->flat = malloc(sizeof *p->flat * (size_t)N);
    p->labels = malloc(sizeof *p->labels * (size_t)N);
    p->label_ptr = malloc(sizeof *p->label_ptr * (size_t)N);
    p->tokens = malloc(sizeof *p->tokens * (size_t)T);
    p->token_ptr = malloc(sizeof *p->token_ptr * (size_t)T);
    if (!p->flat || !p->labels || !p->label_ptr || !p->tokens || !p->token_ptr) {
        map_plan_free(p);
        return hl_error_set(err, HL_ERR_NOMEM, "maps: out of memory");
    }
    for (int t = 0; t < T; t++)
        p->token_ptr[t] = hl_token_label(tokens[t], vocab, p->tokens[t]);
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(&m->cfg, l); h++) {
            if (which && !which->on[l][h])
                continue;
            map_label(p->labels[p->n], sizeof p->labels[0], m, l, h,
                      scores ? &scores[l * m->cfg.n_heads + h] : NULL);
            p->label_ptr[p->n] = p->labels[p->n];
            p->flat[p->n++] = hl_gpt_head_index(&m->cfg, l, h);
        }
    return HL_OK;
}

/* Pixels a side: one head's map at most MAP_SIDE_PX, a tile of the grid at
 * most GRID_SIDE_PX (at 10 pixels a cell, a GPT-2 context of 1,024 tokens
 * would be 10,240 pixels a side, and the grid of its 144 heads past the
 * image limit). Cells shrink to 1 pixel; past GRID_SIDE_PX tokens a grid
 * pixel is the largest weight of a block of cells, so a one-token line such
 * as the previous-token diagonal stays visible. */
#define MAP_SIDE_PX 1024
#define GRID_SIDE_PX 256

static int map_cell_px(int T, int side)
{
    const int cell = side / T;
    return cell < 1 ? 1 : cell > HL_HEATMAP_CELL_PX ? HL_HEATMAP_CELL_PX : cell;
}

/* dst (P,P) = src (T,T) in blocks of k×k, each its largest value, P = ⌈T/k⌉. */
static void map_pool(const hl_real *src, int T, int k, hl_real *dst)
{
    const int P = (T + k - 1) / k;
    for (int r = 0; r < P; r++)
        for (int c = 0; c < P; c++) {
            hl_real top = src[(size_t)r * k * T + (size_t)c * k];
            for (int i = r * k; i < T && i < (r + 1) * k; i++)
                for (int j = c * k; j < T && j < (c + 1) * k; j++)
                    top = src[(size_t)i * T + j] > top ? src[(size_t)i * T + j] : top;
            dst[(size_t)r * P + c] = top;
        }
}

hl_status hl_maps_write(const char *dir, const hl_gpt *m, const hl_tensor *maps,
                        const int32_t *tokens, const hl_vocab *vocab, const hl_head_set *which,
                        const hl_head_scores *scores, hl_error *err)
{
    const int N = hl_gpt_total_heads(&m->cfg);
    if (!maps || maps->rank != 3 || maps->shape[0] != N || maps->shape[1] != maps->shape[2])
        return hl_error_set(err, HL_ERR_SHAPE, "maps: attention must be (%d,T,T), one per head", N);
    const int T = maps->shape[1];
    const size_t TT = (size_t)T * T;
    map_plan p;
    if (map_plan_make(&p, m, tokens, T, vocab, which, scores, err) != HL_OK)
        return err->status;
    if (p.n == 0) {
        map_plan_free(&p);
        return hl_error_set(err, HL_ERR_ARG, "maps: no head chosen");
    }
    const int k = (T + GRID_SIDE_PX - 1) / GRID_SIDE_PX, P = (T + k - 1) / k;
    hl_tensor *grid = hl_tensor_new_checked("maps", 3, (int[]){p.n, P, P}, false, err);
    hl_status s = grid ? HL_OK : err->status;
    char path[4200];
    for (int i = 0; s == HL_OK && i < p.n; i++) {
        hl_tensor one = *maps;
        hl_tensor_set_shape(&one, 2, (int[]){T, T});
        one.data = maps->data + (size_t)p.flat[i] * TT;
        map_pool(one.data, T, k, grid->data + (size_t)i * P * P);
        snprintf(path, sizeof path, "%s/attn_%.*s.png", dir, (int)strcspn(p.labels[i], " "),
                 p.labels[i]);
        hl_heatmap_opts opts = {.cell_px = map_cell_px(T, MAP_SIDE_PX),
                                .labels = &p.label_ptr[i], .row_labels = p.token_ptr,
                                .col_labels = p.token_ptr, .title = "rows: queries, columns: keys"};
        s = hl_heatmap_write(&one, path, &opts, err);
    }
    char title[128] = "attention (rows: queries, columns: keys)";
    if (k > 1)
        snprintf(title, sizeof title, "attention (rows: queries, columns: keys; a pixel: the "
                 "largest of %dx%d weights)", k, k);
    snprintf(path, sizeof path, "%s/maps_grid.png", dir);
    hl_heatmap_opts opts = {.cell_px = map_cell_px(P, GRID_SIDE_PX), .labels = p.label_ptr,
                            .row_labels = k == 1 ? p.token_ptr : NULL,
                            .col_labels = k == 1 ? p.token_ptr : NULL,
                            .columns = m->cfg.n_heads, .title = title};
    if (s == HL_OK)
        s = hl_heatmap_write(grid, path, &opts, err);
    hl_tensor_free(grid);
    map_plan_free(&p);
    return s;
}

/* ---- the circuit diagram -------------------------------------------------------- */

hl_status hl_circuit_diagram_write(const char *path, const hl_gpt *m,
                                   const double *const scores[HL_COMPOSE_KINDS],
                                   const double baseline[HL_COMPOSE_KINDS], hl_error *err)
{
    const hl_gpt_config *c = &m->cfg;
    const int N = hl_gpt_total_heads(c);
    char (*names)[HL_HEAD_NAME_MAX];
    const char **labels;
    if (head_names(m, &names, &labels, err) != HL_OK)
        return err->status;
    hl_diagram_node *nodes = malloc(sizeof *nodes * (size_t)N);
    hl_diagram_edge *edges = malloc(sizeof *edges * (size_t)N * HL_COMPOSE_KINDS);
    int n_edges = 0;
    double top = 0;
    for (int l = 0, i = 0; nodes && l < c->n_layers; l++)
        for (int h = 0; h < hl_gpt_layer_heads(c, l); h++, i++)
            nodes[i] = (hl_diagram_node){l, labels[i]};
    /* Each destination's strongest source per kind, when above the baseline. */
    for (int k = 0; edges && k < HL_COMPOSE_KINDS; k++)
        for (int j = 0; j < N; j++) {
            int best = -1;
            for (int i = 0; i < N; i++)
                if (!isnan(scores[k][(size_t)i * N + j]) &&
                    (best < 0 || scores[k][(size_t)i * N + j] > scores[k][(size_t)best * N + j]))
                    best = i;
            const double excess = best < 0 ? 0 : scores[k][(size_t)best * N + j] - baseline[k];
            if (excess > 0) {
                edges[n_edges++] = (hl_diagram_edge){best, j, excess, k};
                top = excess > top ? excess : top;
            }
        }
    for (int e = 0; e < n_edges; e++)
        edges[e].weight /= top;
    const char *legend[] = {"Q-composition", "K-composition", "V-composition"};
    hl_diagram d = {"strongest composition into each head (width: score above baseline)",
                    nodes, N, edges, n_edges, legend, HL_COMPOSE_KINDS};
    hl_status s = nodes && edges ? hl_diagram_write(&d, path, err)
                                 : hl_error_set(err, HL_ERR_NOMEM, "diagram: out of memory");
    free(nodes);
    free(edges);
    free(names);
    free(labels);
    return s;
}
