/* Tests for files/atomic.c: a file is written whole or not at all, a failed
 * write leaves the old file and no temporary file, and temporary files no
 * writer holds are cleaned up, and only those. */
#define _DEFAULT_SOURCE /* flock */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "files/atomic.h"
#include "tests/testutil.h"

static char dir[TU_DIR_MAX];

static const char *in_dir(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", dir, name);
    return buf;
}

static void expect_contents(const char *path, const char *want)
{
    size_t size;
    unsigned char *got = hl_fs_read_file(path, &size);
    ck_assert_msg(got, "cannot read %s", path);
    ck_assert_uint_eq(size, strlen(want));
    ck_assert(!memcmp(got, want, size));
    free(got);
}

/* Files in dir (the target and any temporary file). */
static int count_files(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

START_TEST(test_atomic_commit_and_abort)
{
    tu_make_dir(dir, "atomic");
    char path[128];
    in_dir("out.csv", path, sizeof path);
    hl_error err = {0};
    ck_assert_int_eq(hl_atomic_write(path, "old\n", 4, &err), HL_OK);
    hl_atomic_file f;
    ck_assert_int_eq(hl_atomic_begin(&f, path, &err), HL_OK);
    fprintf(f.f, "new contents\n");
    expect_contents(path, "old\n"); /* nothing changes before the commit */
    ck_assert_int_eq(count_files(), 2);
    ck_assert_int_eq(hl_atomic_commit(&f, &err), HL_OK);
    expect_contents(path, "new contents\n");
    ck_assert_int_eq(hl_atomic_begin(&f, path, &err), HL_OK);
    fprintf(f.f, "abandoned\n");
    hl_atomic_abort(&f);
    expect_contents(path, "new contents\n");
    ck_assert_int_eq(count_files(), 1);
    tu_remove_dir(dir);
}
END_TEST

START_TEST(test_atomic_unwritable)
{
    tu_make_dir(dir, "atomic");
    char file[128], path[160];
    in_dir("plain", file, sizeof file);
    hl_error err = {0};
    ck_assert_int_eq(hl_atomic_write(file, "x", 1, &err), HL_OK);
    /* A path through a regular file cannot be created. */
    snprintf(path, sizeof path, "%s/inside.csv", file);
    ck_assert_int_eq(hl_atomic_write(path, "y", 1, &err), HL_ERR_IO);
    ck_assert_ptr_nonnull(strstr(err.message, path));
    expect_contents(file, "x");
    tu_remove_dir(dir);
}
END_TEST

/* What is not a regular file is refused before anything is written, and
 * stays as it was: a directory, a FIFO, a link to nothing. A symbolic link
 * to a file is written through: the file gets the contents, the link stays. */
START_TEST(test_atomic_what_it_replaces)
{
    tu_make_dir(dir, "atomic");
    char sub[128], fifo[128], dangling[128], target[128], link[128];
    in_dir("sub", sub, sizeof sub);
    in_dir("fifo", fifo, sizeof fifo);
    in_dir("dangling", dangling, sizeof dangling);
    in_dir("target.csv", target, sizeof target);
    in_dir("link.csv", link, sizeof link);
    ck_assert_int_eq(mkdir(sub, 0777), 0);
    ck_assert_int_eq(mkfifo(fifo, 0666), 0);
    ck_assert_int_eq(symlink("missing.csv", dangling), 0);
    hl_error err = {0};
    hl_atomic_file f;
    const char *const refused[][2] = {
        {sub, "is a directory"}, {fifo, "is not a regular file"},
        {dangling, "is a symbolic link to nothing"}};
    for (int i = 0; i < 3; i++) {
        hl_error_clear(&err);
        ck_assert_int_eq(hl_atomic_begin(&f, refused[i][0], &err), HL_ERR_IO);
        ck_assert_msg(strstr(err.message, refused[i][0]) && strstr(err.message, refused[i][1]),
                      "%s", err.message);
    }
    struct stat st;
    ck_assert(stat(sub, &st) == 0 && S_ISDIR(st.st_mode));
    ck_assert(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    ck_assert(lstat(dangling, &st) == 0 && S_ISLNK(st.st_mode));
    ck_assert_int_eq(count_files(), 3);
    ck_assert_int_eq(hl_atomic_write(target, "old\n", 4, &err), HL_OK);
    ck_assert_int_eq(symlink("target.csv", link), 0);
    ck_assert_int_eq(hl_atomic_write(link, "new\n", 4, &err), HL_OK);
    ck_assert(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    expect_contents(target, "new\n");
    ck_assert_int_eq(count_files(), 5);
    tu_remove_dir(dir);
}
END_TEST

/* In a child with a file-size limit of 1 KiB and SIGXFSZ ignored (as the
 * programs set it), writing 64 KiB fails as an error. */
static int write_past_limit(const char *path)
{
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {1024, 1024};
    if (setrlimit(RLIMIT_FSIZE, &limit))
        return 3;
    static char big[65536];
    memset(big, 'z', sizeof big);
    hl_error err = {0};
    hl_status s = hl_atomic_write(path, big, sizeof big, &err);
    return s == HL_ERR_IO && strstr(err.message, path) ? 0 : 4;
}

START_TEST(test_atomic_file_size_limit)
{
    tu_make_dir(dir, "atomic");
    char path[128];
    in_dir("model.safetensors", path, sizeof path);
    hl_error err = {0};
    ck_assert_int_eq(hl_atomic_write(path, "previous", 8, &err), HL_OK);
    fflush(NULL);
    pid_t child = fork();
    if (child == 0)
        _exit(write_past_limit(path));
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
    expect_contents(path, "previous");
    ck_assert_int_eq(count_files(), 1); /* no temporary file left */
    tu_remove_dir(dir);
}
END_TEST

/* A process that creates `name` and holds an exclusive flock on it, as a
 * writer does, until the test closes *release; its pid for waitpid. */
static pid_t hold_locked(const char *name, int *release)
{
    int ready[2], done[2];
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(done), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        close(ready[0]);
        close(done[1]); /* so that the test's close is the end of the pipe */
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0666);
        char c = fd >= 0 && flock(fd, LOCK_EX) == 0 ? 'y' : 'n';
        if (write(ready[1], &c, 1) != 1 || read(done[0], &c, 1) < 0)
            _exit(1);
        _exit(0);
    }
    close(ready[1]);
    close(done[0]);
    char c = 0;
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    ck_assert_msg(c == 'y', "the holder could not create and lock %s", name);
    close(ready[0]);
    *release = done[1];
    return child;
}

/* Temporaries nobody holds are removed whatever pid they name (one of this
 * machine's live processes, or one that ended); one a writer holds is kept
 * even when its pid names no process here, as for a writer on another host
 * or in another PID namespace (the pid in its name is forged: one that
 * ended). Other files' temporaries are left alone. */
START_TEST(test_atomic_removes_stale_temporaries)
{
    tu_make_dir(dir, "atomic");
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
    char path[128], stale[192], unheld_live_pid[192], held[192], other[192];
    in_dir("checkpoint.safetensors", path, sizeof path);
    snprintf(stale, sizeof stale, "%s.tmp.%ld.0", path, (long)dead);
    snprintf(unheld_live_pid, sizeof unheld_live_pid, "%s.tmp.1.0", path); /* pid 1 lives */
    snprintf(held, sizeof held, "%s.tmp.%ld.1", path, (long)dead);
    snprintf(other, sizeof other, "%s/other.tmp.%ld.0", dir, (long)dead);
    hl_error err = {0};
    ck_assert_int_eq(hl_atomic_write(stale, "s", 1, &err), HL_OK);
    ck_assert_int_eq(hl_atomic_write(unheld_live_pid, "l", 1, &err), HL_OK);
    ck_assert_int_eq(hl_atomic_write(other, "o", 1, &err), HL_OK);
    int release;
    pid_t holder = hold_locked(held, &release);
    ck_assert_int_eq(hl_atomic_write(path, "new", 3, &err), HL_OK);
    ck_assert_int_eq(access(stale, F_OK), -1);
    ck_assert_int_eq(access(unheld_live_pid, F_OK), -1);
    ck_assert_msg(access(held, F_OK) == 0, "a temporary its writer holds was removed");
    ck_assert_int_eq(access(other, F_OK), 0);
    expect_contents(path, "new");
    /* Once its writer is gone, the next write reaps it. */
    close(release);
    ck_assert_int_eq(waitpid(holder, NULL, 0), holder);
    ck_assert_int_eq(hl_atomic_write(path, "newer", 5, &err), HL_OK);
    ck_assert_int_eq(access(held, F_OK), -1);
    expect_contents(path, "newer");
    tu_remove_dir(dir);
}
END_TEST

/* Writers of one path in several threads at once: every commit succeeds (no
 * writer reaps another's temporary) and none is left behind. */
START_TEST(test_atomic_concurrent_writers)
{
    tu_make_dir(dir, "atomic");
    char path[128];
    in_dir("shared.csv", path, sizeof path);
    int failures = 0;
#pragma omp parallel num_threads(4) reduction(+ : failures)
    for (int i = 0; i < 200; i++) {
        hl_error err = {0};
        failures += hl_atomic_write(path, "same", 4, &err) != HL_OK;
    }
    ck_assert_int_eq(failures, 0);
    ck_assert_int_eq(count_files(), 1);
    expect_contents(path, "same");
    tu_remove_dir(dir);
}
END_TEST

Suite *atomic_suite(void)
{
    Suite *s = suite_create("atomic");
    TCase *tc = tcase_create("atomic");
    tcase_add_test(tc, test_atomic_commit_and_abort);
    tcase_add_test(tc, test_atomic_unwritable);
    tcase_add_test(tc, test_atomic_what_it_replaces);
    tcase_add_test(tc, test_atomic_file_size_limit);
    tcase_add_test(tc, test_atomic_removes_stale_temporaries);
    tcase_add_test(tc, test_atomic_concurrent_writers);
    suite_add_tcase(s, tc);
    return s;
}
