/*
 * plotcsv: columns of the CSV files the programs write, as lines on one PNG,
 * e.g. two charlm runs side by side:
 *
 *     build/plotcsv --file learned/position_loss.csv --file rope/position_loss.csv \
 *                   --x position --y val_loss --out position_loss.png
 *
 * Each file gives a series per --y column, labelled with the file's folder
 * (its path where it has none or shares it with another file; and the
 * column, when there are several). --where COL=VALUE keeps the rows
 * whose COL equals VALUE (e.g. one head of heads.csv). Run with --help.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "headlab.h"

typedef struct {
    hl_opt_list files, ys, where;
    const char *x, *out, *title, *y_label;
} options;

#define STRINGIFY(x) #x
#define STRING_OF(x) STRINGIFY(x)

static const hl_usage usage = {
    "usage: plotcsv --file FILE [--file FILE ...] --x COL --y COL [--y COL ...] --out PNG\n"
    "Draws columns of CSV files (train.csv, position_loss.csv, heads.csv, ...) as lines\n"
    "on one picture, a series per file and --y column (at most "
    STRING_OF(HL_PLOT_MAX_SERIES) ").\n",
    "Series are labelled with each file's folder (its path where it has none or\n"
    "shares it with another file), and the column when there are several.\n"
    "Exit status: 0 written, 1 out of memory, 2 bad input or a file that cannot be read\n"
    "or written.\n",
};

/* A CSV that cannot be read: exit 1 out of memory, else 2 (bad input). */
_Noreturn static void fail(const hl_error *err)
{
    if (err->status != HL_ERR_NOMEM)
        hl_cli_bad_input("plotcsv", "%s", err->message);
    fprintf(stderr, "plotcsv: %s\n", err->message);
    exit(1);
}

/* Whether row r passes every --where COL=VALUE (checked to exist beforehand). */
static bool row_kept(const hl_csv_table *t, size_t r, const int *col, const double *value,
                     int n)
{
    for (int i = 0; i < n; i++)
        if (hl_csv_value(t, r, col[i]) != value[i])
            return false;
    return true;
}

/* A series' name for files[f]: its folder, or its path where it has no
 * folder or shares it with another file. */
static void series_name(const hl_opt_list *files, int f, char *out, size_t size)
{
    const char *path = files->item[f], *slash = strrchr(path, '/');
    const int len = slash ? (int)(slash - path) : 0;
    bool shared = !slash;
    for (int g = 0; g < files->n && !shared; g++) {
        const char *other = files->item[g], *other_slash = strrchr(other, '/');
        shared = g != f && other_slash && other_slash - other == len && !strncmp(other, path,
                                                                                (size_t)len);
    }
    snprintf(out, size, "%.*s", shared ? (int)strlen(path) : len, path);
}

