/* Tests for io/csv_log.c: a new log starts with its header; a resumed one
 * keeps exactly the rows up to the checkpoint's step, whatever was written
 * after it (rows, a row cut by a kill), and refuses another program's file;
 * a text field is quoted as RFC 4180 says. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"

static const char *const header = "step,loss,seconds";

/* Writes text to path, opens it as a log resumed at `step`, appends `row`,
 * and checks the file is then `want`. */
static void expect_resumed(const char *path, const char *text, int64_t step, const char *row,
                           const char *want)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    hl_error err = {0};
    FILE *log = hl_csv_log_open(path, step, header, &err);
    ck_assert_msg(log, "%s", err.message);
    fputs(row, log);
    fclose(log);
    size_t n;
    char *got = (char *)hl_fs_read_file(path, &n);
    ck_assert_ptr_nonnull(got);
    ck_assert_msg(n == strlen(want) && !memcmp(got, want, n), "resumed at %lld:\n%.*s\nwanted:\n%s",
                  (long long)step, (int)n, got, want);
    free(got);
}

START_TEST(test_csv_log_new_and_resumed)
{
    char path[] = "/tmp/hl_csv_log_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    hl_error err = {0};
    FILE *log = hl_csv_log_open(path, -1, header, &err);
    ck_assert_msg(log, "%s", err.message);
    fputs("0,3.5,0.1\n", log);
    fclose(log);
    /* A new run starts afresh even over an old file. */
    expect_resumed(path, "step,loss,seconds\n0,9,9\n", -1, "0,3.5,0.1\n",
                   "step,loss,seconds\n0,3.5,0.1\n");
    /* Rows after the checkpoint (10) and a row cut by a kill are dropped; the
     * row at the checkpoint's step stays. */
    expect_resumed(path, "step,loss,seconds\n0,3.5,0.1\n5,3.0,0.2\n10,2.5,0.3\n15,2.0,0.4\n20,1",
                   10, "15,2.1,0.1\n",
                   "step,loss,seconds\n0,3.5,0.1\n5,3.0,0.2\n10,2.5,0.3\n15,2.1,0.1\n");
    /* Several rows per step (heads.csv) all stay or all go. */
    expect_resumed(path, "step,loss,seconds\n5,1,1\n5,2,2\n10,3,3\n10,4,4\n", 5, "",
                   "step,loss,seconds\n5,1,1\n5,2,2\n");
    /* An empty file (killed before its header) starts afresh. */
    expect_resumed(path, "", 10, "15,2,1\n", "step,loss,seconds\n15,2,1\n");
    /* A missing file (resumed into another directory) too. */
    unlink(path);
    log = hl_csv_log_open(path, 10, header, &err);
    ck_assert_msg(log, "%s", err.message);
    fclose(log);
    size_t n;
    char *got = (char *)hl_fs_read_file(path, &n);
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq((int)n, (int)strlen(header) + 1);
    free(got);
    unlink(path);
}
END_TEST

START_TEST(test_csv_log_refuses_another_header)
{
    char path[] = "/tmp/hl_csv_log_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    static const char other[] = "step,layer,head\n5,0,0\n";
    ck_assert_int_eq(write(fd, other, sizeof other - 1), (int)sizeof other - 1);
    close(fd);
    hl_error err = {0};
    ck_assert_ptr_null(hl_csv_log_open(path, 5, header, &err));
    ck_assert_int_eq(err.status, HL_ERR_FORMAT);
    ck_assert_msg(strstr(err.message, path) && strstr(err.message, header), "%s", err.message);
    size_t n;
    char *got = (char *)hl_fs_read_file(path, &n);
    ck_assert_msg(got && n == sizeof other - 1 && !memcmp(got, other, n), "the file changed");
    free(got);
    unlink(path);
}
END_TEST

/* A comma stays inside the quotes, a quote inside is written twice, an
 * empty text is an empty quoted field (RFC 4180). */
START_TEST(test_csv_log_quote)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    ck_assert_ptr_nonnull(f);
    hl_csv_log_quote(f, "4x4 heads, d 128");
    fputc(',', f);
    hl_csv_log_quote(f, "say \"hi\"");
    fputc(',', f);
    hl_csv_log_quote(f, "");
    fclose(f);
    ck_assert_str_eq(text, "\"4x4 heads, d 128\",\"say \"\"hi\"\"\",\"\"");
    free(text);
}
END_TEST

Suite *csv_log_suite(void)
{
    Suite *s = suite_create("csv_log");
    TCase *tc = tcase_create("csv_log");
    tcase_add_test(tc, test_csv_log_new_and_resumed);
    tcase_add_test(tc, test_csv_log_refuses_another_header);
    tcase_add_test(tc, test_csv_log_quote);
    suite_add_tcase(s, tc);
    return s;
}
