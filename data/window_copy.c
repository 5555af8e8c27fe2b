/* window_copy.c: spans recurring in training windows (see window_copy.h). */
#include "data/window_copy.h"

hl_window_copy hl_window_copy_draw(hl_rng *rng, int n, int length, double fraction)
{
    if (fraction <= 0 || length <= 0 || 2 * length > n || hl_rng_uniform(rng) >= fraction)
        return (hl_window_copy){0};
    const int from = (int)(hl_rng_uniform(rng) * (n - 2 * length + 1));
    const int to = from + length + (int)(hl_rng_uniform(rng) * (n - from - 2 * length + 1));
    return (hl_window_copy){from, to, length};
}

void hl_window_copy_apply(int32_t *x, int32_t *y, int T, hl_window_copy c)
{
    /* Token i of the window is x[i] for i < T and y[i - 1] for i > 0. */
    for (int i = 0; i < c.length; i++) {
        const int from = c.from + i, to = c.to + i; /* to >= length >= 1 */
        const int32_t token = from < T ? x[from] : y[from - 1];
        if (to < T)
            x[to] = token;
        y[to - 1] = token;
    }
}
