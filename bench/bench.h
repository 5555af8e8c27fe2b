/*
 * bench.h: the pieces of the benchmark program (`make bench`, bench/bench.c)
 * that compares headlab with OpenBLAS and PyTorch on the same work.
 *
 * A row is one piece of work (a GEMM shape, an MHA config, the toy training
 * step) at one thread count. Every implementation that is present runs it in
 * blocks of warm-up plus timed runs; blocks alternate between implementations
 * (headlab, OpenBLAS, PyTorch, headlab, ...) so slow drifts of a shared
 * machine hit them alike. A block is a function, so headlab's and OpenBLAS's
 * work run in this process and PyTorch's in a worker process:
 *
 *     double s[10];
 *     if (block.run(block.ctx, 2, 10, s) == 0) ...   // s: seconds per call
 */
#ifndef HL_BENCH_H
#define HL_BENCH_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/profile.h"
#include "core/real.h"
#include "ops/isa.h"
#include "files/atomic.h"

/* ---- timing (bench/timing.c) ---- */

double bench_now(void); /* monotonic seconds */
void bench_sleep(double seconds);

typedef struct bench_stats {
    double median, min, max; /* seconds per call */
    int runs;
} bench_stats;

void bench_stats_of(const double *seconds, int n, bench_stats *out);

/* CPU use of the whole machine, this process and the PyTorch worker, to tell
 * how much of a row's time other processes took (a shared machine). */
typedef struct bench_load_mark {
    double wall, busy, self, worker; /* seconds */
} bench_load_mark;

void bench_load_mark_take(bench_load_mark *m, pid_t worker);
/* The share of all CPUs used by other processes between a and b, 0..1, with
 * worker_elsewhere seconds of the worker's CPU counted as foreign too (its use
 * while it should have been idle). */
double bench_load_foreign(const bench_load_mark *a, const bench_load_mark *b,
                          double worker_elsewhere);

/* ---- one implementation's block of runs ---- */

/* How a row is measured: rounds × (one block per implementation); a block
 * warms up for at least warmup calls and warmup_seconds (long enough for the
 * scheduler to place freshly woken threads), then times reps calls. */
typedef struct bench_plan {
    int rounds, reps, warmup;
    double warmup_seconds;
} bench_plan;

/* Runs one block, writing each timed call's seconds into seconds[0..reps).
 * 0, or -1 with a reason in why. */
typedef int (*bench_block_fn)(void *ctx, const bench_plan *p, double *seconds, char *why,
                              size_t why_size);

/* One call of some work; 0, or -1 with a reason. */
typedef int (*bench_work_fn)(void *ctx, char *why, size_t why_size);

/* A block of `once`: the warm-up, then p->reps timed runs of `calls` calls
 * each (bench/work.c). */
int bench_run_block(bench_work_fn once, void *ctx, int calls, const bench_plan *p,
                    double *seconds, char *why, size_t why_size);

/* ---- OpenBLAS, loaded at run time (bench/openblas.c) ---- */

typedef struct bench_openblas bench_openblas;

/* Sets OpenBLAS's environment for this process and the PyTorch worker, before
 * either loads it: OPENBLAS_CORETYPE=SkylakeX on AVX-512 CPUs (note says what
 * it replaced, or is empty), room for max_threads threads, and a short spin
 * of idle threads. */
void bench_openblas_environment(int max_threads, hl_isa isa, char *note, size_t note_size);
/* Loads lib (e.g. "libopenblas.so.0"). NULL when it cannot be loaded; the
 * reason goes into why. */
bench_openblas *bench_openblas_open(const char *lib, char *why, size_t why_size);
void bench_openblas_close(bench_openblas *ob);
/* "core SkylakeX" or similar, for the header. */
const char *bench_openblas_about(const bench_openblas *ob);
void bench_openblas_set_threads(bench_openblas *ob, int n);
/* C (M,N) = op(A)·op(B), row-major, with ops/gemm.h's argument conventions. */
void bench_openblas_gemm(const bench_openblas *ob, bool trans_a, bool trans_b, int M, int N,
                         int K, const hl_real *A, int lda, const hl_real *B, int ldb,
                         hl_real *C, int ldc);

