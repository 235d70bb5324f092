// file_io.h: whole-file reads and crash-safe writes for the small text files
// (config.json, train_state.json, hardware profiles). Errors name the path.
#ifndef MT_FILE_IO_H
#define MT_FILE_IO_H

#include <stddef.h>
#include <sys/stat.h>

#include "core/status.h"

// Opens PATH read-only and refuses, before any read, what is not a regular file:
// opening a FIFO blocks until a writer comes (forever, for a FIFO left in place of
// a model file), and a device or socket never ends. The open itself does not block
// (O_NONBLOCK, cleared once the file is known to be regular). `what` (may be NULL)
// names the expected content: "PATH: not a regular file but a FIFO (expected WHAT)".
// *sb receives the file's stat (may be NULL).
mt_status mt_file_open_regular(const char *path, const char *what, int *fd, struct stat *sb);
// "a FIFO", "a directory", "a character device", ... for messages.
const char *mt_file_kind(mode_t mode);

// Reads a regular file of at most max_bytes into a NUL-terminated buffer the
// caller frees (mt_file_open_regular first: a FIFO or device is refused, never
// waited on). `what` names the expected content in errors:
// "PATH: cannot open WHAT: ...", "PATH: not a regular file but a FIFO (expected WHAT)".
mt_status mt_file_read_text(const char *path, const char *what, size_t max_bytes, char **out, size_t *len);
// Writes len bytes to PATH.<pid>.tmp, fsyncs, renames it over PATH and fsyncs the
// directory: PATH is either the old file or the complete new one, never a partial
// one, and two processes writing the same PATH never share a temporary name.
mt_status mt_file_write_atomic(const char *path, const void *data, size_t len);
// Creates the temporary TMP (O_EXCL, never through a link) that will be renamed
// over DEST, with DEST's permission bits where DEST exists (a file the user made
// private stays private), else the umask's: every writer that replaces a file
// goes through here. Errors name DEST and TMP.
mt_status mt_file_create_replacing(const char *tmp, const char *dest, int *fd);
// Gives what fd (or, when fd < 0, path itself) names the permission bits `mode`
// and, where this process may, the owner and group of `from`, so the file or
// directory that replaces another is as private, and as shared, as it was.
mt_status mt_file_copy_mode(int fd, const char *path, const struct stat *from, mode_t mode);
// strerror(err) for a failed write; for EFBIG also the file size limit the
// process runs under (RLIMIT_FSIZE, `ulimit -f`) and a HINT to raise it, in
// parentheses, so that what a caller appends still reads.
// A thread-local buffer, valid until the next call.
const char *mt_write_strerror(int err);
// "PATH.<pid>.tmp" into tmp[cap] (0 when it does not fit).
int mt_file_tmp_name(const char *path, char *tmp, size_t cap);
// fsync of a directory (after a rename or unlink in it, so the change is durable).
// Filesystems that refuse fsync on a directory (EINVAL) count as success.
mt_status mt_fsync_dir(const char *dir);
// The directory holding PATH ("." for a bare name) into out[cap].
void mt_path_dirname(const char *path, char *out, size_t cap);

#endif
