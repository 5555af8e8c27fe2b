/* Tests for ops/smear.c: smeared keys against the formula, within packed
 * documents too, the gradient of keys and alpha, thread independence and
 * errors. */
#include <math.h>
#include <string.h>

#include "ops/internal.h"
#include "tests/testutil.h"

static hl_tensor *build_smear(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    (void)ctx;
    return hl_smear(g, in[0], in[1]);
}

/* ctx: the doc_ids */
static hl_tensor *build_smear_docs(hl_graph *g, hl_tensor *const *in, void *ctx)
{
    return hl_smear_docs(g, in[0], in[1], ctx);
}

/* doc_ids (B,S), a new document every `every` keys of batch b, shifted by b. */
static hl_tensor *doc_ids_new(int B, int S, int every)
{
    hl_tensor *ids = hl_tensor_new("doc_ids", 2, (int[]){B, S}, false);
    for (int b = 0; b < B; b++)
        for (int s = 0; s < S; s++)
            ids->data[(size_t)b * S + s] = (hl_real)((s + b) / every);
    return ids;
}

START_TEST(test_smear_forward)
{
    const int B = 2, H = 3, S = 5, D = 4;
    hl_tensor *k = tu_random("k", 4, (int[]){B, H, S, D}, false, 1, -2, 2);
    hl_tensor *alpha = tu_random("alpha", 1, &H, false, 2, -2, 2);
    hl_graph *g = hl_graph_new(0);
    hl_tensor *y = hl_smear(g, k, alpha);
    ck_assert(!hl_graph_failed(g));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const double w = 1 / (1 + exp(-(double)alpha->data[h]));
            for (int s = 0; s < S; s++)
                for (int d = 0; d < D; d++) {
                    const size_t at = (((size_t)b * H + h) * S + s) * D + d;
                    const double want = s ? w * k->data[at] + (1 - w) * k->data[at - D]
                                          : k->data[at];
                    ck_assert_msg(fabs(y->data[at] - want) <= 1e-6 * (1 + fabs(want)),
                                  "(%d,%d,%d,%d): %g, want %g", b, h, s, d,
                                  (double)y->data[at], want);
                }
        }
    hl_tensor_free(k);
    hl_tensor_free(alpha);
    hl_graph_free(g);
}
END_TEST

/* Packed documents: the first key of each is itself, the rest smeared with
 * their predecessor, as if each document stood alone. */
START_TEST(test_smear_documents)
{
    const int B = 2, H = 2, S = 9, D = 3;
    hl_tensor *k = tu_random("k", 4, (int[]){B, H, S, D}, false, 11, -2, 2);
    hl_tensor *alpha = tu_random("alpha", 1, &H, false, 12, -2, 2);
    hl_tensor *ids = doc_ids_new(B, S, 4);
    hl_graph *g = hl_graph_new(0);
    hl_tensor *y = hl_smear_docs(g, k, alpha, ids);
    ck_assert(!hl_graph_failed(g));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const double w = 1 / (1 + exp(-(double)alpha->data[h]));
            for (int s = 0; s < S; s++) {
                const bool first = s == 0 || (s + b) % 4 == 0;
                for (int d = 0; d < D; d++) {
                    const size_t at = (((size_t)b * H + h) * S + s) * D + d;
                    const double want = first ? k->data[at]
                                              : w * k->data[at] + (1 - w) * k->data[at - D];
                    ck_assert_msg(fabs(y->data[at] - want) <= 1e-6 * (1 + fabs(want)),
                                  "(%d,%d,%d,%d): %g, want %g", b, h, s, d,
                                  (double)y->data[at], want);
                }
            }
        }
    /* One document: hl_smear's bits. */
    hl_tensor *one = hl_tensor_new("doc_ids", 2, (int[]){B, S}, false);
    hl_tensor *plain = hl_smear(g, k, alpha), *same = hl_smear_docs(g, k, alpha, one);
    ck_assert(!memcmp(plain->data, same->data, plain->numel * sizeof *plain->data));
    hl_tensor *in[2] = {tu_random("k", 4, (int[]){B, 3, S, 2}, true, 13, -2, 2),
                        tu_random("alpha", 1, (int[]){3}, true, 14, -1.5, 1.5)};
    tu_gradcheck("smear within documents", build_smear_docs, ids, in, 2);
    hl_tensor *wide[2] = {tu_random("k", 4, (int[]){4, 8, 65, 17}, true, 15, -2, 2),
                          tu_random("alpha", 1, (int[]){8}, true, 16, -1, 1)};
    hl_tensor *wide_ids = doc_ids_new(4, 65, 9);
    tu_check_threads_bitwise("smear within documents", build_smear_docs, wide_ids, wide, 2);
    for (int i = 0; i < 2; i++) {
        hl_tensor_free(in[i]);
        hl_tensor_free(wide[i]);
    }
    hl_tensor_free(wide_ids);
    hl_tensor_free(one);
    hl_tensor_free(ids);
    hl_tensor_free(k);
    hl_tensor_free(alpha);
    hl_graph_free(g);
}
END_TEST

