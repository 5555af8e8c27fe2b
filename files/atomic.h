/*
 * atomic.h: every file headlab writes is written whole or not at all. The
 * bytes go to a temporary file beside the target ("<path>.tmp.<pid>.<n>",
 * created exclusively, a taken name skipped), which is flushed, synced and
 * renamed over the target; on any failure it is removed and the target keeps
 * its old contents. A target that is a symbolic link to a file is written
 * through (the file replaced, the link kept); a directory, device, FIFO or
 * link to nothing is refused by hl_atomic_begin.
 *
 *     hl_atomic_file out;
 *     if (hl_atomic_begin(&out, "out/scores.csv", &err) != HL_OK) return err.status;
 *     fprintf(out.f, "layer,head\n");
 *     ...
 *     if (hl_atomic_commit(&out, &err) != HL_OK) ...   // or hl_atomic_abort(&out)
 *
 * The writer holds an exclusive flock(2) on its temporary file from creation
 * to rename. Beginning a file removes the temporaries beside it that nobody
 * holds (left by a run killed while saving), and only those: a pid names no
 * process on a directory shared by several machines or PID namespaces, but
 * the lock is seen there too (Linux NFS maps flock to byte-range locks).
 */
#ifndef HL_ATOMIC_H
#define HL_ATOMIC_H

#include <stddef.h>
#include <stdio.h>

#include "core/error.h"

typedef struct hl_atomic_file {
    FILE *f;    /* write the contents here */
    char *path; /* the target */
    char *tmp;  /* the temporary file */
} hl_atomic_file;

hl_status hl_atomic_begin(hl_atomic_file *a, const char *path, hl_error *err);
/* Flushes and syncs the temporary file without renaming it, so that several
 * files can all be complete on disk before any replaces its target; a write
 * error seen on a->f fails it (then abort). Optional before the commit. */
hl_status hl_atomic_flush(hl_atomic_file *a, hl_error *err);
/* Flushes, syncs, closes and renames over the target; a write error seen on
 * a->f at any point fails the commit. Frees a's memory either way. */
hl_status hl_atomic_commit(hl_atomic_file *a, hl_error *err);
/* Closes and removes the temporary file, leaving the target as it was. */
void hl_atomic_abort(hl_atomic_file *a);

/* n bytes as the whole contents of path. */
hl_status hl_atomic_write(const char *path, const void *bytes, size_t n, hl_error *err);

#endif
