/*
 * heatmap.c: a grid of attention maps drawn as viridis tiles (see heatmap.h).
 *
 * The picture, top to bottom: the title; then rows of tile slots, each a label
 * line, the column (key) labels turned upright, and the tile with the row
 * (query) labels in a gutter at its left; the colorbar stands right of the
 * grid, level with the first row of tiles. Every slot has the same size, so
 * tile i's position is a multiplication away (hl_heatmap_cell_origin).
 */
#include "viz/heatmap.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define MARGIN 10
#define TILE_GAP 10      /* between neighbouring slots */
#define LABEL_GAP 3      /* between a label and what it names */
#define TITLE_SCALE 2
#define CAP_HEIGHT 7     /* rows of a capital or digit, for centring */
#define BAR_GAP 16       /* from the grid to the colorbar */
#define BAR_W 14
#define BAR_MIN_H 40

static const uint8_t black[3] = {0, 0, 0};
static const uint8_t bad_rgb[3] = {255, 0, 0};   /* NaN and inf: no viridis colour is red */

/* Everything hl_heatmap_write needs beyond the public layout. */
typedef struct {
    hl_heatmap_layout l;
    hl_heatmap_opts o;          /* with defaults filled in */
    int gutter_w;               /* row labels' column, 0 without them */
    int label_h, colband_h, title_h;
    int label_step;             /* label every label_step-th row and column */
    double lo, hi;              /* the finite minimum and maximum over all maps */
    char bar_top[32], bar_bottom[32];
} plan;

static int max_int(int a, int b) { return a > b ? a : b; }

static const char *text_or_empty(const char *const *texts, int i)
{
    return texts && texts[i] ? texts[i] : "";
}

/* A token label cut to HL_HEATMAP_TOKEN_CHARS characters, in buf. */
static const char *token(const char *const *texts, int i, char buf[HL_HEATMAP_TOKEN_CHARS + 1])
{
    snprintf(buf, HL_HEATMAP_TOKEN_CHARS + 1, "%s", text_or_empty(texts, i));
    return buf;
}

static int widest_token(const char *const *texts, int n)
{
    char buf[HL_HEATMAP_TOKEN_CHARS + 1];
    int w = 0;
    for (int i = 0; i < n; i++)
        w = max_int(w, hl_text_width(token(texts, i, buf), 1));
    return w;
}

static hl_status check_args(const hl_tensor *maps, const hl_heatmap_opts *opts, plan *p,
                            hl_error *err)
{
    if (!maps)
        return hl_error_set(err, HL_ERR_ARG, "heatmap: NULL maps");
    if (maps->rank != 2 && maps->rank != 3) {
        char s[HL_SHAPE_STR_MAX];
        return hl_error_set(err, HL_ERR_SHAPE, "heatmap: maps %s are neither (rows,cols) nor "
                            "(N,rows,cols)", hl_shape_str(maps, s));
    }
    if (!maps->data)
        return hl_error_set(err, HL_ERR_ARG, "heatmap: maps have no data");
    p->o = opts ? *opts : (hl_heatmap_opts){0};
    hl_heatmap_opts *o = &p->o;
    if (o->cell_px < 0 || o->cell_px > HL_HEATMAP_CELL_PX_MAX)
        return hl_error_set(err, HL_ERR_ARG, "heatmap: cell_px %d is outside 0..%d", o->cell_px,
                            HL_HEATMAP_CELL_PX_MAX);
    if (o->columns < 0)
        return hl_error_set(err, HL_ERR_ARG, "heatmap: columns %d is negative", o->columns);
    if (o->range != HL_HEATMAP_RANGE_TILE_MAX && o->range != HL_HEATMAP_RANGE_UNIT &&
        o->range != HL_HEATMAP_RANGE_GLOBAL)
        return hl_error_set(err, HL_ERR_ARG, "heatmap: unknown range mode %d", (int)o->range);
    return HL_OK;
}

static void find_range(const hl_tensor *maps, plan *p)
{
    bool any = false;
    p->lo = p->hi = 0;
    for (size_t i = 0; i < maps->numel; i++) {
        double v = maps->data[i];
        if (!isfinite(v))
            continue;
        if (!any || v < p->lo)
            p->lo = v;
        if (!any || v > p->hi)
            p->hi = v;
        any = true;
    }
}

static void bar_texts(plan *p)
{
    switch (p->o.range) {
    case HL_HEATMAP_RANGE_TILE_MAX:
        snprintf(p->bar_top, sizeof p->bar_top, "tile max");
        snprintf(p->bar_bottom, sizeof p->bar_bottom, "0");
        break;
    case HL_HEATMAP_RANGE_UNIT:
        snprintf(p->bar_top, sizeof p->bar_top, "1");
        snprintf(p->bar_bottom, sizeof p->bar_bottom, "0");
        break;
    case HL_HEATMAP_RANGE_GLOBAL:
        snprintf(p->bar_top, sizeof p->bar_top, "%.3g", p->hi);
        snprintf(p->bar_bottom, sizeof p->bar_bottom, "%.3g", p->lo);
        break;
    }
}

