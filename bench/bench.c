/*
 * bench: headlab against OpenBLAS and PyTorch on the same work, in one run.
 *
 *     build/bench [--quick] [--csv FILE] [--threads LIST] [--only LIST] [--isa LIST]
 *                 [--python PATH] [--torch-worker PATH] [--openblas LIB]
 *
 * Rows: GEMM GFLOP/s (square sizes, transformer shapes, the batched products
 * of attention; all four transpose variants), MHA forward and forward +
 * backward ms, the toy model's training step, GPT training steps (steady,
 * evaluation forward, first step) at charlm's and nanoGPT's sizes, each at 1
 * and 2 threads; then the peak RSS of the MHA configs; then the toy and charlm
 * programs with a busy loop holding one core. All of it once per kernel set
 * (--isa; by default every set the CPU has), OpenBLAS (and PyTorch's
 * OpenBLAS) on the same instruction set, and a peak row: the FMA rate of one
 * core and of all, measured, to read every GFLOP/s against. Every cell is the
 * median of at least 10 timed calls after warm-up (3 with --quick and for a
 * GPT's first step), with the fastest and slowest;
 * blocks alternate between headlab, OpenBLAS (cblas_sgemm, loaded with
 * dlopen) and PyTorch (bench/torch_worker.py, a persistent process), and
 * each row shows speed-up = the other's median time / headlab's. At 2 or more
 * threads a model's row times PyTorch at each arrangement of torch's and
 * OpenBLAS's threads and keeps the fastest (its "PT t" column; a PyTorch on
 * MKL runs at thr:thr alone). --only batched sweeps attention's batched
 * products over a grid, headlab alone at every thread count. A missing
 * OpenBLAS or PyTorch makes its column say "absent"; nothing fails. The rows
 * also go to FILE (default bench.csv), which is replaced only when the run
 * completes. See bench/README.md.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench/bench.h"
#include "cli/cli.h"

#define MAX_THREAD_COUNTS 8
#define WHY_SIZE 512
/* A row whose blocks shared the CPUs with other processes for more than this
 * share is measured again (once), after waiting up to QUIET_WAIT seconds for
 * the machine to calm down, and the quieter attempt is kept; only in the
 * first REDO_SECONDS of a run, so a busy machine cannot stretch it much. */
#define FOREIGN_MAX 0.10
#define QUIET_WAIT 15.0
#define REDO_SECONDS 600.0
/* Idle time before each block: after a multi-threaded block, libgomp's idle
 * threads (headlab's, PyTorch's) spin for a few ms and would slow whatever
 * runs next. */
#define SETTLE_SECONDS 0.015
/* The least warm-up of a block: freshly woken threads (OpenBLAS's especially)
 * can share one core for the first few ms until the scheduler spreads them. */
#define WARMUP_SECONDS 0.03

enum {
    SECTION_GEMM = 1,
    SECTION_MHA = 2,
    SECTION_TOY = 4,
    SECTION_RSS = 8,
    SECTION_LONG = 16,
    SECTION_GPT = 32,
    SECTION_BUSY = 64,
    SECTION_GPT2 = 128,
    SECTION_MUON = 256,
    SECTION_BATCHED = 512,
    SECTION_PHASES = 1024,
    SECTION_PROFILE = 2048
};

typedef struct {
    bool quick, scaling;
    const char *csv, *python, *worker, *openblas;
    int threads[MAX_THREAD_COUNTS], n_threads;
    unsigned sections;
    hl_isa isas[HL_ISA_COUNT]; /* the kernel sets to run, best first */
    int n_isas;
} options;

typedef struct {
    options o;
    bench_plan gemm, mha, toy, long_ctx, gpt, gpt_first;
    int attempts;
    double redo_until; /* bench_now() after which rows are not measured again */
    bench_openblas *ob;
    char ob_why[WHY_SIZE], ob_note[64];
    bench_torch torch;
    bool torch_started;
    bench_report report;
    bool failed; /* a headlab block failed: exit 1 at the end */
    double peak_one, peak_all; /* GFLOP/s of the kernel set's FMAs, measured */
    int peak_threads;
} bench_run;

/* The MHA configurations of the issue, (B,T,E,H). */
/* The last: one sequence of one head, fewer heads than threads. */
static const int mha_configs[][4] = {{8, 64, 128, 4}, {8, 128, 256, 8}, {4, 256, 512, 8},
                                     {1, 1024, 256, 4}, {1, 1024, 64, 1}};
#define N_MHA_CONFIGS (int)(sizeof mha_configs / sizeof mha_configs[0])
/* The long-context row: fwd+bwd causal on the training path only (the
 * composed path's (1,4,4096,4096) weights alone would be 256 MiB a tensor). */
static const int long_config[4] = {1, 4096, 256, 4};

/* The gpt rows: charlm's default model and nanoGPT's "shakespeare-char", each
 * also with rotary positions, RMSNorm and SwiGLU, and that modern model again
 * with a BPE-sized vocabulary (the modern ones: training steps only); then
 * GPT-2 small's shape (12 layers of 12 heads, d 768, its 50,257 tokens):
 * fine-tuning's step at 4 x 256 and its forward over 1,024 tokens. */
enum { GPT_STEPS = 1 << BENCH_GPT_STEP, GPT_EVAL = 1 << BENCH_GPT_EVAL,
       GPT_FIRST = 1 << BENCH_GPT_FIRST, GPT_GENERATE = 1 << BENCH_GPT_GENERATE };
static const struct {
    const char *name;
    bench_gpt_shape shape;
    int modes; /* the variants measured; 0: all, or the training step alone when modern */
    bool scaling; /* one of --scaling's training steps */
} gpt_configs[] = {
    {"4x4 heads, d 128",
     {.layers = 4, .heads = 4, .d_model = 128, .ctx = 64, .batch = 16, .vocab = 256}, 0, true},
    {"6x6 heads, d 384",
     {.layers = 6, .heads = 6, .d_model = 384, .ctx = 256, .batch = 8, .vocab = 256}, 0, true},
    {"4x4 d 128 rope+rms+swiglu",
     {.layers = 4, .heads = 4, .d_model = 128, .ctx = 64, .batch = 16, .vocab = 256,
      .modern = true}, 0, false},
    {"6x6 d 384 rope+rms+swiglu",
     {.layers = 6, .heads = 6, .d_model = 384, .ctx = 256, .batch = 8, .vocab = 256,
      .modern = true}, 0, false},
    {"4x4 d 128 modern, V 4096",
     {.layers = 4, .heads = 4, .d_model = 128, .ctx = 64, .batch = 16, .vocab = 4096,
      .modern = true}, 0, false},
    {"6x6 d 384 modern, V 8192",
     {.layers = 6, .heads = 6, .d_model = 384, .ctx = 256, .batch = 8, .vocab = 8192,
      .modern = true}, 0, false},
    {"12x12 d 768 (GPT-2 small), V 50257",
     {.layers = 12, .heads = 12, .d_model = 768, .ctx = 256, .batch = 4, .vocab = 50257},
     GPT_STEPS | GPT_EVAL | GPT_GENERATE, true},
    {"GPT-2 small, 1024 tokens",
     {.layers = 12, .heads = 12, .d_model = 768, .ctx = 1024, .batch = 1, .vocab = 50257},
     GPT_EVAL, false}};
