/* Tests for files/fs.c: a file read whole ends in a '\0' its size leaves out,
 * a directory is refused as one, and mkdir -p refuses a file in its place. */
#include <check.h>
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h> /* M_PERTURB */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "files/fs.h"
#include "tests/testutil.h"

static char dir[TU_DIR_MAX];

/* Sizes around the reader's 64 KiB first buffer and its doublings: the
 * terminator must fit after a file that fills a buffer exactly. */
START_TEST(test_read_file_terminated)
{
    tu_make_dir(dir, "fs");
    char path[128];
    snprintf(path, sizeof path, "%s/f", dir);
    static const size_t sizes[] = {0, 3, 65535, 65536, 65537, 131072};
#ifdef M_PERTURB
    /* Fresh memory is often zero, which would hide a missing terminator:
     * glibc fills every allocation with ~'x' instead. */
    mallopt(M_PERTURB, 'x');
#endif
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        for (size_t k = 0; k < sizes[i]; k++)
            fputc('0' + (int)(k % 10), f);
        ck_assert_int_eq(fclose(f), 0);
        size_t n = 1;
        unsigned char *text = hl_fs_read_file(path, &n);
        ck_assert_ptr_nonnull(text);
        ck_assert_uint_eq(n, sizes[i]);
        ck_assert_msg(text[n] == '\0', "no terminator after %zu bytes", n);
        ck_assert_uint_eq(strlen((const char *)text), n);
        free(text);
    }
#ifdef M_PERTURB
    mallopt(M_PERTURB, 0);
#endif
    tu_remove_dir(dir);
}
END_TEST

START_TEST(test_read_directory)
{
    tu_make_dir(dir, "fs");
    size_t n;
    errno = 0;
    ck_assert_ptr_null(hl_fs_read_file(dir, &n));
    ck_assert_msg(errno == EISDIR, "errno %d (%s), wanted EISDIR", errno, strerror(errno));
    char path[128];
    snprintf(path, sizeof path, "%s/none", dir);
    ck_assert_ptr_null(hl_fs_read_file(path, &n));
    ck_assert_int_eq(errno, ENOENT);
    tu_remove_dir(dir);
}
END_TEST

START_TEST(test_make_dirs)
{
    tu_make_dir(dir, "fs");
    char path[128], file[128];
    snprintf(path, sizeof path, "%s/a/b/c", dir);
    ck_assert_int_eq(hl_fs_make_dirs(path), 0);
    ck_assert_int_eq(hl_fs_make_dirs(path), 0); /* already there */
    ck_assert_int_eq(access(path, W_OK), 0);
    snprintf(file, sizeof file, "%s/file", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    errno = 0;
    ck_assert_int_eq(hl_fs_make_dirs(file), -1);
    ck_assert_int_eq(errno, ENOTDIR);
    snprintf(path, sizeof path, "%s/file/below", dir);
    ck_assert_int_eq(hl_fs_make_dirs(path), -1);
    ck_assert_int_eq(errno, ENOTDIR);
    tu_remove_dir(dir);
}
END_TEST

Suite *fs_suite(void)
{
    Suite *s = suite_create("fs");
    TCase *tc = tcase_create("fs");
    tcase_add_test(tc, test_read_file_terminated);
    tcase_add_test(tc, test_read_directory);
    tcase_add_test(tc, test_make_dirs);
    suite_add_tcase(s, tc);
    return s;
}
