/* Tests for viz/heatmap.c, viz/image.c, viz/font.c, viz/colormap.c and
 * viz/png_write.c: pictures are written to a fresh temporary directory and
 * read back with libpng's simplified API. */
#include <dirent.h>
#include <errno.h>
#include <png.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "viz/heatmap.h"
#include "tests/testutil.h"


static const uint8_t red[3] = {255, 0, 0};
static const uint8_t white[3] = {255, 255, 255};
static const uint8_t black[3] = {0, 0, 0};

/* ---- helpers -------------------------------------------------------------- */

typedef struct {
    char dir[64];
} tmpdir;

static void tmpdir_make(tmpdir *t)
{
    snprintf(t->dir, sizeof t->dir, "/tmp/hl_heatmap_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(t->dir));
}

static const char *tmpdir_path(const tmpdir *t, const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", t->dir, name);
    return buf;
}

/* Names in the directory other than . and .., joined by spaces. */
static void tmpdir_list(const tmpdir *t, char *out, size_t size)
{
    DIR *d = opendir(t->dir);
    ck_assert_ptr_nonnull(d);
    out[0] = '\0';
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            snprintf(out + strlen(out), size - strlen(out), "%s%s", out[0] ? " " : "", e->d_name);
    closedir(d);
}

/* Removes the named files, then fails unless the directory was left empty. */
static void tmpdir_remove(const tmpdir *t, const char *const *names)
{
    char path[256];
    for (int i = 0; names && names[i]; i++)
        remove(tmpdir_path(t, names[i], path, sizeof path));
    char left[512];
    tmpdir_list(t, left, sizeof left);
    ck_assert_msg(left[0] == '\0', "left behind in %s: %s", t->dir, left);
    ck_assert_int_eq(rmdir(t->dir), 0);
}

/* An 8-bit RGB PNG read back; NULL when libpng cannot read it. */
static uint8_t *read_png(const char *path, int *width, int *height)
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&im, path))
        return NULL;
    ck_assert_msg(im.format == PNG_FORMAT_RGB, "%s is not plain RGB (format %u)", path,
                  im.format);
    im.format = PNG_FORMAT_RGB;
    uint8_t *rgb = malloc(PNG_IMAGE_SIZE(im));
    ck_assert_ptr_nonnull(rgb);
    if (!png_image_finish_read(&im, NULL, rgb, 0, NULL)) {
        free(rgb);
        return NULL;
    }
    *width = (int)im.width;
    *height = (int)im.height;
    return rgb;
}

typedef struct {
    uint8_t *rgb;
    int width, height;
} picture;

static picture read_picture(const char *path, const hl_heatmap_layout *l)
{
    picture p = {0};
    p.rgb = read_png(path, &p.width, &p.height);
    ck_assert_msg(p.rgb != NULL, "cannot read %s back", path);
    if (l) {
        ck_assert_int_eq(p.width, l->width);
        ck_assert_int_eq(p.height, l->height);
    }
    return p;
}

static const uint8_t *pixel(const picture *p, int x, int y)
{
    ck_assert(x >= 0 && x < p->width && y >= 0 && y < p->height);
    return p->rgb + ((size_t)y * p->width + x) * 3;
}

static bool same_rgb(const uint8_t *a, const uint8_t *b) { return memcmp(a, b, 3) == 0; }

static void expect_pixel(const picture *p, int x, int y, const uint8_t rgb[3], const char *what)
{
    const uint8_t *got = pixel(p, x, y);
    ck_assert_msg(same_rgb(got, rgb), "%s: pixel (%d,%d) is (%d,%d,%d), expected (%d,%d,%d)",
                  what, x, y, got[0], got[1], got[2], rgb[0], rgb[1], rgb[2]);
}

/* Fails unless every pixel of tile's cell (r, c) has colour rgb. */
static void expect_cell(const picture *p, const hl_heatmap_layout *l, int tile, int r, int c,
                        const uint8_t rgb[3])
{
    int x0, y0;
    hl_heatmap_cell_origin(l, tile, r, c, &x0, &y0);
    char what[64];
    snprintf(what, sizeof what, "tile %d cell (%d,%d)", tile, r, c);
    for (int y = y0; y < y0 + l->cell_px; y++)
        for (int x = x0; x < x0 + l->cell_px; x++)
            expect_pixel(p, x, y, rgb, what);
}