static hl_status make_plan(const hl_tensor *maps, const hl_heatmap_opts *opts, plan *p,
                           hl_error *err)
{
    memset(p, 0, sizeof *p);
    hl_status s = check_args(maps, opts, p, err);
    if (s != HL_OK)
        return s;
    hl_heatmap_opts *o = &p->o;
    hl_heatmap_layout *l = &p->l;
    l->tiles = maps->rank == 3 ? maps->shape[0] : 1;
    l->rows = maps->shape[maps->rank - 2];
    l->cols = maps->shape[maps->rank - 1];
    l->cell_px = o->cell_px ? o->cell_px : HL_HEATMAP_CELL_PX;
    int gc = 1;
    while (gc * gc < l->tiles)
        gc++;
    l->grid_cols = o->columns == 0 ? gc : o->columns < l->tiles ? o->columns : l->tiles;
    l->grid_rows = (l->tiles + l->grid_cols - 1) / l->grid_cols;
    find_range(maps, p);
    bar_texts(p);

    p->label_step = (HL_FONT_LINE + l->cell_px - 1) / l->cell_px;
    p->title_h = o->title ? HL_FONT_LINE * TITLE_SCALE + 4 : 0;
    p->label_h = o->labels ? HL_FONT_LINE + LABEL_GAP : 0;
    p->colband_h = o->col_labels ? widest_token(o->col_labels, l->cols) + LABEL_GAP : 0;
    p->gutter_w = o->row_labels ? widest_token(o->row_labels, l->rows) + LABEL_GAP : 0;
    int label_w = 0;
    for (int i = 0; i < l->tiles; i++)
        label_w = max_int(label_w, hl_text_width(text_or_empty(o->labels, i), 1));

    /* Sizes in long long: a big map or a long label must fail the size check,
     * not overflow. */
    long long cell = l->cell_px;
    long long tile_w = cell * l->cols, tile_h = cell * l->rows;
    long long slot_w = p->gutter_w + (tile_w > label_w ? tile_w : label_w);
    long long slot_h = p->label_h + p->colband_h + tile_h;
    long long grid_w = l->grid_cols * (slot_w + TILE_GAP) - TILE_GAP;
    long long grid_h = l->grid_rows * (slot_h + TILE_GAP) - TILE_GAP;
    long long bar_x = MARGIN + grid_w + BAR_GAP;
    long long bar_h = tile_h > BAR_MIN_H ? tile_h : BAR_MIN_H;
    int bar_text_w = max_int(hl_text_width(p->bar_top, 1), hl_text_width(p->bar_bottom, 1));
    long long title_w = o->title ? hl_text_width(o->title, TITLE_SCALE) : 0;
    long long width = bar_x + BAR_W + LABEL_GAP + 1 + bar_text_w + MARGIN;
    if (width < 2 * MARGIN + title_w)
        width = 2 * MARGIN + title_w;
    long long tile_y = MARGIN + p->title_h + p->label_h + p->colband_h;
    long long height = MARGIN + p->title_h + grid_h;
    if (height < tile_y + bar_h)
        height = tile_y + bar_h;
    height += MARGIN;
    if (width > HL_IMAGE_MAX_SIDE || height > HL_IMAGE_MAX_SIDE)
        return hl_error_set(err, HL_ERR_ARG, "heatmap: the picture would be %lldx%lld pixels, "
                            "over the limit of %d a side (use a smaller cell_px or fewer "
                            "columns)", width, height, HL_IMAGE_MAX_SIDE);
    l->width = (int)width;
    l->height = (int)height;
    l->tile_x = MARGIN + p->gutter_w;
    l->tile_y = (int)tile_y;
    l->pitch_x = (int)(slot_w + TILE_GAP);
    l->pitch_y = (int)(slot_h + TILE_GAP);
    l->bar_x = (int)bar_x;
    l->bar_y = (int)tile_y;
    l->bar_w = BAR_W;
    l->bar_h = (int)bar_h;
    return HL_OK;
}

hl_status hl_heatmap_measure(const hl_tensor *maps, const hl_heatmap_opts *opts,
                             hl_heatmap_layout *layout, hl_error *err)
{
    plan p;
    hl_status s = make_plan(maps, opts, &p, err);
    if (s == HL_OK)
        *layout = p.l;
    return s;
}

void hl_heatmap_cell_origin(const hl_heatmap_layout *layout, int tile, int r, int c, int *x,
                            int *y)
{
    *x = layout->tile_x + tile % layout->grid_cols * layout->pitch_x + c * layout->cell_px;
    *y = layout->tile_y + tile / layout->grid_cols * layout->pitch_y + r * layout->cell_px;
}

