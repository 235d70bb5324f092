// out_file.c: outputs resolved by kind and written through a temporary, so no
// output option ever replaces a device node or a symlink with a regular file.
#define _POSIX_C_SOURCE 200809L
#include "core/out_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file_io.h"

// The last component's symlinks followed by hand, so a dangling link names the
// file to create (realpath cannot): out = the final path.
static mt_status follow_links(const char *option, const char *path, char *out, size_t cap) {
    if (snprintf(out, cap, "%s", path) >= (int)cap) return mt_fail(MT_ERR_ARG, "%s %s: path too long", option, path);
    struct stat sb;
    for (int hops = 0; lstat(out, &sb) == 0 && S_ISLNK(sb.st_mode); hops++) {
        char target[MT_OUT_PATH_MAX], dir[MT_OUT_PATH_MAX];
        ssize_t k = hops < 40 ? readlink(out, target, sizeof target - 1) : -1;
        if (k <= 0) return mt_fail(MT_ERR_IO, "%s %s: cannot follow the symbolic link %s", option, path, out);
        target[k] = 0;
        mt_path_dirname(out, dir, sizeof dir);
        int n = target[0] == '/' ? snprintf(out, cap, "%s", target) : snprintf(out, cap, "%s/%s", dir, target);
        if (n >= (int)cap) return mt_fail(MT_ERR_ARG, "%s %s: the link's target path is too long", option, path);
    }
    return MT_OK;
}

mt_status mt_out_resolve(const char *option, const char *path, mt_out_kind kind, char *dest, size_t cap,
                         int *in_place) {
    *in_place = 0;
    struct stat sb;
    // stat follows the kernel's way first: /dev/stdout's /proc/self/fd/1 names a
    // pipe no readlink can spell, and a device is written at the path given.
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
        if (kind == MT_OUT_STREAM && (S_ISCHR(sb.st_mode) || S_ISFIFO(sb.st_mode))) {
            if (snprintf(dest, cap, "%s", path) >= (int)cap)
                return mt_fail(MT_ERR_ARG, "%s %s: path too long", option, path);
            *in_place = 1;
            return MT_OK;
        }
        return mt_fail(MT_ERR_IO, "%s %s: is %s; megatrain writes this output only to a regular file%s", option, path,
                       mt_file_kind(sb.st_mode),
                       kind == MT_OUT_STREAM ? " (or through a character device or FIFO)" : ", never through a device");
    }
    return follow_links(option, path, dest, cap);
}

mt_status mt_out_open(mt_out_file *o, const char *option, const char *path, mt_out_kind kind) {
    memset(o, 0, sizeof *o);
    o->option = option;
    snprintf(o->path, sizeof o->path, "%s", path);
    int in_place;
    MT_TRY(mt_out_resolve(option, path, kind, o->dest, sizeof o->dest, &in_place));
    if (!in_place && !mt_file_tmp_name(o->dest, o->tmp, sizeof o->tmp))
        return mt_fail(MT_ERR_ARG, "%s %s: path too long", option, path);
    if (in_place) {
        o->f = fopen(o->dest, "w");
    } else { // a fresh file with the replaced one's mode, never through a planted link
        int fd;
        mt_status s = mt_file_create_replacing(o->tmp, o->dest, &fd);
        if (s != MT_OK) {
            o->tmp[0] = 0;
            return mt_fail(s, "%s %s: %s", option, path, mt_last_error());
        }
        o->f = fdopen(fd, "w");
        if (!o->f) {
            close(fd);
            unlink(o->tmp);
        }
    }
    if (!o->f) {
        mt_status s = mt_fail(MT_ERR_IO, "%s %s: cannot open %s for writing: %s", option, path,
                              in_place ? o->dest : o->tmp, strerror(errno));
        o->tmp[0] = 0;
        return s;
    }
    errno = 0; // the first failed write's errno is what mt_out_close reports
    return MT_OK;
}

mt_status mt_out_close(mt_out_file *o) {
    if (!o->f) return mt_fail(MT_ERR_ARG, "%s %s: not open", o->option, o->path);
    int bad = ferror(o->f) || fflush(o->f) != 0 || (o->tmp[0] && fsync(fileno(o->f)) != 0);
    int err = errno ? errno : EIO;
    if (fclose(o->f) != 0 && !bad) bad = 1, err = errno;
    o->f = NULL;
    mt_status s = MT_OK;
    if (bad) s = mt_fail(MT_ERR_IO, "%s %s: write failed: %s", o->option, o->path, mt_write_strerror(err));
    else if (o->tmp[0] && rename(o->tmp, o->dest) != 0)
        s = mt_fail(MT_ERR_IO, "%s %s: cannot rename %s into place: %s", o->option, o->path, o->tmp, strerror(errno));
    if (s != MT_OK && o->tmp[0]) unlink(o->tmp);
    if (s == MT_OK && o->tmp[0]) {
        char dir[MT_OUT_PATH_MAX];
        mt_path_dirname(o->dest, dir, sizeof dir);
        s = mt_fsync_dir(dir);
    }
    o->tmp[0] = 0;
    return s;
}
