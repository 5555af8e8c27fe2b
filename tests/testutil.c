#include "tests/testutil.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#ifdef _OPENMP
#include <omp.h>
#endif

hl_tensor *tu_random(const char *name, int rank, const int *shape, bool requires_grad,
                     uint64_t seed, double lo, double hi)
{
    hl_tensor *t = hl_tensor_new(name, rank, shape, requires_grad);
    ck_assert_ptr_nonnull(t);
    hl_rng rng;
    hl_rng_seed(&rng, seed);
    hl_init_uniform(t, &rng, lo, hi);
    return t;
}

static void log_report(const char *what, const hl_gradcheck_report *r)
{
    const char *path = getenv("HL_GRADCHECK_LOG");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f)
        return;
    for (int k = 0; k < r->n_inputs; k++)
        if (r->inputs[k].checked)
            fprintf(f, "%s %s %s %s %.3e %.3e\n", HL_REAL_NAME, what, r->inputs[k].name,
                    r->inputs[k].shape, r->inputs[k].max_abs_err, r->inputs[k].max_rel_err);
    fclose(f);
}

void tu_gradcheck(const char *what, hl_gradcheck_fn fn, void *ctx, hl_tensor *const *inputs,
                  int n_inputs)
{
    hl_graph *g = hl_graph_new(0);
    ck_assert_ptr_nonnull(g);
    hl_gradcheck_report r;
    hl_status s = hl_gradcheck(g, fn, ctx, inputs, n_inputs, NULL, &r);
    ck_assert_msg(s == HL_OK, "%s: gradcheck could not run: %s", what, hl_graph_message(g));
    log_report(what, &r);
    for (int k = 0; k < r.n_inputs; k++) {
        const hl_gradcheck_input_report *in = &r.inputs[k];
        ck_assert_msg(in->passed || !in->checked,
                      "%s: gradient of %s %s wrong at element %zu: analytic %.8g, numeric %.8g "
                      "(max abs err %.3g, max rel err %.3g)",
                      what, in->name, in->shape, in->worst_index, in->worst_analytic,
                      in->worst_numeric, in->max_abs_err, in->max_rel_err);
    }
    ck_assert(r.passed);
    hl_graph_free(g);
}

hl_real *tu_forward_backward(hl_gradcheck_fn fn, void *ctx, hl_tensor *const *inputs,
                             int n_inputs, size_t *n_values)
{
    hl_graph *g = hl_graph_new(0);
    ck_assert_ptr_nonnull(g);
    for (int k = 0; k < n_inputs; k++)
        hl_tensor_zero_grad(inputs[k]);
    hl_tensor *y = fn(g, inputs, ctx);
    ck_assert_msg(!hl_graph_failed(g), "%s", hl_graph_message(g));
    hl_real *grad_out = malloc(y->numel * sizeof *grad_out);
    hl_rng rng;
    hl_rng_seed(&rng, 99);
    for (size_t i = 0; i < y->numel; i++)
        grad_out[i] = (hl_real)hl_rng_normal(&rng);
    if (y->requires_grad)
        ck_assert_int_eq(hl_graph_backward_from(g, y, grad_out), HL_OK);
    size_t n = y->numel;
    for (int k = 0; k < n_inputs; k++)
        if (inputs[k]->grad)
            n += inputs[k]->numel;
    hl_real *all = malloc(n * sizeof *all);
    memcpy(all, y->data, y->numel * sizeof *all);
    size_t at = y->numel;
    for (int k = 0; k < n_inputs; k++)
        if (inputs[k]->grad) {
            memcpy(all + at, inputs[k]->grad, inputs[k]->numel * sizeof *all);
            at += inputs[k]->numel;
        }
    free(grad_out);
    hl_graph_free(g);
    *n_values = n;
    return all;
}

void tu_check_threads_bitwise(const char *what, hl_gradcheck_fn fn, void *ctx,
                              hl_tensor *const *inputs, int n_inputs)
{
#ifdef _OPENMP
    int saved = omp_get_max_threads();
    size_t n1, n2;
    omp_set_num_threads(1);
    hl_real *one = tu_forward_backward(fn, ctx, inputs, n_inputs, &n1);
    omp_set_num_threads(2);
    hl_real *two = tu_forward_backward(fn, ctx, inputs, n_inputs, &n2);
    omp_set_num_threads(saved);
    ck_assert_uint_eq(n1, n2);
    ck_assert_msg(memcmp(one, two, n1 * sizeof *one) == 0,
                  "%s: results differ between 1 and 2 threads", what);
    free(one);
    free(two);
#else
    (void)what, (void)fn, (void)ctx, (void)inputs, (void)n_inputs;
#endif
}

