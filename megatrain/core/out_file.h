// out_file.h: what an output path (--log, --trace, --dump-grads) may name, and
// writing it without destroying what is there. Absent or a regular file: written
// to a temporary beside it and renamed over it. A symlink is followed: the file
// it names is the output and the link stays. A character device or FIFO is
// written through in place where the output is a text stream (--log, --trace:
// /dev/null, a pipe the user reads). Anything else (a directory, a block
// device, a socket, a device for a file output) is refused, naming what it is.
#ifndef MT_OUT_FILE_H
#define MT_OUT_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "core/status.h"

#define MT_OUT_PATH_MAX 4200

#include <sys/types.h>


typedef enum {
    MT_OUT_FILE = 0,   // a file readers open as a whole (safetensors): regular only
    MT_OUT_STREAM = 1, // text written front to back: a device or FIFO is written through
} mt_out_kind;

// Where PATH's output goes: dest[cap] = the file to write (symlinks followed; PATH
// itself for a device or FIFO, which *in_place says). Creates nothing.
mt_status mt_out_resolve(const char *option, const char *path, mt_out_kind kind, char *dest, size_t cap,
                         int *in_place);

typedef struct {
    const char *option;
    char path[MT_OUT_PATH_MAX];     // as given (errors name it)
    char dest[MT_OUT_PATH_MAX];     // what is written
    char tmp[MT_OUT_PATH_MAX + 32]; // the temporary beside dest ("" when written in place)
    FILE *f;
} mt_out_file;

// Opens o->f on a temporary beside the destination (or the device in place).
mt_status mt_out_open(mt_out_file *o, const char *option, const char *path, mt_out_kind kind);
// Checks every write (ferror, fflush, fsync, fclose), then renames the temporary
// into place and syncs its directory; on failure the temporary is removed.
mt_status mt_out_close(mt_out_file *o);

#endif
