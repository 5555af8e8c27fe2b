#include "io/checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/internal.h"
#include "io/safetensors.h"

#ifdef HL_REAL_DOUBLE
#define NATIVE_DTYPE HL_DTYPE_F64
#else
#define NATIVE_DTYPE HL_DTYPE_F32
#endif

#define FORMAT_NAME "headlab-checkpoint-1"

/* A view of one slice of an optimizer state block, shaped as parameter t. */
static hl_tensor state_view(const hl_params *params, const hl_tensor *t, hl_real *block)
{
    hl_tensor v = *t;
    v.data = block + (t->data - hl_params_values(params));
    v.grad = NULL;
    return v;
}

static void state_name(char *buf, size_t size, char which, const char *param)
{
    snprintf(buf, size, "optim.%c.%s", which, param);
}

/* Whether tensor i has a second moment: the tensors AdamW updates. */
static bool has_v(const hl_optim *opt, size_t i)
{
    return opt->v && hl_optim_tensor_kind(opt, i) == HL_OPTIM_ADAMW;
}

/* The optimizer's kinds, its groups' joined by '+' ("adamw", "adamw+muon"). */
static void kinds_format(const hl_optim *opt, char *buf, size_t size)
{
    buf[0] = 0;
    for (int k = 0; k < opt->n_groups; k++)
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", k ? "+" : "",
                 hl_optim_kind_name(opt->cfg[k].kind));
}

static void rng_format(const hl_rng *rng, char *buf, size_t size)
{
    snprintf(buf, size, "%016" PRIx64 "%016" PRIx64 "%016" PRIx64 "%016" PRIx64, rng->s[0],
             rng->s[1], rng->s[2], rng->s[3]);
}

/* 64 hex digits, nothing else (strtoull alone would take a sign or spaces),
 * and not all zero: the generator never leaves the zero state. */
static bool rng_parse(const char *text, hl_rng *rng)
{
    if (!text || strlen(text) != 64 || strspn(text, "0123456789abcdefABCDEF") != 64)
        return false;
    uint64_t any = 0;
    for (int i = 0; i < 4; i++) {
        char part[17];
        memcpy(part, text + 16 * i, 16);
        part[16] = '\0';
        rng->s[i] = strtoull(part, NULL, 16);
        any |= rng->s[i];
    }
    return any != 0;
}

/* A count written by the save: decimal digits only, all of the text, in range
 * (strtoll alone would take a sign, spaces, an empty string and junk after). */
static bool count_parse(const char *text, int64_t *out)
{
    if (!text || !*text || strspn(text, "0123456789") != strlen(text))
        return false;
    errno = 0;
    long long v = strtoll(text, NULL, 10);
    if (errno)
        return false;
    *out = v;
    return true;
}

/* The "optim" metadata, "<kinds> <step>" as the save writes it. */
static bool optim_parse(const char *text, char kinds[64], int64_t *step)
{
    const char *space = text ? strchr(text, ' ') : NULL;
    if (!space || space == text || space - text >= 64)
        return false;
    memcpy(kinds, text, (size_t)(space - text));
    kinds[space - text] = '\0';
    return count_parse(space + 1, step);
}

static hl_status add_params(hl_safetensors_writer *w, const hl_params *params, const hl_optim *opt,
                            hl_error *err)
{
    for (size_t i = 0; i < hl_params_n_tensors(params); i++) {
        const hl_tensor *t = hl_params_tensor(params, i);
        if (hl_safetensors_writer_add(w, t->name, t, NATIVE_DTYPE, err) != HL_OK)
            return err->status;
        if (!opt)
            continue;
        char name[HL_NAME_MAX + 16];
        hl_tensor m = state_view(params, t, opt->m);
        state_name(name, sizeof name, 'm', t->name);
        if (hl_safetensors_writer_add(w, name, &m, NATIVE_DTYPE, err) != HL_OK)
            return err->status;
        if (has_v(opt, i)) {
            hl_tensor v = state_view(params, t, opt->v);
            state_name(name, sizeof name, 'v', t->name);
            if (hl_safetensors_writer_add(w, name, &v, NATIVE_DTYPE, err) != HL_OK)
                return err->status;
        }
    }
    return HL_OK;
}

