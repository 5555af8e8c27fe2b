/*
 * fs.h: file-system helpers the programs share.
 *
 *     if (hl_fs_make_dirs("out/toy_heads") != 0)
 *         fprintf(stderr, "cannot create out/toy_heads: %s\n", strerror(errno));
 */
#ifndef HL_FS_H
#define HL_FS_H

#include <stddef.h>

/* Creates a directory and its missing parents, like `mkdir -p`. Returns 0, or
 * -1 with errno set (ENAMETOOLONG for a path of 4096 bytes or more, ENOTDIR
 * when path exists and is not a directory). */
int hl_fs_make_dirs(const char *path);

/* The whole file in a malloc'ed buffer (caller frees), its length in *size,
 * followed by a '\0' that *size does not count (a text file is a C string,
 * unless it holds a '\0' itself); NULL with errno set when it cannot be
 * opened, read or held in memory (EISDIR for a directory). */
unsigned char *hl_fs_read_file(const char *path, size_t *size);

#endif
