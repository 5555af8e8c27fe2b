/*
 * html.h: a self-contained HTML page built in memory — sections, headings,
 * paragraphs, tables and PNG pictures embedded as base64 data URIs — saved
 * atomically. Nothing in it loads from the network, so it opens anywhere.
 * At the end of the page a small script writes each picture's decoded width
 * into its data-natural-width attribute and a summary line into
 * <p id="image-check"> ("images decoded: 5 of 5"), for tests and for readers.
 *
 * The builder keeps the first error (cairo's model): later calls do nothing
 * and hl_html_save reports it.
 *
 *     hl_html *h = hl_html_new("heads of model.safetensors");
 *     hl_html_section(h, "roles", "Roles");
 *     hl_html_table(h, 2, (const char *[]){"head", "role"}, cells, n_rows);
 *     hl_html_image(h, "out/scores.png", "detectors");
 *     if (hl_html_save(h, "out/report.html", &err) != HL_OK) ...err.message...
 *     hl_html_free(h);
 */
#ifndef HL_HTML_H
#define HL_HTML_H

#include <stddef.h>

#include "core/error.h"

typedef struct hl_html hl_html;

/* NULL only when out of memory. */
hl_html *hl_html_new(const char *title);
void hl_html_free(hl_html *h);

/* Starts <section id="id"> with an <h2> title (closing the previous one). */
void hl_html_section(hl_html *h, const char *id, const char *title);
/* An escaped paragraph, printf-style. */
void hl_html_text(hl_html *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Escaped preformatted text. */
void hl_html_pre(hl_html *h, const char *text);
/* A table: n_cols header cells, then n_rows rows of n_cols cells, row-major. */
void hl_html_table(hl_html *h, int n_cols, const char *const *header, const char *const *cells,
                   int n_rows);
/* The PNG file at path, embedded (its bytes must start with the PNG signature). */
void hl_html_image(hl_html *h, const char *path, const char *alt);

/* Writes the page atomically (files/atomic.h). */
hl_status hl_html_save(hl_html *h, const char *path, hl_error *err);

/* Base64 (RFC 4648, padded) of n bytes into out (4*ceil(n/3)+1 bytes, NUL-terminated). */
void hl_base64(const unsigned char *data, size_t n, char *out);

#endif