static void expect_cell_index(const picture *p, const hl_heatmap_layout *l, int tile, int r,
                              int c, int index)
{
    uint8_t rgb[3];
    hl_viridis_color(index, rgb);
    expect_cell(p, l, tile, r, c, rgb);
}

/* Whether the rectangle holds at least one pixel of colour rgb. */
static bool has_colour(const picture *p, int x, int y, int w, int h, const uint8_t rgb[3])
{
    for (int py = y; py < y + h; py++)
        for (int px = x; px < x + w; px++)
            if (same_rgb(pixel(p, px, py), rgb))
                return true;
    return false;
}

static double luma(const uint8_t c[3]) { return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]; }

/* ---- colormap, text, PNG -------------------------------------------------- */

START_TEST(test_viridis)
{
    uint8_t c[3];
    hl_viridis_color(0, c);
    ck_assert(c[0] == 68 && c[1] == 1 && c[2] == 84);
    hl_viridis_color(255, c);
    ck_assert(c[0] == 253 && c[1] == 231 && c[2] == 37);
    /* Entries of matplotlib's table, to within 1. */
    const struct { int i; uint8_t rgb[3]; } known[] = {
        {32, {71, 45, 123}}, {64, {59, 82, 139}}, {128, {33, 145, 140}},
        {192, {94, 201, 98}}, {230, {189, 223, 38}},
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        hl_viridis_color(known[k].i, c);
        for (int ch = 0; ch < 3; ch++)
            ck_assert_msg(abs(c[ch] - known[k].rgb[ch]) <= 1, "entry %d channel %d is %d, not %d",
                          known[k].i, ch, c[ch], known[k].rgb[ch]);
    }
    /* Luminance rises: never falls by more than a 1-step rounding wobble, and
     * strictly over every 8 entries. */
    for (int i = 0; i < 255; i++) {
        uint8_t a[3], b[3];
        hl_viridis_color(i, a);
        hl_viridis_color(i + 1, b);
        ck_assert_msg(luma(b) >= luma(a) - 0.25, "luminance falls at %d", i);
        if (i + 8 <= 255) {
            hl_viridis_color(i + 8, b);
            ck_assert_msg(luma(b) > luma(a), "luminance flat from %d to %d", i, i + 8);
        }
    }
    /* Out-of-range entries clamp. */
    uint8_t d[3];
    hl_viridis_color(-5, c);
    hl_viridis_color(0, d);
    ck_assert(same_rgb(c, d));
    hl_viridis_color(300, c);
    hl_viridis_color(255, d);
    ck_assert(same_rgb(c, d));
    /* matplotlib's index rule. */
    ck_assert_int_eq(hl_viridis_index(0), 0);
    ck_assert_int_eq(hl_viridis_index(1), 255);
    ck_assert_int_eq(hl_viridis_index(0.5), 128);
    ck_assert_int_eq(hl_viridis_index(0.25), 64);
    ck_assert_int_eq(hl_viridis_index(0.65), 166);
    ck_assert_int_eq(hl_viridis_index(0.999), 255);
    ck_assert_int_eq(hl_viridis_index(-3), 0);
    ck_assert_int_eq(hl_viridis_index(7), 255);
    ck_assert_int_eq(hl_viridis_index(NAN), 0);
}
END_TEST

