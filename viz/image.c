/* image.c: plain RGB images for pictures (see heatmap.h). */
#include "viz/heatmap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

hl_image *hl_image_new(int width, int height, hl_error *err)
{
    if (width < 1 || height < 1 || width > HL_IMAGE_MAX_SIDE || height > HL_IMAGE_MAX_SIDE) {
        if (err)
            hl_error_set(err, HL_ERR_ARG, "image: size %dx%d is outside 1..%d", width, height,
                         HL_IMAGE_MAX_SIDE);
        return NULL;
    }
    hl_image *img = malloc(sizeof *img);
    uint8_t *rgb = malloc((size_t)width * (size_t)height * 3);
    if (!img || !rgb) {
        free(img);
        free(rgb);
        if (err)
            hl_error_set(err, HL_ERR_NOMEM, "image: no memory for %dx%d pixels", width, height);
        return NULL;
    }
    memset(rgb, 255, (size_t)width * (size_t)height * 3);
    *img = (hl_image){.width = width, .height = height, .rgb = rgb};
    return img;
}

void hl_image_free(hl_image *img)
{
    if (!img)
        return;
    free(img->rgb);
    free(img);
}

void hl_image_fill_rect(hl_image *img, int x, int y, int w, int h, const uint8_t rgb[3])
{
    /* In long long so that huge rectangles clip instead of overflowing. */
    long long x0 = x < 0 ? 0 : x, y0 = y < 0 ? 0 : y;
    long long x1 = (long long)x + w, y1 = (long long)y + h;
    if (x1 > img->width)
        x1 = img->width;
    if (y1 > img->height)
        y1 = img->height;
    for (long long py = y0; py < y1; py++)
        for (long long px = x0; px < x1; px++)
            memcpy(img->rgb + ((size_t)py * (size_t)img->width + (size_t)px) * 3, rgb, 3);
}

void hl_image_fill_disc(hl_image *img, int cx, int cy, int r, const uint8_t rgb[3])
{
    for (int dy = -r; dy <= r; dy++)
        for (int dx = -r; dx <= r; dx++)
            if (dx * dx + dy * dy <= r * r + r)
                hl_image_fill_rect(img, cx + dx, cy + dy, 1, 1, rgb);
}

void hl_image_draw_line(hl_image *img, int x0, int y0, int x1, int y1, int width,
                        const uint8_t rgb[3])
{
    /* A disc (a square for thin lines) at every pixel step along the longer axis. */
    const int steps = abs(x1 - x0) > abs(y1 - y0) ? abs(x1 - x0) : abs(y1 - y0);
    const int r = width > 1 ? width / 2 : 0;
    for (int i = 0; i <= steps; i++) {
        const double t = steps ? (double)i / steps : 0;
        const int x = (int)lround(x0 + t * (x1 - x0)), y = (int)lround(y0 + t * (y1 - y0));
        if (width <= 2)
            hl_image_fill_rect(img, x, y, width < 1 ? 1 : width, width < 1 ? 1 : width, rgb);
        else
            hl_image_fill_disc(img, x, y, r, rgb);
    }
}