void tu_check_sets_bitwise(const char *what, hl_gradcheck_fn fn, void *ctx,
                           hl_tensor *const *inputs, int n_inputs)
{
    const hl_isa before = hl_isa_active();
    hl_error err = {0};
    ck_assert_int_eq(hl_isa_use(HL_ISA_PORTABLE, &err), HL_OK);
    size_t n_ref;
    hl_real *ref = tu_forward_backward(fn, ctx, inputs, n_inputs, &n_ref);
    for (int i = HL_ISA_PORTABLE + 1; i < HL_ISA_COUNT; i++) {
        if (!hl_isa_supported((hl_isa)i))
            continue;
        ck_assert_int_eq(hl_isa_use((hl_isa)i, &err), HL_OK);
        size_t n;
        hl_real *got = tu_forward_backward(fn, ctx, inputs, n_inputs, &n);
        ck_assert_uint_eq(n, n_ref);
        for (size_t j = 0; j < n; j++)
            ck_assert_msg(!memcmp(&ref[j], &got[j], sizeof *got),
                          "%s: kernel sets portable and %s differ at %zu: %.9g vs %.9g", what,
                          hl_isa_name((hl_isa)i), j, (double)ref[j], (double)got[j]);
        free(got);
    }
    free(ref);
    ck_assert_int_eq(hl_isa_use(before, &err), HL_OK);
}

void tu_expect_error(hl_graph *g, const hl_tensor *result, ...)
{
    ck_assert_msg(hl_graph_failed(g), "expected an error, got none");
    ck_assert_msg(hl_tensor_is_poison(result), "expected the poisoned tensor after an error");
    va_list ap;
    va_start(ap, result);
    for (const char *frag = va_arg(ap, const char *); frag; frag = va_arg(ap, const char *))
        ck_assert_msg(strstr(hl_graph_message(g), frag), "message \"%s\" lacks \"%s\"",
                      hl_graph_message(g), frag);
    va_end(ap);
}

void tu_assert_close(const char *what, const hl_real *a, const hl_real *b, size_t n, double tol)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs((double)a[i] - (double)b[i]) <= tol,
                      "%s: element %zu: %.9g vs %.9g (tolerance %.3g)", what, i, (double)a[i],
                      (double)b[i], tol);
}

int tu_run(const char *command, char *out, size_t size)
{
    char full[4096];
    snprintf(full, sizeof full, "%s 2>&1", command);
    FILE *p = popen(full, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = 0;
    for (size_t got; n + 1 < size && (got = fread(out + n, 1, size - 1 - n, p)) > 0;)
        n += got;
    out[n] = '\0';
    char sink[256];
    while (fread(sink, 1, sizeof sink, p) > 0) {
    }
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void tu_run_ok(const char *command)
{
    char out[8192];
    int rc = tu_run(command, out, sizeof out);
    ck_assert_msg(rc == 0, "%s: exit %d: %s", command, rc, out);
}

void tu_make_dir(char dir[TU_DIR_MAX], const char *name)
{
    ck_assert_int_lt(snprintf(dir, TU_DIR_MAX, "/tmp/hl_%s_XXXXXX", name), TU_DIR_MAX);
    ck_assert_msg(mkdtemp(dir), "%s: %s", dir, strerror(errno));
}

void tu_remove_dir(const char *dir)
{
    char command[TU_DIR_MAX + 16];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(command), 0);
}

bool tu_same_file(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *x = hl_fs_read_file(a, &na), *y = hl_fs_read_file(b, &nb);
    bool same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

void tu_set_metadata(const char *from, const char *to, const char *const *keys, int n_keys,
                     const char *key, const char *value)
{
    hl_error err = {0};
    hl_safetensors *f = NULL;
    ck_assert_msg(hl_safetensors_read(from, &f, &err) == HL_OK, "%s", err.message);
    hl_safetensors_writer *w = hl_safetensors_writer_new();
    for (size_t i = 0; i < hl_safetensors_count(f); i++) {
        const hl_safetensors_entry_info *e = hl_safetensors_entry(f, i);
        ck_assert_msg(hl_safetensors_writer_add_raw(w, e->name, e->dtype, e->rank, e->shape,
                                                    e->data, &err) == HL_OK,
                      "%s", err.message);
    }
    for (int k = 0; k < n_keys; k++) {
        const char *v = hl_safetensors_metadata(f, keys[k]);
        if (v && strcmp(keys[k], key))
            ck_assert(hl_safetensors_writer_set_metadata(w, keys[k], v, &err) == HL_OK);
    }
    ck_assert(hl_safetensors_writer_set_metadata(w, key, value, &err) == HL_OK);
    ck_assert_msg(hl_safetensors_writer_save(w, to, &err) == HL_OK, "%s", err.message);
    hl_safetensors_writer_free(w);
    hl_safetensors_free(f);
}