START_TEST(test_text)
{
    ck_assert_int_eq(hl_text_width("", 1), 0);
    ck_assert_int_eq(hl_text_width("L", 1), 5);
    ck_assert_int_eq(hl_text_width("L0H1", 1), 23);
    ck_assert_int_eq(hl_text_width("L0H1", 2), 46);
    hl_image *img = hl_image_new(20, 12, NULL);
    ck_assert_ptr_nonnull(img);
    /* 'L' at (2,1): its stem is column 0 of rows 0-6, its foot row 6. */
    hl_image_draw_text(img, 2, 1, "L", 1, black);
    int ink = 0;
    for (int i = 0; i < 20 * 12; i++)
        ink += img->rgb[3 * i] == 0;
    ck_assert_int_eq(ink, 7 + 4);
    for (int y = 1; y <= 7; y++)
        ck_assert_int_eq(img->rgb[(y * 20 + 2) * 3], 0);
    ck_assert_int_eq(img->rgb[(7 * 20 + 6) * 3], 0);
    ck_assert_int_eq(img->rgb[(0 * 20 + 2) * 3], 255);
    /* Turned up, the stem becomes the top row of its box (x 10..16 for
     * rows 0-6), and the foot the box's right column at x 16. */
    hl_image_draw_text_up(img, 10, 2, "L", 1, black);
    for (int x = 10; x <= 16; x++)
        ck_assert_int_eq(img->rgb[(6 * 20 + x) * 3], 0);
    for (int y = 2; y <= 6; y++)
        ck_assert_int_eq(img->rgb[(y * 20 + 16) * 3], 0);
    /* Clipping: text hanging off every edge, characters outside ASCII. */
    hl_image_draw_text(img, -7, -3, "Wide text \x80\xff", 3, black);
    hl_image_draw_text(img, 15, 10, "xyz", 2, black);
    hl_image_draw_text_up(img, -4, -20, "gjpqy", 2, black);
    hl_image_fill_rect(img, -100, 5, 1000, 1, red);
    ck_assert(same_rgb(img->rgb + (5 * 20 + 19) * 3, red));
    hl_image_free(img);
}
END_TEST

START_TEST(test_png_roundtrip)
{
    tmpdir t;
    tmpdir_make(&t);
    char path[256];
    tmpdir_path(&t, "small.png", path, sizeof path);
    hl_image *img = hl_image_new(7, 5, NULL);
    ck_assert_ptr_nonnull(img);
    const uint8_t teal[3] = {33, 145, 140};
    hl_image_fill_rect(img, 1, 1, 3, 2, teal);
    hl_image_fill_rect(img, 6, 4, 1, 1, red);
    hl_error err = {0};
    ck_assert_int_eq(hl_image_write_png(img, path, &err), HL_OK);
    /* A second write replaces the first. */
    hl_image_fill_rect(img, 0, 0, 1, 1, black);
    ck_assert_int_eq(hl_image_write_png(img, path, &err), HL_OK);
    picture p = read_picture(path, NULL);
    ck_assert(p.width == 7 && p.height == 5);
    ck_assert_mem_eq(p.rgb, img->rgb, 7 * 5 * 3);
    expect_pixel(&p, 2, 2, teal, "teal");
    expect_pixel(&p, 6, 4, red, "red");
    expect_pixel(&p, 0, 0, black, "black");
    expect_pixel(&p, 5, 0, white, "background");
    free(p.rgb);
    hl_image_free(img);

    ck_assert_ptr_null(hl_image_new(0, 5, &err));
    ck_assert_int_eq(err.status, HL_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "0x5"));
    hl_error_clear(&err);
    ck_assert_ptr_null(hl_image_new(5, HL_IMAGE_MAX_SIDE + 1, &err));
    ck_assert_int_eq(err.status, HL_ERR_ARG);
    hl_error_clear(&err);
    ck_assert_int_eq(hl_image_write_png(NULL, path, &err), HL_ERR_ARG);
    tmpdir_remove(&t, (const char *[]){"small.png", NULL});
}
END_TEST

/* A write that fails inside libpng (here: past a file size limit) goes
 * through its error longjmp, reports the system's reason and leaves no
 * temporary file. */
START_TEST(test_png_write_failure)
{
    tmpdir t;
    tmpdir_make(&t);
    char path[256];
    tmpdir_path(&t, "big.png", path, sizeof path);
    hl_image *img = hl_image_new(300, 300, NULL);
    ck_assert_ptr_nonnull(img);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < 300 * 300 * 3; i++) {   /* noise does not compress */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        img->rgb[i] = (uint8_t)x;
    }
    struct rlimit old, small;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    small = old;
    small.rlim_cur = 20000;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    hl_error err = {0};
    hl_status s = hl_image_write_png(img, path, &err);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, old_handler);
    ck_assert_int_eq(s, HL_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.message, path));
    ck_assert_msg(strstr(err.message, strerror(EFBIG)), "unexpected message: %s", err.message);
    hl_image_free(img);
    tmpdir_remove(&t, NULL);
}
END_TEST