#define N_GPT_CONFIGS (int)(sizeof gpt_configs / sizeof gpt_configs[0])

/* ---- options ---- */

static const hl_usage usage = {
    "usage: bench [--quick | --scaling] [--csv FILE] [--threads LIST] [--only LIST]\n"
    "             [--isa LIST] [--python PATH] [--torch-worker PATH] [--openblas LIB]\n"
    "Times headlab's GEMM, multi-head attention, toy and GPT training steps against\n"
    "OpenBLAS and PyTorch in the same run, prints a table and writes FILE.\n",
    "A missing Python, torch or OpenBLAS makes its columns say \"absent\".\n"
    "speed-up = the other's median time / headlab's (> 1: headlab is faster).\n",
};

static void bad_option(const char *fmt, const char *what)
{
    fprintf(stderr, "bench: ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, " (see --help)\n");
    exit(2);
}

/* A comma list with no empty item ("1,,2", ",gemm" and "gemm," were taken
 * in part). */
static bool items_whole(const char *list)
{
    const size_t n = strlen(list);
    return n && list[0] != ',' && list[n - 1] != ',' && !strstr(list, ",,");
}

static void parse_threads(options *o, const char *list)
{
    if (!items_whole(list))
        bad_option("--threads needs up to 8 counts in 1..256 like 1,2, got \"%s\"", list);
    o->n_threads = 0;
    for (const char *p = list; *p;) {
        char *end;
        errno = 0;
        long n = strtol(p, &end, 10);
        if (end == p || errno || n < 1 || n > 256 || o->n_threads == MAX_THREAD_COUNTS ||
            (*end && *end != ','))
            bad_option("--threads needs up to 8 counts in 1..256 like 1,2, got %s", list);
        for (int i = 0; i < o->n_threads; i++)
            if (o->threads[i] == n)
                bad_option("--threads %s: a count named twice", list);
        o->threads[o->n_threads++] = (int)n;
        p = *end ? end + 1 : end;
    }
    if (!o->n_threads)
        bad_option("--threads needs up to 8 counts in 1..256 like 1,2, got \"%s\"", list);
}

/* --only's names, in the order its help gives them */
#define SECTION_NAMES "gemm,batched,mha,toy,gpt,gpt2,phases,profile,muon,rss,long,busy"

static void parse_sections(options *o, const char *list)
{
    static const struct {
        const char *name;
        unsigned bit;
    } names[] = {{"gemm", SECTION_GEMM}, {"mha", SECTION_MHA}, {"toy", SECTION_TOY},
                 {"gpt", SECTION_GPT}, {"rss", SECTION_RSS}, {"long", SECTION_LONG},
                 {"busy", SECTION_BUSY}, {"gpt2", SECTION_GPT2}, {"muon", SECTION_MUON},
                 {"batched", SECTION_BATCHED}, {"phases", SECTION_PHASES},
                 {"profile", SECTION_PROFILE}};
    if (!items_whole(list))
        bad_option("--only takes some of " SECTION_NAMES ", got \"%s\"", list);
    o->sections = 0;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        unsigned bit = 0;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (strlen(names[i].name) == n && !strncmp(p, names[i].name, n))
                bit = names[i].bit;
        if (!bit)
            bad_option("--only takes some of " SECTION_NAMES ", got %s", list);
        o->sections |= bit;
        p += n + (p[n] == ',');
    }
    if (!o->sections)
        bad_option("--only takes some of " SECTION_NAMES ", got \"%s\"", list);
}

static void parse_isas(options *o, const char *list)
{
    if (!items_whole(list))
        bad_option("--isa takes some of avx512,avx2,portable, got \"%s\"", list);
    o->n_isas = 0;
    for (const char *p = list; *p;) {
        char name[16];
        const size_t n = strcspn(p, ",");
        snprintf(name, sizeof name, "%.*s", (int)(n < 15 ? n : 15), p);
        hl_isa isa;
        if (!hl_isa_parse(name, &isa))
            bad_option("--isa takes some of avx512,avx2,portable, got %s", list);
        for (int i = 0; i < o->n_isas; i++)
            if (o->isas[i] == isa)
                bad_option("--isa %s: a kernel set named twice", list);
        if (!hl_isa_supported(isa)) {
            char have[64];
            fprintf(stderr, "bench: --isa %s: this CPU lacks it (it has: %s)\n", name,
                    hl_isa_list(have, sizeof have));
            exit(2);
        }
        o->isas[o->n_isas++] = isa;
        p += n + (p[n] == ',');
    }
    if (!o->n_isas)
        bad_option("--isa takes some of avx512,avx2,portable, got \"%s\"", list);
}

/* --scaling's thread counts: 1, 2, 4, ... below the CPUs this process may
 * run on (OpenMP's count: logical CPUs, within its affinity), then that
 * count itself. */
static void scaling_threads(options *o)
{
    int cores = 1;
#ifdef _OPENMP
    cores = omp_get_num_procs();
#endif
    cores = cores > 256 ? 256 : cores;
    o->n_threads = 0;
    for (int t = 1; t < cores && o->n_threads < MAX_THREAD_COUNTS - 1; t *= 2)
        o->threads[o->n_threads++] = t;
    o->threads[o->n_threads++] = cores > 1 ? cores : 1;
}

/* The worker of the source tree bench was built in, found from the program's
 * own path (build/bench: ../bench/torch_worker.py) when run from elsewhere
 * than the tree's root; the default path otherwise. */
static const char *default_worker(void)
{
    static const char relative[] = "bench/torch_worker.py";
    static char beside[4096];
    if (access(relative, R_OK) == 0)
        return relative;
    char exe[4096 - sizeof relative - 4];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return relative;
    *slash = '\0';
    snprintf(beside, sizeof beside, "%s/../%s", exe, relative);
    return access(beside, R_OK) == 0 ? beside : relative;
}