/* ---- the PyTorch worker process (bench/torch_client.c) ---- */

typedef struct bench_torch {
    pid_t pid;       /* 0 when absent */
    FILE *to, *from; /* its stdin and stdout */
    char about[512]; /* "torch 1.13.0, ..." or why it is absent */
    bool openblas;   /* its BLAS is OpenBLAS, whose threads are set apart from torch's */
} bench_torch;

/* Starts `python worker --dtype DTYPE` (float32 or float64) and waits for
 * its hello. false when python, the script or torch is missing (t->about
 * says which); nothing fails. */
bool bench_torch_start(bench_torch *t, const char *python, const char *worker,
                       const char *dtype);
bool bench_torch_alive(const bench_torch *t);
/* Sends one command line; reads back "ok v1 v2 ..." into values (at most
 * max). Returns the count, or -1 with the worker's message in why. A worker
 * that died is stopped, and later calls fail. */
int bench_torch_call(bench_torch *t, const char *command, double *values, int max, char *why,
                     size_t why_size);
void bench_torch_stop(bench_torch *t);

/* Runs argv[0] (a path) as a child and waits for it. *peak_mib is its
 * ru_maxrss; *base_mib is the number it printed on a line "base <KiB>" (its
 * RSS after setup, before the work), or -1. 0, or -1 with a reason. */
int bench_child_rss(char *const argv[], double *peak_mib, double *base_mib, char *why,
                    size_t why_size);

/* ---- headlab's work (bench/work.c) ---- */

typedef struct bench_gemm {
    bool trans_a, trans_b;
    int M, N, K, batch; /* batch 1: hl_gemm; more: hl_gemm_batched */
    int inner;          /* calls per timed run (small shapes take microseconds);
                           seconds are per call */
    hl_real *A, *B, *C;
    const bench_openblas *ob;
} bench_gemm;

int bench_gemm_init(bench_gemm *c, bool trans_a, bool trans_b, int M, int N, int K, int batch,
                    const bench_openblas *ob);
void bench_gemm_release(bench_gemm *c);
double bench_gemm_flops(const bench_gemm *c); /* per call */
int bench_gemm_headlab(void *ctx, const bench_plan *p, double *seconds, char *why,
                       size_t why_size);
int bench_gemm_openblas(void *ctx, const bench_plan *p, double *seconds, char *why,
                        size_t why_size);

/* Muon's orthogonalisation of one (rows,cols) matrix (bench/muon_work.c):
 * BENCH_MUON_STEPS Newton–Schulz steps, the input copied in first. FLOPs are
 * the published iteration's, 5·(4r²c + 2r³) for r = min, c = max. */
#define BENCH_MUON_STEPS 5
typedef struct bench_muon {
    int rows, cols;
    hl_real *g0, *g, *work;
} bench_muon;

int bench_muon_init(bench_muon *m, int rows, int cols);
void bench_muon_release(bench_muon *m);
/* Per call: the published iteration's (PyTorch's) flops. headlab's Gram form
 * does fewer on a matrix 2x wider than tall, so its GFLOP/s there are that
 * work's rate, not its own, and can pass the peak. */
double bench_muon_flops(const bench_muon *m);
int bench_muon_headlab(void *ctx, const bench_plan *p, double *seconds, char *why,
                       size_t why_size);

typedef struct bench_mha_work bench_mha_work;

/* Self-attention of x (B,T,E) through an H-head module with biases. */
bench_mha_work *bench_mha_new(int B, int T, int E, int H);
void bench_mha_free(bench_mha_work *w);
/* Selects what a block runs: forward, or forward and backward; without
 * weights the training path (no trace: the fused attention op), with weights
 * the composed path that hands back the (B,H,T,S) attention weights. */