int main(int argc, char **argv)
{
    hl_cli_init();
    options o = {0};
    const hl_opt opts[] = {
        HL_OPTION_LIST("file", &o.files, "FILE",
                       "a CSV file: a header naming its columns, then rows of numbers; repeat "
                       "for more files", .dflt = "required"),
        HL_OPTION_TEXT("x", &o.x, "COL", "the column along the x axis", .dflt = "required"),
        HL_OPTION_LIST("y", &o.ys, "COL", "a column to draw; repeat for more", .dflt = "required"),
        HL_OPTION_LIST("where", &o.where, "COL=V",
                       "keep only the rows whose COL is V; repeat to combine"),
        HL_OPTION_TEXT("out", &o.out, "PNG", "the picture to write", .dflt = "required"),
        HL_OPTION_TEXT("title", &o.title, "TEXT", "the title above the plot",
                       .dflt = "the --y columns"),
        HL_OPTION_TEXT("y-label", &o.y_label, "TEXT", "the y axis's label",
                       .dflt = "the first --y column"),
        {0},
    };
    hl_cli_parse_or_exit("plotcsv", &usage, opts, argc, argv);
    if (!o.files.n || !o.ys.n || !o.x || !o.out)
        hl_cli_bad_input("plotcsv", "--file, --x, --y and --out are required (see --help)");
    if (o.files.n * o.ys.n > HL_PLOT_MAX_SERIES)
        hl_cli_bad_input("plotcsv", "%d files x %d columns: at most %d series", o.files.n,
                         o.ys.n, HL_PLOT_MAX_SERIES);
    hl_csv_table tables[HL_OPT_LIST_MAX];
    hl_plot_series series[HL_PLOT_MAX_SERIES];
    char labels[HL_PLOT_MAX_SERIES][256];
    double *points[HL_PLOT_MAX_SERIES][2];
    int n = 0;
    for (int f = 0; f < o.files.n; f++) {
        const char *path = o.files.item[f];
        hl_error err = {0};
        hl_csv_table *t = &tables[f];
        if (hl_csv_read(path, t, &err) != HL_OK)
            fail(&err);
        int where_col[HL_OPT_LIST_MAX];
        double where_value[HL_OPT_LIST_MAX];
        for (int w = 0; w < o.where.n; w++) {
            char col[128];
            const char *eq = strchr(o.where.item[w], '=');
            char *end = NULL;
            if (eq)
                where_value[w] = strtod(eq + 1, &end);
            if (!eq || eq == o.where.item[w] || end == eq + 1 || *end)
                hl_cli_bad_input("plotcsv", "--where %s: give COL=NUMBER", o.where.item[w]);
            snprintf(col, sizeof col, "%.*s", (int)(eq - o.where.item[w]), o.where.item[w]);
            if ((where_col[w] = hl_csv_column(t, col)) < 0)
                hl_cli_bad_input("plotcsv", "%s has no column %s (--where)", path, col);
        }
        const int xc = hl_csv_column(t, o.x);
        if (xc < 0)
            hl_cli_bad_input("plotcsv", "%s has no column %s (--x)", path, o.x);
        for (int y = 0; y < o.ys.n; y++, n++) {
            const int yc = hl_csv_column(t, o.ys.item[y]);
            if (yc < 0)
                hl_cli_bad_input("plotcsv", "%s has no column %s (--y)", path, o.ys.item[y]);
            double *x = points[n][0] = malloc(sizeof(double) * (t->n_rows + 1));
            double *v = points[n][1] = malloc(sizeof(double) * (t->n_rows + 1));
            if (!x || !v) {
                fprintf(stderr, "plotcsv: out of memory\n");
                exit(1);
            }
            size_t kept = 0, drawn = 0;
            for (size_t r = 0; r < t->n_rows; r++)
                if (row_kept(t, r, where_col, where_value, o.where.n)) {
                    x[kept] = hl_csv_value(t, r, xc);
                    v[kept] = hl_csv_value(t, r, yc);
                    drawn += isfinite(x[kept]) && isfinite(v[kept]);
                    kept++;
                }
            /* Still drawn, as an empty series: a column may be empty on
             * purpose, but a --where that matches nothing is likely a slip. */
            if (!drawn)
                fprintf(stderr, "plotcsv: %s: no %s has a finite value against %s%s; its series "
                        "is empty\n", path, o.ys.item[y], o.x,
                        o.where.n ? " in the rows --where keeps" : "");
            char folder[200];
            series_name(&o.files, f, folder, sizeof folder);
            if (o.ys.n > 1)
                snprintf(labels[n], sizeof labels[n], "%s %s", folder, o.ys.item[y]);
            else
                snprintf(labels[n], sizeof labels[n], "%s", folder);
            series[n] = (hl_plot_series){labels[n], x, v, (int)kept};
        }
    }
    char title[256];
    snprintf(title, sizeof title, "%s", o.ys.item[0]);
    for (int y = 1; y < o.ys.n; y++)
        snprintf(title + strlen(title), sizeof title - strlen(title), ", %s", o.ys.item[y]);
    hl_plot_panel panel = {.y_label = o.y_label ? o.y_label : o.ys.item[0], .series = series,
                           .n_series = n};
    hl_plot_opts plot = {.title = o.title ? o.title : title, .x_label = o.x};
    hl_error err = {0};
    const hl_status s = hl_plot_write(&panel, 1, o.out, &plot, &err);
    for (int i = 0; i < n; i++) {
        free(points[i][0]);
        free(points[i][1]);
    }
    for (int f = 0; f < o.files.n; f++)
        hl_csv_table_free(&tables[f]);
    if (s != HL_OK) {
        fprintf(stderr, "plotcsv: %s (--x %s, --y %s", err.message, o.x, o.ys.item[0]);
        for (int y = 1; y < o.ys.n; y++)
            fprintf(stderr, ", %s", o.ys.item[y]);
        for (int f = 0; f < o.files.n; f++)
            fprintf(stderr, "%s%s", f ? ", " : " of ", o.files.item[f]);
        fprintf(stderr, ")\n");
        return s == HL_ERR_NOMEM ? 1 : 2;
    }
    printf("wrote %s (%d series)\n", o.out, n);
    return 0;
}