static options parse_options(int argc, char **argv)
{
    options o = {.csv = "bench.csv", .python = "/usr/bin/python3",
                 .worker = default_worker(), .openblas = "libopenblas.so.0",
                 .threads = {1, 2}, .n_threads = 2,
                 .sections = SECTION_GEMM | SECTION_MHA | SECTION_TOY | SECTION_GPT |
                             SECTION_GPT2 | SECTION_MUON | SECTION_RSS | SECTION_LONG |
                             SECTION_BUSY};
    for (int i = HL_ISA_COUNT - 1; i >= 0; i--)
        if (hl_isa_supported((hl_isa)i))
            o.isas[o.n_isas++] = (hl_isa)i;
    const char *threads = NULL, *only = NULL, *isas = NULL;
    const hl_opt opts[] = {
        HL_OPTION_FLAG("quick", &o.quick,
                       "a few sizes and runs: a smoke test of a minute or two (without the "
                       "long-context rows unless --only names long)"),
        HL_OPTION_FLAG("scaling", &o.scaling,
                       "the training steps of the 4x4, 6x6 and GPT-2 small models and their "
                       "phases, a few runs each, at 1, 2, 4, ... threads up to every CPU, on the "
                       "best kernel set unless --isa says (bench/scaling.sh)"),
        HL_OPTION_TEXT("csv", &o.csv, "FILE", "where the rows go"),
        HL_OPTION_TEXT("threads", &threads, "LIST",
                       "thread counts, up to 8 of them in 1..256 (with --scaling: 1, 2, 4, ... "
                       "and the machine's CPUs)", .dflt = "1,2"),
        HL_OPTION_TEXT("only", &only, "LIST",
                       "some of " SECTION_NAMES ". batched: "
                       "attention's batched products on a grid of 8-96 heads, T 32-256, head "
                       "width 16-64, headlab alone (not in every section); gpt2: GPT-2 small's "
                       "shape (train step at 4 x 256, forward over 1,024 tokens; not with "
                       "--quick unless named); phases: the 4x4, 6x6 and GPT-2 small training "
                       "steps' zero-grad, forward, loss, backward, AdamW and arena reset timed "
                       "apart, headlab alone (not in every section; with --scaling); profile: the "
                       "same steps' time op by op, forward and backward (not in every section); "
                       "muon: "
                       "Muon's Newton-Schulz on one matrix of each model's shapes; long: MHA "
                       "(1,4096,256,4) fwd+bwd causal, its time and peak RSS; busy: toy_heads and "
                       "charlm runs with one core taken",
                       .dflt = "every section"),
        HL_OPTION_TEXT("isa", &isas, "LIST",
                       "kernel sets, e.g. avx512,avx2; each runs everything, OpenBLAS on the "
                       "same set", .dflt = "every set the CPU has"),
        HL_OPTION_TEXT("python", &o.python, "PATH",
                       "the Python with torch; a name without a slash is looked for on PATH"),
        HL_OPTION_TEXT("torch-worker", &o.worker, "PATH", "the PyTorch side"),
        HL_OPTION_TEXT("openblas", &o.openblas, "LIB", "the OpenBLAS to dlopen"),
        {0},
    };
    hl_cli_parse_or_exit("bench", &usage, opts, argc, argv);
    if (!*o.csv)
        bad_option("%s needs a file name", "--csv");
    if (threads)
        parse_threads(&o, threads);
    if (isas)
        parse_isas(&o, isas);
    if (only)
        parse_sections(&o, only);
    /* A long-context call takes about a second, and the busy rows are whole
     * program runs: not for a smoke run unless asked. */
    if (o.quick && !only)
        o.sections &= ~(unsigned)(SECTION_LONG | SECTION_BUSY | SECTION_GPT2);
    if (o.scaling && o.quick)
        bad_option("%s: --scaling has its own few runs; give one of --quick and --scaling",
                   "--quick");
    if (o.scaling && !only)
        o.sections = SECTION_GPT | SECTION_GPT2 | SECTION_PHASES;
    if (o.scaling && !threads)
        scaling_threads(&o);
    if (o.scaling && !isas)
        o.n_isas = 1; /* the best set only */
    return o;
}

/* ---- measuring one row ---- */

typedef struct {
    bench_block_fn fn[BENCH_IMPLS]; /* NULL: not measured */
    void *ctx[BENCH_IMPLS];
    bool arrange; /* PyTorch tries every arrangement of its threads (a model's rows) */
} row_work;

/* PyTorch's arrangements of n threads, torch's own and OpenBLAS's: which is
 * fastest depends on the work (a model step at 2 threads was fastest at 1:2
 * on one machine, 2:1 on another; 2:2 oversubscribes), so a model's row
 * measures each and keeps the fastest, and headlab meets PyTorch at its best. */
enum { N_ARRANGEMENTS = 3 };

static int arrangements(const bench_run *run, const bench_row *row, const row_work *w)
{
    return w->arrange && row->threads > 1 && run->torch.openblas ? N_ARRANGEMENTS : 1;
}

static void arrangement(int n, int k, int *torch, int *blas)
{
    *torch = k == 1 ? 1 : n;
    *blas = k == 0 ? 1 : n;
}

static void set_torch_threads(bench_run *run, int torch, int blas)
{
    char command[64], why[WHY_SIZE];
    double none;
    snprintf(command, sizeof command, "threads %d %d", torch, blas);
    if (bench_torch_alive(&run->torch) &&
        bench_torch_call(&run->torch, command, &none, 0, why, sizeof why) < 0)
        fprintf(stderr, "bench: PyTorch worker: %s\n", why);
}

/* PyTorch's block: one command to the worker. */
typedef struct {
    bench_torch *torch;
    char command[160];
} torch_block;

static int run_torch_block(void *ctx, const bench_plan *p, double *seconds, char *why,
                           size_t why_size)
{
    torch_block *b = ctx;
    char line[240];
    snprintf(line, sizeof line, "%s %d %g %d", b->command, p->warmup, p->warmup_seconds, p->reps);
    int n = bench_torch_call(b->torch, line, seconds, p->reps, why, why_size);
    if (n >= 0 && n != p->reps)
        snprintf(why, why_size, "the worker sent %d of %d timings", n, p->reps);
    return n == p->reps ? 0 : -1;
}

static void set_threads(bench_run *run, int n, int torch_blas_threads)
{
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
    if (run->ob)
        bench_openblas_set_threads(run->ob, n);
    set_torch_threads(run, n, torch_blas_threads);
}

/* What a column shows before measuring: absent libraries say so. */
static void init_cells(const bench_run *run, bench_row *row, const row_work *w)
{
    row->cell[BENCH_HEADLAB] = BENCH_CELL_OK;
    row->cell[BENCH_OPENBLAS] = !w->fn[BENCH_OPENBLAS] ? BENCH_CELL_NA
                                : run->ob               ? BENCH_CELL_OK
                                                        : BENCH_CELL_ABSENT;
    row->cell[BENCH_TORCH] = !w->fn[BENCH_TORCH]              ? BENCH_CELL_NA
                             : bench_torch_alive(&run->torch) ? BENCH_CELL_OK
                             : run->torch_started             ? BENCH_CELL_FAILED
                                                              : BENCH_CELL_ABSENT;
}

/* One attempt: rounds of blocks, alternating implementations (PyTorch's
 * arrangements of its threads one after another in each round). Returns the
 * foreign CPU share: other processes' over the attempt, and the PyTorch
 * worker's during the other implementations' blocks (its threads must be
 * idle then); fills row->cell, row->stats and row->torch_threads.
 * samples holds BENCH_IMPLS - 1 + N_ARRANGEMENTS arrays, PyTorch's from
 * samples[BENCH_TORCH] on. */
