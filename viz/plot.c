/*
 * plot.c: line plots (see plot.h).
 *
 * The picture, top to bottom: the title; the panels, each a framed plotting
 * area with its y tick labels and its y label (turned upright) at the left;
 * under the last panel the x tick labels and the x label. All panels share
 * the plotting area's columns, so one x maps to the same column everywhere.
 */
#include "viz/plot.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viz/heatmap.h"

#define MARGIN 10
#define TITLE_SCALE 2
#define PANEL_GAP 16     /* between neighbouring panels */
#define TICK 4           /* tick length, outside the frame */
#define LABEL_GAP 3      /* between a label and what it names */
#define CAP_HEIGHT 7     /* rows of a capital or digit, for centring */
#define RIGHT_MARGIN 16
#define TARGET_TICKS 5
#define MARKER 5         /* side of a point's square */
#define LEGEND_LINE 16   /* length of a legend's line sample */
#define MIN_AREA 40      /* smallest plotting area side */

static const uint8_t black[3] = {0, 0, 0};
static const uint8_t grid_rgb[3] = {225, 225, 225};
static const uint8_t white[3] = {255, 255, 255};

/* matplotlib's "tab10" colours. */
static const uint8_t palette[HL_PLOT_MAX_SERIES][3] = {
    {31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},
    {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127}};

void hl_plot_color(int i, uint8_t rgb[3])
{
    int k = ((i % HL_PLOT_MAX_SERIES) + HL_PLOT_MAX_SERIES) % HL_PLOT_MAX_SERIES;
    memcpy(rgb, palette[k], 3);
}

/* ---- axes --------------------------------------------------------------- */

typedef struct {
    double lo, hi, step;
} axis;

/* 1, 2 or 5 times a power of ten, near range / TARGET_TICKS. */
static double nice_step(double range)
{
    double raw = range / TARGET_TICKS, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
}

/* Limits: given when lo < hi, else the data's range widened to whole steps. */
static axis make_axis(double given_lo, double given_hi, double data_lo, double data_hi)
{
    axis a;
    if (given_lo < given_hi && isfinite(given_lo) && isfinite(given_hi)) {
        a.lo = given_lo;
        a.hi = given_hi;
        a.step = nice_step(a.hi - a.lo);
        return a;
    }
    if (!(data_lo <= data_hi)) { /* no finite data */
        data_lo = 0;
        data_hi = 1;
    }
    if (data_lo == data_hi) {
        double pad = data_lo == 0 ? 0.5 : fabs(data_lo) * 0.1;
        data_lo -= pad;
        data_hi += pad;
    }
    a.step = nice_step(data_hi - data_lo);
    a.lo = floor(data_lo / a.step) * a.step;
    a.hi = ceil(data_hi / a.step) * a.step;
    return a;
}

/* The ticks are the multiples of the step inside the limits. */
static int tick_count(const axis *a, double *first)
{
    double k0 = ceil(a->lo / a->step - 1e-9), k1 = floor(a->hi / a->step + 1e-9);
    *first = k0;
    return k1 >= k0 ? (int)(k1 - k0) + 1 : 0;
}

static void tick_text(const axis *a, double k, char *buf, size_t size)
{
    int decimals = (int)fmax(0, -floor(log10(a->step) + 1e-9));
    double v = k * a->step;
    if (fabs(v) >= 1e15) { /* in fixed notation, more digits than a label holds */
        const double places = floor(log10(fabs(v))) - floor(log10(a->step) + 1e-9) + 1;
        const int digits = (int)fmin(17, fmax(1, places));
        snprintf(buf, size, "%.*g", digits, v);
        return;
    }
    snprintf(buf, size, "%.*f", decimals, v == 0 ? 0.0 : v); /* no "-0" */
}

/* Whether the axis can be drawn: finite limits a whole number of finite
 * steps apart (data from -1e308 to 1e308 span more than a double holds). */
static bool axis_ok(const axis *a)
{
    return isfinite(a->lo) && isfinite(a->hi) && isfinite(a->step) && a->step > 0 &&
           a->lo < a->hi;
}

