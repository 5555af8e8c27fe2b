/* Tests for data/documents.c: the form-feed rule, encoding by documents,
 * window starts and the ids of a window, against naive loops. */
#include <stdlib.h>
#include <string.h>

#include "data/documents.h"
#include "tests/testutil.h"

START_TEST(test_documents_form_feed_rule)
{
    size_t safe;
    const unsigned char *t = (const unsigned char *)"ab\n\f\ncd\f\nx\n\f";
    const size_t n = strlen((const char *)t);
    ck_assert_uint_eq(hl_docs_form_feed_end(t, n, true, &safe), 5); /* after "\f\n" */
    ck_assert_uint_eq(safe, n);
    /* "cd\f\n": the form feed does not start its line; the last "\f" may
     * still begin a form-feed line: encoding stops before it. */
    ck_assert_uint_eq(hl_docs_form_feed_end(t + 5, n - 5, true, &safe), 0);
    ck_assert_uint_eq(safe, n - 5 - 1);
    /* At the very start, only when that is a line's start. */
    const unsigned char *s = (const unsigned char *)"\f\nz";
    ck_assert_uint_eq(hl_docs_form_feed_end(s, 3, true, &safe), 2);
    ck_assert_uint_eq(hl_docs_form_feed_end(s, 3, false, &safe), 0);
    /* CRLF lines: "\f\r\n" ends a document too; "\f\r" at the end may be
     * one whose "\n" is not read yet; "\f\rx" is no form-feed line. */
    const unsigned char *c = (const unsigned char *)"a\r\n\f\r\nb\r\n\f\rx\r\n\f\r";
    const size_t nc = strlen((const char *)c);
    ck_assert_uint_eq(hl_docs_form_feed_end(c, nc, true, &safe), 6);
    ck_assert_uint_eq(safe, nc);
    ck_assert_uint_eq(hl_docs_form_feed_end(c + 6, nc - 6, true, &safe), 0);
    ck_assert_uint_eq(safe, nc - 6 - 2);
}
END_TEST

START_TEST(test_documents_encode_and_windows)
{
    hl_vocab *v = hl_vocab_bytes();
    const char *text = "first\n\f\nsecond one\n\f\n\f\nthird";
    int32_t *tokens;
    uint64_t *starts;
    size_t n, n_docs;
    hl_error err = {0};
    ck_assert_int_eq(hl_docs_encode(v, (const unsigned char *)text, strlen(text), &tokens, &n,
                                     &starts, &n_docs, &err), HL_OK);
    ck_assert_uint_eq(n, strlen(text)); /* the bytes: the same tokens as one text */
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(tokens[i], (unsigned char)text[i]);
    /* "first\n\f\n" | "second one\n\f\n" | "\f\n" | "third" */
    ck_assert_uint_eq(n_docs, 4);
    const uint64_t want[4] = {0, 8, 21, 23};
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(starts[i], want[i]);
    /* windows of 9 tokens fit after starts 0, 8 (8 + 9 <= 28), not 21 or 23 */
    ck_assert_uint_eq(hl_docs_window_starts(starts, n_docs, n, 9), 2);
    ck_assert_uint_eq(hl_docs_window_starts(starts, n_docs, n, 28), 1);
    ck_assert_uint_eq(hl_docs_window_starts(starts, n_docs, n, 29), 0);
    /* windows of 9 from 0 and 8 read 0..16; of 10 from 0, 8 and 21 (n 28):
     * 0..17 and 21..27 */
    ck_assert_uint_eq(hl_docs_window_coverage(starts, 2, n, 9), 17);
    ck_assert_uint_eq(hl_docs_window_coverage(starts, 3, n, 10), 18 + 7);
    ck_assert_uint_eq(hl_docs_draw(2, 0), 0);
    ck_assert_uint_eq(hl_docs_draw(2, 0.99), 1);
    /* the ids of positions 6..25: a new id at 8, 21 and 23 */
    hl_real ids[20];
    hl_docs_ids(starts, n_docs, 6, 20, ids);
    for (int t = 0; t < 20; t++) {
        const uint64_t at = 6 + (uint64_t)t;
        const int id = (at >= 8) + (at >= 21) + (at >= 23);
        ck_assert_msg(ids[t] == id, "position %d: id %g, want %d", (int)at, (double)ids[t], id);
    }
    free(tokens);
    free(starts);
    ck_assert_int_eq(hl_docs_encode(v, (const unsigned char *)"", 0, &tokens, &n, &starts,
                                     &n_docs, &err), HL_OK);
    ck_assert(n == 0 && n_docs == 0);
    free(tokens);
    free(starts);
    hl_vocab_free(v);
}
END_TEST

Suite *documents_suite(void)
{
    Suite *s = suite_create("documents");
    TCase *tc = tcase_create("documents");
    tcase_set_timeout(tc, 0);
    tcase_add_test(tc, test_documents_form_feed_rule);
    tcase_add_test(tc, test_documents_encode_and_windows);
    suite_add_tcase(s, tc);
    return s;
}
