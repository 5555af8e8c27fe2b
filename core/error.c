#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>

hl_status hl_error_set(hl_error *err, hl_status status, const char *fmt, ...)
{
    if (!err)
        return status;
    if (err->status != HL_OK)
        return err->status;
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return status;
}

void hl_error_clear(hl_error *err)
{
    err->status = HL_OK;
    err->message[0] = '\0';
}

const char *hl_status_name(hl_status status)
{
    switch (status) {
    case HL_OK: return "ok";
    case HL_ERR_ARG: return "argument";
    case HL_ERR_SHAPE: return "shape";
    case HL_ERR_NOMEM: return "out of memory";
    case HL_ERR_IO: return "i/o";
    case HL_ERR_FORMAT: return "format";
    case HL_ERR_NUMERIC: return "numeric";
    case HL_ERR_STATE: return "state";
    }
    return "unknown";
}
