/* Tests for tasks/probe.c: the induction probe repeats its first half
 * after BOS, targets only the second half, and refuses what does not fit. */
#include <string.h>

#include "tasks/probe.h"
#include "tests/head_models.h"
#include "tests/testutil.h"

START_TEST(test_probe_repeats_its_first_half)
{
    hl_gpt *m = hm_previous_token_model(1, 1);
    hl_probe p;
    hl_error err = {0};
    ck_assert_int_eq(hl_probe_new(m, &(hl_probe_opts){.sequences = 5, .bos = 7, .token_lo = 2,
                                                      .token_hi = 6, .seed = 4}, &p, &err), HL_OK);
    ck_assert_int_eq(p.start, 1);
    ck_assert_int_eq(p.half, 3); /* (8 - 1) / 2 */
    ck_assert_int_eq(p.set->T, 7);
    for (int i = 0; i < 5; i++) {
        const int32_t *x = p.set->tokens + i * 7, *y = p.set->targets[0] + i * 7;
        ck_assert_int_eq(x[0], 7);
        for (int k = 0; k < 3; k++) {
            ck_assert(x[1 + k] >= 2 && x[1 + k] < 6);
            ck_assert_int_eq(x[4 + k], x[1 + k]);
        }
        ck_assert_int_eq(y[2], -1);
        ck_assert_int_eq(y[3], x[4]);
        ck_assert_int_eq(y[6], -1);
    }
    hl_probe_free(&p);
    ck_assert_int_eq(hl_probe_new(m, &(hl_probe_opts){.half = 5}, &p, &err), HL_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.message, "context of 8"));
    hl_error_clear(&err);
    ck_assert_int_eq(hl_probe_new(m, &(hl_probe_opts){.token_lo = 3, .token_hi = 9}, &p, &err),
                     HL_ERR_ARG);
    hl_gpt_free(m);
}
END_TEST

/* A text model's probe: letters for the bytes, learnt words for a learnt
 * vocabulary. */
START_TEST(test_probe_of_text_models)
{
    hl_vocab *bytes = hl_vocab_bytes();
    hl_probe_opts o = hl_probe_text_opts(bytes);
    ck_assert(o.token_lo == 'a' && o.token_hi == 'z' + 1 && o.bos < 0);
    const unsigned char *pieces[] = {(const unsigned char *)" the", (const unsigned char *)"And"};
    hl_error err = {0};
    hl_vocab *words = hl_vocab_from_pieces(pieces, (size_t[]){4, 3}, 2, &err);
    o = hl_probe_text_opts(words);
    ck_assert(o.token_lo == 256 && o.token_hi == 258 && o.bos < 0);
    hl_vocab_free(words);
    hl_vocab_free(bytes);
}
END_TEST

Suite *probe_suite(void)
{
    Suite *s = suite_create("probe");
    TCase *tc = tcase_create("probe");
    tcase_add_test(tc, test_probe_repeats_its_first_half);
    tcase_add_test(tc, test_probe_of_text_models);
    suite_add_tcase(s, tc);
    return s;
}
