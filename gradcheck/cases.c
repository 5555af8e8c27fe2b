/* The gradient-check catalogue: see cases.h. Its cases are the tables of
 * gradcheck/cases/NAME.c (gradcheck/case.h), in the order of the file names. */
#include "gradcheck/cases.h"

#include <stdlib.h>
#include <string.h>

#include "gradcheck/case.h"

/* The Makefile lists every gradcheck/cases/NAME.c as X(NAME). */
#ifndef HL_GRADCHECK_FILES
#error "HL_GRADCHECK_FILES(X) lists gradcheck/cases/: build with make"
#endif
#define DECLARE(file) extern const case_entry hl_gradcheck_cases_##file[];
HL_GRADCHECK_FILES(DECLARE)
#define TABLE(file) hl_gradcheck_cases_##file,
static const case_entry *const tables[] = {HL_GRADCHECK_FILES(TABLE)};
#define N_TABLES ((int)(sizeof tables / sizeof tables[0]))

/* Case i of the catalogue, or NULL. */
static const case_entry *entry(int i)
{
    for (int t = 0; t < N_TABLES && i >= 0; t++)
        for (const case_entry *e = tables[t]; e->name; e++)
            if (i-- == 0)
                return e;
    return NULL;
}

/* FNV-1a: each case's seeds come from its name, so adding a case changes no
 * other case's numbers. */
static uint64_t name_seed(const char *name)
{
    uint64_t h = 1469598103934665603u;
    for (const char *s = name; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

int hl_gradcheck_case_count(void)
{
    int n = 0;
    while (entry(n))
        n++;
    return n;
}

const char *hl_gradcheck_case_name(int i)
{
    const case_entry *e = entry(i);
    return e ? e->name : NULL;
}

int hl_gradcheck_case_find(const char *name)
{
    const char *n;
    for (int i = 0; name && (n = hl_gradcheck_case_name(i)); i++)
        if (!strcmp(n, name))
            return i;
    return -1;
}

hl_status hl_gradcheck_case_make(int i, hl_gradcheck_case *c, hl_error *err)
{
    memset(c, 0, sizeof *c);
    const case_entry *e = entry(i);
    if (!e)
        return hl_error_set(err, HL_ERR_ARG, "gradcheck cases: no case %d (there are %d)", i,
                            hl_gradcheck_case_count());
    case_data *d = calloc(1, sizeof *d);
    if (!d)
        return hl_error_set(err, HL_ERR_NOMEM, "gradcheck cases: out of memory");
    *c = (hl_gradcheck_case){.name = e->name, .fn = e->fn, .ctx = d, .data = d};
    d->flags = e->flags;
    d->p = (hl_real)e->p;
    hl_rng rng;
    hl_rng_seed(&rng, name_seed(e->name));
    hl_status s = HL_OK;
    for (int k = 0; k < e->n_inputs && s == HL_OK; k++) {
        const input_spec *in = &e->in[k];
        c->inputs[k] = hl_gradcheck_new_tensor(d, in->name, in->rank, in->shape, true, &rng, in->lo,
                                             in->hi, err);
        s = c->inputs[k] ? HL_OK : err->status;
    }
    c->n_inputs = e->n_inputs;
    if (s == HL_OK && e->setup)
        s = e->setup(d, c, &rng, err);
    if (s != HL_OK)
        hl_gradcheck_case_free(c);
    return s;
}

void hl_gradcheck_case_free(hl_gradcheck_case *c)
{
    case_data *d = c->data;
    if (d) {
        for (int k = 0; k < d->n_owned; k++)
            hl_tensor_free(d->owned[k]);
        hl_params_free(d->params);
        hl_gpt_free(d->gpt);
        free(d);
    }
    memset(c, 0, sizeof *c);
}
