/*
 * heatmap.h: attention maps as PNG pictures.
 *
 * A heatmap is a grid of tiles, one per 2-D map (rows = queries, columns =
 * keys), each cell a square of viridis colour, with a label above each tile,
 * an optional title and token labels, and a colorbar at the right:
 *
 *     const char *labels[] = {"L0H0 previous-token 0.97", "L0H1 two-back 0.86"};
 *     hl_heatmap_opts opts = {.labels = labels, .title = "step 1000"};
 *     hl_error err = {0};
 *     if (hl_heatmap_write(attn, "heads.png", &opts, &err) != HL_OK)   // attn (2,T,T)
 *         fprintf(stderr, "%s\n", err.message);
 *
 * Underneath are a plain RGB image (viz/image.c) with text in a built-in 5x7
 * bitmap font with descenders (viz/font.c), the viridis colormap
 * (viz/colormap.c) and an atomic PNG writer over libpng (viz/png_write.c).
 * Functions that take an hl_error need a non-NULL one, except hl_image_new.
 */
#ifndef HL_HEATMAP_H
#define HL_HEATMAP_H

#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"

/* ---- RGB images ---------------------------------------------------------- */

/* Largest width or height of an image, in pixels. */
#define HL_IMAGE_MAX_SIDE 32768

typedef struct hl_image {
    int width, height;
    uint8_t *rgb;   /* (height, width, 3): row-major, three bytes per pixel */
} hl_image;

/* A white image; NULL on a bad size or a failed allocation, with the reason
 * in err when err is not NULL. */
hl_image *hl_image_new(int width, int height, hl_error *err);
void hl_image_free(hl_image *img);

/* Fills the w x h rectangle whose top-left pixel is (x, y), clipped to the image. */
void hl_image_fill_rect(hl_image *img, int x, int y, int w, int h, const uint8_t rgb[3]);
/* A line from (x0,y0) to (x1,y1) of the given width in pixels (>= 1), clipped
 * to the image. */
void hl_image_draw_line(hl_image *img, int x0, int y0, int x1, int y1, int width,
                        const uint8_t rgb[3]);
/* A filled disc of radius r (>= 0) centred on (cx,cy), clipped. */
void hl_image_fill_disc(hl_image *img, int cx, int cy, int r, const uint8_t rgb[3]);

/* ---- text in the built-in font (viz/font.c) ----------------------------- */

/* A glyph is 5x9 pixels at scale 1: capitals and digits fill rows 0-6,
 * descenders (g, j, p, q, y, comma) reach rows 7-8. Characters advance by 6
 * pixels; lines should be HL_FONT_LINE apart. Bytes outside printable ASCII
 * are drawn as '?'. */
#define HL_FONT_ADVANCE 6
#define HL_FONT_HEIGHT 9
#define HL_FONT_LINE 10

/* Width in pixels of text drawn at scale (no trailing gap); 0 for "". */
int hl_text_width(const char *text, int scale);

/* Draws text with the top-left of its first glyph at (x, y), each font pixel
 * a scale x scale square, clipped to the image. */
void hl_image_draw_text(hl_image *img, int x, int y, const char *text, int scale,
                        const uint8_t rgb[3]);

/* The same text turned 90 degrees counter-clockwise (it reads bottom to top),
 * inside the box whose top-left pixel is (x, y): the box is
 * HL_FONT_HEIGHT * scale wide and hl_text_width(text, scale) high. */
void hl_image_draw_text_up(hl_image *img, int x, int y, const char *text, int scale,
                           const uint8_t rgb[3]);

/* ---- the viridis colormap (viz/colormap.c) ------------------------------ */

/* The table entry for t in [0, 1], as matplotlib picks it: floor(t * 256)
 * clamped to 0..255 (so 1 gives 255). NaN gives 0. */
int hl_viridis_index(double t);

