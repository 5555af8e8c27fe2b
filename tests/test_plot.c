/* Tests for viz/plot.c: plots are written to a fresh temporary directory and
 * read back with libpng's simplified API; points must land on the pixels the
 * layout promises, in their series' colour. */
#include <float.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "viz/plot.h"
#include "tests/testutil.h"

static char dir[TU_DIR_MAX];

typedef struct {
    uint8_t *rgb;
    int width, height;
} picture;

static picture read_picture(const char *path)
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    ck_assert_msg(png_image_begin_read_from_file(&im, path), "cannot read %s", path);
    im.format = PNG_FORMAT_RGB;
    picture p = {malloc(PNG_IMAGE_SIZE(im)), (int)im.width, (int)im.height};
    ck_assert_ptr_nonnull(p.rgb);
    ck_assert(png_image_finish_read(&im, NULL, p.rgb, 0, NULL));
    return p;
}

static const uint8_t *pixel(const picture *p, int x, int y)
{
    ck_assert(x >= 0 && x < p->width && y >= 0 && y < p->height);
    return p->rgb + ((size_t)y * p->width + x) * 3;
}

static void expect_color(const picture *p, int x, int y, const uint8_t rgb[3], const char *what)
{
    const uint8_t *got = pixel(p, x, y);
    ck_assert_msg(!memcmp(got, rgb, 3), "%s: pixel (%d,%d) is (%d,%d,%d), expected (%d,%d,%d)",
                  what, x, y, got[0], got[1], got[2], rgb[0], rgb[1], rgb[2]);
}

START_TEST(test_plot_points_land_where_promised)
{
    tu_make_dir(dir, "plot");
    /* Two panels; the legend sits top-right, so the checked points stay low or left. */
    const double x[] = {0, 1, 2, 3, 4}, a[] = {0.2, 0.5, 0.9, 1.4, 2.0};
    const double b[] = {1.8, 1.2, 0.7, 0.4, 0.3}, c[] = {0.1, 0.3, 0.35, 0.6, 0.62};
    hl_plot_series top[] = {{"rising", x, a, 5}, {"falling", x, b, 5}};
    hl_plot_series bottom[] = {{"accuracy", x, c, 5}};
    hl_plot_panel panels[] = {{.y_label = "loss", .series = top, .n_series = 2},
                              {.y_label = "accuracy", .series = bottom, .n_series = 1,
                               .y_min = 0, .y_max = 1}};
    hl_plot_opts opts = {.title = "a test", .x_label = "x"};
    hl_error err = {0};
    hl_plot_layout l;
    ck_assert_int_eq(hl_plot_measure(panels, 2, &opts, &l, &err), HL_OK);
    /* The fitted y axis of panel 0 covers the data on whole steps; panel 1 is as given. */
    ck_assert(l.y_min[0] <= 0.2 && l.y_max[0] >= 2.0 && l.y_max[0] <= 2.5);
    ck_assert(l.x_min <= 0 && l.x_max >= 4);
    ck_assert(l.y_min[1] == 0 && l.y_max[1] == 1);
    ck_assert(l.bottom[0] < l.top[1]);

    char path[128];
    snprintf(path, sizeof path, "%s/plot.png", dir);
    ck_assert_msg(hl_plot_write(panels, 2, path, &opts, &err) == HL_OK, "%s", err.message);
    picture p = read_picture(path);
    ck_assert_int_eq(p.width, l.width);
    ck_assert_int_eq(p.height, l.height);
    uint8_t blue[3], orange[3], black[3] = {0, 0, 0};
    hl_plot_color(0, blue);
    hl_plot_color(1, orange);
    int px, py;
    for (int i = 0; i < 3; i++) {
        hl_plot_point(&l, 0, x[i], a[i], &px, &py);
        expect_color(&p, px, py, blue, "series 0 marker");
        hl_plot_point(&l, 1, x[i], c[i], &px, &py);
        expect_color(&p, px, py, blue, "panel 1 marker");
    }
    hl_plot_point(&l, 0, x[4], b[4], &px, &py);
    expect_color(&p, px, py, orange, "series 1 marker");
    /* Halfway along a segment the line passes (within the pixel its 2-pixel
     * width and the rounding of its ends allow). */
    hl_plot_point(&l, 0, 0.5, 0.35, &px, &py);
    bool on_line = false;
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++)
            on_line |= !memcmp(pixel(&p, px + dx, py + dy), blue, 3);
    ck_assert_msg(on_line, "no line near (%d,%d)", px, py);
    /* The frame is black just outside the plotting area. */
    expect_color(&p, l.left - 1, (l.top[0] + l.bottom[0]) / 2, black, "left frame");
    expect_color(&p, (l.left + l.right) / 2, l.bottom[1] + 1, black, "bottom frame");
    free(p.rgb);
    tu_remove_dir(dir);
}
END_TEST

