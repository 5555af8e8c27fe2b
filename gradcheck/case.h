/*
 * case.h: what a file of gradient checks (gradcheck/cases/NAME.c, one per op
 * file or module) is written with. Each file holds its cases' builders and
 * setups and one table, ended by {0}:
 *
 *     static hl_tensor *build_relu2(hl_graph *g, hl_tensor *const *in, void *ctx)
 *     {
 *         (void)ctx;
 *         return hl_relu2(g, in[0]);
 *     }
 *
 *     HL_GRADCHECK_CASES(relu2) = {
 *         {.name = "relu2", .fn = build_relu2, .n_inputs = 1,
 *          .in = {IN_RANGE("x", 3, 0.2, 3, 3, 1, 17)}},
 *         {0},
 *     };
 *
 * The Makefile finds the files and lists them to gradcheck/cases.c, which
 * joins their tables into the catalogue of gradcheck/cases.h: a new file needs
 * no registration. Internal to gradcheck/.
 */
#ifndef HL_GRADCHECK_CASE_H
#define HL_GRADCHECK_CASE_H

#include <math.h>
#include <string.h>

#include "gradcheck/cases.h"
#include "models/gpt.h"
#include "models/mha.h"
#include "ops/ops.h"

#define MAX_OWNED (HL_GRADCHECK_MAX_INPUTS + 1)
#define MAX_IDS 64
#define LN_EPS ((hl_real)1e-5)

/* Everything a case owns; its functions get it as ctx. */
struct hl_gradcheck_case_data {
    hl_tensor *owned[MAX_OWNED]; /* heap tensors: inputs, and a mask */
    int n_owned;
    const hl_tensor *mask;       /* mask cases: padding, blocked, additive bias or doc ids */
    int flags;                   /* matmul transpose flags */
    hl_real p;                   /* scale factor, dropout probability */
    int32_t ids[MAX_IDS];        /* embedding ids, or the gpt's tokens */
    int32_t targets[MAX_IDS];    /* cross-entropy targets */
    int B, T;                    /* the gpt's batch */
    hl_params *params;           /* mha cases */
    hl_mha mha;
    hl_mha_masks masks;
    hl_tensor *gate; /* (H) per-head gate of the MHA run, or NULL */
    hl_gpt *gpt;
};

typedef hl_gradcheck_case_data case_data;

/* One input of a case: its shape, drawn uniform in [lo, hi). */
typedef struct {
    const char *name;
    int rank;
    int shape[HL_MAX_RANK];
    double lo, hi;
} input_spec;

#define IN(name, rank, ...) {name, rank, {__VA_ARGS__}, -1, 1}
#define IN_RANGE(name, rank, lo, hi, ...) {name, rank, {__VA_ARGS__}, lo, hi}

/* Sets up what a case needs beyond its listed inputs (a mask, ids, a module). */
typedef hl_status (*setup_fn)(case_data *d, hl_gradcheck_case *c, hl_rng *rng, hl_error *err);

/* One case of a file's table. */
typedef struct {
    const char *name;
    hl_gradcheck_fn fn;
    int n_inputs;
    input_spec in[4];
    setup_fn setup;
    int flags;  /* matmul */
    double p;   /* scale factor, dropout probability */
} case_entry;

/* The table of gradcheck/cases/NAME.c, declared and defined. */
#define HL_GRADCHECK_CASES(file)                        \
    extern const case_entry hl_gradcheck_cases_##file[]; \
    const case_entry hl_gradcheck_cases_##file[]

/* A heap tensor owned by d, uniform in [lo, hi); NULL with err set when d
 * owns too many or memory runs out. */
hl_tensor *hl_gradcheck_new_tensor(case_data *d, const char *name, int rank, const int *shape,
                                   bool requires_grad, hl_rng *rng, double lo, double hi,
                                   hl_error *err);

/* d->mask = doc_ids (2,7): batch 0 three documents (0,0,1,1,1,2,2), batch 1
 * two, for the document mask and the recipe's GPT. */
hl_status hl_gradcheck_setup_documents(case_data *d, hl_gradcheck_case *c, hl_rng *rng,
                                       hl_error *err);

#endif
