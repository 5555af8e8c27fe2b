/*
 * lines.h: where a byte lies in a text, for messages that name its line
 * (internal, not installed).
 */
#ifndef HL_TEXT_LINES_H
#define HL_TEXT_LINES_H

#include <stddef.h>

/* The line, counted from 1, that holds byte at of text (the newlines before
 * it, plus one). */
size_t hl_lines_number(const char *text, size_t at);

#endif
