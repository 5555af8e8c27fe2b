/*
 * csv_log.h: a CSV file that grows by a row at a time while a program runs
 * (train.csv): opened for appending when a run resumes, with its header line
 * whenever the file is new, each row flushed as it is written.
 *
 *     FILE *log = hl_csv_log_open("out/train.csv", resuming, "step,loss", &err);
 *     fprintf(log, "%d,%.6f\n", step, loss);
 *     fflush(log);
 */
#ifndef HL_CSV_LOG_H
#define HL_CSV_LOG_H

#include <stdbool.h>
#include <stdio.h>

#include "core/error.h"

/* NULL, with the reason in err, when the file cannot be opened or written. */
FILE *hl_csv_log_open(const char *path, bool append, const char *header, hl_error *err);

#endif