void bench_mha_select(bench_mha_work *w, bool causal, bool backward, bool weights);
int bench_mha_block(void *ctx, const bench_plan *p, double *seconds, char *why,
                    size_t why_size);

typedef struct bench_toy bench_toy;

/* The model of docs/toy-task.md, AdamW and pre-drawn batches of 32. */
bench_toy *bench_toy_new(void);
void bench_toy_free(bench_toy *w);
/* One training step per call: zero-grad, forward, the two-term loss,
 * backward, AdamW. */
int bench_toy_block(void *ctx, const bench_plan *p, double *seconds, char *why,
                    size_t why_size);

/* A GPT as charlm builds it (pre-LayerNorm blocks, 4x GELU MLP, an untied
 * biased head), trained with AdamW on pre-drawn batches (bench/gpt_work.c);
 * modern: charlm --pos rope --norm rmsnorm --mlp swiglu instead. vocab: 256
 * for the bytes, more for a BPE vocabulary's embedding and head. */
typedef struct bench_gpt_shape {
    int layers, heads, d_model, ctx, batch, vocab;
    bool modern;
} bench_gpt_shape;

typedef enum bench_gpt_mode {
    BENCH_GPT_STEP,  /* zero-grad, forward, cross-entropy, backward, AdamW */
    BENCH_GPT_EVAL,  /* forward and cross-entropy, no gradients, eval mode */
    BENCH_GPT_FIRST, /* the first step of a freshly built model (arena growth and all) */
    BENCH_GPT_GENERATE /* BENCH_GENERATE_TOKENS tokens, greedy, after one, with a key/value
                        * cache (models/gpt_cache.h; PyTorch: the same loop by hand) */
} bench_gpt_mode;

/* Tokens one generation call decodes. */
#define BENCH_GENERATE_TOKENS 64

typedef struct bench_gpt bench_gpt;

bench_gpt *bench_gpt_new(const bench_gpt_shape *shape);
void bench_gpt_free(bench_gpt *w);
void bench_gpt_select(bench_gpt *w, bench_gpt_mode mode);
/* The training steps' optimizer from now on: AdamW (as the gpt rows), or with
 * muon Muon on the hidden matrices and AdamW on the rest (charlm --optim
 * muon). 0, or -1 when out of memory. */
int bench_gpt_use_muon(bench_gpt *w, bool muon);
int bench_gpt_block(void *ctx, const bench_plan *p, double *seconds, char *why,
                    size_t why_size);
/* The phases of a training step, in order; bench_gpt_phases times each. */
typedef enum bench_gpt_phase {
    BENCH_PHASE_ZERO_GRAD, /* hl_params_zero_grad */
    BENCH_PHASE_FORWARD,   /* hl_gpt_forward to the logits */
    BENCH_PHASE_LOSS,      /* the cross-entropy */
    BENCH_PHASE_BACKWARD,  /* hl_graph_backward */
    BENCH_PHASE_OPTIMIZER, /* AdamW, or Muon (bench_gpt_use_muon) */
    BENCH_PHASE_RESET,     /* hl_graph_reset: the step arena emptied */
    BENCH_PHASES
} bench_gpt_phase;
/* Training steps with each phase timed on its own: the warm-up, then p->reps
 * steps; phase ph of step r takes seconds[ph·p->reps + r], and the whole step
 * seconds[BENCH_PHASES·p->reps + r] (so seconds holds BENCH_PHASES + 1 rows of
 * p->reps). Selects BENCH_GPT_STEP. 0, or -1 with a reason. */
int bench_gpt_phases(bench_gpt *w, const bench_plan *p, double *seconds, char *why,
                     size_t why_size);
/* Training steps with each op's forward and backward timed (core/profile.h):
 * the warm-up, then p->reps steps, step r's times in steps[r]. Selects
 * BENCH_GPT_STEP. 0, or -1 with a reason. */
