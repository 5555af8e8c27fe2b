/* Numeric CSV tables: see csv_read.h. */
#include "io/csv_read.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "files/fs.h"

void hl_csv_table_free(hl_csv_table *t)
{
    for (int c = 0; t->names && c < t->n_cols; c++)
        free(t->names[c]);
    free(t->names);
    free(t->values);
    memset(t, 0, sizeof *t);
}

int hl_csv_column(const hl_csv_table *t, const char *name)
{
    for (int c = 0; c < t->n_cols; c++)
        if (!strcmp(t->names[c], name))
            return c;
    return -1;
}

/* The end of the line starting at i (its \n, or n), and where the next starts. */
static size_t line_end(const char *text, size_t n, size_t i, size_t *next)
{
    const char *nl = memchr(text + i, '\n', n - i);
    size_t end = nl ? (size_t)(nl - text) : n;
    *next = nl ? end + 1 : n;
    if (end > i && text[end - 1] == '\r')
        end--;
    return end;
}

/* Fields on a line, counted up to one past the most a table may have. */
static int count_fields(const char *line, size_t len)
{
    int fields = 1;
    for (size_t i = 0; i < len && fields <= HL_CSV_MAX_COLS; i++)
        fields += line[i] == ',';
    return fields;
}

/* The header's names into t (t->n_cols set). */
static hl_status parse_header(const char *line, size_t len, const char *name, hl_csv_table *t,
                              hl_error *err)
{
    const int cols = count_fields(line, len);
    if (cols > HL_CSV_MAX_COLS)
        return hl_error_set(err, HL_ERR_FORMAT, "%s line 1: %d columns, more than %d", name,
                            cols, HL_CSV_MAX_COLS);
    if (!(t->names = calloc((size_t)cols, sizeof *t->names)))
        return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", name);
    t->n_cols = cols;
    size_t start = 0;
    for (int c = 0; c < cols; c++) {
        const char *comma = memchr(line + start, ',', len - start);
        const size_t end = comma ? (size_t)(comma - line) : len;
        if (end == start)
            return hl_error_set(err, HL_ERR_FORMAT, "%s line 1: column %d has no name", name,
                                c + 1);
        if (!(t->names[c] = strndup(line + start, end - start)))
            return hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", name);
        for (int k = 0; k < c; k++)
            if (!strcmp(t->names[k], t->names[c]))
                return hl_error_set(err, HL_ERR_FORMAT, "%s line 1: column \"%.40s\" is named "
                                    "twice", name, t->names[c]);
        start = end + 1;
    }
    return HL_OK;
}

/* One row's numbers into out (n_cols of them). */
static hl_status parse_row(const char *line, size_t len, size_t at, const char *name,
                           int n_cols, double *out, hl_error *err)
{
    char field[400]; /* the longest %f of a finite double is 317 bytes with 6 decimals */
    size_t start = 0;
    for (int c = 0; c < n_cols; c++) {
        const char *comma = memchr(line + start, ',', len - start);
        const size_t end = comma ? (size_t)(comma - line) : len;
        const size_t width = end - start;
        if (width >= sizeof field)
            return hl_error_set(err, HL_ERR_FORMAT, "%s line %zu: field %d is %zu bytes long, "
                                "not a number", name, at, c + 1, width);
        memcpy(field, line + start, width);
        field[width] = '\0';
        char *stop;
        out[c] = width ? strtod(field, &stop) : NAN;
        if (width && *stop)
            return hl_error_set(err, HL_ERR_FORMAT, "%s line %zu: field %d \"%s\" is not a "
                                "number", name, at, c + 1, field);
        start = end + 1;
    }
    return HL_OK;
}

hl_status hl_csv_parse(const char *text, size_t n, const char *name, hl_csv_table *t,
                       hl_error *err)
{
    memset(t, 0, sizeof *t);
    if (memchr(text, '\0', n))
        return hl_error_set(err, HL_ERR_FORMAT, "%s: a NUL byte; not a CSV text file", name);
    /* A UTF-8 byte-order mark (spreadsheets write one) is no part of the
     * first column's name. */
    if (n >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) {
        text += 3;
        n -= 3;
    }
    size_t next, end = line_end(text, n, 0, &next);
    if (n == 0 || end == 0)
        return hl_error_set(err, HL_ERR_FORMAT, "%s line 1: no header naming the columns", name);
    /* A carriage return inside the header: lines ended by \r alone (classic
     * Mac OS), which would read as one header line. */
    if (memchr(text, '\r', end))
        return hl_error_set(err, HL_ERR_FORMAT, "%s line 1: a carriage return inside the line; "
                            "lines end in \\n or \\r\\n", name);
    /* Empty lines at the end of the text are no rows. */
    while (n > next && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        n--;
    hl_status s = parse_header(text, end, name, t, err);
    size_t rows = 0;
    for (size_t i = next, after; s == HL_OK && i < n; i = after)
        rows += line_end(text, n, i, &after) > i || after < n;
    if (s == HL_OK && !(t->values = malloc((rows ? rows : 1) * (size_t)t->n_cols * sizeof(double))))
        s = hl_error_set(err, HL_ERR_NOMEM, "%s: out of memory", name);
    size_t at = 1;
    for (size_t i = next, after; s == HL_OK && i < n; i = after) {
        end = line_end(text, n, i, &after);
        at++;
        if (end == i && after >= n) /* the end of the last line */
            break;
        const int fields = count_fields(text + i, end - i);
        if (fields != t->n_cols)
            s = hl_error_set(err, HL_ERR_FORMAT, "%s line %zu: %d fields, the header has %d",
                             name, at, fields, t->n_cols);
        else
            s = parse_row(text + i, end - i, at, name, t->n_cols,
                          t->values + t->n_rows++ * (size_t)t->n_cols, err);
    }
    if (s != HL_OK)
        hl_csv_table_free(t);
    return s;
}

hl_status hl_csv_read(const char *path, hl_csv_table *t, hl_error *err)
{
    memset(t, 0, sizeof *t);
    size_t size;
    char *text = (char *)hl_fs_read_file(path, &size);
    if (!text)
        return hl_error_set(err, errno == ENOMEM ? HL_ERR_NOMEM : HL_ERR_IO, "cannot read %s: %s",
                            path, strerror(errno));
    const hl_status s = hl_csv_parse(text, size, path, t, err);
    free(text);
    return s;
}
