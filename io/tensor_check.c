/* Checks a loader makes of a file's tensor before taking it: see internal.h. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/internal.h"

static bool accepted(hl_real x, hl_io_values rule)
{
    switch (rule) {
    case HL_IO_FINITE: return isfinite(x);
    case HL_IO_SECOND_MOMENT: return x >= 0; /* NaN compares false */
    case HL_IO_ADDITIVE_MASK: return x < (hl_real)INFINITY;
    }
    return false;
}

size_t hl_io_first_refused(const hl_safetensors_entry_info *e, hl_io_values rule)
{
    const size_t n = e->nbytes / hl_dtype_size(e->dtype);
    for (size_t i = 0; i < n; i++)
        if (!accepted((hl_real)hl_safetensors_value(e, i), rule))
            return i;
    return n;
}

hl_status hl_io_check_values(const hl_safetensors_entry_info *e, const char *what,
                             hl_io_values rule, hl_error *err)
{
    if (!e->data && e->nbytes) /* hl_safetensors_read_header's */
        return hl_error_set(err, HL_ERR_ARG, "%s%stensor \"%s\": only the header was read",
                            what ? what : "", what ? ": " : "", e->name);
    const size_t i = hl_io_first_refused(e, rule);
    if (i == e->nbytes / hl_dtype_size(e->dtype))
        return HL_OK;
    const double x = hl_safetensors_value(e, i);
    char value[48];
    if (isnan(x))
        snprintf(value, sizeof value, "NaN");
    else if (isinf(x))
        snprintf(value, sizeof value, "%sinfinity", x < 0 ? "-" : "");
    else if (isfinite((hl_real)x))
        snprintf(value, sizeof value, "%g", x);
    else
        snprintf(value, sizeof value, "%g, beyond float's range,", x);
    static const char *const why[] = {
        [HL_IO_FINITE] = "values must be finite",
        [HL_IO_SECOND_MOMENT] = "a second moment is >= 0 and not NaN",
        [HL_IO_ADDITIVE_MASK] = "an additive mask holds finite values or -inf",
    };
    return hl_error_set(err, HL_ERR_FORMAT, "%s%stensor \"%s\" holds %s at element %zu (%s)",
                        what ? what : "", what ? ": " : "", e->name, value, i, why[rule]);
}

hl_status hl_io_check_tensor(const hl_safetensors *f, const char *what, const char *name,
                             const hl_tensor *t, hl_io_values rule, hl_error *err)
{
    const char *sep = what ? ": " : "";
    const char *prefix = what ? what : "";
    const hl_safetensors_entry_info *e = hl_safetensors_find(f, name);
    if (!e)
        return hl_error_set(err, HL_ERR_FORMAT, "%s%sno tensor \"%s\"", prefix, sep, name);
    bool same = e->rank == t->rank || (e->rank == 0 && t->rank == 1 && t->shape[0] == 1);
    for (int d = 0; same && d < e->rank; d++)
        same = e->shape[d] == t->shape[d];
    if (!same) {
        char fs[HL_ST_SHAPE_STR_MAX], ts[HL_SHAPE_STR_MAX];
        return hl_error_set(err, HL_ERR_SHAPE, "%s%stensor \"%s\" has shape %s in the file, %s "
                            "in the model", prefix, sep, name, hl_safetensors_shape_str(e, fs),
                            hl_shape_str(t, ts));
    }
    return hl_io_check_values(e, what, rule, err);
}

/* Whether name is a parameter's or one's optimizer state (optim.m.<name>,
 * optim.v.<name>). */
static bool expected_name(const hl_params *params, const char *name)
{
    if (!strncmp(name, "optim.m.", 8) || !strncmp(name, "optim.v.", 8))
        if (hl_params_find(params, name + 8))
            return true;
    return hl_params_find(params, name) != NULL;
}

hl_status hl_io_check_no_extra(const hl_safetensors *f, const char *what,
                               const hl_params *params, hl_error *err)
{
    for (size_t i = 0; i < hl_safetensors_count(f); i++) {
        const char *name = hl_safetensors_entry(f, i)->name;
        if (!expected_name(params, name))
            return hl_error_set(err, HL_ERR_FORMAT, "%s%stensor \"%s\" is not in the model "
                                "(a file of another model?)", what ? what : "", what ? ": " : "",
                                name);
    }
    return HL_OK;
}
