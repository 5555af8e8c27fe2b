/*
 * diagram.h: lines and discs on an hl_image, and a layered circuit diagram
 * drawn with them: nodes in rows (row 0 at the bottom, as layers stack), edges
 * as straight lines whose width grows with their weight, in the colours of
 * hl_plot_color, a legend and a title.
 *
 *     hl_diagram_node nodes[] = {{0, "L0H0"}, {0, "L0H1"}, {1, "L1H0"}};
 *     hl_diagram_edge edges[] = {{.from = 0, .to = 2, .weight = 0.8, .color = 1}};
 *     const char *legend[] = {"Q", "K", "V"};          // legend[i] names colour i
 *     hl_diagram d = {"composition", nodes, 3, edges, 1, legend, 3};
 *     hl_diagram_write(&d, "circuit.png", &err);
 */
#ifndef HL_DIAGRAM_H
#define HL_DIAGRAM_H

#include <stdint.h>

#include "core/error.h"
#include "viz/heatmap.h"

typedef struct hl_diagram_node {
    int row;            /* 0 = bottom row */
    const char *label;  /* drawn beside the node */
} hl_diagram_node;

typedef struct hl_diagram_edge {
    int from, to;       /* node indices */
    double weight;      /* 0..1: line width 1..8 pixels */
    int color;          /* hl_plot_color index; edges of different colours between
                           the same nodes are drawn side by side */
} hl_diagram_edge;

typedef struct hl_diagram {
    const char *title;  /* or NULL */
    const hl_diagram_node *nodes;
    int n_nodes;        /* 1..1024 */
    const hl_diagram_edge *edges;
    int n_edges;
    const char *const *legend; /* legend[i] names colour i; or NULL */
    int n_legend;
} hl_diagram;

/* Node centre positions and the image size hl_diagram_write uses. */
typedef struct hl_diagram_layout {
    int width, height;
    int n_rows;
    int *x, *y;         /* n_nodes each (malloc'ed; hl_diagram_layout_free) */
} hl_diagram_layout;

hl_status hl_diagram_measure(const hl_diagram *d, hl_diagram_layout *layout, hl_error *err);
void hl_diagram_layout_free(hl_diagram_layout *layout);

/* Draws the diagram and writes it as a PNG, atomically (hl_image_write_png).
 * HL_ERR_ARG for a bad node, edge or weight. */
hl_status hl_diagram_write(const hl_diagram *d, const char *path, hl_error *err);

#endif