START_TEST(test_plot_breaks_at_non_finite_and_clips)
{
    tu_make_dir(dir, "plot");
    const double x[] = {0, 1, 2, 3}, y[] = {0, NAN, 0, 1e300};
    hl_plot_series s = {"gap", x, y, 4};
    hl_plot_panel panel = {.series = &s, .n_series = 1, .y_min = -1, .y_max = 1};
    hl_plot_opts opts = {.x_min = 0, .x_max = 4};
    hl_error err = {0};
    hl_plot_layout l;
    char path[128];
    snprintf(path, sizeof path, "%s/gap.png", dir);
    ck_assert_int_eq(hl_plot_measure(&panel, 1, &opts, &l, &err), HL_OK);
    ck_assert_msg(hl_plot_write(&panel, 1, path, &opts, &err) == HL_OK, "%s", err.message);
    picture p = read_picture(path);
    uint8_t blue[3];
    hl_plot_color(0, blue);
    int px, py;
    hl_plot_point(&l, 0, 0, 0, &px, &py);
    expect_color(&p, px, py, blue, "first marker");
    /* No line across the NaN: the pixel between the two finite points is not blue. */
    hl_plot_point(&l, 0, 1, 0, &px, &py);
    ck_assert_msg(memcmp(pixel(&p, px, py), blue, 3) != 0, "the line bridged a NaN");
    /* The segment towards 1e300 is clipped to the area: nothing above the frame. */
    for (int row = 0; row < l.top[0] - 1; row++)
        ck_assert_msg(memcmp(pixel(&p, px + (l.right - l.left) / 4, row), blue, 3) != 0,
                      "a line left the plotting area at row %d", row);
    free(p.rgb);
    tu_remove_dir(dir);
}
END_TEST

START_TEST(test_plot_bad_input)
{
    tu_make_dir(dir, "plot");
    const double x[] = {0, 1};
    const double huge[] = {-1e308, 1e308}, most[] = {DBL_MAX, DBL_MAX};
    hl_plot_series s = {"s", x, x, 2}, bad = {"s", NULL, x, 2}, neg = {"s", x, x, -1},
                   wide_x = {"s", huge, x, 2}, wide_y = {"s", x, most, 2};
    hl_plot_panel ok = {.series = &s, .n_series = 1};
    hl_plot_panel five[5] = {ok, ok, ok, ok, ok};
    hl_plot_layout l;
    char path[128];
    snprintf(path, sizeof path, "%s/bad.png", dir);
    struct {
        const hl_plot_panel *panels;
        int n;
        hl_plot_opts opts;
        const char *fragment;
    } cases[] = {
        {&ok, 0, {0}, "0 panels"},
        {five, 5, {0}, "5 panels"},
        {&(hl_plot_panel){.series = &s, .n_series = 0}, 1, {0}, "0 series"},
        {&(hl_plot_panel){.series = &bad, .n_series = 1}, 1, {0}, "no data"},
        {&(hl_plot_panel){.series = &neg, .n_series = 1}, 1, {0}, "negative"},
        {&ok, 1, {.width = 50}, "no room"},
        {&ok, 1, {.panel_height = 10}, "panel height 10"},
        /* a span past DBL_MAX, or a pad above it: no axis to draw (it drew an
         * empty picture) */
        {&(hl_plot_panel){.series = &wide_x, .n_series = 1}, 1, {0}, "the x values, -1e+308"},
        {&(hl_plot_panel){.series = &wide_y, .n_series = 1}, 1, {0}, "the y values of panel 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hl_error err = {0};
        ck_assert_int_eq(hl_plot_measure(cases[i].panels, cases[i].n, &cases[i].opts, &l, &err),
                         HL_ERR_ARG);
        ck_assert_msg(strstr(err.message, cases[i].fragment), "case %zu: \"%s\" lacks \"%s\"",
                      i, err.message, cases[i].fragment);
        hl_error_clear(&err);
        ck_assert_int_eq(hl_plot_write(cases[i].panels, cases[i].n, path, &cases[i].opts, &err),
                         HL_ERR_ARG);
        ck_assert_int_ne(access(path, F_OK), 0);
    }
    hl_error err = {0};
    ck_assert_int_eq(hl_plot_write(&ok, 1, NULL, NULL, &err), HL_ERR_ARG);
    /* An unwritable place: an I/O error naming the path, and nothing left behind. */
    hl_error_clear(&err);
    snprintf(path, sizeof path, "%s/missing/plot.png", dir);
    ck_assert_int_eq(hl_plot_write(&ok, 1, path, NULL, &err), HL_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.message, path));
    tu_remove_dir(dir);
}
END_TEST

Suite *plot_suite(void)
{
    Suite *s = suite_create("plot");
    TCase *tc = tcase_create("plot");
    tcase_add_test(tc, test_plot_points_land_where_promised);
    tcase_add_test(tc, test_plot_breaks_at_non_finite_and_clips);
    tcase_add_test(tc, test_plot_bad_input);
    suite_add_tcase(s, tc);
    return s;
}