/* ---- heatmaps ------------------------------------------------------------- */

/* Three 4x5 tiles: tile 0 spans 0..2, tile 1 has a NaN and an inf and a
 * maximum of 0.5, tile 2 is never positive. */
static hl_tensor *three_tiles(void)
{
    hl_tensor *m = hl_tensor_new("attn", 3, (int[]){3, 4, 5}, false);
    ck_assert_ptr_nonnull(m);
    for (size_t i = 0; i < m->numel; i++)
        m->data[i] = (hl_real)0.1;
    hl_real *t0 = m->data, *t1 = m->data + 20, *t2 = m->data + 40;
    t0[0 * 5 + 0] = 0;
    t0[1 * 5 + 2] = 2;
    t0[2 * 5 + 3] = (hl_real)0.5;
    t0[3 * 5 + 4] = (hl_real)1.3;
    t1[0 * 5 + 0] = NAN;
    t1[0 * 5 + 1] = INFINITY;
    t1[1 * 5 + 1] = (hl_real)0.5;
    t1[2 * 5 + 2] = (hl_real)0.25;
    for (int i = 0; i < 20; i++)
        t2[i] = (hl_real)(-0.1 * (i % 3));
    return m;
}

START_TEST(test_heatmap_tile_max)
{
    tmpdir t;
    tmpdir_make(&t);
    char path[256];
    tmpdir_path(&t, "grid.png", path, sizeof path);
    hl_tensor *m = three_tiles();
    const char *labels[] = {"L0H0 prev 0.97", "L0H1 nan", "L1H0 flat"};
    const char *rows[] = {"BOS", "a", "b", "a_long_token"};
    const char *cols[] = {"BOS", "a", "b", "a", "-"};
    hl_heatmap_opts opts = {.labels = labels, .row_labels = rows, .col_labels = cols,
                            .title = "three tiles"};
    hl_error err = {0};
    hl_heatmap_layout l;
    ck_assert_int_eq(hl_heatmap_measure(m, &opts, &l, &err), HL_OK);
    ck_assert(l.tiles == 3 && l.rows == 4 && l.cols == 5 && l.cell_px == HL_HEATMAP_CELL_PX);
    ck_assert(l.grid_cols == 2 && l.grid_rows == 2);
    ck_assert_int_eq(hl_heatmap_write(m, path, &opts, &err), HL_OK);
    picture p = read_picture(path, &l);

    expect_cell_index(&p, &l, 0, 0, 0, 0);      /* 0 */
    expect_cell_index(&p, &l, 0, 1, 2, 255);    /* the tile maximum */
    expect_cell_index(&p, &l, 0, 2, 3, 64);     /* 0.5 / 2 */
    expect_cell_index(&p, &l, 0, 3, 4, 166);    /* 1.3 / 2 = 0.65 */
    expect_cell_index(&p, &l, 0, 0, 1, 12);     /* 0.1 / 2 */
    expect_cell(&p, &l, 1, 0, 0, red);          /* NaN */
    expect_cell(&p, &l, 1, 0, 1, red);          /* inf, left out of the maximum */
    expect_cell_index(&p, &l, 1, 1, 1, 255);    /* tile 1 scaled to its own 0.5 */
    expect_cell_index(&p, &l, 1, 2, 2, 128);
    expect_cell_index(&p, &l, 1, 0, 2, 51);     /* 0.1 / 0.5 */
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 5; c++)
            expect_cell_index(&p, &l, 2, r, c, 0);

    /* Tiles sit on the grid: tile 1 right of tile 0, tile 2 below it. */
    int x0, y0, x1, y1, x2, y2;
    hl_heatmap_cell_origin(&l, 0, 0, 0, &x0, &y0);
    hl_heatmap_cell_origin(&l, 1, 0, 0, &x1, &y1);
    hl_heatmap_cell_origin(&l, 2, 0, 0, &x2, &y2);
    ck_assert(y1 == y0 && x1 >= x0 + 5 * l.cell_px);
    ck_assert(x2 == x0 && y2 >= y0 + 4 * l.cell_px);
    expect_pixel(&p, 0, 0, white, "corner");
    /* The title, the tile labels and the token labels left ink above and
     * beside the tiles. */
    ck_assert(has_colour(&p, 0, 0, p.width, 30, black));   /* the title */
    ck_assert(has_colour(&p, x2, y0 + 4 * l.cell_px, p.width - x2, y2 - y0 - 4 * l.cell_px, black));
    ck_assert(has_colour(&p, 0, y0, x0, 4 * l.cell_px, black));
    ck_assert(has_colour(&p, x0, y0 - 15, 5 * l.cell_px, 15, black));

    /* The colorbar: top colour at its top, bottom colour at its bottom, a
     * frame, and the range printed beside it. */
    ck_assert(l.bar_x > x1 + 5 * l.cell_px && l.bar_x + l.bar_w < l.width);
    uint8_t top[3], bottom[3];
    hl_viridis_color(255, top);
    hl_viridis_color(0, bottom);
    expect_pixel(&p, l.bar_x, l.bar_y, top, "colorbar top");
    expect_pixel(&p, l.bar_x + l.bar_w - 1, l.bar_y + l.bar_h - 1, bottom, "colorbar bottom");
    expect_pixel(&p, l.bar_x - 1, l.bar_y - 1, black, "colorbar frame");
    ck_assert(has_colour(&p, l.bar_x + l.bar_w + 1, l.bar_y, l.width - l.bar_x - l.bar_w - 1,
                         8, black));
    free(p.rgb);
    hl_tensor_free(m);
    tmpdir_remove(&t, (const char *[]){"grid.png", NULL});
}
END_TEST