hl_status hl_checkpoint_save(const char *path, const hl_params *params, const hl_optim *opt,
                             int64_t step, const hl_checkpoint_rng *rngs, int n_rngs,
                             const hl_checkpoint_meta *meta, int n_meta, hl_error *err)
{
    hl_safetensors_writer *w = hl_safetensors_writer_new();
    if (!w)
        return hl_error_set(err, HL_ERR_NOMEM, "checkpoint: out of memory");
    char text[128];
    hl_status s = add_params(w, params, opt, err);
    if (s == HL_OK)
        s = hl_safetensors_writer_set_metadata(w, "format", FORMAT_NAME, err);
    snprintf(text, sizeof text, "%" PRId64, step);
    if (s == HL_OK)
        s = hl_safetensors_writer_set_metadata(w, "step", text, err);
    if (s == HL_OK && opt) {
        char kinds[64];
        kinds_format(opt, kinds, sizeof kinds);
        snprintf(text, sizeof text, "%s %" PRId64, kinds, opt->step);
        s = hl_safetensors_writer_set_metadata(w, "optim", text, err);
    }
    for (int i = 0; i < n_rngs && s == HL_OK; i++) {
        char key[96];
        snprintf(key, sizeof key, "rng.%s", rngs[i].name);
        rng_format(rngs[i].rng, text, sizeof text);
        s = hl_safetensors_writer_set_metadata(w, key, text, err);
    }
    for (int i = 0; i < n_meta && s == HL_OK; i++)
        s = hl_safetensors_writer_set_metadata(w, meta[i].key, meta[i].value, err);
    if (s == HL_OK)
        s = hl_safetensors_writer_save(w, path, err);
    hl_safetensors_writer_free(w);
    return s;
}

static hl_status check_all(const hl_safetensors *f, const char *path, hl_params *params,
                           hl_optim *opt, hl_error *err)
{
    const char *format = hl_safetensors_metadata(f, "format");
    if (!format || strcmp(format, FORMAT_NAME) != 0)
        return hl_error_set(err, HL_ERR_FORMAT, "checkpoint %s: not a headlab checkpoint "
                            "(metadata format is %s)", path, format ? format : "missing");
    /* Every tensor the load will copy must be there, of the right shape,
     * with values it may hold, before anything is overwritten. */
    char what[512];
    snprintf(what, sizeof what, "checkpoint %s", path);
    for (size_t i = 0; i < hl_params_n_tensors(params); i++) {
        const hl_tensor *t = hl_params_tensor(params, i);
        char name[HL_NAME_MAX + 16];
        if (hl_io_check_tensor(f, what, t->name, t, HL_IO_FINITE, err) != HL_OK)
            return err->status;
        state_name(name, sizeof name, 'm', t->name);
        if (opt && hl_io_check_tensor(f, what, name, t, HL_IO_FINITE, err) != HL_OK)
            return err->status;
        state_name(name, sizeof name, 'v', t->name);
        if (opt && has_v(opt, i) &&
            hl_io_check_tensor(f, what, name, t, HL_IO_SECOND_MOMENT, err) != HL_OK)
            return err->status;
    }
    /* A bigger model's checkpoint (more layers) holds all of this one's
     * tensors: what is left over tells it apart. */
    return hl_io_check_no_extra(f, what, params, err);
}

