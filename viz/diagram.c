/* Lines, discs and layered circuit diagrams: see diagram.h. */
#include "viz/diagram.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "viz/plot.h"

#define NODE_R 9
#define NODE_GAP 90      /* between neighbouring nodes' centres in a row */
#define ROW_GAP 130      /* between rows */
#define MARGIN 40
#define TITLE_H 30
#define LEGEND_H 24
#define LANE 6           /* sideways offset between edge colours */
#define MAX_NODES 1024

static const uint8_t black[3] = {0, 0, 0}, node_rgb[3] = {60, 60, 60};

void hl_diagram_layout_free(hl_diagram_layout *layout)
{
    free(layout->x);
    free(layout->y);
    memset(layout, 0, sizeof *layout);
}

static hl_status check_diagram(const hl_diagram *d, hl_error *err)
{
    if (!d || !d->nodes || d->n_nodes < 1 || d->n_nodes > MAX_NODES || d->n_edges < 0 ||
        (d->n_edges && !d->edges))
        return hl_error_set(err, HL_ERR_ARG, "diagram: needs 1..%d nodes and an edge array",
                            MAX_NODES);
    for (int i = 0; i < d->n_nodes; i++)
        if (d->nodes[i].row < 0 || d->nodes[i].row >= MAX_NODES)
            return hl_error_set(err, HL_ERR_ARG, "diagram: node %d has row %d", i,
                                d->nodes[i].row);
    for (int i = 0; i < d->n_edges; i++) {
        const hl_diagram_edge *e = &d->edges[i];
        if (e->from < 0 || e->from >= d->n_nodes || e->to < 0 || e->to >= d->n_nodes ||
            !(e->weight >= 0 && e->weight <= 1) || e->color < 0)
            return hl_error_set(err, HL_ERR_ARG, "diagram: edge %d (%d -> %d, weight %g) needs "
                                "nodes below %d and a weight in 0..1", i, e->from, e->to,
                                e->weight, d->n_nodes);
    }
    return HL_OK;
}

hl_status hl_diagram_measure(const hl_diagram *d, hl_diagram_layout *layout, hl_error *err)
{
    memset(layout, 0, sizeof *layout);
    if (check_diagram(d, err) != HL_OK)
        return err->status;
    int per_row[MAX_NODES] = {0}, widest = 0;
    for (int i = 0; i < d->n_nodes; i++) {
        const int r = d->nodes[i].row;
        layout->n_rows = r + 1 > layout->n_rows ? r + 1 : layout->n_rows;
        per_row[r]++;
        widest = per_row[r] > widest ? per_row[r] : widest;
    }
    /* Wide enough for the widest row (and its labels), the title and the legend. */
    int legend_w = 0;
    for (int i = 0; d->legend && i < d->n_legend; i++)
        legend_w += 40 + hl_text_width(d->legend[i] ? d->legend[i] : "", 1);
    const int title_w = d->title ? hl_text_width(d->title, 2) : 0;
    int content_w = (widest - 1) * NODE_GAP + 60;
    content_w = title_w > content_w ? title_w : content_w;
    content_w = legend_w > content_w ? legend_w : content_w;
    layout->width = 2 * MARGIN + content_w;
    layout->height = TITLE_H + LEGEND_H + 2 * MARGIN + (layout->n_rows - 1) * ROW_GAP;
    layout->x = malloc(sizeof *layout->x * (size_t)d->n_nodes);
    layout->y = malloc(sizeof *layout->y * (size_t)d->n_nodes);
    if (!layout->x || !layout->y) {
        hl_diagram_layout_free(layout);
        return hl_error_set(err, HL_ERR_NOMEM, "diagram: out of memory");
    }
    int seen[MAX_NODES] = {0};
    for (int i = 0; i < d->n_nodes; i++) {
        const int r = d->nodes[i].row;
        /* Each row centred across the width. */
        const int row_w = (per_row[r] - 1) * NODE_GAP;
        layout->x[i] = (layout->width - 60) / 2 - row_w / 2 + seen[r]++ * NODE_GAP;
        layout->y[i] = TITLE_H + LEGEND_H + MARGIN + (layout->n_rows - 1 - r) * ROW_GAP;
    }
    return HL_OK;
}

static void draw_legend(hl_image *img, const hl_diagram *d)
{
    int x = MARGIN;
    for (int i = 0; d->legend && i < d->n_legend; i++) {
        uint8_t rgb[3];
        hl_plot_color(i, rgb);
        hl_image_draw_line(img, x, TITLE_H + 8, x + 24, TITLE_H + 8, 4, rgb);
        hl_image_draw_text(img, x + 30, TITLE_H + 4, d->legend[i] ? d->legend[i] : "", 1, black);
        x += 40 + hl_text_width(d->legend[i] ? d->legend[i] : "", 1);
    }
}

hl_status hl_diagram_write(const hl_diagram *d, const char *path, hl_error *err)
{
    hl_diagram_layout lay;
    if (hl_diagram_measure(d, &lay, err) != HL_OK)
        return err->status;
    hl_image *img = hl_image_new(lay.width, lay.height, err);
    if (!img) {
        hl_diagram_layout_free(&lay);
        return err->status;
    }
    if (d->title)
        hl_image_draw_text(img, MARGIN, 8, d->title, 2, black);
    draw_legend(img, d);
    for (int i = 0; i < d->n_edges; i++) {
        const hl_diagram_edge *e = &d->edges[i];
        uint8_t rgb[3];
        hl_plot_color(e->color, rgb);
        const int lane = (e->color % 3 - 1) * LANE;
        hl_image_draw_line(img, lay.x[e->from] + lane, lay.y[e->from], lay.x[e->to] + lane,
                           lay.y[e->to], 1 + (int)lround(7 * e->weight), rgb);
    }
    for (int i = 0; i < d->n_nodes; i++) {
        hl_image_fill_disc(img, lay.x[i], lay.y[i], NODE_R, node_rgb);
        hl_image_draw_text(img, lay.x[i] + NODE_R + 4, lay.y[i] + NODE_R, 
                           d->nodes[i].label ? d->nodes[i].label : "", 1, black);
    }
    hl_status s = hl_image_write_png(img, path, err);
    hl_image_free(img);
    hl_diagram_layout_free(&lay);
    return s;
}
