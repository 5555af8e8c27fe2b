/* Self-contained HTML pages: see html.h. */
#include "report/html.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files/atomic.h"
#include "files/fs.h"

struct hl_html {
    char *buf;
    size_t size;
    FILE *f;
    int in_section;
    hl_error err;
};

static const char page_head[] =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n"
    "<style>\nbody{font-family:sans-serif;margin:2em;max-width:1200px}\n"
    "table{border-collapse:collapse;margin:1em 0}\n"
    "td,th{border:1px solid #bbb;padding:2px 8px;text-align:right;font-family:monospace}\n"
    "th{background:#eee}\nimg{max-width:100%%;display:block;margin:1em 0}\n"
    "pre{background:#f6f6f6;padding:0.5em}\n</style>\n</head>\n<body>\n<h1>%s</h1>\n";

static const char page_tail[] =
    "<p id=\"image-check\">images: not checked (scripts off)</p>\n"
    "<script>\nwindow.addEventListener('load', function () {\n"
    "  var imgs = document.images, ok = 0, widths = [];\n"
    "  for (var i = 0; i < imgs.length; i++) {\n"
    "    var w = imgs[i].complete ? imgs[i].naturalWidth : 0;\n"
    "    imgs[i].setAttribute('data-natural-width', w);\n"
    "    widths.push(w);\n"
    "    if (w > 0) ok++;\n"
    "  }\n"
    "  document.getElementById('image-check').textContent =\n"
    "    'images decoded: ' + ok + ' of ' + imgs.length + ' (widths ' + widths.join(',') + ')';\n"
    "});\n</script>\n</body>\n</html>\n";

/* Text with <, >, & and " escaped. */
static void put_escaped(FILE *f, const char *s)
{
    for (; s && *s; s++)
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
}

hl_html *hl_html_new(const char *title)
{
    hl_html *h = calloc(1, sizeof *h);
    if (!h || !(h->f = open_memstream(&h->buf, &h->size))) {
        free(h);
        return NULL;
    }
    char *escaped = NULL;
    size_t n = 0;
    FILE *t = open_memstream(&escaped, &n);
    if (!t) {
        hl_html_free(h);
        return NULL;
    }
    put_escaped(t, title);
    fclose(t);
    fprintf(h->f, page_head, escaped, escaped);
    free(escaped);
    return h;
}

void hl_html_free(hl_html *h)
{
    if (!h)
        return;
    if (h->f)
        fclose(h->f);
    free(h->buf);
    free(h);
}

void hl_html_section(hl_html *h, const char *id, const char *title)
{
    if (hl_error_failed(&h->err))
        return;
    fprintf(h->f, "%s<section id=\"", h->in_section ? "</section>\n" : "");
    put_escaped(h->f, id);
    fputs("\">\n<h2>", h->f);
    put_escaped(h->f, title);
    fputs("</h2>\n", h->f);
    h->in_section = 1;
}

void hl_html_text(hl_html *h, const char *fmt, ...)
{
    if (hl_error_failed(&h->err))
        return;
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fputs("<p>", h->f);
    put_escaped(h->f, text);
    fputs("</p>\n", h->f);
}

void hl_html_pre(hl_html *h, const char *text)
{
    if (hl_error_failed(&h->err))
        return;
    fputs("<pre>", h->f);
    put_escaped(h->f, text);
    fputs("</pre>\n", h->f);
}

void hl_html_table(hl_html *h, int n_cols, const char *const *header, const char *const *cells,
                   int n_rows)
{
    if (hl_error_failed(&h->err))
        return;
    fputs("<table>\n<tr>", h->f);
    for (int c = 0; c < n_cols; c++) {
        fputs("<th>", h->f);
        put_escaped(h->f, header[c]);
        fputs("</th>", h->f);
    }
    fputs("</tr>\n", h->f);
    for (int r = 0; r < n_rows; r++) {
        fputs("<tr>", h->f);
        for (int c = 0; c < n_cols; c++) {
            fputs("<td>", h->f);
            put_escaped(h->f, cells[(size_t)r * n_cols + c]);
            fputs("</td>", h->f);
        }
        fputs("</tr>\n", h->f);
    }
    fputs("</table>\n", h->f);
}

void hl_base64(const unsigned char *data, size_t n, char *out)
{
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        const unsigned v = (unsigned)data[i] << 16 | (i + 1 < n ? (unsigned)data[i + 1] << 8 : 0) |
                           (i + 2 < n ? data[i + 2] : 0);
        out[o++] = digits[v >> 18 & 63];
        out[o++] = digits[v >> 12 & 63];
        out[o++] = i + 1 < n ? digits[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? digits[v & 63] : '=';
    }
    out[o] = '\0';
}

void hl_html_image(hl_html *h, const char *path, const char *alt)
{
    if (hl_error_failed(&h->err))
        return;
    size_t n = 0;
    unsigned char *png = hl_fs_read_file(path, &n);
    if (!png) {
        hl_error_set(&h->err, HL_ERR_IO, "report: cannot read %s: %s", path, strerror(errno));
        return;
    }
    if (n < 8 || memcmp(png, "\x89PNG\r\n\x1a\n", 8) != 0) {
        hl_error_set(&h->err, HL_ERR_FORMAT, "report: %s is not a PNG picture", path);
        free(png);
        return;
    }
    char *b64 = malloc(4 * (n / 3 + 1) + 1);
    if (!b64) {
        hl_error_set(&h->err, HL_ERR_NOMEM, "report: out of memory for %s", path);
        free(png);
        return;
    }
    hl_base64(png, n, b64);
    fputs("<img alt=\"", h->f);
    put_escaped(h->f, alt);
    fprintf(h->f, "\" src=\"data:image/png;base64,%s\">\n", b64);
    free(b64);
    free(png);
}

hl_status hl_html_save(hl_html *h, const char *path, hl_error *err)
{
    if (hl_error_failed(&h->err))
        return hl_error_set(err, h->err.status, "%s", h->err.message);
    /* The page so far, closed, then the memory stream goes on as it was. */
    fflush(h->f);
    size_t body = h->size;
    fprintf(h->f, "%s%s", h->in_section ? "</section>\n" : "", page_tail);
    fflush(h->f);
    hl_status s = hl_atomic_write(path, h->buf, h->size, err);
    fseeko(h->f, (off_t)body, SEEK_SET);
    return s;
}
