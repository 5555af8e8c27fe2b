/*
 * csv_log.h: a CSV file that grows by a row at a time while a program runs
 * (train.csv, heads.csv), each row flushed as it is written. Every row starts
 * with the training step it belongs to.
 *
 *     FILE *log = hl_csv_log_open("out/train.csv", resume_step, "step,loss", &err);
 *     fprintf(log, "%d,%.6f\n", step, loss);
 *     fflush(log);
 *
 * A new run (resume_step < 0) starts the file afresh with its header. A run
 * resumed from a checkpoint at step S keeps the rows of steps up to S and
 * drops the later ones (written after the checkpoint, before a kill), so the
 * log holds exactly what the checkpoint's run logged and the resumed run
 * continues it with the rows after S.
 */
#ifndef HL_CSV_LOG_H
#define HL_CSV_LOG_H

#include <stdint.h>
#include <stdio.h>

#include "core/error.h"

/* NULL, with the reason in err, when the file cannot be opened, read or
 * written, or when a resumed file's header is not `header` (HL_ERR_FORMAT). */
FILE *hl_csv_log_open(const char *path, int64_t resume_step, const char *header,
                      hl_error *err);

/* Writes s to f as one CSV field: in double quotes, a quote inside written
 * twice (RFC 4180), so a comma or quote in a name stays in its field. */
void hl_csv_log_quote(FILE *f, const char *s);

#endif
