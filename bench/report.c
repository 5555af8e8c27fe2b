/* The printed table and bench.csv (see bench/bench.h). The CSV is written
 * whole at the end (files/atomic.h), so a failed or interrupted run leaves the
 * previous bench.csv as it was. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "io/csv_log.h"

static const char *const impl_names[BENCH_IMPLS] = {"headlab", "openblas", "torch"};

static const char *cell_word(bench_cell c)
{
    switch (c) {
    case BENCH_CELL_OK:
        return "ok";
    case BENCH_CELL_ABSENT:
        return "absent";
    case BENCH_CELL_FAILED:
        return "failed";
    case BENCH_CELL_NA:
        break;
    }
    return "-";
}

/* ---- the table ---- */

static void print_header(const char *section)
{
    if (!strcmp(section, "gemm"))
        printf("\nGEMM  C = op(A)·op(B): GFLOP/s at the median time (slowest-fastest run)\n"
               "%-26s %-3s %3s  %-23s %-23s %-23s %7s %7s %5s\n",
               "shape", "op", "thr", "headlab", "OpenBLAS", "PyTorch", "vs OB", "vs PT",
               "busy");
    else if (!strcmp(section, "rss"))
        printf("\nPeak RSS (MiB) of a fresh process running MHA fwd+bwd (no trace) 3 times, 1 thread "
               "(after setup: before the first call)\n"
               "%-26s %-16s %10s %12s %10s %12s\n",
               "B,T,E,H", "mask", "headlab", "after setup", "PyTorch", "after setup");
    else
        printf("\n%s  ms per call: median (fastest-slowest run); PT t: PyTorch's fastest "
               "arrangement of its threads, torch:BLAS\n"
               "%-26s %-22s %3s  %-23s %-23s %5s %7s %5s\n",
               !strcmp(section, "mha")
                   ? "MHA  (B,T,E,H) self-attention, training mode (without +weights: no "
                     "trace, the training path: the fused op)"
               : !strcmp(section, "gpt")
                   ? "GPT  charlm's model (pre-LayerNorm, 4x GELU MLP, 256-byte vocabulary "
                     "unless V says, AdamW); modern: rope+rms+swiglu;\n4x4 d 128: T 64, batch "
                     "16; 6x6 d 384: T 256, batch 8. "
                     "eval: forward + cross-entropy, no gradients; first step: a new model's"
               : !strcmp(section, "phases")
                   ? "Phases  the gpt rows' training step, each phase timed apart in the same "
                     "steps (headlab alone; step: the whole step,\nreset: the step arena "
                     "emptied)"
               : !strcmp(section, "profile")
                   ? "Profile  the phases' training steps op by op (headlab alone): an op's "
                     "forward (fwd: since the op before it)\nand backward kernel (bwd), ms a "
                     "step over all its calls"
               : !strcmp(section, "muon")
                   ? "Muon  one matrix (rows,cols) orthogonalised as the optimizer does each "
                     "step; PyTorch: the same iteration\nwritten with torch.mm (modded-nanogpt's "
                     "zeropower_via_newtonschulz5 in float32; the CSV's GFLOP/s count "
                     "its flops)"
               : "Toy training step (the toy task: B=32, T=32, 2 layers x 4 heads, d 64; AdamW)",
               !strcmp(section, "mha")    ? "B,T,E,H"
               : !strcmp(section, "muon") ? "matrix"
                                          : "model",
               "variant", "thr", "headlab",
               "PyTorch", "PT t", "vs PT", "busy");
}

/* "123.4 (110.2-130.9)": GFLOP/s for GEMM rows, else milliseconds. */
static void format_cell(char *buf, size_t size, const bench_row *row, int impl)
{
    if (row->cell[impl] != BENCH_CELL_OK) {
        snprintf(buf, size, "%s", cell_word(row->cell[impl]));
        return;
    }
    const bench_stats *s = &row->stats[impl];
    if (!strcmp(row->section, "gemm"))
        snprintf(buf, size, "%7.1f (%6.1f-%6.1f)", row->flops / s->median * 1e-9,
                 row->flops / s->max * 1e-9, row->flops / s->min * 1e-9);
    else
        snprintf(buf, size, "%7.2f (%6.2f-%6.2f)", 1e3 * s->median, 1e3 * s->min,
                 1e3 * s->max);
}

