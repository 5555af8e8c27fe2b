/* Whole-or-nothing file writes: see atomic.h. */
#define _DEFAULT_SOURCE /* flock */
#include "files/atomic.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Makes every temporary name of this process distinct, even across threads. */
static atomic_uint tmp_counter;

/* Names tried before giving up when every one is taken. */
enum { NAME_ATTEMPTS = 64 };

static char *copy_string(const char *s)
{
    char *c = malloc(strlen(s) + 1);
    return c ? strcpy(c, s) : NULL;
}

/* The directory part of path ("." when there is none), in buf. */
static void dir_of(const char *path, char *buf, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, size, ".");
    else if (slash == path)
        snprintf(buf, size, "/");
    else
        snprintf(buf, size, "%.*s", (int)(slash - path), path);
}

/* Removes the file at `name` if nobody holds a lock on it: its writer ended
 * without committing. The lock is taken before the unlink, so a writer that
 * creates the name meanwhile finds its file unlinked (see create_locked). */
static void remove_if_unheld(const char *name)
{
    int fd = open(name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return;
    struct stat opened, named;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &opened) == 0 &&
        lstat(name, &named) == 0 && opened.st_dev == named.st_dev &&
        opened.st_ino == named.st_ino)
        unlink(name);
    close(fd); /* releases the lock */
}

/* Removes the "<base>.tmp.*" files beside path that nobody holds. Best
 * effort: errors are ignored. */
static void remove_stale(const char *path)
{
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    const size_t base_len = strlen(base);
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, base, base_len) || strncmp(e->d_name + base_len, ".tmp.", 5))
            continue;
        char stale[8192];
        snprintf(stale, sizeof stale, "%s/%s", dir, e->d_name);
        remove_if_unheld(stale);
    }
    closedir(d);
}

/* Creates a->tmp exclusively under a fresh name and locks it; -1 with errno
 * set when no name could be created. A file system without locks (ENOLCK)
 * writes unlocked: nothing can reap it there either. */
static int create_locked(hl_atomic_file *a, size_t size)
{
    for (int attempt = 0; attempt < NAME_ATTEMPTS; attempt++) {
        snprintf(a->tmp, size, "%s.tmp.%ld.%u", a->path, (long)getpid(),
                 atomic_fetch_add(&tmp_counter, 1));
        /* O_EXCL: fail rather than write through a file (or link) already
         * there; another host's writer may hold this very name. */
        int fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0) {
            if (errno == EEXIST)
                continue;
            return -1;
        }
        struct stat st;
        if (flock(fd, LOCK_EX) != 0 && errno != ENOLCK) {
            int saved = errno;
            unlink(a->tmp);
            close(fd);
            errno = saved;
            return -1;
        }
        /* Reaped between the create and the lock: the name is gone. */
        if (fstat(fd, &st) == 0 && st.st_nlink == 0) {
            close(fd);
            continue;
        }
        return fd;
    }
    errno = EEXIST;
    return -1;
}

static void free_names(hl_atomic_file *a)
{
    free(a->path);
    free(a->tmp);
    a->path = a->tmp = NULL;
    a->f = NULL;
}

/* The file a write of path replaces, in *target (malloc'd; NULL out of
 * memory): path itself, or the regular file a symbolic link there names,
 * the link left a link. Anything else is refused: the rename would put a
 * file where a directory, a device (/dev/null) or a FIFO was. */
static hl_status target_of(const char *path, char **target, hl_error *err)
{
    struct stat st;
    *target = NULL;
    if (lstat(path, &st) != 0 || S_ISREG(st.st_mode)) {
        /* new, or not to be looked at: creating the temporary says why */
        *target = copy_string(path);
        return HL_OK;
    }
    if (S_ISLNK(st.st_mode) && stat(path, &st) != 0)
        return errno == ENOENT
                   ? hl_error_set(err, HL_ERR_IO, "cannot write %s: it is a symbolic link to "
                                  "nothing", path)
                   : hl_error_set(err, HL_ERR_IO, "cannot write %s: cannot follow its symbolic "
                                  "link: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return hl_error_set(err, HL_ERR_IO, "cannot write %s: it is %s", path,
                            S_ISDIR(st.st_mode) ? "a directory" : "not a regular file");
    if (!(*target = realpath(path, NULL)) && errno != ENOMEM)
        return hl_error_set(err, HL_ERR_IO, "cannot write %s: cannot follow its symbolic link: "
                            "%s", path, strerror(errno));
    return HL_OK; /* *target NULL: out of memory, said by the caller */
}

