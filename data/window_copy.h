/*
 * window_copy.h: a training-data intervention for the study of induction
 * heads. In a chosen fraction of the training windows, a span of the window
 * is written again later in the same window, over the tokens that were
 * there: the window then holds a natural span that recurs, the pattern an
 * induction head completes (after the idea of training on text with
 * forward-copied snippets). The targets follow the changed window, so the
 * model is asked to predict the copy. Only training windows are changed;
 * every measurement reads plain text.
 *
 *     hl_window_copy c = hl_window_copy_draw(&rng, T + 1, T / 4, 0.5);
 *     hl_window_copy_apply(x, y, T, c); // x: T inputs, y: their T targets
 */
#ifndef HL_WINDOW_COPY_H
#define HL_WINDOW_COPY_H

#include <stdint.h>

#include "core/rng.h"

/* Tokens from..from+length-1 of a window written again at to..to+length-1,
 * to >= from + length; length 0 leaves the window as it is. */
typedef struct {
    int from, to, length;
} hl_window_copy;

/* With probability fraction, a copy of a span of `length` tokens in a window
 * of n tokens (2 * length <= n), its two places uniform among those that
 * fit; otherwise no copy. Draws nothing from rng when fraction is 0. */
hl_window_copy hl_window_copy_draw(hl_rng *rng, int n, int length, double fraction);

/* Applies c to a window of T + 1 tokens held as inputs x[0..T) and targets
 * y[0..T) (y[i] = token i + 1): both change where the copy lands. */
void hl_window_copy_apply(int32_t *x, int32_t *y, int T, hl_window_copy c);

#endif
