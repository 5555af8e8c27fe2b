#include "files/fs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int hl_fs_make_dirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!buf[0]) { /* as mkdir("") */
        errno = ENOENT;
        return -1;
    }
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0777) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    if (mkdir(buf, 0777) == 0)
        return 0;
    /* mkdir -p refuses a file in the directory's place; a caller would
     * otherwise find out only when it writes into it. */
    struct stat st;
    if (errno != EEXIST || stat(buf, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

unsigned char *hl_fs_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    /* fopen opens a directory for reading on Linux, and its read fails with
     * a reason the EIO below would hide. */
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        errno = EISDIR;
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            unsigned char *grown = realloc(buf, cap *= 2);
            if (!grown)
                free(buf);
            buf = grown;
        }
    }
    int read_error = ferror(f);
    fclose(f);
    if (!buf || read_error) {
        int why = buf ? EIO : ENOMEM;
        free(buf);
        errno = why;
        return NULL;
    }
    /* The loop grows the buffer whenever it fills, so there is room for the
     * terminator that lets callers parse the text with the C string functions. */
    buf[n] = '\0';
    *size = n;
    return buf;
}