static int widest_tick(const axis *a)
{
    double k0;
    int n = tick_count(a, &k0), w = 0;
    for (int i = 0; i < n; i++) {
        char buf[48];
        tick_text(a, k0 + i, buf, sizeof buf);
        int tw = hl_text_width(buf, 1);
        w = tw > w ? tw : w;
    }
    return w;
}

/* ---- layout ---------------------------------------------------------------- */

typedef struct {
    hl_plot_layout l;
    hl_plot_opts o;
    axis x, y[HL_PLOT_MAX_PANELS];
    int title_h;
} plan;

static hl_status check_panels(const hl_plot_panel *panels, int n_panels, hl_error *err)
{
    if (!panels || n_panels < 1 || n_panels > HL_PLOT_MAX_PANELS)
        return hl_error_set(err, HL_ERR_ARG, "plot: %d panels; 1 to %d are allowed", n_panels,
                            HL_PLOT_MAX_PANELS);
    for (int p = 0; p < n_panels; p++) {
        const hl_plot_panel *pa = &panels[p];
        if (!pa->series || pa->n_series < 1 || pa->n_series > HL_PLOT_MAX_SERIES)
            return hl_error_set(err, HL_ERR_ARG, "plot: panel %d has %d series; 1 to %d are "
                                "allowed", p, pa->n_series, HL_PLOT_MAX_SERIES);
        for (int s = 0; s < pa->n_series; s++)
            if (pa->series[s].n < 0 || (pa->series[s].n > 0 && (!pa->series[s].x ||
                                                                  !pa->series[s].y)))
                return hl_error_set(err, HL_ERR_ARG, "plot: series %d of panel %d has %d "
                                    "points and %s", s, p, pa->series[s].n,
                                    pa->series[s].n < 0 ? "that is negative" : "no data");
    }
    return HL_OK;
}

/* The finite range of the x (which = 0) or y (1) values of a panel's series. */
static void data_range(const hl_plot_panel *p, int which, double *lo, double *hi)
{
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int s = 0; s < p->n_series; s++)
        for (int i = 0; i < p->series[s].n; i++) {
            double x = p->series[s].x[i], y = p->series[s].y[i];
            if (!isfinite(x) || !isfinite(y))
                continue;
            double v = which ? y : x;
            *lo = fmin(*lo, v);
            *hi = fmax(*hi, v);
        }
}

