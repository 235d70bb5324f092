// file_io.c: stdio with every failure turned into one line naming the path.
#define _POSIX_C_SOURCE 200809L
#include "core/file_io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

mt_status mt_file_read_text(const char *path, const char *what, size_t max_bytes, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return mt_fail(MT_ERR_IO, "%s: cannot open %s: %s", path, what, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !(S_ISREG(sb.st_mode) || S_ISFIFO(sb.st_mode))) {
        fclose(f);
        return mt_fail(MT_ERR_IO, "%s: not a regular file (expected %s)", path, what);
    }
    if (S_ISREG(sb.st_mode) && (size_t)sb.st_size > max_bytes) {
        fclose(f);
        return mt_fail(MT_ERR_FORMAT, "%s: %lld bytes is too large for %s", path, (long long)sb.st_size, what);
    }
    char *text = NULL;
    size_t n = 0, cap = 0, got;
    do { // chunked, so pipes work too
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 16384;
            char *t = cap <= max_bytes + 4097 ? realloc(text, cap) : NULL;
            if (!t) {
                free(text);
                fclose(f);
                return cap > max_bytes + 4097 ? mt_fail(MT_ERR_FORMAT, "%s: too large for %s", path, what)
                                              : mt_fail(MT_ERR_MEMORY, "%s: cannot allocate a read buffer", path);
            }
            text = t;
        }
        got = fread(text + n, 1, 4096, f);
        n += got;
    } while (got == 4096);
    int err = ferror(f);
    fclose(f);
    if (err || n > max_bytes) {
        free(text);
        return err ? mt_fail(MT_ERR_IO, "%s: read failed", path)
                   : mt_fail(MT_ERR_FORMAT, "%s: too large for %s", path, what);
    }
    text[n] = 0;
    *out = text;
    *len = n;
    return MT_OK;
}

mt_status mt_file_write_atomic(const char *path, const void *data, size_t len) {
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    mt_status s = MT_OK;
    FILE *f = fopen(tmp, "wb");
    if (!f) s = mt_fail(MT_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
    if (s == MT_OK && (fwrite(data, 1, len, f) != len || fflush(f) != 0 || fsync(fileno(f)) != 0))
        s = mt_fail(MT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (f && fclose(f) != 0 && s == MT_OK) s = mt_fail(MT_ERR_IO, "%s: close failed: %s", path, strerror(errno));
    if (s == MT_OK && rename(tmp, path) != 0)
        s = mt_fail(MT_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
    if (s != MT_OK && f) unlink(tmp);
    free(tmp);
    return s;
}