static double attempt_row(bench_run *run, bench_row *row, const row_work *w, const bench_plan *p,
                          double **samples)
{
    const int n_arr = arrangements(run, row, w);
    int n[BENCH_IMPLS - 1 + N_ARRANGEMENTS] = {0};
    bench_load_mark before, after;
    bench_load_mark_take(&before, run->torch.pid);
    double worker_elsewhere = 0; /* CPU seconds */
    for (int r = 0; r < p->rounds; r++)
        for (int i = 0; i < BENCH_IMPLS; i++)
            for (int k = 0; k < (i == BENCH_TORCH ? n_arr : 1); k++) {
                if (row->cell[i] != BENCH_CELL_OK)
                    continue;
                const int at = i + k;
                char why[WHY_SIZE];
                if (n_arr > 1 && i == BENCH_TORCH) {
                    int torch, blas;
                    arrangement(row->threads, k, &torch, &blas);
                    set_torch_threads(run, torch, blas);
                }
                bench_sleep(SETTLE_SECONDS);
                bench_load_mark b0, b1;
                bench_load_mark_take(&b0, run->torch.pid);
                const int failed = w->fn[i](w->ctx[i], p, samples[at] + n[at], why, sizeof why);
                bench_load_mark_take(&b1, run->torch.pid);
                if (i != BENCH_TORCH)
                    worker_elsewhere += b1.worker - b0.worker;
                if (failed) {
                    fprintf(stderr, "bench: %s %s %s: %s\n", i == BENCH_HEADLAB ? "headlab"
                                                              : i == BENCH_OPENBLAS ? "OpenBLAS"
                                                                                    : "PyTorch",
                            row->name, row->variant, why);
                    row->cell[i] = BENCH_CELL_FAILED;
                    run->failed |= i == BENCH_HEADLAB;
                    continue;
                }
                n[at] += p->reps;
            }
    bench_load_mark_take(&after, run->torch.pid);
    for (int i = 0; i < BENCH_IMPLS; i++)
        bench_stats_of(samples[i], n[i], &row->stats[i]);
    int best = 0;
    for (int k = 1; k < n_arr; k++) {
        bench_stats s;
        bench_stats_of(samples[BENCH_TORCH + k], n[BENCH_TORCH + k], &s);
        if (n[BENCH_TORCH + k] > 0 && s.median < row->stats[BENCH_TORCH].median)
            row->stats[BENCH_TORCH] = s, best = k;
    }
    int torch, blas;
    arrangement(row->threads, best, &torch, &blas);
    if (n_arr == 1) /* as the row set them; MKL's threads follow torch's */
        torch = row->threads, blas = w->arrange && run->torch.openblas ? 1 : row->threads;
    snprintf(row->torch_threads, sizeof row->torch_threads, "%d:%d", torch, blas);
    return bench_load_foreign(&before, &after, worker_elsewhere);
}

/* Returns once other processes used less than FOREIGN_MAX of the CPUs for
 * half a second, or after QUIET_WAIT seconds. */
static void wait_for_quiet(const bench_run *run)
{
    for (double start = bench_now(); bench_now() - start < QUIET_WAIT;) {
        bench_load_mark a, b;
        bench_load_mark_take(&a, run->torch.pid);
        bench_sleep(0.5);
        bench_load_mark_take(&b, run->torch.pid);
        if (bench_load_foreign(&a, &b, 0) <= FOREIGN_MAX)
            return;
    }
}

static void measure_row(bench_run *run, bench_row *row, const row_work *w, const bench_plan *p)
{
    enum { N_SAMPLES = BENCH_IMPLS - 1 + N_ARRANGEMENTS };
    double *samples[N_SAMPLES], *store = malloc(sizeof(double) * N_SAMPLES * p->rounds * p->reps);
    if (!store) {
        fprintf(stderr, "bench: out of memory\n");
        bench_report_abandon(&run->report);
        exit(1);
    }
    for (int i = 0; i < N_SAMPLES; i++)
        samples[i] = store + (size_t)i * p->rounds * p->reps;
    bench_row best = *row;
    best.foreign = 2;
    for (int a = 0; a < run->attempts && best.foreign > FOREIGN_MAX; a++) {
        if (a > 0 && bench_now() > run->redo_until)
            break;
        if (a > 0)
            wait_for_quiet(run);
        bench_row now = *row;
        init_cells(run, &now, w);
        now.foreign = attempt_row(run, &now, w, p, samples);
        if (now.foreign < best.foreign)
            best = now;
    }
    *row = best;
    free(store);
    bench_report_row(&run->report, row);
}

/* ---- GEMM rows ---- */

/* The rows of one shape: op(A)·op(B) in NN, NT, TN and TT, or, when alone,
 * headlab's side only in the three forms attention takes (NN, NT, TN). */
static void gemm_row(bench_run *run, const char *name, int M, int N, int K, int batch, bool alone)
{
    static const char *const variants[] = {"NN", "NT", "TN", "TT"};
    for (int v = 0; v < (alone ? 3 : 4); v++) {
        bool ta = v >= 2, tb = v % 2;
        bench_gemm c;
        if (bench_gemm_init(&c, ta, tb, M, N, K, batch, run->ob)) {
            fprintf(stderr, "bench: out of memory for GEMM %s\n", name);
            run->failed = true;
            return;
        }
        torch_block tb_ctx = {.torch = &run->torch};
        snprintf(tb_ctx.command, sizeof tb_ctx.command, "gemm %d %d %d %d %d %d %d", ta, tb, M,
                 N, K, batch, c.inner);
        row_work w = {.fn = {bench_gemm_headlab, alone ? NULL : bench_gemm_openblas,
                             alone ? NULL : run_torch_block},
                      .ctx = {&c, &c, &tb_ctx}};
        for (int t = 0; t < run->o.n_threads; t++) {
            bench_row row = {.section = "gemm", .threads = run->o.threads[t],
                             .flops = bench_gemm_flops(&c)};
            snprintf(row.name, sizeof row.name, "%s", name);
            snprintf(row.variant, sizeof row.variant, "%s", variants[v]);
            /* a lone GEMM is one BLAS call: PyTorch's threads are OpenBLAS's */
            set_threads(run, row.threads, row.threads);
            measure_row(run, &row, &w, &run->gemm);
        }
        bench_gemm_release(&c);
    }
}

static void gemm_section(bench_run *run)
{
    static const int square[] = {64, 128, 256, 512, 1024}, square_quick[] = {64, 512};
    static const int rows[] = {1024, 4096}, depths[] = {64, 128, 256, 512};
    const bool q = run->o.quick;
    char name[48];
    for (int i = 0; i < (q ? 2 : 5); i++) {
        int n = q ? square_quick[i] : square[i];
        snprintf(name, sizeof name, "M=N=K=%d", n);
        gemm_row(run, name, n, n, n, 1, false);
    }
    /* transformer shapes: (B·T, K) times a (K, N) weight, N = K or 4K */
    for (int i = 0; i < (q ? 1 : 2); i++)
        for (int j = 0; j < 4; j++)
            for (int wide = 0; wide < 2; wide++) {
                int M = rows[i], K = depths[j], N = wide ? 4 * K : K;
                /* --quick: the smallest and the widest */
                if (q && !(j == 0 && !wide) && !(j == 3 && wide))
                    continue;
                snprintf(name, sizeof name, "M=%d N=%d K=%d", M, N, K);
                gemm_row(run, name, M, N, K, 1, false);
            }
    /* attention's batched products per MHA config: scores Q·Kᵀ (T,T,D) and
     * context A·V (T,D,T), B·H matrices each */
    for (int i = 0; i < (q ? 1 : N_MHA_CONFIGS); i++) {
        const int *c = mha_configs[i];
        int BH = c[0] * c[3], T = c[1], D = c[2] / c[3];
        snprintf(name, sizeof name, "%dx M=%d N=%d K=%d", BH, T, T, D);
        gemm_row(run, name, T, T, D, BH, false);
        snprintf(name, sizeof name, "%dx M=%d N=%d K=%d", BH, T, D, T);
        gemm_row(run, name, T, D, T, BH, false);
    }
}