hl_status hl_checkpoint_load(const char *path, hl_params *params, hl_optim *opt, int64_t *step,
                             const hl_checkpoint_rng *rngs, int n_rngs, hl_error *err)
{
    hl_safetensors *f = NULL;
    if (hl_safetensors_read(path, &f, err) != HL_OK)
        return err->status;
    const char *step_text = hl_safetensors_metadata(f, "step");
    const char *optim_text = hl_safetensors_metadata(f, "optim");
    int64_t saved_step = 0, optim_step = 0;
    char kinds[64] = "", saved_kinds[64] = "";
    if (opt)
        kinds_format(opt, kinds, sizeof kinds);
    hl_status s = HL_OK;
    if (opt && optim_text && !optim_parse(optim_text, saved_kinds, &optim_step))
        s = hl_error_set(err, HL_ERR_FORMAT, "checkpoint %s: metadata \"optim\" is \"%.60s\", "
                         "not \"<kinds> <step>\" with a whole step >= 0", path, optim_text);
    /* The kinds first: another optimizer's state has other tensors. */
    if (s == HL_OK && opt && optim_text && strcmp(kinds, saved_kinds))
        s = hl_error_set(err, HL_ERR_ARG, "checkpoint %s: its optimizer state is %s's, the "
                         "optimizer is %s", path, saved_kinds, kinds);
    /* Before the tensors: a model file given as a checkpoint has none of the
     * optimizer's, and this says why. */
    if (s == HL_OK && opt && !optim_text)
        s = hl_error_set(err, HL_ERR_FORMAT, "checkpoint %s: no optimizer state", path);
    if (s == HL_OK)
        s = check_all(f, path, params, opt, err);
    if (s == HL_OK && !step_text)
        s = hl_error_set(err, HL_ERR_FORMAT, "checkpoint %s: metadata \"step\" is missing", path);
    else if (s == HL_OK && !count_parse(step_text, &saved_step))
        s = hl_error_set(err, HL_ERR_FORMAT, "checkpoint %s: metadata \"step\" is \"%.60s\", "
                         "not a whole number >= 0", path, step_text);
    hl_rng parsed[8];
    bool there[8] = {false};
    for (int i = 0; i < n_rngs && s == HL_OK; i++) {
        char key[96];
        snprintf(key, sizeof key, "rng.%s", rngs[i].name);
        const char *text = hl_safetensors_metadata(f, key);
        if (i >= 8)
            s = hl_error_set(err, HL_ERR_ARG, "checkpoint %s: more than 8 RNG states", path);
        else if (!text && !rngs[i].found)
            s = hl_error_set(err, HL_ERR_FORMAT, "checkpoint %s: metadata \"%s\" is missing",
                             path, key);
        else if (text && !(there[i] = rng_parse(text, &parsed[i])))
            s = hl_error_set(err, HL_ERR_FORMAT, "checkpoint %s: metadata \"%s\" is \"%.70s\", "
                             "not 64 hex digits of a nonzero state", path, key, text);
    }
    /* Everything is there: now overwrite. */
    for (size_t i = 0; i < hl_params_n_tensors(params) && s == HL_OK; i++) {
        hl_tensor *t = hl_params_tensor(params, i);
        s = hl_safetensors_copy_to(f, t->name, t, err);
        char name[HL_NAME_MAX + 16];
        if (s == HL_OK && opt) {
            hl_tensor m = state_view(params, t, opt->m);
            state_name(name, sizeof name, 'm', t->name);
            s = hl_safetensors_copy_to(f, name, &m, err);
        }
        if (s == HL_OK && opt && has_v(opt, i)) {
            hl_tensor v = state_view(params, t, opt->v);
            state_name(name, sizeof name, 'v', t->name);
            s = hl_safetensors_copy_to(f, name, &v, err);
        }
    }
    if (s == HL_OK) {
        if (step)
            *step = saved_step;
        if (opt)
            opt->step = optim_step;
        for (int i = 0; i < n_rngs; i++) {
            if (there[i])
                *rngs[i].rng = parsed[i];
            if (rngs[i].found)
                *rngs[i].found = there[i];
        }
    }
    hl_safetensors_free(f);
    return s;
}

hl_status hl_checkpoint_resume(const char *path, hl_params *params, hl_optim *opt,
                               int64_t total_steps, int64_t *step, const hl_checkpoint_rng *rngs,
                               int n_rngs, hl_error *err)
{
    if (hl_checkpoint_load(path, params, opt, step, rngs, n_rngs, err) != HL_OK)
        return err->status;
    if (*step >= total_steps)
        return hl_error_set(err, HL_ERR_ARG,
                            "%s: checkpoint is at step %lld; nothing to train (--steps %lld is "
                            "the new total)",
                            path, (long long)*step, (long long)total_steps);
    return HL_OK;
}
