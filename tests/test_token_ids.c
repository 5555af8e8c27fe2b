/* Tests for data/token_ids.c: sequences of ids as text, with blanks, CRLF and
 * a last line without its end; each refusal names the file and the line. */
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

START_TEST(test_token_ids_read)
{
    static const char text[] = "1 2 3\r\n\n\t4\t5 6  \n \n7 8 9";
    int32_t *ids;
    int rows, cols;
    hl_error err = {0};
    ck_assert_int_eq(hl_token_ids_parse(text, strlen(text), "ids.txt", 10, &ids, &rows, &cols,
                                        &err), HL_OK);
    ck_assert_int_eq(rows, 3);
    ck_assert_int_eq(cols, 3);
    for (int i = 0; i < 9; i++)
        ck_assert_int_eq(ids[i], i + 1);
    free(ids);
    /* a NUL byte is a byte like any other: not an id */
    ck_assert_int_eq(hl_token_ids_parse("1 \0002\n", 5, "nul.txt", 10, &ids, &rows, &cols, &err),
                     HL_ERR_FORMAT);
    ck_assert_ptr_null(ids);
}
END_TEST

START_TEST(test_token_ids_refused)
{
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"1 2\n3\n", "ids.txt line 2 has 1 ids; the lines before have 2"},
        {"1 x2\n", "ids.txt line 1: \"x2\" is not a token id of 0..9"},
        {"3 10\n", "ids.txt line 1: \"10\" is not a token id of 0..9"},
        {"-1\n", "\"-1\" is not a token id"},
        {"99999999999999999999999999999\n", "\"99999999999999999999999999999\" is not"},
        {"", "ids.txt holds no token ids"},
        {" \r\n\n", "ids.txt holds no token ids"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t *ids = (int32_t *)&i;
        int rows, cols;
        hl_error err = {0};
        ck_assert_int_eq(hl_token_ids_parse(bad[i].text, strlen(bad[i].text), "ids.txt", 10,
                                            &ids, &rows, &cols, &err), HL_ERR_FORMAT);
        ck_assert_ptr_null(ids);
        ck_assert_msg(strstr(err.message, bad[i].says), "\"%s\": %s", bad[i].text, err.message);
    }
}
END_TEST

Suite *token_ids_suite(void)
{
    Suite *s = suite_create("token_ids");
    TCase *tc = tcase_create("token_ids");
    tcase_add_test(tc, test_token_ids_read);
    tcase_add_test(tc, test_token_ids_refused);
    suite_add_tcase(s, tc);
    return s;
}