/* --only batched: attention's batched products over a grid of head counts,
 * lengths and head widths, headlab's alone at every --threads count, so a
 * work split that starves threads shows as a row slower at more threads. */
static void batched_section(bench_run *run)
{
    static const int batches[] = {8, 32, 96}, lengths[] = {32, 64, 256}, widths[] = {16, 32, 64};
    char name[48];
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < 3; t++)
            for (int d = 0; d < 3; d++) {
                const int BH = batches[b], T = lengths[t], D = widths[d];
                snprintf(name, sizeof name, "%dx M=%d N=%d K=%d", BH, T, T, D);
                gemm_row(run, name, T, T, D, BH, true);
                snprintf(name, sizeof name, "%dx M=%d N=%d K=%d", BH, T, D, T);
                gemm_row(run, name, T, D, T, BH, true);
            }
}

/* ---- MHA rows ---- */

/* One variant of config c at every thread count: "fwd", "fwd+bwd", with
 * "+weights" the composed path (PyTorch: need_weights=True, per head), and
 * " causal". */
static void mha_rows(bench_run *run, bench_mha_work *work, const int *c, int causal, int bwd,
                     int weights, const bench_plan *plan)
{
    bench_mha_select(work, causal, bwd, weights);
    torch_block tb_ctx = {.torch = &run->torch};
    snprintf(tb_ctx.command, sizeof tb_ctx.command, "mha %d %d %d %d %d %d %d", c[0], c[1], c[2],
             c[3], causal, bwd, weights);
    row_work w = {.fn = {bench_mha_block, NULL, run_torch_block}, .ctx = {work, NULL, &tb_ctx},
                  .arrange = true};
    for (int t = 0; t < run->o.n_threads; t++) {
        bench_row row = {.section = "mha", .threads = run->o.threads[t]};
        snprintf(row.name, sizeof row.name, "%d,%d,%d,%d", c[0], c[1], c[2], c[3]);
        snprintf(row.variant, sizeof row.variant, "%s%s%s", bwd ? "fwd+bwd" : "fwd",
                 weights ? "+weights" : "", causal ? " causal" : "");
        set_threads(run, row.threads, 1);
        measure_row(run, &row, &w, plan);
    }
}

static bench_mha_work *mha_work_new(bench_run *run, const int *c)
{
    bench_mha_work *work = bench_mha_new(c[0], c[1], c[2], c[3]);
    if (!work) {
        fprintf(stderr, "bench: cannot build MHA %d,%d,%d,%d\n", c[0], c[1], c[2], c[3]);
        run->failed = true;
    }
    return work;
}

/* The training path first (no weights), then the composed one (weights). */
static void mha_section(bench_run *run)
{
    for (int i = 0; i < (run->o.quick ? 1 : N_MHA_CONFIGS); i++) {
        bench_mha_work *work = mha_work_new(run, mha_configs[i]);
        for (int weights = 0; work && weights < 2; weights++)
            for (int bwd = 0; bwd < 2; bwd++)
                for (int causal = 0; causal < 2; causal++)
                    mha_rows(run, work, mha_configs[i], causal, bwd, weights, &run->mha);
        bench_mha_free(work);
    }
}

static void long_section(bench_run *run)
{
    bench_mha_work *work = mha_work_new(run, long_config);
    if (work)
        mha_rows(run, work, long_config, 1, 1, 0, &run->long_ctx);
    bench_mha_free(work);
}

/* ---- the toy training step ---- */

static void toy_section(bench_run *run)
{
    bench_toy *work = bench_toy_new();
    if (!work) {
        fprintf(stderr, "bench: cannot build the toy model\n");
        run->failed = true;
        return;
    }
    torch_block tb_ctx = {.torch = &run->torch, .command = "toy"};
    row_work w = {.fn = {bench_toy_block, NULL, run_torch_block}, .ctx = {work, NULL, &tb_ctx},
                  .arrange = true};
    for (int t = 0; t < run->o.n_threads; t++) {
        bench_row row = {.section = "toy", .name = "2x4 heads, d 64",
                         .variant = "train step", .threads = run->o.threads[t]};
        set_threads(run, row.threads, 1);
        measure_row(run, &row, &w, &run->toy);
    }
    bench_toy_free(work);
}

/* ---- GPT training steps ---- */

static const char *const gpt_variants[] = {"train step", "eval", "first step", "generate 64"};

/* gpt_configs[config]'s model, or NULL with the failure reported. */
static bench_gpt *gpt_work_new(bench_run *run, int config)
{
    bench_gpt *work = bench_gpt_new(&gpt_configs[config].shape);
    if (!work) {
        fprintf(stderr, "bench: cannot build the GPT %s\n", gpt_configs[config].name);
        run->failed = true;
    }
    return work;
}

/* One variant of a GPT at every thread count; PyTorch at its fastest
 * arrangement of threads (attempt_row). */
static void gpt_rows(bench_run *run, bench_gpt *work, int config, bench_gpt_mode mode)
{
    const bench_gpt_shape *s = &gpt_configs[config].shape;
    bench_gpt_select(work, mode);
    torch_block tb_ctx = {.torch = &run->torch};
    snprintf(tb_ctx.command, sizeof tb_ctx.command, "gpt %d %d %d %d %d %d %d %d", s->layers,
             s->heads, s->d_model, s->ctx, s->batch, s->vocab, (int)mode, (int)s->modern);
    row_work w = {.fn = {bench_gpt_block, NULL, run_torch_block}, .ctx = {work, NULL, &tb_ctx},
                  .arrange = true};
    for (int t = 0; t < run->o.n_threads; t++) {
        bench_row row = {.section = "gpt", .threads = run->o.threads[t],
                         .flops = bench_gpt_flops(s, mode)};
        snprintf(row.name, sizeof row.name, "%s", gpt_configs[config].name);
        snprintf(row.variant, sizeof row.variant, "%s", gpt_variants[mode]);
        set_threads(run, row.threads, 1);
        measure_row(run, &row, &w, mode == BENCH_GPT_FIRST ? &run->gpt_first : &run->gpt);
    }
}

/* The GPT rows: GPT-2 small's (vocab 50,257) with gpt2, the others without. */
static void gpt_section(bench_run *run, bool gpt2)
{
    for (int i = 0; i < N_GPT_CONFIGS; i++) {
        if ((gpt_configs[i].shape.vocab == 50257) != gpt2)
            continue;
        if (run->o.quick && i != 0 && i != 2) /* the small model, classic and modern */
            continue;
        if (run->o.scaling && !gpt_configs[i].scaling)
            continue;
        bench_gpt *work = gpt_work_new(run, i);
        if (!work)
            continue;
        const int modes = run->o.scaling                ? GPT_STEPS
                          : gpt_configs[i].modes         ? gpt_configs[i].modes
                          : gpt_configs[i].shape.modern ? GPT_STEPS
                                                        : GPT_STEPS | GPT_EVAL | GPT_FIRST;
        for (int mode = BENCH_GPT_STEP; mode <= BENCH_GPT_GENERATE; mode++)
            if (modes & 1 << mode)
                gpt_rows(run, work, i, (bench_gpt_mode)mode);
        bench_gpt_free(work);
    }
}

