// status.h: error status codes and a thread-local "last error" message.
// Library code never prints or exits: it returns a status and leaves one
// line in mt_last_error() that names the file or option and what is wrong.
#ifndef MT_STATUS_H
#define MT_STATUS_H

typedef enum {
    MT_OK = 0,
    MT_ERR_IO,          // file missing, unreadable, unwritable
    MT_ERR_FORMAT,      // malformed file content (JSON, safetensors header, ...)
    MT_ERR_SHAPE,       // shapes contradict each other or the config
    MT_ERR_ARG,         // bad option / argument value
    MT_ERR_MEMORY,      // allocation failed or refused by the memory budget
    MT_ERR_BACKEND,     // a backend (CUDA, BLAS) call failed
    MT_ERR_UNSUPPORTED, // valid but not implemented (e.g. bf16 activations on cpu)
    MT_ERR_INTERRUPTED, // stopped by a signal
} mt_status;

// Sets the thread-local message (printf-style) and returns s, so callers write
//   return mt_fail(MT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
mt_status mt_fail(mt_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *mt_last_error(void);
const char *mt_status_name(mt_status s);

#define MT_TRY(expr)                       \
    do {                                   \
        mt_status mt_try_s_ = (expr);      \
        if (mt_try_s_ != MT_OK) return mt_try_s_; \
    } while (0)

#endif
