/* Shared test helpers: random inputs, gradient checks, thread-count checks and
 * error-path checks, each failing the current Check test with a message. */
#ifndef HL_TESTUTIL_H
#define HL_TESTUTIL_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>

#include "headlab.h"

/* Every suite's constructor, Suite *<name>_suite(void) of tests/test_<name>.c:
 * the Makefile lists the files as HL_TEST_SUITES(X) = X(arena) X(attention) ... */
#ifndef HL_TEST_SUITES
#error "HL_TEST_SUITES(X) lists the suites: build with make"
#endif
#define HL_DECLARE_SUITE(name) Suite *name##_suite(void);
HL_TEST_SUITES(HL_DECLARE_SUITE)

/* A heap tensor with values uniform in [lo, hi), from a fixed seed. */
hl_tensor *tu_random(const char *name, int rank, const int *shape, bool requires_grad,
                     uint64_t seed, double lo, double hi);

/* Gradient check of fn with the build's default tolerances (see
 * hl_gradcheck_defaults); fails the test with the worst element on failure.
 * When HL_GRADCHECK_LOG names a file, appends one line per input:
 * "<real> <what> <input> <shape> <max_abs> <max_rel>". */
void tu_gradcheck(const char *what, hl_gradcheck_fn fn, void *ctx, hl_tensor *const *inputs,
                  int n_inputs);

/* Runs fn forward and backward with a fixed random output gradient on the
 * current thread count; returns, on the heap, the output followed by the
 * gradient of every input that has one, and their count in *n_values. */
hl_real *tu_forward_backward(hl_gradcheck_fn fn, void *ctx, hl_tensor *const *inputs,
                             int n_inputs, size_t *n_values);

/* Runs fn forward and backward (with fixed random output gradients) with 1 and
 * with 2 OpenMP threads, and fails unless the output and every input gradient
 * are bitwise identical. */
void tu_check_threads_bitwise(const char *what, hl_gradcheck_fn fn, void *ctx,
                              hl_tensor *const *inputs, int n_inputs);

/* Runs fn forward and backward as tu_check_threads_bitwise does on every
 * kernel set the CPU supports, and fails unless each gives the portable set's
 * bits: for an op whose kernels round the same with and without FMA. */
void tu_check_sets_bitwise(const char *what, hl_gradcheck_fn fn, void *ctx,
                           hl_tensor *const *inputs, int n_inputs);

/* Fails unless result is poisoned and the graph's message contains every
 * given fragment (a NULL-terminated list). */
void tu_expect_error(hl_graph *g, const hl_tensor *result, ...);

/* Runs a shell command with stderr joined to stdout, keeps the first size-1
 * bytes of its output in out (NUL-terminated) and returns its exit status
 * (-1 when it did not exit normally). */
int tu_run(const char *command, char *out, size_t size);

/* tu_run, failing the test with the command's output unless it exits 0. */
void tu_run_ok(const char *command);

/* Room for the path tu_make_dir writes. */
#define TU_DIR_MAX 64

/* A fresh folder /tmp/hl_<name>_XXXXXX, its path written to dir; the test
 * fails when it cannot be made. */
void tu_make_dir(char dir[TU_DIR_MAX], const char *name);

/* Removes folder dir and everything in it; the test fails unless that
 * worked. */
void tu_remove_dir(const char *dir);

/* Whether two files exist and hold the same bytes. */
bool tu_same_file(const char *a, const char *b);

/* Writes the safetensors file `from` again as `to` (which may be the same
 * path): every tensor byte for byte, the metadata keys[0..n_keys) it holds,
 * and metadata `key` set to value. */
void tu_set_metadata(const char *from, const char *to, const char *const *keys, int n_keys,
                     const char *key, const char *value);

/* Fails unless |a[i] - b[i]| <= tol for all i. */
void tu_assert_close(const char *what, const hl_real *a, const hl_real *b, size_t n, double tol);

#endif
