/*
 * heads.h: what the files of build/heads share: the parsed options, the
 * model under study with its evaluation set, and the helpers every command
 * uses. One file per command: ablate.c, importance.c, prune.c, curve.c; detect.c
 * holds scores, maps, circuits and report; patch.c patch, paths, attrib and
 * logit-lens; pretrained.c eval, generate and export.
 */
#ifndef HEADS_PROGRAM_H
#define HEADS_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "report/head_files.h"
#include "headlab.h"

#define FINETUNE_SEED 777 /* fine-tuning data, apart from the evaluation set */

/* The patching commands come last (options.c tests cmd >= CMD_PATCH). */
typedef enum { CMD_ABLATE, CMD_IMPORTANCE, CMD_PRUNE, CMD_SCORES, CMD_MAPS, CMD_CIRCUITS,
               CMD_REPORT, CMD_EVAL, CMD_GENERATE, CMD_EXPORT, CMD_PATCH, CMD_PATHS, CMD_ATTRIB,
               CMD_LOGIT_LENS, CMD_COUNT } command;

typedef struct {
    command cmd;
    const char *model, *data, *finetune_data, *out, *heads, *text;
    const char *token_ids; /* eval: sequences of ids, one a line */
    const char *prompt;    /* generate */
    int tokens, top_k;     /* generate */
    double temperature;    /* generate */
    /* patch, paths, attrib, logit-lens; pairs: a file of clean/corrupted pairs */
    const char *act, *clean, *corrupt, *positions, *metric, *pairs;
    int seed, sequences, windows, batch, threads, finetune, timing_runs, offset;
    bool curve, per_position, metric_diff, repeat;
    bool ignore_eos;      /* generate: on past the model's end-of-sequence token */
    bool sequences_given; /* --sequences: also the probe's size for a text model */
    double step_fraction, lr;
} options;

/* The model, what its file says, and the set it is evaluated on. */
typedef struct {
    hl_gpt *m;
    hl_gpt_meta meta;
    hl_eval_set *set;
    bool toy;
    int32_t *text;       /* charlm: the --data file's tokens */
    size_t text_tokens;
    char what[160];      /* the evaluation set, in words */
} study;

/* Prints "heads: ..." and exits 2 (bad input: nothing written). */
_Noreturn void heads_bad_input(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "heads: <message>" and exits 2 for a file that cannot be read or
 * written (HL_ERR_IO), 1 for another failure while running. */
_Noreturn void heads_fail(const hl_error *err);
/* Prints "heads: <message>" and exits 1 when err is out of memory, else 2
 * (the input did not fit). */
_Noreturn void heads_refuse(const hl_error *err);
/* Prints "heads: out of memory" and exits 1. */
_Noreturn void heads_out_of_memory(void);

/* Loads the model and builds its evaluation set; exits 2 on bad input. */
study heads_open_study(const options *o);
void heads_close_study(study *s);
/* Creates --out once the inputs are known to be good, before the work. */
void heads_make_out_dir(const options *o);
/* The whole file as tokens of vocab (*n of them; free them); exits 2 when it
 * cannot be read. */
int32_t *heads_read_tokens(const char *path, const hl_vocab *vocab, size_t *n);

/* A text output built in memory and written whole at the end (files/atomic.h),
 * so a run that fails leaves the old file. */
typedef struct {
    char *text;
    size_t size;
    FILE *f;
} text_out;

FILE *heads_text_begin(text_out *t);
/* 0, or with a message the exit status: 2 when the file cannot be written,
 * 1 out of memory. */
int heads_text_save(text_out *t, const char *dir, const char *name);
/* heads_text_save, exiting with its status when the file was not written. */
void heads_text_save_or_exit(text_out *t, const char *dir, const char *name);

int heads_total(const hl_gpt *m);
/* --heads "1.3,0.2" (indices as trained, as every command names heads) ->
 * the heads of m; exits 2 on a bad list or a head m does not have. */
hl_head_set heads_parse_list(const hl_gpt *m, const char *list);
void heads_print_model(const study *s, const char *path);
void heads_print_result(const hl_eval_set *set, const char *what, const hl_eval_result *r);

/* Median seconds of a forward pass over the whole set (runs timed, at most
 * 1000), after one untimed pass that sizes the graph's arena. */
double heads_forward_seconds(const hl_gpt *m, const hl_eval_set *set, int runs, hl_error *err);

/* A head with its importance. */
typedef struct {
    int layer, head; /* current index */
    double norm, raw;
} scored_head;

/* Every current head with its scores, most important first; returns the count. */
int heads_rank(const study *s, const double *raw, const double *norm, scored_head *out);

int heads_run_ablate(const options *o, study *s);
int heads_run_importance(const options *o, study *s);
int heads_run_prune_once(const options *o, study *s);
int heads_run_prune_curve(const options *o, study *s);
/* These load the model themselves (a text model needs no --data for them). */
int heads_run_scores(const options *o);
int heads_run_maps(const options *o);
int heads_run_circuits(const options *o);
int heads_run_report(const options *o);
int heads_run_patch(const options *o);
int heads_run_paths(const options *o);
int heads_run_attrib(const options *o);
int heads_run_logit_lens(const options *o);
/* pretrained.c: a model's loss and logits on ids or a text; text sampled
 * with a key/value cache; a model as a Hugging Face folder. */
int heads_run_eval(const options *o);
int heads_run_generate(const options *o);
int heads_run_export(const options *o);

#endif
