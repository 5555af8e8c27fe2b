/* A CSV log that grows a row at a time: see csv_log.h. */
#include "io/csv_log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "files/atomic.h"
#include "files/fs.h"

/* Keeps, in place, the header and the rows of `text` (n bytes) whose step is
 * at most resume_step; a last line without its newline (cut by a kill) is
 * dropped. Returns the kept length, or -1 when the header differs. */
static long keep_rows_until(char *text, size_t n, const char *header, int64_t resume_step)
{
    const size_t header_len = strlen(header);
    if (n <= header_len || memcmp(text, header, header_len) != 0 || text[header_len] != '\n')
        return -1;
    size_t kept = header_len + 1;
    for (size_t at = kept; at < n;) {
        char *newline = memchr(text + at, '\n', n - at);
        if (!newline)
            break;
        const size_t len = (size_t)(newline - (text + at)) + 1;
        char *end;
        long long step = strtoll(text + at, &end, 10);
        if (end != text + at && *end == ',' && step <= resume_step) {
            memmove(text + kept, text + at, len);
            kept += len;
        }
        at += len;
    }
    return (long)kept;
}

/* The resumed log's rows up to resume_step, rewritten whole; a missing file
 * (a resume into another directory) is started afresh. */
static hl_status truncate_log(const char *path, int64_t resume_step, const char *header,
                              bool *fresh, hl_error *err)
{
    size_t n;
    char *text = (char *)hl_fs_read_file(path, &n);
    /* Empty: killed before its header was written. */
    *fresh = (!text && errno == ENOENT) || (text && n == 0);
    if (*fresh) {
        free(text);
        return HL_OK;
    }
    if (!text)
        return hl_error_set(err, HL_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    long kept = keep_rows_until(text, n, header, resume_step);
    hl_status s = kept < 0 ? hl_error_set(err, HL_ERR_FORMAT,
                                          "cannot resume %s: its first line is not \"%s\" "
                                          "(a log of another program or version)",
                                          path, header)
                           : hl_atomic_write(path, text, (size_t)kept, err);
    free(text);
    return s;
}

FILE *hl_csv_log_open(const char *path, int64_t resume_step, const char *header,
                      hl_error *err)
{
    bool fresh = resume_step < 0;
    if (!fresh && truncate_log(path, resume_step, header, &fresh, err) != HL_OK)
        return NULL;
    FILE *log = fopen(path, fresh ? "w" : "a");
    if (!log) {
        hl_error_set(err, HL_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        return NULL;
    }
    if (fresh && (fprintf(log, "%s\n", header) < 0 || fflush(log) != 0)) {
        hl_error_set(err, HL_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        fclose(log);
        return NULL;
    }
    return log;
}

void hl_csv_log_quote(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}
