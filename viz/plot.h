/*
 * plot.h: line plots as PNG pictures, drawn with the image, font and PNG
 * writer of heatmap.h.
 *
 * A figure is one or more panels stacked vertically that share the x axis.
 * Each panel has its own y axis with "nice" ticks (1, 2 or 5 times a power of
 * ten), light grid lines, a y label, and a legend in its top-right corner;
 * each series is a 2-pixel line through its points with a square marker on
 * every point, in a colour of a fixed palette (hl_plot_color):
 *
 *     double x[] = {0, 0.25, 0.5}, loss[] = {0.35, 0.41, 0.9}, acc[] = {0.94, 0.9, 0.7};
 *     hl_plot_series l = {"loss", x, loss, 3}, a = {"accuracy", x, acc, 3};
 *     hl_plot_panel panels[] = {{.y_label = "loss", .series = &l, .n_series = 1},
 *                               {.y_label = "accuracy", .series = &a, .n_series = 1,
 *                                .y_min = 0, .y_max = 1}};
 *     hl_plot_opts opts = {.title = "pruning", .x_label = "fraction of heads pruned"};
 *     if (hl_plot_write(panels, 2, "curve.png", &opts, &err) != HL_OK) ...err.message...
 *
 * Non-finite points are left out (the line breaks there). Axis limits are
 * fitted to the data unless given (min < max). The file is written
 * atomically, as hl_image_write_png does.
 */
#ifndef HL_PLOT_H
#define HL_PLOT_H

#include <stdint.h>

#include "core/error.h"

#define HL_PLOT_MAX_PANELS 4
#define HL_PLOT_MAX_SERIES 8
/* Default width and panel height in pixels. */
#define HL_PLOT_WIDTH 640
#define HL_PLOT_PANEL_HEIGHT 240

typedef struct hl_plot_series {
    const char *label;     /* in the legend; NULL: none */
    const double *x, *y;   /* n points each */
    int n;
} hl_plot_series;

typedef struct hl_plot_panel {
    const char *y_label;
    const hl_plot_series *series;
    int n_series;          /* 1..HL_PLOT_MAX_SERIES */
    double y_min, y_max;   /* used when y_min < y_max; otherwise fitted to the data */
} hl_plot_panel;

/* All fields may be zero (or opts NULL) for the defaults. */
typedef struct hl_plot_opts {
    const char *title, *x_label;
    int width;             /* 0: HL_PLOT_WIDTH */
    int panel_height;      /* 0: HL_PLOT_PANEL_HEIGHT */
    double x_min, x_max;   /* used when x_min < x_max; otherwise fitted to the data */
} hl_plot_opts;

/* Where everything goes, in pixels, and the axis limits chosen. */
typedef struct hl_plot_layout {
    int width, height;
    int n_panels;
    int left, right;                      /* the plotting area's first and last column */
    int top[HL_PLOT_MAX_PANELS];          /* each panel's first and last row */
    int bottom[HL_PLOT_MAX_PANELS];
    double x_min, x_max;
    double y_min[HL_PLOT_MAX_PANELS], y_max[HL_PLOT_MAX_PANELS];
} hl_plot_layout;

/* The colour of series i (the palette repeats after HL_PLOT_MAX_SERIES). */
void hl_plot_color(int i, uint8_t rgb[3]);

/* Checks the arguments and computes the layout hl_plot_write would use.
 * HL_ERR_ARG for a bad panel count, series, size or range. */
hl_status hl_plot_measure(const hl_plot_panel *panels, int n_panels, const hl_plot_opts *opts,
                          hl_plot_layout *layout, hl_error *err);

/* The pixel of point (x, y) in panel p (rounded to the nearest). */
void hl_plot_point(const hl_plot_layout *layout, int p, double x, double y, int *px, int *py);

hl_status hl_plot_write(const hl_plot_panel *panels, int n_panels, const char *path,
                        const hl_plot_opts *opts, hl_error *err);

#endif