/* ---- the training step's phases ---- */

/* --only phases: the phases of --scaling's training steps timed apart in the
 * same steps, headlab alone, at every thread count. A phase whose time falls
 * less than the step's from 1 thread to many is where threads wait. */
static void phases_section(bench_run *run)
{
    static const char *const names[BENCH_PHASES + 1] = {
        "zero-grad", "forward", "loss", "backward", "AdamW", "reset", "step"};
    /* the gpt rows' count of timed steps, in one block */
    const bench_plan plan = {.reps = run->gpt.rounds * run->gpt.reps, .warmup = run->gpt.warmup,
                             .warmup_seconds = run->gpt.warmup_seconds},
                     *p = &plan;
    double *seconds = malloc(sizeof *seconds * (BENCH_PHASES + 1) * p->reps);
    for (int i = 0; seconds && i < N_GPT_CONFIGS; i++) {
        if (!gpt_configs[i].scaling || (run->o.quick && i != 0))
            continue;
        bench_gpt *work = gpt_work_new(run, i);
        if (!work)
            continue;
        for (int t = 0; t < run->o.n_threads; t++) {
            set_threads(run, run->o.threads[t], 1);
            char why[WHY_SIZE];
            bench_load_mark before, after;
            bench_load_mark_take(&before, run->torch.pid);
            const bool failed = bench_gpt_phases(work, p, seconds, why, sizeof why) != 0;
            bench_load_mark_take(&after, run->torch.pid);
            if (failed) {
                fprintf(stderr, "bench: headlab %s phases: %s\n", gpt_configs[i].name, why);
                run->failed = true;
            }
            for (int ph = 0; ph <= BENCH_PHASES; ph++) {
                bench_row row = {.section = "phases", .threads = run->o.threads[t],
                                 .foreign = bench_load_foreign(&before, &after, 0),
                                 .cell = {failed ? BENCH_CELL_FAILED : BENCH_CELL_OK,
                                          BENCH_CELL_NA, BENCH_CELL_NA}};
                snprintf(row.name, sizeof row.name, "%s", gpt_configs[i].name);
                snprintf(row.variant, sizeof row.variant, "%s", names[ph]);
                if (!failed)
                    bench_stats_of(seconds + (size_t)ph * p->reps, p->reps,
                                   &row.stats[BENCH_HEADLAB]);
                bench_report_row(&run->report, &row);
            }
        }
        bench_gpt_free(work);
    }
    if (!seconds) {
        fprintf(stderr, "bench: out of memory for the phases\n");
        run->failed = true;
    }
    free(seconds);
}

/* ---- the training step op by op ---- */

/* A row of the profile: step r's seconds of op's forward (or backward) in
 * seconds[r]; false when no step ran it. */
static bool op_seconds(const hl_profile *steps, int reps, hl_op op, bool backward,
                       double *seconds)
{
    bool ran = false;
    for (int r = 0; r < reps; r++) {
        const hl_profile *s = &steps[r];
        seconds[r] = backward ? s->backward_seconds[op] : s->forward_seconds[op];
        ran |= (backward ? s->backward_calls[op] : s->forward_calls[op]) > 0;
    }
    return ran;
}

/* --only profile: the phases section's training steps with each op's forward
 * and backward timed (core/profile.h), headlab alone. Rows go op by op, each
 * at every thread count, so that the op that gains least from more threads
 * stands out. */
static void profile_section(bench_run *run)
{
    const bench_plan plan = {.reps = run->gpt.rounds * run->gpt.reps, .warmup = run->gpt.warmup,
                             .warmup_seconds = run->gpt.warmup_seconds},
                     *p = &plan;
    const int n_t = run->o.n_threads;
    hl_profile *steps = malloc(sizeof *steps * (size_t)(n_t * p->reps));
    double *seconds = malloc(sizeof *seconds * p->reps);
    for (int i = 0; steps && seconds && i < N_GPT_CONFIGS; i++) {
        if (!gpt_configs[i].scaling || (run->o.quick && i != 0))
            continue;
        bench_gpt *work = gpt_work_new(run, i);
        if (!work)
            continue;
        bool failed[MAX_THREAD_COUNTS] = {false};
        double foreign[MAX_THREAD_COUNTS];
        for (int t = 0; t < n_t; t++) {
            set_threads(run, run->o.threads[t], 1);
            char why[WHY_SIZE];
            bench_load_mark before, after;
            bench_load_mark_take(&before, run->torch.pid);
            failed[t] = bench_gpt_profile(work, p, steps + (size_t)t * p->reps, why,
                                          sizeof why) != 0;
            bench_load_mark_take(&after, run->torch.pid);
            foreign[t] = bench_load_foreign(&before, &after, 0);
            if (failed[t]) {
                fprintf(stderr, "bench: headlab %s profile: %s\n", gpt_configs[i].name, why);
                run->failed = true;
            }
        }
        bench_gpt_free(work);
        for (int op = 0; op < HL_OP_COUNT; op++)
            for (int backward = 0; backward < 2; backward++)
                for (int t = 0; t < n_t; t++) {
                    if (failed[t] || !op_seconds(steps + (size_t)t * p->reps, p->reps,
                                                 (hl_op)op, backward, seconds))
                        continue;
                    bench_row row = {.section = "profile", .threads = run->o.threads[t],
                                     .foreign = foreign[t],
                                     .cell = {BENCH_CELL_OK, BENCH_CELL_NA, BENCH_CELL_NA}};
                    snprintf(row.name, sizeof row.name, "%s", gpt_configs[i].name);
                    snprintf(row.variant, sizeof row.variant, "%s %s", hl_op_name((hl_op)op),
                             backward ? "bwd" : "fwd");
                    bench_stats_of(seconds, p->reps, &row.stats[BENCH_HEADLAB]);
                    bench_report_row(&run->report, &row);
                }
    }
    if (!steps || !seconds) {
        fprintf(stderr, "bench: out of memory for the profile\n");
        run->failed = true;
    }
    free(steps);
    free(seconds);
}

/* ---- Muon rows ---- */

/* The hidden matrices of charlm's 4x4 model (attention's 128 x 128 blocks,
 * the MLP's 512 x 128), the 6x6 d 384 model's and GPT-2 small's square ones:
 * the matrices Muon orthogonalises every step. */
static const int muon_shapes[][2] = {{128, 128}, {512, 128}, {384, 384}, {1536, 384},
                                     {768, 768}};

/* charlm's default model (the first gpt row's) trained with AdamW and with
 * Muon, a block of steps of each in turn, headlab alone: what Muon adds to a
 * step. For each optimizer a row of its phase and one of the whole step. */