/* speed-up = the other's median time / headlab's: > 1 means headlab is faster */
static double speedup(const bench_row *row, int impl)
{
    if (row->cell[impl] != BENCH_CELL_OK || row->cell[BENCH_HEADLAB] != BENCH_CELL_OK)
        return 0;
    return row->stats[impl].median / row->stats[BENCH_HEADLAB].median;
}

static void format_speedup(char *buf, size_t size, const bench_row *row, int impl)
{
    double s = speedup(row, impl);
    if (s > 0)
        snprintf(buf, size, "%6.2fx", s);
    else
        snprintf(buf, size, "%7s", "-");
}

static void print_row(const bench_row *row)
{
    char cells[BENCH_IMPLS][40], ratio[BENCH_IMPLS][16];
    for (int i = 0; i < BENCH_IMPLS; i++) {
        format_cell(cells[i], sizeof cells[i], row, i);
        format_speedup(ratio[i], sizeof ratio[i], row, i);
    }
    if (!strcmp(row->section, "rss")) {
        printf("%-26s %-16s", row->name, row->variant);
        const int shown[] = {BENCH_HEADLAB, BENCH_TORCH};
        for (int k = 0; k < 2; k++) {
            const int i = shown[k];
            if (row->cell[i] == BENCH_CELL_OK)
                printf(" %10.1f", row->peak_mib[i]);
            else
                printf(" %10s", cell_word(row->cell[i]));
            if (row->cell[i] == BENCH_CELL_OK && row->base_mib[i] >= 0)
                printf(" %12.1f", row->base_mib[i]);
            else
                printf(" %12s", "-");
        }
        printf("\n");
    } else if (!strcmp(row->section, "gemm")) {
        printf("%-26s %-3s %3d  %-23s %-23s %-23s %7s %7s %4.0f%%\n", row->name, row->variant,
               row->threads, cells[0], cells[1], cells[2], ratio[1], ratio[2],
               100 * row->foreign);
    } else {
        printf("%-26s %-22s %3d  %-23s %-23s %5s %7s %4.0f%%\n", row->name, row->variant,
               row->threads, cells[0], cells[2], row->torch_threads, ratio[2],
               100 * row->foreign);
    }
    fflush(stdout);
}

/* ---- the CSV ---- */

/* The temporary file's path, for the signal handler: an interrupted run
 * leaves neither a half-written CSV nor the temporary file. */
static char interrupted_tmp[4096];

static void remove_tmp_and_die(int sig)
{
    if (interrupted_tmp[0])
        unlink(interrupted_tmp);
    signal(sig, SIG_DFL);
    raise(sig);
}

int bench_report_open_raw(bench_report *r, const char *path)
{
    *r = (bench_report){0};
    hl_error err = {0};
    if (hl_atomic_begin(&r->file, path, &err) != HL_OK) {
        fprintf(stderr, "bench: %s\n", err.message);
        return -1;
    }
    r->csv = r->file.f;
    if (strlen(r->file.tmp) < sizeof interrupted_tmp) {
        strcpy(interrupted_tmp, r->file.tmp);
        struct sigaction on_signal = {.sa_handler = remove_tmp_and_die};
        sigaction(SIGINT, &on_signal, NULL);
        sigaction(SIGTERM, &on_signal, NULL);
    }
    return 0;
}