static hl_status make_plan(const hl_plot_panel *panels, int n_panels, const hl_plot_opts *opts,
                           plan *p, hl_error *err)
{
    memset(p, 0, sizeof *p);
    if (check_panels(panels, n_panels, err) != HL_OK)
        return err->status;
    p->o = opts ? *opts : (hl_plot_opts){0};
    hl_plot_opts *o = &p->o;
    if (!o->width)
        o->width = HL_PLOT_WIDTH;
    if (!o->panel_height)
        o->panel_height = HL_PLOT_PANEL_HEIGHT;
    if (o->width < 0 || o->width > HL_IMAGE_MAX_SIDE || o->panel_height < MIN_AREA ||
        o->panel_height > HL_IMAGE_MAX_SIDE)
        return hl_error_set(err, HL_ERR_ARG, "plot: width %d or panel height %d is outside "
                            "%d..%d", o->width, o->panel_height, MIN_AREA, HL_IMAGE_MAX_SIDE);
    double x_lo = INFINITY, x_hi = -INFINITY;
    for (int k = 0; k < n_panels; k++) {
        double lo, hi;
        data_range(&panels[k], 0, &lo, &hi);
        x_lo = fmin(x_lo, lo);
        x_hi = fmax(x_hi, hi);
    }
    p->x = make_axis(o->x_min, o->x_max, x_lo, x_hi);
    if (!axis_ok(&p->x))
        return hl_error_set(err, HL_ERR_ARG, "plot: the x values, %g to %g, span more than an "
                            "axis can show", x_lo, x_hi);
    int tick_w = 0;
    for (int k = 0; k < n_panels; k++) {
        double lo, hi;
        data_range(&panels[k], 1, &lo, &hi);
        p->y[k] = make_axis(panels[k].y_min, panels[k].y_max, lo, hi);
        if (!axis_ok(&p->y[k]))
            return hl_error_set(err, HL_ERR_ARG, "plot: the y values of panel %d, %g to %g, "
                                "span more than an axis can show", k, lo, hi);
        int w = widest_tick(&p->y[k]);
        tick_w = w > tick_w ? w : tick_w;
    }
    hl_plot_layout *l = &p->l;
    p->title_h = o->title ? HL_FONT_LINE * TITLE_SCALE + 6 : 0;
    l->n_panels = n_panels;
    l->left = MARGIN + HL_FONT_HEIGHT + 2 * LABEL_GAP + tick_w + TICK;
    l->right = o->width - RIGHT_MARGIN - 1;
    if (l->right - l->left < MIN_AREA)
        return hl_error_set(err, HL_ERR_ARG, "plot: width %d leaves no room to plot in",
                            o->width);
    long long y = MARGIN + p->title_h;
    for (int k = 0; k < n_panels; k++) {
        l->top[k] = (int)y;
        l->bottom[k] = (int)(y + o->panel_height - 1);
        y += o->panel_height + PANEL_GAP;
        l->y_min[k] = p->y[k].lo;
        l->y_max[k] = p->y[k].hi;
    }
    long long height = l->bottom[n_panels - 1] + 1 + TICK + LABEL_GAP + HL_FONT_LINE +
                       (o->x_label ? LABEL_GAP + HL_FONT_LINE : 0) + MARGIN;
    if (height > HL_IMAGE_MAX_SIDE)
        return hl_error_set(err, HL_ERR_ARG, "plot: the picture would be %lld pixels high, "
                            "over the limit of %d", height, HL_IMAGE_MAX_SIDE);
    l->width = o->width;
    l->height = (int)height;
    l->x_min = p->x.lo;
    l->x_max = p->x.hi;
    return HL_OK;
}

hl_status hl_plot_measure(const hl_plot_panel *panels, int n_panels, const hl_plot_opts *opts,
                          hl_plot_layout *layout, hl_error *err)
{
    plan p;
    hl_status s = make_plan(panels, n_panels, opts, &p, err);
    if (s == HL_OK)
        *layout = p.l;
    return s;
}

/* Pixel coordinates as doubles (not rounded, possibly far outside). */
static void to_pixel(const hl_plot_layout *l, int p, double x, double y, double *px, double *py)
{
    *px = l->left + (x - l->x_min) / (l->x_max - l->x_min) * (l->right - l->left);
    *py = l->bottom[p] - (y - l->y_min[p]) / (l->y_max[p] - l->y_min[p]) * (l->bottom[p] - l->top[p]);
}

void hl_plot_point(const hl_plot_layout *layout, int p, double x, double y, int *px, int *py)
{
    double fx, fy;
    to_pixel(layout, p, x, y, &fx, &fy);
    *px = (int)lround(fx);
    *py = (int)lround(fy);
}

/* ---- drawing --------------------------------------------------------------- */

typedef struct {
    int x0, y0, x1, y1; /* inclusive */
} rect;

static void fill_clipped(hl_image *img, rect c, int x, int y, int w, int h,
                         const uint8_t rgb[3])
{
    int x0 = x > c.x0 ? x : c.x0, y0 = y > c.y0 ? y : c.y0;
    int x1 = x + w - 1 < c.x1 ? x + w - 1 : c.x1, y1 = y + h - 1 < c.y1 ? y + h - 1 : c.y1;
    if (x1 >= x0 && y1 >= y0)
        hl_image_fill_rect(img, x0, y0, x1 - x0 + 1, y1 - y0 + 1, rgb);
}

