/*
 * error.h: the sticky error record shared by graphs, parameter blocks and I/O.
 *
 * Library code never prints, exits or aborts on bad user input. It records the
 * first error in an hl_error (later errors are dropped, so the message names
 * the root cause) and returns a status or a poisoned result. Callers check once:
 *
 *     hl_error err = {0};
 *     if (hl_safetensors_read(path, &file, &err) != HL_OK)
 *         fprintf(stderr, "%s\n", err.message);
 */
#ifndef HL_ERROR_H
#define HL_ERROR_H

#include <stdbool.h>

typedef enum hl_status {
    HL_OK = 0,
    HL_ERR_ARG,     /* a bad argument: NULL, out of range, bad flag */
    HL_ERR_SHAPE,   /* shapes or ranks that do not fit the operation */
    HL_ERR_NOMEM,   /* an allocation failed */
    HL_ERR_IO,      /* a file could not be opened, read or written */
    HL_ERR_FORMAT,  /* a file's contents break its format's rules */
    HL_ERR_NUMERIC, /* a NaN or an infinity where finite numbers are needed */
    HL_ERR_STATE    /* a call at the wrong time (e.g. adding after commit) */
} hl_status;

#define HL_ERROR_MESSAGE_MAX 512

typedef struct hl_error {
    hl_status status;                   /* HL_OK until the first error */
    char message[HL_ERROR_MESSAGE_MAX]; /* the first error's message */
} hl_error;

/* Record an error unless one is already recorded; returns the stored status
 * (so `return hl_error_set(...)` reports the first error, not this one). With
 * err NULL nothing is recorded and status is returned. */
hl_status hl_error_set(hl_error *err, hl_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline bool hl_error_failed(const hl_error *err) { return err->status != HL_OK; }

void hl_error_clear(hl_error *err);

/* A short name for a status, e.g. "shape". */
const char *hl_status_name(hl_status status);

#endif