/* The value range [lo, hi] of one tile's colours. */
static void tile_range(const plan *p, const hl_real *v, size_t n, double *lo, double *hi)
{
    *lo = 0;
    *hi = 1;
    if (p->o.range == HL_HEATMAP_RANGE_GLOBAL) {
        *lo = p->lo;
        *hi = p->hi;
    } else if (p->o.range == HL_HEATMAP_RANGE_TILE_MAX) {
        *hi = 0;
        for (size_t i = 0; i < n; i++)
            if (isfinite(v[i]) && v[i] > *hi)
                *hi = v[i];
    }
}

static void draw_tile(hl_image *img, const plan *p, int tile, const hl_real *v)
{
    const hl_heatmap_layout *l = &p->l;
    double lo, hi;
    tile_range(p, v, (size_t)l->rows * l->cols, &lo, &hi);
    for (int r = 0; r < l->rows; r++)
        for (int c = 0; c < l->cols; c++) {
            double x = v[(size_t)r * l->cols + c];
            uint8_t rgb[3];
            if (!isfinite(x))
                memcpy(rgb, bad_rgb, 3);
            else
                hl_viridis_color(hi > lo ? hl_viridis_index((x - lo) / (hi - lo)) : 0, rgb);
            int px, py;
            hl_heatmap_cell_origin(l, tile, r, c, &px, &py);
            hl_image_fill_rect(img, px, py, l->cell_px, l->cell_px, rgb);
        }
}

static void draw_labels(hl_image *img, const plan *p, int tile)
{
    const hl_heatmap_layout *l = &p->l;
    const hl_heatmap_opts *o = &p->o;
    int x0, y0;
    hl_heatmap_cell_origin(l, tile, 0, 0, &x0, &y0);
    int inset = (l->cell_px - CAP_HEIGHT) / 2;   /* centres a label on its row or column */
    char buf[HL_HEATMAP_TOKEN_CHARS + 1];
    if (o->labels)
        hl_image_draw_text(img, x0, y0 - p->colband_h - p->label_h, text_or_empty(o->labels, tile),
                           1, black);
    for (int r = 0; o->row_labels && r < l->rows; r += p->label_step) {
        const char *t = token(o->row_labels, r, buf);
        hl_image_draw_text(img, x0 - LABEL_GAP - hl_text_width(t, 1),
                           y0 + r * l->cell_px + inset, t, 1, black);
    }
    for (int c = 0; o->col_labels && c < l->cols; c += p->label_step) {
        const char *t = token(o->col_labels, c, buf);
        hl_image_draw_text_up(img, x0 + c * l->cell_px + inset,
                              y0 - LABEL_GAP - hl_text_width(t, 1), t, 1, black);
    }
}

static void draw_colorbar(hl_image *img, const plan *p)
{
    const hl_heatmap_layout *l = &p->l;
    hl_image_fill_rect(img, l->bar_x - 1, l->bar_y - 1, l->bar_w + 2, l->bar_h + 2, black);
    for (int y = 0; y < l->bar_h; y++) {
        uint8_t rgb[3];
        /* The top row is entry 255, the bottom row entry 0. */
        hl_viridis_color(255 - (int)lround(255.0 * y / (l->bar_h - 1)), rgb);
        hl_image_fill_rect(img, l->bar_x, l->bar_y + y, l->bar_w, 1, rgb);
    }
    int tx = l->bar_x + l->bar_w + LABEL_GAP + 1;
    hl_image_draw_text(img, tx, l->bar_y, p->bar_top, 1, black);
    hl_image_draw_text(img, tx, l->bar_y + l->bar_h - CAP_HEIGHT, p->bar_bottom, 1, black);
}

hl_status hl_heatmap_write(const hl_tensor *maps, const char *path,
                           const hl_heatmap_opts *opts, hl_error *err)
{
    if (!path)
        return hl_error_set(err, HL_ERR_ARG, "heatmap: NULL path");
    plan p;
    hl_status s = make_plan(maps, opts, &p, err);
    if (s != HL_OK)
        return s;
    hl_image *img = hl_image_new(p.l.width, p.l.height, err);
    if (!img)
        return err->status;
    if (p.o.title)
        hl_image_draw_text(img, MARGIN, MARGIN, p.o.title, TITLE_SCALE, black);
    size_t per_tile = (size_t)p.l.rows * p.l.cols;
    for (int i = 0; i < p.l.tiles; i++) {
        draw_tile(img, &p, i, maps->data + i * per_tile);
        draw_labels(img, &p, i);
    }
    draw_colorbar(img, &p);
    s = hl_image_write_png(img, path, err);
    hl_image_free(img);
    return s;
}