hl_status hl_atomic_begin(hl_atomic_file *a, const char *path, hl_error *err)
{
    *a = (hl_atomic_file){0};
    if (!path || !*path)
        return hl_error_set(err, HL_ERR_ARG, "cannot write a file without a name");
    if (target_of(path, &a->path, err) != HL_OK)
        return err->status;
    if (a->path)
        remove_stale(a->path);
    const size_t size = strlen(a->path ? a->path : path) + 48;
    a->tmp = malloc(size);
    if (!a->path || !a->tmp) {
        free_names(a);
        return hl_error_set(err, HL_ERR_NOMEM, "cannot write %s: out of memory", path);
    }
    int fd = create_locked(a, size);
    a->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!a->f) {
        hl_status s = hl_error_set(err, HL_ERR_IO, "cannot write %s: cannot create %s: %s",
                                   path, a->tmp, strerror(errno));
        if (fd >= 0) {
            unlink(a->tmp);
            close(fd);
        }
        free_names(a);
        return s;
    }
    return HL_OK;
}

/* The rename is durable once the directory entry is: sync the directory. */
static void sync_dir(const char *path)
{
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* The first failing step of writing a->f out, its errno in *saved; NULL when
 * every byte is on disk. */
static const char *flush_step(hl_atomic_file *a, int *saved)
{
    if (ferror(a->f))
        return *saved = EIO, "write";
    if (fflush(a->f) != 0)
        return *saved = errno, "write";
    if (fsync(fileno(a->f)) != 0)
        return *saved = errno, "fsync";
    return NULL;
}

hl_status hl_atomic_flush(hl_atomic_file *a, hl_error *err)
{
    if (!a->f)
        return hl_error_set(err, HL_ERR_STATE, "atomic write: no file begun");
    int saved = 0;
    const char *step = flush_step(a, &saved);
    if (step)
        return hl_error_set(err, HL_ERR_IO, "cannot write %s: %s of %s failed: %s", a->path,
                            step, a->tmp, strerror(saved));
    return HL_OK;
}

hl_status hl_atomic_commit(hl_atomic_file *a, hl_error *err)
{
    if (!a->f)
        return hl_error_set(err, HL_ERR_STATE, "atomic write: no file begun");
    int saved = 0;
    const char *step = flush_step(a, &saved);
    bool ok = step == NULL;
    /* Renamed while still open: the lock guards the temporary name until it
     * is gone. */
    if (ok && rename(a->tmp, a->path) != 0)
        ok = false, step = "rename", saved = errno;
    if (!ok)
        remove(a->tmp);
    if (fclose(a->f) != 0 && ok)
        ok = false, step = "close", saved = errno;
    hl_status s = HL_OK;
    if (ok)
        sync_dir(a->path);
    else
        s = hl_error_set(err, HL_ERR_IO, "cannot write %s: %s of %s failed: %s", a->path, step,
                         a->tmp, strerror(saved));
    free_names(a);
    return s;
}

void hl_atomic_abort(hl_atomic_file *a)
{
    if (!a->f)
        return;
    remove(a->tmp);
    fclose(a->f);
    free_names(a);
}

hl_status hl_atomic_write(const char *path, const void *bytes, size_t n, hl_error *err)
{
    hl_atomic_file a;
    if (hl_atomic_begin(&a, path, err) != HL_OK)
        return err->status;
    if (n && fwrite(bytes, 1, n, a.f) != n) {
        int saved = errno;
        hl_atomic_abort(&a);
        return hl_error_set(err, HL_ERR_IO, "cannot write %s: %s", path, strerror(saved));
    }
    return hl_atomic_commit(&a, err);
}
