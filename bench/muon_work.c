/* headlab's side of the Muon rows: Newton–Schulz on one matrix (see
 * bench/bench.h). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "core/rng.h"
#include "train/muon.h"

int bench_muon_init(bench_muon *m, int rows, int cols)
{
    const size_t n = (size_t)rows * cols;
    *m = (bench_muon){.rows = rows, .cols = cols, .g0 = malloc(n * sizeof *m->g0),
                      .g = malloc(n * sizeof *m->g),
                      .work = malloc(hl_muon_work_size(rows, cols) * sizeof *m->work)};
    if (!m->g0 || !m->g || !m->work) {
        bench_muon_release(m);
        return -1;
    }
    hl_rng rng;
    hl_rng_seed(&rng, 1);
    for (size_t i = 0; i < n; i++)
        m->g0[i] = (hl_real)(2 * hl_rng_uniform(&rng) - 1);
    return 0;
}

void bench_muon_release(bench_muon *m)
{
    free(m->g0);
    free(m->g);
    free(m->work);
    m->g0 = m->g = m->work = NULL;
}

double bench_muon_flops(const bench_muon *m)
{
    const bool wide = m->rows < m->cols;
    const double r = wide ? m->rows : m->cols, c = wide ? m->cols : m->rows;
    return BENCH_MUON_STEPS * (4 * r * r * c + 2 * r * r * r);
}

static int muon_once(void *ctx, char *why, size_t why_size)
{
    (void)why, (void)why_size;
    bench_muon *m = ctx;
    memcpy(m->g, m->g0, (size_t)m->rows * m->cols * sizeof *m->g);
    hl_muon_orthogonalize(m->g, m->rows, m->cols, BENCH_MUON_STEPS, m->work);
    return 0;
}

int bench_muon_headlab(void *ctx, const bench_plan *p, double *seconds, char *why,
                       size_t why_size)
{
    return bench_run_block(muon_once, ctx, 1, p, seconds, why, why_size);
}