START_TEST(test_heatmap_ranges)
{
    tmpdir t;
    tmpdir_make(&t);
    char path[256];
    tmpdir_path(&t, "range.png", path, sizeof path);
    hl_tensor *m = hl_tensor_new("m", 3, (int[]){2, 2, 3}, false);
    ck_assert_ptr_nonnull(m);
    const hl_real v[] = {-1, 0, 1, (hl_real)0.5, (hl_real)0.25, (hl_real)-0.2,
                         3, 2, (hl_real)1.5, 0, 0, 0};
    memcpy(m->data, v, sizeof v);
    hl_error err = {0};
    hl_heatmap_layout l;

    hl_heatmap_opts unit = {.range = HL_HEATMAP_RANGE_UNIT, .cell_px = 6};
    ck_assert_int_eq(hl_heatmap_measure(m, &unit, &l, &err), HL_OK);
    ck_assert_int_eq(hl_heatmap_write(m, path, &unit, &err), HL_OK);
    picture p = read_picture(path, &l);
    ck_assert_int_eq(l.cell_px, 6);
    const int unit_index[] = {0, 0, 255, 128, 64, 0, 255, 255, 255, 0, 0, 0};
    for (int i = 0; i < 12; i++)
        expect_cell_index(&p, &l, i / 6, i / 3 % 2, i % 3, unit_index[i]);
    free(p.rgb);

    /* Global: -1 .. 3, so 1 is halfway. */
    hl_heatmap_opts global = {.range = HL_HEATMAP_RANGE_GLOBAL, .columns = 1};
    ck_assert_int_eq(hl_heatmap_measure(m, &global, &l, &err), HL_OK);
    ck_assert(l.grid_cols == 1 && l.grid_rows == 2);
    ck_assert_int_eq(hl_heatmap_write(m, path, &global, &err), HL_OK);
    p = read_picture(path, &l);
    const int global_index[] = {0, 64, 128, 96, 80, 51, 255, 192, 160, 64, 64, 64};
    for (int i = 0; i < 12; i++)
        expect_cell_index(&p, &l, i / 6, i / 3 % 2, i % 3, global_index[i]);
    free(p.rgb);

    /* All equal: the bottom colour, not a division by zero. The colorbar's
     * numbers change, and with them the layout. */
    hl_tensor_fill(m, 4);
    ck_assert_int_eq(hl_heatmap_measure(m, &global, &l, &err), HL_OK);
    ck_assert_int_eq(hl_heatmap_write(m, path, &global, &err), HL_OK);
    p = read_picture(path, &l);
    for (int i = 0; i < 12; i++)
        expect_cell_index(&p, &l, i / 6, i / 3 % 2, i % 3, 0);
    free(p.rgb);
    hl_tensor_free(m);
    tmpdir_remove(&t, (const char *[]){"range.png", NULL});
}
END_TEST