/* Liang-Barsky: cuts the segment to the rectangle; false when nothing is left. */
static bool clip_segment(rect c, double *x0, double *y0, double *x1, double *y1)
{
    double t0 = 0, t1 = 1, dx = *x1 - *x0, dy = *y1 - *y0;
    double p[4] = {-dx, dx, -dy, dy};
    double q[4] = {*x0 - c.x0, c.x1 - *x0, *y0 - c.y0, c.y1 - *y0};
    for (int i = 0; i < 4; i++) {
        if (p[i] == 0) {
            if (q[i] < 0)
                return false;
            continue;
        }
        double t = q[i] / p[i];
        if (p[i] < 0 && t > t0)
            t0 = t;
        else if (p[i] > 0 && t < t1)
            t1 = t;
        if (t0 > t1)
            return false;
    }
    double ax = *x0 + t0 * dx, ay = *y0 + t0 * dy;
    *x1 = *x0 + t1 * dx;
    *y1 = *y0 + t1 * dy;
    *x0 = ax;
    *y0 = ay;
    return true;
}

/* A 2-pixel line (Bresenham, each step a 2x2 square) inside c. */
static void draw_line(hl_image *img, rect c, double fx0, double fy0, double fx1, double fy1,
                      const uint8_t rgb[3])
{
    if (!clip_segment(c, &fx0, &fy0, &fx1, &fy1))
        return;
    int x0 = (int)lround(fx0), y0 = (int)lround(fy0), x1 = (int)lround(fx1), y1 = (int)lround(fy1);
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
    for (int e = dx + dy;;) {
        fill_clipped(img, c, x0, y0, 2, 2, rgb);
        if (x0 == x1 && y0 == y1)
            break;
        int e2 = 2 * e;
        if (e2 >= dy) {
            e += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            e += dx;
            y0 += sy;
        }
    }
}

static void draw_frame(hl_image *img, rect a)
{
    hl_image_fill_rect(img, a.x0 - 1, a.y0 - 1, a.x1 - a.x0 + 3, 1, black);
    hl_image_fill_rect(img, a.x0 - 1, a.y1 + 1, a.x1 - a.x0 + 3, 1, black);
    hl_image_fill_rect(img, a.x0 - 1, a.y0 - 1, 1, a.y1 - a.y0 + 3, black);
    hl_image_fill_rect(img, a.x1 + 1, a.y0 - 1, 1, a.y1 - a.y0 + 3, black);
}

/* Grid lines, ticks and tick labels of panel k (x labels under the last). */
static void draw_axes(hl_image *img, const plan *p, int k, rect a)
{
    const hl_plot_layout *l = &p->l;
    double k0;
    char buf[48];
    int n = tick_count(&p->x, &k0);
    for (int i = 0; i < n; i++) {
        int px, py;
        hl_plot_point(l, k, (k0 + i) * p->x.step, l->y_min[k], &px, &py);
        hl_image_fill_rect(img, px, a.y0, 1, a.y1 - a.y0 + 1, grid_rgb);
        hl_image_fill_rect(img, px, a.y1 + 2, 1, TICK, black);
        if (k == l->n_panels - 1) {
            tick_text(&p->x, k0 + i, buf, sizeof buf);
            hl_image_draw_text(img, px - hl_text_width(buf, 1) / 2, a.y1 + 2 + TICK + LABEL_GAP,
                               buf, 1, black);
        }
    }
    n = tick_count(&p->y[k], &k0);
    for (int i = 0; i < n; i++) {
        int px, py;
        hl_plot_point(l, k, l->x_min, (k0 + i) * p->y[k].step, &px, &py);
        hl_image_fill_rect(img, a.x0, py, a.x1 - a.x0 + 1, 1, grid_rgb);
        hl_image_fill_rect(img, a.x0 - 1 - TICK, py, TICK, 1, black);
        tick_text(&p->y[k], k0 + i, buf, sizeof buf);
        hl_image_draw_text(img, a.x0 - 1 - TICK - LABEL_GAP - hl_text_width(buf, 1),
                           py - CAP_HEIGHT / 2, buf, 1, black);
    }
}