int bench_gpt_profile(bench_gpt *w, const bench_plan *p, hl_profile *steps, char *why,
                      size_t why_size);
/* Matmul FLOPs of one call: 24·B·T·d² + 4·B·T²·d a layer and 2·B·T·d·V for the head
 * forward, three times that with backward. */
double bench_gpt_flops(const bench_gpt_shape *shape, bench_gpt_mode mode);

/* The child process of the peak-memory measurement: builds the MHA config,
 * prints "base <KiB>", runs forward+backward (the training path) a few
 * times, returns an exit status. */
int bench_mha_rss_child(int B, int T, int E, int H, bool causal);

/* ---- the table and the CSV (bench/report.c) ---- */

enum { BENCH_HEADLAB, BENCH_OPENBLAS, BENCH_TORCH, BENCH_IMPLS };

typedef enum bench_cell {
    BENCH_CELL_NA,     /* not measured for this row (OpenBLAS has no MHA) */
    BENCH_CELL_OK,
    BENCH_CELL_ABSENT, /* the library is not installed */
    BENCH_CELL_FAILED  /* it ran and reported an error */
} bench_cell;

typedef struct bench_row {
    const char *section;  /* "gemm", "mha", "toy", "gpt", "rss" */
    char name[48];        /* "M=N=K=256", "8,64,128,4" */
    char variant[24];     /* "NT", "fwd+bwd causal" */
    int threads;          /* 0 for the memory rows */
    double flops;         /* per call; 0: no GFLOP/s column */
    bench_cell cell[BENCH_IMPLS];
    bench_stats stats[BENCH_IMPLS];
    double peak_mib[BENCH_IMPLS], base_mib[BENCH_IMPLS]; /* memory rows */
    double foreign;       /* share of the CPUs other processes used */
    char torch_threads[16]; /* PyTorch's fastest arrangement, "torch:OpenBLAS" threads */
} bench_row;

typedef struct bench_report {
    hl_atomic_file file;  /* bench.csv, written whole at the end (files/atomic.h) */
    FILE *csv;            /* file.f */
    const char *section;  /* the section whose table header was printed last */
} bench_report;

/* Creates path's temporary file and writes the CSV header; -1 with a
 * message on stderr when it cannot. */
int bench_report_open(bench_report *r, const char *path);
/* Prints the row (and the section's header first) and appends it to the CSV. */
void bench_report_row(bench_report *r, const bench_row *row);
/* A row into the CSV only (its section prints its own table). */
void bench_report_csv_row(bench_report *r, const bench_row *row);
/* The same file with no header, for rows copied in whole (bench/isa.c). */
int bench_report_open_raw(bench_report *r, const char *path);
/* Renames the temporary file over the CSV path; -1 with a message. */
int bench_report_close(bench_report *r);
/* Removes the temporary file (the old CSV stays as it was). */
void bench_report_abandon(bench_report *r);

/* ---- one run per kernel set (bench/isa.c) ---- */

/* OpenBLAS's core type of the same instruction set as a kernel set. */
const char *bench_openblas_coretype(hl_isa isa);

/* Runs this program once per set of isas (HL_ISA and --isa set, each with its
 * own CSV), then merges their CSVs into csv. 0 when every run succeeded. */
int bench_isa_runs(int argc, char **argv, const hl_isa *isas, int n_isas, const char *csv);

/* ---- the machine's peak and a busy machine (bench/busy.c) ---- */

/* Fused multiply-add GFLOP/s of the active kernel set on one thread and on
 * `threads` threads at once, measured. */
void bench_fma_peak(int threads, double *one, double *all);

/* The busy section: toy_heads and charlm runs, with a busy loop holding one
 * core, at 1 thread, `threads` threads and the default (the step tuner):
 * wall seconds per run and the ratio to 1 thread. quick: one run each. */
void bench_busy_section(bench_report *report, int threads, bool quick);

#endif
