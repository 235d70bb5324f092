// file_io.c: stdio with every failure turned into one line naming the path.
#define _POSIX_C_SOURCE 200809L
#include "core/file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

const char *mt_file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link"; // from lstat
    return "not a regular file";
}

mt_status mt_file_open_regular(const char *path, const char *what, int *fd_out, struct stat *sb_out) {
    *fd_out = -1;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return mt_fail(MT_ERR_IO, "%s: cannot open%s%s: %s", path, what ? " " : "", what ? what : "", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return mt_fail(MT_ERR_IO, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return mt_fail(MT_ERR_IO, "%s: not a regular file but %s%s%s%s", path, mt_file_kind(sb.st_mode),
                       what ? " (expected " : "", what ? what : "", what ? ")" : "");
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl != -1) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); // a regular file: ordinary reads from here on
    if (sb_out) *sb_out = sb;
    *fd_out = fd;
    return MT_OK;
}

mt_status mt_file_read_text(const char *path, const char *what, size_t max_bytes, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    int fd;
    struct stat sb;
    MT_TRY(mt_file_open_regular(path, what, &fd, &sb));
    if ((size_t)sb.st_size > max_bytes) {
        close(fd);
        return mt_fail(MT_ERR_FORMAT, "%s: %lld bytes is too large for %s", path, (long long)sb.st_size, what);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return mt_fail(MT_ERR_IO, "%s: cannot open %s: %s", path, what, strerror(errno));
    }
    char *text = NULL;
    size_t n = 0, cap = 0, got;
    do { // chunked: the file may grow while it is read
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

int mt_file_tmp_name(const char *path, char *tmp, size_t cap) {
    int n = snprintf(tmp, cap, "%s.%ld.tmp", path, (long)getpid());
    return n > 0 && (size_t)n < cap;
}

void mt_path_dirname(const char *path, char *out, size_t cap) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--; // "a/b/" is "a/b"
    while (n > 0 && path[n - 1] != '/') n--;
    while (n > 1 && path[n - 1] == '/') n--;
    if (n == 0) snprintf(out, cap, ".");
    else snprintf(out, cap, "%.*s", (int)n, path);
}

mt_status mt_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return mt_fail(MT_ERR_IO, "%s: cannot open the directory to sync it: %s", dir, strerror(errno));
    int rc = fsync(fd), err = errno;
    close(fd);
    if (rc != 0 && err != EINVAL && err != EROFS)
        return mt_fail(MT_ERR_IO, "%s: fsync of the directory failed: %s", dir, strerror(err));
    return MT_OK;
}

mt_status mt_file_create_replacing(const char *tmp, const char *dest, int *fd) {
    struct stat sb;
    int keep = stat(dest, &sb) == 0 && S_ISREG(sb.st_mode);
    unlink(tmp); // a leftover of a killed writer with our pid, or a planted link: never written through
    // Private from the start when it replaces a file, then given the old file's
    // bits exactly (fchmod, which the umask does not touch).
    *fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, keep ? 0600 : 0666);
    if (*fd < 0) return mt_fail(MT_ERR_IO, "%s: cannot create %s: %s", dest, tmp, strerror(errno));
    if (keep && mt_file_copy_mode(*fd, tmp, &sb, sb.st_mode & 07777) != MT_OK) {
        close(*fd);
        *fd = -1;
        unlink(tmp);
        return mt_fail(MT_ERR_IO, "%s: %s", dest, mt_last_error());
    }
    return MT_OK;
}

mt_status mt_file_copy_mode(int fd, const char *path, const struct stat *from, mode_t mode) {
    // Owner and group first (a chown clears set-id bits); only root may give a
    // file away, and only to a group it is in otherwise: best effort.
    if (fd >= 0 ? fchown(fd, from->st_uid, from->st_gid) != 0 : lchown(path, from->st_uid, from->st_gid) != 0) {
        if (fd >= 0) (void)!fchown(fd, (uid_t)-1, from->st_gid);
        else (void)!lchown(path, (uid_t)-1, from->st_gid);
    }
    if (fd >= 0 ? fchmod(fd, mode) != 0 : chmod(path, mode) != 0)
        return mt_fail(MT_ERR_IO, "%s: cannot give it the mode %04o: %s", path, (unsigned)mode, strerror(errno));
    return MT_OK;
}

const char *mt_write_strerror(int err) {
    static _Thread_local char buf[320];
    struct rlimit rl;
    if (err != EFBIG) return strerror(err);
    if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        snprintf(buf, sizeof buf, "%s: over the file size limit of %llu bytes (`ulimit -f` %llu) this process runs "
                                  "under (RLIMIT_FSIZE; HINT: raise it before the run, `ulimit -f unlimited`)",
                 strerror(err), (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_cur / 1024);
    else
        snprintf(buf, sizeof buf, "%s: over the largest file this filesystem holds (HINT: write it to another "
                                  "filesystem)",
                 strerror(err));
    return buf;
}

mt_status mt_file_write_atomic(const char *path, const void *data, size_t len) {
    char tmp[4200];
    if (!mt_file_tmp_name(path, tmp, sizeof tmp)) return mt_fail(MT_ERR_ARG, "%s: path too long", path);
    int fd;
    MT_TRY(mt_file_create_replacing(tmp, path, &fd));
    mt_status s = MT_OK;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        s = mt_fail(MT_ERR_IO, "%s: cannot open %s: %s", path, tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return s;
    }
    if (fwrite(data, 1, len, f) != len || fflush(f) != 0 || fsync(fileno(f)) != 0)
        s = mt_fail(MT_ERR_IO, "%s: write failed: %s", path, mt_write_strerror(errno));
    if (fclose(f) != 0 && s == MT_OK) s = mt_fail(MT_ERR_IO, "%s: close failed: %s", path, mt_write_strerror(errno));
    if (s == MT_OK && rename(tmp, path) != 0)
        s = mt_fail(MT_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
    if (s != MT_OK && f) unlink(tmp);
    if (s == MT_OK) {
        char dir[4200];
        mt_path_dirname(path, dir, sizeof dir);
        s = mt_fsync_dir(dir);
    }
    return s;
}
