/* Line numbers for messages: see lines.h. */
#include "text/lines.h"

size_t hl_lines_number(const char *text, size_t at)
{
    size_t line = 1;
    for (size_t i = 0; i < at; i++)
        line += text[i] == '\n';
    return line;
}