int bench_report_open(bench_report *r, const char *path)
{
    if (bench_report_open_raw(r, path))
        return -1;
    fprintf(r->csv, "kernels,section,case,variant,threads,runs,flops");
    for (int i = 0; i < BENCH_IMPLS; i++)
        fprintf(r->csv, ",%s_ms,%s_min_ms,%s_max_ms,%s_gflops", impl_names[i], impl_names[i],
                impl_names[i], impl_names[i]);
    fprintf(r->csv, ",speedup_vs_openblas,speedup_vs_torch,openblas,torch,foreign_cpu_pct,"
                    "headlab_peak_rss_mib,headlab_base_rss_mib,torch_peak_rss_mib,"
                    "torch_base_rss_mib,torch_threads\n");
    return 0;
}

/* An empty CSV field for what was not measured. */
static void csv_number(FILE *f, bool have, double v)
{
    if (have)
        fprintf(f, ",%.6g", v);
    else
        fputc(',', f);
}

static void csv_row(FILE *f, const bench_row *row)
{
    /* names and variants hold commas ("4x4 heads, d 128", "step, Muon") */
    fprintf(f, "%s,%s,", hl_isa_name(hl_isa_active()), row->section);
    hl_csv_log_quote(f, row->name);
    fputc(',', f);
    hl_csv_log_quote(f, row->variant);
    fprintf(f, ",%d,%d,%.6g", row->threads, row->stats[BENCH_HEADLAB].runs, row->flops);
    bool timed = strcmp(row->section, "rss") != 0;
    for (int i = 0; i < BENCH_IMPLS; i++) {
        bool ok = timed && row->cell[i] == BENCH_CELL_OK;
        const bench_stats *s = &row->stats[i];
        csv_number(f, ok, 1e3 * s->median);
        csv_number(f, ok, 1e3 * s->min);
        csv_number(f, ok, 1e3 * s->max);
        csv_number(f, ok && row->flops > 0, ok ? row->flops / s->median * 1e-9 : 0);
    }
    csv_number(f, speedup(row, BENCH_OPENBLAS) > 0, speedup(row, BENCH_OPENBLAS));
    csv_number(f, speedup(row, BENCH_TORCH) > 0, speedup(row, BENCH_TORCH));
    fprintf(f, ",%s,%s", cell_word(row->cell[BENCH_OPENBLAS]), cell_word(row->cell[BENCH_TORCH]));
    if (timed)
        fprintf(f, ",%.1f", 100 * row->foreign);
    else
        fputc(',', f);
    bool rss_hl = !timed && row->cell[BENCH_HEADLAB] == BENCH_CELL_OK;
    bool rss_pt = !timed && row->cell[BENCH_TORCH] == BENCH_CELL_OK;
    csv_number(f, rss_hl, row->peak_mib[BENCH_HEADLAB]);
    csv_number(f, rss_hl && row->base_mib[BENCH_HEADLAB] >= 0, row->base_mib[BENCH_HEADLAB]);
    csv_number(f, rss_pt, row->peak_mib[BENCH_TORCH]);
    csv_number(f, rss_pt && row->base_mib[BENCH_TORCH] >= 0, row->base_mib[BENCH_TORCH]);
    fprintf(f, ",%s\n", row->torch_threads);
    fflush(f);
}

void bench_report_row(bench_report *r, const bench_row *row)
{
    if (!r->section || strcmp(r->section, row->section)) {
        print_header(row->section);
        r->section = row->section;
    }
    print_row(row);
    csv_row(r->csv, row);
}

void bench_report_csv_row(bench_report *r, const bench_row *row) { csv_row(r->csv, row); }

int bench_report_close(bench_report *r)
{
    interrupted_tmp[0] = '\0';
    r->csv = NULL;
    hl_error err = {0};
    if (hl_atomic_commit(&r->file, &err) != HL_OK) {
        fprintf(stderr, "bench: %s\n", err.message);
        return -1;
    }
    return 0;
}

void bench_report_abandon(bench_report *r)
{
    interrupted_tmp[0] = '\0';
    r->csv = NULL;
    hl_atomic_abort(&r->file);
}
