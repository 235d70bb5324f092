// status.c: the thread-local error message behind mt_fail / mt_last_error.
#include "core/status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

mt_status mt_fail(mt_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return s;
}

const char *mt_last_error(void) { return last_error[0] ? last_error : "unknown error"; }

const char *mt_status_name(mt_status s) {
    switch (s) {
    case MT_OK: return "ok";
    case MT_ERR_IO: return "io";
    case MT_ERR_FORMAT: return "format";
    case MT_ERR_SHAPE: return "shape";
    case MT_ERR_ARG: return "argument";
    case MT_ERR_MEMORY: return "memory";
    case MT_ERR_BACKEND: return "backend";
    case MT_ERR_UNSUPPORTED: return "unsupported";
    case MT_ERR_INTERRUPTED: return "interrupted";
    }
    return "?";
}
