/* Tests for io/csv_read.c: tables as the programs write them, and every
 * refusal with its message. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "io/csv_read.h"
#include "tests/testutil.h"

START_TEST(test_csv_read_table)
{
    static const char text[] = "step,loss,icl\r\n0,nan,-0.5\r\n200,2.5,\r\n400,1e-3,inf";
    hl_csv_table t;
    hl_error err = {0};
    ck_assert_msg(hl_csv_parse(text, sizeof text - 1, "t.csv", &t, &err) == HL_OK, "%s",
                  err.message);
    ck_assert_int_eq(t.n_cols, 3);
    ck_assert_uint_eq(t.n_rows, 3);
    ck_assert_int_eq(hl_csv_column(&t, "icl"), 2);
    ck_assert_int_eq(hl_csv_column(&t, "ICL"), -1);
    ck_assert(isnan(hl_csv_value(&t, 0, 1)));
    ck_assert(hl_csv_value(&t, 0, 2) == -0.5);
    ck_assert(hl_csv_value(&t, 1, 0) == 200);
    ck_assert(isnan(hl_csv_value(&t, 1, 2))); /* an empty field */
    ck_assert(hl_csv_value(&t, 2, 1) == 1e-3 && isinf(hl_csv_value(&t, 2, 2)));
    hl_csv_table_free(&t);
    /* A header alone is a table of no rows; a trailing line end adds none. */
    ck_assert_int_eq(hl_csv_parse("a,b\n", 4, "h.csv", &t, &err), HL_OK);
    ck_assert_uint_eq(t.n_rows, 0);
    hl_csv_table_free(&t);
    ck_assert_int_eq(hl_csv_parse("a\n1\n2\n", 6, "h.csv", &t, &err), HL_OK);
    ck_assert_uint_eq(t.n_rows, 2);
    hl_csv_table_free(&t);
    /* Empty lines at the end are no rows (an editor's, a shell's echo >>);
     * one before a row is, NaN in a one-column table. */
    ck_assert_int_eq(hl_csv_parse("a,b\n1,2\n\n\r\n\n", 12, "h.csv", &t, &err), HL_OK);
    ck_assert_uint_eq(t.n_rows, 1);
    hl_csv_table_free(&t);
    ck_assert_int_eq(hl_csv_parse("a\n\n2\n\n", 6, "h.csv", &t, &err), HL_OK);
    ck_assert_uint_eq(t.n_rows, 2);
    ck_assert(isnan(hl_csv_value(&t, 0, 0)) && hl_csv_value(&t, 1, 0) == 2);
    hl_csv_table_free(&t);
    /* The longest number the programs write (%.6f of -DBL_MAX, 317 bytes). */
    char big[512];
    const int n = snprintf(big, sizeof big, "a\n%.6f\n", -DBL_MAX);
    ck_assert_int_eq(hl_csv_parse(big, (size_t)n, "big.csv", &t, &err), HL_OK);
    ck_assert(hl_csv_value(&t, 0, 0) == -DBL_MAX);
    hl_csv_table_free(&t);
    /* A byte-order mark before the header (its column was "\xEF\xBB\xBFstep"). */
    ck_assert_int_eq(hl_csv_parse("\xEF\xBB\xBFstep,x\n1,2\n", 14, "bom.csv", &t, &err), HL_OK);
    ck_assert_int_eq(hl_csv_column(&t, "step"), 0);
    ck_assert(hl_csv_value(&t, 0, 1) == 2);
    hl_csv_table_free(&t);
}
END_TEST

START_TEST(test_csv_read_refusals)
{
    static const struct {
        const char *text, *message;
    } bad[] = {
        {"", "bad.csv line 1: no header"},
        {"\n1,2\n", "bad.csv line 1: no header"},
        {"a,,c\n1,2,3\n", "bad.csv line 1: column 2 has no name"},
        {"a,b,a\n1,2,3\n", "bad.csv line 1: column \"a\" is named twice"},
        {"a,b\n1,2\n3\n", "bad.csv line 3: 1 fields, the header has 2"},
        {"a,b\n1,2,3\n", "bad.csv line 2: 3 fields, the header has 2"},
        {"a,b\n1,x2\n", "bad.csv line 2: field 2 \"x2\" is not a number"},
        {"a,b\n1,\"2\"\n", "bad.csv line 2: field 2 \"\"2\"\" is not a number"},
        {"a,b\n\n1,2\n", "bad.csv line 2: 1 fields, the header has 2"},
        {"a,b\r1,2\r", "bad.csv line 1: a carriage return inside the line"},
    };
    hl_csv_table t;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        hl_error err = {0};
        ck_assert_int_eq(hl_csv_parse(bad[i].text, strlen(bad[i].text), "bad.csv", &t, &err),
                         HL_ERR_FORMAT);
        ck_assert_msg(strstr(err.message, bad[i].message), "%s: got \"%s\", want \"%s\"",
                      bad[i].text, err.message, bad[i].message);
        ck_assert_ptr_null(t.names);
    }
    hl_error err = {0};
    char longer[512] = "a\n";
    memset(longer + 2, '1', 400);
    ck_assert_int_eq(hl_csv_parse(longer, 402, "bad.csv", &t, &err), HL_ERR_FORMAT);
    ck_assert_msg(strstr(err.message, "bad.csv line 2: field 1 is 400 bytes long"), "%s",
                  err.message);
    err = (hl_error){0};
    ck_assert_int_eq(hl_csv_parse("a\n1\0", 4, "nul.csv", &t, &err), HL_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.message, "nul.csv: a NUL byte"));
    char wide[4 * (HL_CSV_MAX_COLS + 1)];
    size_t n = 0;
    for (int c = 0; c <= HL_CSV_MAX_COLS; c++)
        n += (size_t)sprintf(wide + n, c ? ",c%d" : "c%d", c % 100);
    err = (hl_error){0};
    ck_assert_int_eq(hl_csv_parse(wide, n, "wide.csv", &t, &err), HL_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.message, "257 columns, more than 256"));
}
END_TEST

Suite *csv_read_suite(void)
{
    Suite *s = suite_create("csv_read");
    TCase *tc = tcase_create("csv_read");
    tcase_add_test(tc, test_csv_read_table);
    tcase_add_test(tc, test_csv_read_refusals);
    suite_add_tcase(s, tc);
    return s;
}