START_TEST(test_smear_gradient)
{
    hl_tensor *in[2] = {tu_random("k", 4, (int[]){2, 3, 5, 3}, true, 3, -2, 2),
                        tu_random("alpha", 1, (int[]){3}, true, 4, -1.5, 1.5)};
    tu_gradcheck("smear", build_smear, NULL, in, 2);
    hl_tensor *one[2] = {tu_random("k", 4, (int[]){1, 1, 1, 2}, true, 5, -2, 2),
                         tu_random("alpha", 1, (int[]){1}, true, 6, -1, 1)};
    tu_gradcheck("smear (S = 1)", build_smear, NULL, one, 2);
    for (int i = 0; i < 2; i++) {
        hl_tensor_free(in[i]);
        hl_tensor_free(one[i]);
    }
}
END_TEST

START_TEST(test_smear_threads)
{
    hl_tensor *in[2] = {tu_random("k", 4, (int[]){4, 8, 65, 17}, true, 7, -2, 2),
                        tu_random("alpha", 1, (int[]){8}, true, 8, -1, 1)};
    ck_assert(in[0]->numel >= HL_PARALLEL_MIN_WORK);
    tu_check_threads_bitwise("smear", build_smear, NULL, in, 2);
    hl_tensor_free(in[0]);
    hl_tensor_free(in[1]);
}
END_TEST

START_TEST(test_smear_errors)
{
    hl_graph *g = hl_graph_new(0);
    hl_tensor *k = hl_tensor_new("k", 4, (int[]){1, 2, 3, 4}, false);
    hl_tensor *a3 = hl_tensor_new("alpha", 1, (int[]){3}, false);
    hl_tensor *k3 = hl_tensor_new("k", 3, (int[]){2, 3, 4}, false);
    tu_expect_error(g, hl_smear(g, k, a3), "smear", "(1,2,3,4)", "(3)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_smear(g, k3, a3), "smear", "(2,3,4)", NULL);
    hl_graph_reset(g);
    tu_expect_error(g, hl_smear(g, k, NULL), "smear", "NULL", NULL);
    hl_graph_reset(g);
    hl_tensor *a2 = hl_tensor_new("alpha", 1, (int[]){2}, false);
    hl_tensor *ids = hl_tensor_new("doc_ids", 2, (int[]){1, 4}, false);
    tu_expect_error(g, hl_smear_docs(g, k, a2, ids), "smear", "doc_ids (1,4)", "(1,2,3,4)",
                    NULL);
    hl_tensor_free(a2);
    hl_tensor_free(ids);
    hl_tensor_free(k);
    hl_tensor_free(a3);
    hl_tensor_free(k3);
    hl_graph_free(g);
}
END_TEST

Suite *smear_suite(void)
{
    Suite *s = suite_create("smear");
    TCase *tc = tcase_create("smear");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_smear_forward);
    tcase_add_test(tc, test_smear_documents);
    tcase_add_test(tc, test_smear_gradient);
    tcase_add_test(tc, test_smear_threads);
    tcase_add_test(tc, test_smear_errors);
    suite_add_tcase(s, tc);
    return s;
}