START_TEST(test_heatmap_layout)
{
    hl_error err = {0};
    hl_heatmap_layout l;
    /* One (rows, cols) map, nothing but the colorbar: margin 10, tile 40x30,
     * gap 16, bar 14, gap 4 and "tile max" (47 px) and margin 10 across;
     * the bar's minimum height of 40 decides the height. */
    hl_tensor *one = hl_tensor_new("one", 2, (int[]){3, 4}, false);
    ck_assert_int_eq(hl_heatmap_measure(one, NULL, &l, &err), HL_OK);
    ck_assert(l.tiles == 1 && l.rows == 3 && l.cols == 4 && l.grid_cols == 1 && l.grid_rows == 1);
    ck_assert_int_eq(l.width, 10 + 40 + 16 + 14 + 4 + 47 + 10);
    ck_assert_int_eq(l.height, 10 + 40 + 10);
    int x, y;
    hl_heatmap_cell_origin(&l, 0, 2, 3, &x, &y);
    ck_assert(x == 10 + 30 && y == 10 + 20);

    tmpdir t;
    tmpdir_make(&t);
    char path[256];
    tmpdir_path(&t, "one.png", path, sizeof path);
    ck_assert_int_eq(hl_heatmap_write(one, path, NULL, &err), HL_OK);
    picture p = read_picture(path, &l);
    free(p.rgb);
    hl_tensor_free(one);

    /* Five tiles: ceil(sqrt(5)) = 3 columns by default; columns beyond N are
     * not used. */
    hl_tensor *five = tu_random("five", 3, (int[]){5, 7, 7}, false, 11, 0, 1);
    ck_assert_int_eq(hl_heatmap_measure(five, NULL, &l, &err), HL_OK);
    ck_assert(l.grid_cols == 3 && l.grid_rows == 2);
    hl_heatmap_opts opts = {.columns = 9};
    ck_assert_int_eq(hl_heatmap_measure(five, &opts, &l, &err), HL_OK);
    ck_assert(l.grid_cols == 5 && l.grid_rows == 1);
    /* A label wider than its tile widens every slot. */
    const char *labels[] = {"a label much wider than seventy pixels", "", NULL, "x", "y"};
    opts = (hl_heatmap_opts){.labels = labels};
    ck_assert_int_eq(hl_heatmap_measure(five, &opts, &l, &err), HL_OK);
    ck_assert_int_ge(l.pitch_x, hl_text_width(labels[0], 1));
    ck_assert_int_eq(hl_heatmap_write(five, path, &opts, &err), HL_OK);
    p = read_picture(path, &l);
    free(p.rgb);
    hl_tensor_free(five);
    tmpdir_remove(&t, (const char *[]){"one.png", NULL});
}
END_TEST

