#include "train/progress.h"

#include <time.h>
#include <unistd.h>

double hl_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void hl_progress_begin(hl_progress *p, FILE *out, int64_t total, int64_t every)
{
    p->out = out;
    p->total = total > 0 ? total : 1;
    p->every = every > 0 ? every : 1;
    p->first = 0;
    p->tty = isatty(fileno(out));
    p->start = p->last_draw = hl_seconds();
}

void hl_progress_update(hl_progress *p, int64_t step, double loss, double accuracy)
{
    double now = hl_seconds();
    bool last = step >= p->total;
    if (p->tty ? (now - p->last_draw < 0.1 && !last) : (step % p->every != 0 && !last))
        return;
    p->last_draw = now;
    double elapsed = now - p->start;
    double rate = elapsed > 0 ? (double)(step - p->first) / elapsed : 0;
    double eta = rate > 0 ? (double)(p->total - step) / rate : 0;
    char acc[32] = "";
    if (accuracy >= 0)
        snprintf(acc, sizeof acc, "  acc %.3f", accuracy);
    if (p->tty) {
        enum { WIDTH = 24 };
        int filled = (int)(WIDTH * step / p->total);
        char bar[WIDTH + 1];
        for (int i = 0; i < WIDTH; i++)
            bar[i] = i < filled ? '=' : (i == filled ? '>' : ' ');
        bar[WIDTH] = '\0';
        fprintf(p->out, "\r[%s] %lld/%lld  loss %.4f%s  %.1f steps/s  ETA %.0fs\033[K", bar,
                (long long)step, (long long)p->total, loss, acc, rate, eta);
    } else {
        fprintf(p->out, "step %lld/%lld  loss %.4f%s  %.1f steps/s  ETA %.0fs\n",
                (long long)step, (long long)p->total, loss, acc, rate, eta);
    }
    fflush(p->out);
}

void hl_progress_end(hl_progress *p)
{
    if (p->tty)
        fprintf(p->out, "\n");
    fflush(p->out);
}
