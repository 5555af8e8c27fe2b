/*
 * csv_read.h: the numeric CSV files the programs write (train.csv,
 * heads.csv, position_loss.csv) read back, e.g. to plot several runs on one
 * picture (build/plotcsv).
 *
 *     hl_csv_table t;
 *     if (hl_csv_parse(text, n, "run/train.csv", &t, &err) != HL_OK) ...err.message...
 *     int step = hl_csv_column(&t, "step"), loss = hl_csv_column(&t, "val_loss");
 *     for (size_t r = 0; r < t.n_rows; r++)
 *         use(hl_csv_value(&t, r, step), hl_csv_value(&t, r, loss));
 *     hl_csv_table_free(&t);
 *
 * The first line names the columns (after a UTF-8 byte-order mark, if the
 * text starts with one); every later line holds one number a
 * column (strtod's syntax: "nan" and "inf" too; an empty field is NaN).
 * Lines end in \n or \r\n, and a last line may lack its end; empty lines at
 * the end are no rows, and one before a row is a row of one empty field (NaN
 * in a one-column table, refused in a wider one). Refused
 * (HL_ERR_FORMAT, naming the file and the line): no header, a duplicate or
 * empty column name, a row with more or fewer fields than the header, a field
 * that is not a number, more than HL_CSV_MAX_COLS columns, a NUL byte, a
 * header line with \r inside it (lines ended by \r alone).
 */
#ifndef HL_CSV_READ_H
#define HL_CSV_READ_H

#include <stddef.h>

#include "core/error.h"

#define HL_CSV_MAX_COLS 256

typedef struct hl_csv_table {
    int n_cols;
    size_t n_rows;
    char **names;   /* n_cols column names */
    double *values; /* n_rows × n_cols, row after row */
} hl_csv_table;

/* The table of text (n bytes); name is the file named in errors. On error t
 * holds nothing to free. */
hl_status hl_csv_parse(const char *text, size_t n, const char *name, hl_csv_table *t,
                       hl_error *err);
/* hl_csv_parse of the file at path; HL_ERR_IO naming it when it cannot be
 * read. */
hl_status hl_csv_read(const char *path, hl_csv_table *t, hl_error *err);
void hl_csv_table_free(hl_csv_table *t);

/* The index of the column called name, or -1. */
int hl_csv_column(const hl_csv_table *t, const char *name);

static inline double hl_csv_value(const hl_csv_table *t, size_t row, int col)
{
    return t->values[row * (size_t)t->n_cols + (size_t)col];
}

#endif
