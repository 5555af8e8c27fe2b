/* A CSV log that grows a row at a time: see csv_log.h. */
#include "io/csv_log.h"

#include <errno.h>
#include <string.h>

FILE *hl_csv_log_open(const char *path, bool append, const char *header, hl_error *err)
{
    FILE *log = fopen(path, append ? "a" : "w");
    if (!log) {
        hl_error_set(err, HL_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        return NULL;
    }
    if (ftell(log) == 0 && (fprintf(log, "%s\n", header) < 0 || fflush(log) != 0)) {
        hl_error_set(err, HL_ERR_IO, "cannot write %s: %s", path, strerror(errno));
        fclose(log);
        return NULL;
    }
    return log;
}
