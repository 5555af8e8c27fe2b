/* image.c: plain RGB images for pictures (see heatmap.h). */
#include "viz/heatmap.h"

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