static void muon_step_rows(bench_run *run)
{
    const bench_plan *g = &run->gpt;
    const bench_plan block = {.reps = g->reps, .warmup = g->warmup,
                              .warmup_seconds = g->warmup_seconds};
    const int reps = g->rounds * g->reps;
    static const char *const optim[2] = {"AdamW", "Muon"};
    double *phases = malloc(sizeof *phases * (BENCH_PHASES + 1) * block.reps),
           *times = malloc(sizeof *times * 4 * reps); /* [optim][phase, step][reps] */
    bench_gpt *work = phases && times ? gpt_work_new(run, 0) : NULL;
    for (int t = 0; work && t < run->o.n_threads; t++) {
        set_threads(run, run->o.threads[t], 1);
        char why[WHY_SIZE] = "out of memory for Muon";
        bench_load_mark before, after;
        bench_load_mark_take(&before, run->torch.pid);
        bool failed = false;
        for (int r = 0; r < g->rounds && !failed; r++)
            for (int k = 0; k < 2 && !failed; k++) {
                failed = bench_gpt_use_muon(work, k == 1) ||
                         bench_gpt_phases(work, &block, phases, why, sizeof why);
                for (int i = 0; !failed && i < block.reps; i++) {
                    const int at = r * block.reps + i;
                    times[(2 * k) * reps + at] = phases[BENCH_PHASE_OPTIMIZER * block.reps + i];
                    times[(2 * k + 1) * reps + at] = phases[BENCH_PHASES * block.reps + i];
                }
            }
        bench_load_mark_take(&after, run->torch.pid);
        if (failed) {
            fprintf(stderr, "bench: headlab %s with Muon: %s\n", gpt_configs[0].name, why);
            run->failed = true;
        }
        for (int row_i = 0; row_i < 4; row_i++) {
            bench_row row = {.section = "muon", .threads = run->o.threads[t],
                             .foreign = bench_load_foreign(&before, &after, 0),
                             .cell = {failed ? BENCH_CELL_FAILED : BENCH_CELL_OK, BENCH_CELL_NA,
                                      BENCH_CELL_NA}};
            snprintf(row.name, sizeof row.name, "%s", gpt_configs[0].name);
            snprintf(row.variant, sizeof row.variant, "%s, %s", row_i % 2 ? "step" : "optimizer",
                     optim[row_i / 2]);
            if (!failed)
                bench_stats_of(times + (size_t)row_i * reps, reps, &row.stats[BENCH_HEADLAB]);
            bench_report_row(&run->report, &row);
        }
    }
    if (!phases || !times) {
        fprintf(stderr, "bench: out of memory for the Muon steps\n");
        run->failed = true;
    }
    bench_gpt_free(work);
    free(phases);
    free(times);
}

static void muon_section(bench_run *run)
{
    const int n_shapes = run->o.quick ? 2 : (int)(sizeof muon_shapes / sizeof muon_shapes[0]);
    for (int i = 0; i < n_shapes; i++) {
        const int rows = muon_shapes[i][0], cols = muon_shapes[i][1];
        bench_muon m;
        if (bench_muon_init(&m, rows, cols)) {
            fprintf(stderr, "bench: out of memory for Muon (%d,%d)\n", rows, cols);
            run->failed = true;
            continue;
        }
        torch_block tb_ctx = {.torch = &run->torch};
        snprintf(tb_ctx.command, sizeof tb_ctx.command, "muon %d %d %d", rows, cols,
                 BENCH_MUON_STEPS);
        row_work w = {.fn = {bench_muon_headlab, NULL, run_torch_block},
                      .ctx = {&m, NULL, &tb_ctx}, .arrange = true};
        for (int t = 0; t < run->o.n_threads; t++) {
            bench_row row = {.section = "muon", .threads = run->o.threads[t],
                             .flops = bench_muon_flops(&m)};
            snprintf(row.name, sizeof row.name, "(%d,%d)", rows, cols);
            snprintf(row.variant, sizeof row.variant, "%d Newton-Schulz steps", BENCH_MUON_STEPS);
            set_threads(run, row.threads, 1);
            measure_row(run, &row, &w, &run->gemm);
        }
        bench_muon_release(&m);
    }
    muon_step_rows(run);
}

/* ---- peak memory: one fresh process per MHA config ---- */

/* The peak RSS of config c's forward + backward (training path) in fresh
 * processes, headlab's and PyTorch's. */
static bench_row rss_row(bench_run *run, const char *dtype, const int *c, int causal)
{
    bench_row row = {.section = "rss", .threads = 1};
    snprintf(row.name, sizeof row.name, "%d,%d,%d,%d", c[0], c[1], c[2], c[3]);
    snprintf(row.variant, sizeof row.variant, "%s", causal ? "causal" : "none");
    char config[64], why[WHY_SIZE];
    snprintf(config, sizeof config, "%d,%d,%d,%d,%d", c[0], c[1], c[2], c[3], causal);
    char *self[] = {"/proc/self/exe", "--rss-child", config, NULL};
    row.cell[BENCH_HEADLAB] = BENCH_CELL_OK;
    if (bench_child_rss(self, &row.peak_mib[BENCH_HEADLAB], &row.base_mib[BENCH_HEADLAB],
                        why, sizeof why)) {
        fprintf(stderr, "bench: headlab peak RSS %s: %s\n", config, why);
        row.cell[BENCH_HEADLAB] = BENCH_CELL_FAILED;
        run->failed = true;
    }
    row.cell[BENCH_TORCH] = run->torch_started ? BENCH_CELL_OK : BENCH_CELL_ABSENT;
    char *worker[] = {(char *)run->o.python, (char *)run->o.worker, "--dtype",
                      (char *)dtype, "--rss", config, NULL};
    if (run->torch_started &&
        bench_child_rss(worker, &row.peak_mib[BENCH_TORCH], &row.base_mib[BENCH_TORCH],
                        why, sizeof why)) {
        fprintf(stderr, "bench: PyTorch peak RSS %s: %s\n", config, why);
        row.cell[BENCH_TORCH] = BENCH_CELL_FAILED;
    }
    return row;
}

/* Fills rows (2 per config, and the long-context one) and returns their
 * count. A child's ru_maxrss starts at its parent's peak (the spawn shares
 * the parent's memory until exec), so this runs while the benchmark itself
 * is still small. */
static int rss_measure(bench_run *run, const char *dtype, bench_row *rows)
{
    int n = 0;
    for (int i = 0; run->o.sections & SECTION_RSS && i < (run->o.quick ? 1 : N_MHA_CONFIGS); i++)
        for (int causal = 0; causal < 2; causal++)
            rows[n++] = rss_row(run, dtype, mha_configs[i], causal);
    if (run->o.sections & SECTION_LONG)
        rows[n++] = rss_row(run, dtype, long_config, 1);
    return n;
}

/* The hidden --rss-child B,T,E,H,CAUSAL mode of the process above. */
static int rss_child(const char *config)
{
    int B, T, E, H, causal;
    if (sscanf(config, "%d,%d,%d,%d,%d", &B, &T, &E, &H, &causal) != 5 || B < 1 || T < 1 ||
        E < 1 || H < 1) {
        fprintf(stderr, "bench: --rss-child needs B,T,E,H,CAUSAL, got %s\n", config);
        return 2;
    }
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    return bench_mha_rss_child(B, T, E, H, causal != 0);
}

/* ---- main ---- */