/* Entry index (clamped to 0..255) of the 256-entry viridis table: (68,1,84)
 * dark purple at 0 to (253,231,37) yellow at 255. */
void hl_viridis_color(int index, uint8_t rgb[3]);

/* ---- PNG output (viz/png_write.c) ---------------------------------------- */

/* Writes img as an 8-bit RGB PNG, atomically: into a temporary file beside
 * path, flushed to disk and renamed over path. On failure nothing is left
 * behind and the error (HL_ERR_IO, or HL_ERR_ARG for a bad image) names the
 * path and the reason. */
hl_status hl_image_write_png(const hl_image *img, const char *path, hl_error *err);

/* ---- heatmaps ------------------------------------------------------------- */

/* How values become colours; NaN and infinite cells are always drawn red. */
typedef enum hl_heatmap_range {
    HL_HEATMAP_RANGE_TILE_MAX = 0, /* 0 .. each tile's own maximum (the default) */
    HL_HEATMAP_RANGE_UNIT,         /* 0 .. 1 */
    HL_HEATMAP_RANGE_GLOBAL        /* minimum .. maximum over all tiles */
} hl_heatmap_range;

/* Values below the range take its bottom colour, above it its top colour. In
 * TILE_MAX mode a tile whose maximum is not positive is all bottom colour,
 * and so is every tile in GLOBAL mode when all values are equal. */

/* Default cell side in pixels, and the largest accepted. */
#define HL_HEATMAP_CELL_PX 10
#define HL_HEATMAP_CELL_PX_MAX 256
/* Token labels are cut to this many characters. */
#define HL_HEATMAP_TOKEN_CHARS 8

/* All fields may be zero (or opts NULL) for the defaults. */
typedef struct hl_heatmap_opts {
    int cell_px;                   /* side of one cell in pixels; 0: HL_HEATMAP_CELL_PX */
    int columns;                   /* tiles per grid row; 0: ceil(sqrt(N)); at most N used */
    hl_heatmap_range range;
    const char *title;             /* a line above the grid, or NULL */
    const char *const *labels;     /* N labels, one above each tile, or NULL */
    const char *const *row_labels; /* rows labels (query tokens) left of each tile, or NULL */
    const char *const *col_labels; /* cols labels (key tokens) above each tile, or NULL */
} hl_heatmap_opts;

/* Where everything goes, in pixels. Tile i sits at grid column i % grid_cols
 * and grid row i / grid_cols; see hl_heatmap_cell_origin. */
typedef struct hl_heatmap_layout {
    int width, height;             /* the whole image */
    int tiles, rows, cols;         /* N and the map shape */
    int cell_px;
    int grid_cols, grid_rows;
    int tile_x, tile_y;            /* top-left pixel of tile 0's cell (0,0) */
    int pitch_x, pitch_y;          /* from one tile to the next across and down */
    int bar_x, bar_y, bar_w, bar_h; /* the colorbar, its top row the top colour */
} hl_heatmap_layout;

/* Checks maps ((rows,cols) or (N,rows,cols)) and opts, and computes the layout
 * hl_heatmap_write would use. HL_ERR_SHAPE for another rank, HL_ERR_ARG for
 * bad options or an image over HL_IMAGE_MAX_SIDE. */
hl_status hl_heatmap_measure(const hl_tensor *maps, const hl_heatmap_opts *opts,
                             hl_heatmap_layout *layout, hl_error *err);

/* Top-left pixel of cell (r, c) of tile `tile`. */
void hl_heatmap_cell_origin(const hl_heatmap_layout *layout, int tile, int r, int c, int *x,
                            int *y);

/* Draws maps ((rows,cols) or (N,rows,cols)) as a heatmap grid and writes it to
 * path as a PNG (atomically, as hl_image_write_png). opts may be NULL. */
hl_status hl_heatmap_write(const hl_tensor *maps, const char *path,
                           const hl_heatmap_opts *opts, hl_error *err);

#endif