static void draw_series(hl_image *img, const hl_plot_layout *l, int k, rect a,
                        const hl_plot_series *s, const uint8_t rgb[3])
{
    bool have_prev = false;
    double px0 = 0, py0 = 0;
    for (int i = 0; i < s->n; i++) {
        if (!isfinite(s->x[i]) || !isfinite(s->y[i])) {
            have_prev = false;
            continue;
        }
        double px, py;
        to_pixel(l, k, s->x[i], s->y[i], &px, &py);
        if (have_prev)
            draw_line(img, a, px0, py0, px, py, rgb);
        px0 = px;
        py0 = py;
        have_prev = true;
    }
    for (int i = 0; i < s->n; i++) {
        if (!isfinite(s->x[i]) || !isfinite(s->y[i]))
            continue;
        double px, py;
        to_pixel(l, k, s->x[i], s->y[i], &px, &py);
        if (px > -MARKER && px < l->width + MARKER && py > -MARKER && py < l->height + MARKER)
            fill_clipped(img, a, (int)lround(px) - MARKER / 2, (int)lround(py) - MARKER / 2,
                         MARKER, MARKER, rgb);
    }
}

/* The labelled series, in a white box in the panel's top-right corner. */
static void draw_legend(hl_image *img, const hl_plot_panel *panel, rect a)
{
    int n = 0, w = 0;
    for (int s = 0; s < panel->n_series; s++)
        if (panel->series[s].label) {
            int tw = hl_text_width(panel->series[s].label, 1);
            w = tw > w ? tw : w;
            n++;
        }
    if (!n)
        return;
    const int line = HL_FONT_LINE + 2, box_w = 4 + LEGEND_LINE + 4 + w + 4,
              box_h = n * line + 6;
    rect box = {a.x1 - 3 - box_w, a.y0 + 4, a.x1 - 4, a.y0 + 3 + box_h};
    hl_image_fill_rect(img, box.x0, box.y0, box_w, box_h, white);
    draw_frame(img, (rect){box.x0 + 1, box.y0 + 1, box.x1 - 1, box.y1 - 1});
    int y = box.y0 + 4;
    for (int s = 0; s < panel->n_series; s++) {
        if (!panel->series[s].label)
            continue;
        uint8_t rgb[3];
        hl_plot_color(s, rgb);
        hl_image_fill_rect(img, box.x0 + 4, y + CAP_HEIGHT / 2 - 1, LEGEND_LINE, 2, rgb);
        hl_image_draw_text(img, box.x0 + 4 + LEGEND_LINE + 4, y, panel->series[s].label, 1,
                           black);
        y += line;
    }
}

hl_status hl_plot_write(const hl_plot_panel *panels, int n_panels, const char *path,
                        const hl_plot_opts *opts, hl_error *err)
{
    if (!path)
        return hl_error_set(err, HL_ERR_ARG, "plot: NULL path");
    plan p;
    if (make_plan(panels, n_panels, opts, &p, err) != HL_OK)
        return err->status;
    const hl_plot_layout *l = &p.l;
    hl_image *img = hl_image_new(l->width, l->height, err);
    if (!img)
        return err->status;
    if (p.o.title)
        hl_image_draw_text(img, MARGIN, MARGIN, p.o.title, TITLE_SCALE, black);
    for (int k = 0; k < n_panels; k++) {
        rect a = {l->left, l->top[k], l->right, l->bottom[k]};
        draw_axes(img, &p, k, a);
        for (int s = 0; s < panels[k].n_series; s++) {
            uint8_t rgb[3];
            hl_plot_color(s, rgb);
            draw_series(img, l, k, a, &panels[k].series[s], rgb);
        }
        draw_frame(img, a);
        draw_legend(img, &panels[k], a);
        if (panels[k].y_label) {
            int tw = hl_text_width(panels[k].y_label, 1);
            hl_image_draw_text_up(img, MARGIN, a.y0 + (a.y1 - a.y0 + 1 - tw) / 2,
                                  panels[k].y_label, 1, black);
        }
    }
    if (p.o.x_label) {
        int tw = hl_text_width(p.o.x_label, 1);
        hl_image_draw_text(img, l->left + (l->right - l->left + 1 - tw) / 2,
                           l->height - MARGIN - HL_FONT_LINE, p.o.x_label, 1, black);
    }
    hl_status s = hl_image_write_png(img, path, err);
    hl_image_free(img);
    return s;
}