static void print_intro(const bench_run *run)
{
    char date[64];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S %Z", localtime(&now));
    char have[64];
    const char *isa = hl_isa_name(hl_isa_active());
#ifdef _OPENMP
    const char *omp = "OpenMP";
#else
    const char *omp = "no OpenMP (every thread count runs on 1)";
#endif
    printf("headlab bench, %s: %ld CPUs, kernels %s (the CPU has %s), hl_real %s, %s%s\n",
           date, sysconf(_SC_NPROCESSORS_ONLN), isa, hl_isa_list(have, sizeof have),
           HL_REAL_NAME, omp, run->o.quick ? ", --quick" : "");
    printf("peak: %.1f GFLOP/s on one core, %.1f on %d threads (independent %s FMAs, "
           "measured)\n", run->peak_one, run->peak_all, run->peak_threads, isa);
    if (run->ob)
        printf("OpenBLAS: %s%s\n", bench_openblas_about(run->ob), run->ob_note);
    else
        printf("OpenBLAS: absent (%s)\n", run->ob_why);
    if (run->torch_started && run->torch.openblas)
        printf("PyTorch:  %s; GEMM rows: torch.set_num_threads(thr), OpenBLAS threads = thr; "
               "the others at 2+ threads: the fastest of thr:1, 1:thr and thr:thr (PT t)\n",
               run->torch.about);
    else if (run->torch_started)
        printf("PyTorch:  %s; torch.set_num_threads(thr), its BLAS's threads the same\n",
               run->torch.about);
    else
        printf("PyTorch:  absent (%s)\n", run->torch.about);
    char redo[96] = "";
    if (run->attempts > 1)
        snprintf(redo, sizeof redo, "; above %.0f%% the row is measured again and the quieter "
                 "attempt kept", 100 * FOREIGN_MAX);
    printf("Each cell: the median of %d timed calls (toy step: %d; gpt: %d, first step: %d) "
           "after warm-up; a row runs %d round%s of one block per\nimplementation, alternating "
           "headlab, OpenBLAS, PyTorch.\n"
           "vs OB, vs PT: speed-up = the other's median time / headlab's (> 1: headlab is "
           "faster).\nbusy: the share of all CPUs other processes used during the row (the "
           "PyTorch worker too, outside its own blocks)%s.\n",
           run->mha.rounds * run->mha.reps, run->toy.rounds * run->toy.reps,
           run->gpt.rounds * run->gpt.reps, run->gpt_first.rounds * run->gpt_first.reps,
           run->mha.rounds,
           run->mha.rounds > 1 ? "s" : "", redo);
    if (getenv("OMP_PROC_BIND"))
        printf("note: OMP_PROC_BIND is set; it can cap OpenBLAS at one thread\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--rss-child"))
        return rss_child(argv[2]);
    bench_run run = {.o = parse_options(argc, argv)};
    if (run.o.n_isas > 1)
        return bench_isa_runs(argc, argv, run.o.isas, run.o.n_isas, run.o.csv);
    hl_error err = {0};
    if (hl_isa_use(run.o.isas[0], &err) != HL_OK) {
        fprintf(stderr, "bench: %s\n", err.message);
        return 2;
    }
    if (run.o.quick || run.o.scaling) {
        run.gemm = run.mha = run.long_ctx = (bench_plan){.rounds = 1, .reps = 3, .warmup = 1};
        run.toy = (bench_plan){.rounds = 1, .reps = 5, .warmup = 2};
        run.gpt = (bench_plan){.rounds = 1, .reps = 3, .warmup = 1};
        run.gpt_first = (bench_plan){.rounds = 1, .reps = 2};
        run.attempts = 1;
    } else {
        run.gemm = (bench_plan){.rounds = 4, .reps = 5, .warmup = 1};
        run.mha = (bench_plan){.rounds = 4, .reps = 5, .warmup = 2};
        run.toy = (bench_plan){.rounds = 4, .reps = 10, .warmup = 5};
        run.long_ctx = (bench_plan){.rounds = 2, .reps = 3, .warmup = 1}; /* ~1 s a call */
        run.gpt = (bench_plan){.rounds = 2, .reps = 5, .warmup = 2};    /* up to ~1 s a call */
        run.gpt_first = (bench_plan){.rounds = 1, .reps = 3};           /* a fresh model each */
        run.attempts = 2;
    }
    run.gemm.warmup_seconds = run.mha.warmup_seconds = run.toy.warmup_seconds =
        run.long_ctx.warmup_seconds = run.gpt.warmup_seconds = WARMUP_SECONDS;
    run.redo_until = bench_now() + REDO_SECONDS;
    if (bench_report_open(&run.report, run.o.csv)) {
        bench_report_abandon(&run.report);
        return 2;
    }
    int max_threads = 1;
    for (int t = 0; t < run.o.n_threads; t++)
        max_threads = run.o.threads[t] > max_threads ? run.o.threads[t] : max_threads;
    /* the PyTorch worker inherits this environment */
    bench_openblas_environment(max_threads, run.o.isas[0], run.ob_note, sizeof run.ob_note);
    run.peak_threads = max_threads;
    bench_fma_peak(max_threads, &run.peak_one, &run.peak_all);
    const char *dtype = sizeof(hl_real) == sizeof(double) ? "float64" : "float32";
    run.torch_started = bench_torch_start(&run.torch, run.o.python, run.o.worker, dtype);
    bench_row rss_rows[2 * N_MHA_CONFIGS + 1];
    int n_rss = rss_measure(&run, dtype, rss_rows);
    run.ob = bench_openblas_open(run.o.openblas, run.ob_why, sizeof run.ob_why);
    print_intro(&run);

    if (run.o.sections & SECTION_GEMM)
        gemm_section(&run);
    if (run.o.sections & SECTION_BATCHED)
        batched_section(&run);
    if (run.o.sections & SECTION_MHA)
        mha_section(&run);
    if (run.o.sections & SECTION_LONG)
        long_section(&run);
    if (run.o.sections & SECTION_TOY)
        toy_section(&run);
    if (run.o.sections & SECTION_GPT)
        gpt_section(&run, false);
    if (run.o.sections & SECTION_GPT2)
        gpt_section(&run, true);
    if (run.o.sections & SECTION_PHASES)
        phases_section(&run);
    if (run.o.sections & SECTION_PROFILE)
        profile_section(&run);
    if (run.o.sections & SECTION_MUON)
        muon_section(&run);
    bench_torch_stop(&run.torch);
    for (int i = 0; i < n_rss; i++)
        bench_report_row(&run.report, &rss_rows[i]);
    if (run.o.sections & SECTION_BUSY)
        bench_busy_section(&run.report, max_threads, run.o.quick);
    bench_row peak = {.section = "peak", .threads = 1, .flops = run.peak_one * 1e9};
    snprintf(peak.name, sizeof peak.name, "FMA GFLOP/s one core");
    bench_report_csv_row(&run.report, &peak);
    peak.threads = run.peak_threads;
    peak.flops = run.peak_all * 1e9;
    snprintf(peak.name, sizeof peak.name, "FMA GFLOP/s all threads");
    bench_report_csv_row(&run.report, &peak);
    bench_openblas_close(run.ob);
    if (bench_report_close(&run.report))
        return 2;
    printf("\nwrote %s\n", run.o.csv);
    if (run.failed)
        fprintf(stderr, "bench: some headlab rows failed (see above)\n");
    return run.failed ? 1 : 0;
}