START_TEST(test_heatmap_errors)
{
    tmpdir t;
    tmpdir_make(&t);
    char path[256];
    hl_tensor *m = hl_tensor_new("m", 3, (int[]){2, 3, 3}, false);
    hl_error err = {0};

    /* A missing directory. */
    ck_assert_int_eq(hl_heatmap_write(m, "/nonexistent-dir/x.png", NULL, &err), HL_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.message, "/nonexistent-dir/x.png"));
    ck_assert_ptr_nonnull(strstr(err.message, strerror(ENOENT)));
    struct stat st;
    ck_assert_int_ne(stat("/nonexistent-dir", &st), 0);
    hl_error_clear(&err);

    /* A "directory" that is a file. */
    tmpdir_path(&t, "file", path, sizeof path);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    tmpdir_path(&t, "file/x.png", path, sizeof path);
    ck_assert_int_eq(hl_heatmap_write(m, path, NULL, &err), HL_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.message, path));
    ck_assert_ptr_nonnull(strstr(err.message, strerror(ENOTDIR)));
    hl_error_clear(&err);

    /* A target that is a directory: refused before a temporary file is
     * made, the directory left as it was. */
    tmpdir_path(&t, "sub", path, sizeof path);
    ck_assert_int_eq(mkdir(path, 0700), 0);
    ck_assert_int_eq(hl_heatmap_write(m, path, NULL, &err), HL_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.message, path));
    ck_assert_ptr_nonnull(strstr(err.message, "is a directory"));
    char left[512];
    tmpdir_list(&t, left, sizeof left);
    ck_assert_msg(strcmp(left, "file sub") == 0 || strcmp(left, "sub file") == 0,
                  "directory holds: %s", left);
    ck_assert_int_eq(rmdir(path), 0);
    hl_error_clear(&err);

    /* Shapes and arguments; none of these may create a file. */
    tmpdir_path(&t, "never.png", path, sizeof path);
    char buf[HL_SHAPE_STR_MAX];
    hl_tensor *r1 = hl_tensor_new("r1", 1, (int[]){5}, false);
    hl_tensor *r4 = hl_tensor_new("r4", 4, (int[]){1, 2, 3, 4}, false);
    ck_assert_int_eq(hl_heatmap_write(r1, path, NULL, &err), HL_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(err.message, hl_shape_str(r1, buf)));
    hl_error_clear(&err);
    hl_heatmap_layout l;
    ck_assert_int_eq(hl_heatmap_measure(r4, NULL, &l, &err), HL_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(err.message, "(1,2,3,4)"));
    hl_error_clear(&err);
    ck_assert_int_eq(hl_heatmap_write(NULL, path, NULL, &err), HL_ERR_ARG);
    hl_error_clear(&err);
    ck_assert_int_eq(hl_heatmap_write(m, NULL, NULL, &err), HL_ERR_ARG);
    hl_error_clear(&err);
    const hl_heatmap_opts bad[] = {
        {.cell_px = -1}, {.cell_px = HL_HEATMAP_CELL_PX_MAX + 1}, {.columns = -2},
        {.range = (hl_heatmap_range)7},
    };
    const char *says[] = {"cell_px -1", "cell_px 257", "columns -2", "range mode 7"};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(hl_heatmap_write(m, path, &bad[i], &err), HL_ERR_ARG);
        ck_assert_msg(strstr(err.message, says[i]), "'%s' lacks '%s'", err.message, says[i]);
        hl_error_clear(&err);
    }
    /* Too big a picture is refused before any allocation. */
    hl_tensor *big = hl_tensor_new("big", 3, (int[]){1, 2000, 2000}, false);
    hl_heatmap_opts huge = {.cell_px = 20};
    ck_assert_int_eq(hl_heatmap_write(big, path, &huge, &err), HL_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "over the limit"));
    hl_error_clear(&err);

    hl_tensor_free(big);
    hl_tensor_free(r1);
    hl_tensor_free(r4);
    hl_tensor_free(m);
    tmpdir_remove(&t, (const char *[]){"file", NULL});
}
END_TEST

Suite *heatmap_suite(void)
{
    Suite *s = suite_create("heatmap");
    TCase *tc = tcase_create("heatmap");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_viridis);
    tcase_add_test(tc, test_text);
    tcase_add_test(tc, test_png_roundtrip);
    tcase_add_test(tc, test_png_write_failure);
    tcase_add_test(tc, test_heatmap_tile_max);
    tcase_add_test(tc, test_heatmap_ranges);
    tcase_add_test(tc, test_heatmap_layout);
    tcase_add_test(tc, test_heatmap_errors);
    suite_add_tcase(s, tc);
    return s;
}
