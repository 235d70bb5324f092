// ckpt_carry.c: carrying the user's entries and modes across a checkpoint switch.
#define _GNU_SOURCE // renameat2, RENAME_NOREPLACE
#include "checkpoint/ckpt_carry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/ckpt_dir.h"
#include "core/file_io.h"

#define P (MT_CKPT_PATH_MAX + 512)

static int skip(const char *name) { return !strcmp(name, ".") || !strcmp(name, ".."); }

static void join(char *out, size_t cap, const char *dir, const char *name) {
    if (snprintf(out, cap, "%s/%s", dir, name) >= (int)cap) out[0] = 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const mt_carried *)a)->name, ((const mt_carried *)b)->name);
}

static int key_by_name(const void *k, const void *e) { return strcmp(k, ((const mt_carried *)e)->name); }

static mt_carried *find(mt_carry_list *l, const char *name) {
    return l && l->n ? bsearch(name, l->e, (size_t)l->n, sizeof *l->e, key_by_name) : NULL;
}

static mt_status record(mt_carry_list *l, const char *name, ino_t from, ino_t to, int moved) {
    if (!l) return MT_OK;
    if (strlen(name) >= sizeof l->e[0].name) return mt_fail(MT_ERR_IO, "%s: name too long to carry over", name);
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        mt_carried *e = realloc(l->e, (size_t)cap * sizeof *e);
        if (!e) return mt_fail(MT_ERR_MEMORY, "out of memory recording the entries a save carries over");
        l->e = e;
        l->cap = cap;
    }
    mt_carried *c = &l->e[l->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->name, sizeof c->name, "%s", name);
    c->from_ino = from;
    c->to_ino = to;
    c->moved = moved;
    return MT_OK;
}

void mt_carry_list_free(mt_carry_list *l) {
    free(l->e);
    memset(l, 0, sizeof *l);
}

mt_status mt_carry_into(const char *dir, const char *staged, int trial, mt_carry_list *list) {
    DIR *dp = opendir(dir);
    if (!dp) return errno == ENOENT ? MT_OK : mt_fail(MT_ERR_IO, "%s: cannot open: %s", dir, strerror(errno));
    char from[P], to[P];
    mt_status s = MT_OK;
    for (struct dirent *e; (e = readdir(dp)) && s == MT_OK;) {
        if (skip(e->d_name) || mt_ckpt_file_of(e->d_name) != MT_CKPT_FOREIGN) continue;
        join(from, sizeof from, dir, e->d_name);
        join(to, sizeof to, staged, e->d_name);
        struct stat sb, tb;
        if (lstat(from, &sb) != 0) continue;
        if (S_ISDIR(sb.st_mode)) {
            if (trial) continue;
            if (rename(from, to) == 0) s = record(list, e->d_name, sb.st_ino, sb.st_ino, 1);
            else if (errno != ENOENT) // ENOENT: removed or renamed since the listing, nothing to carry
                s = mt_fail(MT_ERR_IO, "%s: cannot move the subdirectory %s into the new checkpoint: %s; move it out "
                                       "of %s",
                            dir, e->d_name, strerror(errno), dir);
            continue;
        }
        if (S_ISLNK(sb.st_mode)) {
            char target[MT_CKPT_PATH_MAX];
            ssize_t n = readlink(from, target, sizeof target - 1);
            if (n < 0 && errno == ENOENT) continue; // removed or renamed since the listing: the sweep sees it
            if (n < 0 || (target[n] = 0, symlink(target, to) != 0))
                s = mt_fail(MT_ERR_IO, "%s: cannot carry %s over into the new checkpoint: %s", dir, e->d_name,
                            strerror(errno));
        } else if (link(from, to) != 0) {
            if (errno == ENOENT) continue; // removed or renamed since the listing: the sweep sees what came after
            s = mt_fail(MT_ERR_IO, "%s: cannot carry %s over into the new checkpoint (hard link): %s", dir, e->d_name,
                        strerror(errno));
        }
        if (s == MT_OK && lstat(to, &tb) == 0) s = record(list, e->d_name, sb.st_ino, tb.st_ino, 0);
    }
    closedir(dp);
    if (list && list->n) qsort(list->e, (size_t)list->n, sizeof *list->e, by_name);
    return s;
}

mt_status mt_carry_modes(const char *dir, const char *staged) {
    struct stat of_kind[5];
    int have[5] = {0};
    char p[P], q[P];
    DIR *dp = opendir(dir);
    if (!dp) return MT_OK; // the first save: the umask's modes
    for (struct dirent *e; (e = readdir(dp));) {
        int k = (int)mt_ckpt_file_of(e->d_name);
        struct stat sb;
        join(p, sizeof p, dir, e->d_name);
        if (k == MT_CKPT_FOREIGN || have[k] || lstat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        of_kind[k] = sb;
        have[k] = 1;
    }
    closedir(dp);
    if (!(dp = opendir(staged))) return mt_fail(MT_ERR_IO, "%s: cannot open: %s", staged, strerror(errno));
    mt_status s = MT_OK;
    for (struct dirent *e; (e = readdir(dp)) && s == MT_OK;) {
        int k = (int)mt_ckpt_file_of(e->d_name);
        if (k == MT_CKPT_FOREIGN) continue;
        struct stat sb;
        join(p, sizeof p, dir, e->d_name);
        join(q, sizeof q, staged, e->d_name);
        if (lstat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {    // its predecessor
        } else if (have[k]) sb = of_kind[k];                // a new shard: as its siblings
        else if (have[MT_CKPT_MANIFEST]) sb = of_kind[MT_CKPT_MANIFEST];
        else continue;
        s = mt_file_copy_mode(-1, q, &sb, sb.st_mode & 07777);
    }
    closedir(dp);
    return s;
}

// from -> to unless `to` exists (the check and the move one step where the
// filesystem can). 0 on success.
static int move_noreplace(const char *from, const char *to, int is_dir) {
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) return -1;
    struct stat sb;
    if (is_dir) return lstat(to, &sb) == 0 ? (errno = EEXIST, -1) : rename(from, to);
    if (link(from, to) != 0) return -1; // link never replaces
    return unlink(from);
}

// A subdirectory made in DIR while the carried one was away (between its move
// and the switch; `mkdir -p` makes one): its entries join the carried one, by
// name where free; where both hold a file the later write wins. 1 when from is gone.
static int merge_dirs(const char *from, const char *to, int depth) {
    DIR *dp = depth < 32 ? opendir(from) : NULL;
    if (!dp) return 0;
    char a[P], b[P];
    for (struct dirent *e; (e = readdir(dp));) {
        struct stat fa, fb;
        if (skip(e->d_name)) continue;
        join(a, sizeof a, from, e->d_name);
        join(b, sizeof b, to, e->d_name);
        if (!a[0] || !b[0] || lstat(a, &fa) != 0) continue;
        if (lstat(b, &fb) != 0) move_noreplace(a, b, S_ISDIR(fa.st_mode));
        else if (S_ISDIR(fa.st_mode) && S_ISDIR(fb.st_mode)) merge_dirs(a, b, depth + 1);
        else if (S_ISDIR(fa.st_mode) || S_ISDIR(fb.st_mode)) continue; // a file against a directory: both stay
        else if (fa.st_mtim.tv_sec > fb.st_mtim.tv_sec ||
                 (fa.st_mtim.tv_sec == fb.st_mtim.tv_sec && fa.st_mtim.tv_nsec >= fb.st_mtim.tv_nsec))
            rename(a, b);
        else unlink(a);
    }
    closedir(dp);
    return rmdir(from) == 0;
}

mt_status mt_carry_sweep(const char *old, const char *dir, mt_carry_list *list) {
    char from[P], to[P];
    int swept = 0, idle = 0;
    for (int pass = 0; pass < 1000; pass++) {
        DIR *dp = opendir(old);
        if (!dp) {
            if (errno == ENOENT) break;
            return mt_fail(MT_ERR_IO, "%s: cannot open the previous checkpoint to carry its late files over: %s", old,
                           strerror(errno));
        }
        int acted = 0;
        for (struct dirent *e; (e = readdir(dp));) {
            if (skip(e->d_name)) continue;
            join(from, sizeof from, old, e->d_name);
            join(to, sizeof to, dir, e->d_name);
            struct stat ob, nb;
            if (lstat(from, &ob) != 0) continue;
            int is_dir = S_ISDIR(ob.st_mode);
            if (mt_ckpt_file_of(e->d_name) != MT_CKPT_FOREIGN && !is_dir) { // the previous checkpoint's own
                acted += unlink(from) == 0;
                continue;
            }
            mt_carried *c = find(list, e->d_name);
            if (c && !c->moved && ob.st_ino == c->from_ino) { // carried, and the new DIR has it
                c->seen = 1;
                acted += unlink(from) == 0;
                continue;
            }
            // Made or replaced in DIR after the carry (a writer that raced the switch).
            if (lstat(to, &nb) != 0) {
                acted += move_noreplace(from, to, is_dir) == 0;
            } else if (c && !c->moved && nb.st_ino == c->to_ino && !is_dir && !S_ISDIR(nb.st_mode)) {
                acted += rename(from, to) == 0; // its newer version replaces the copy carried before
            } else if (!is_dir) {
                acted += unlink(from) == 0; // written again into the new DIR since: that one is the latest
            } else if (S_ISDIR(nb.st_mode)) {
                acted += merge_dirs(from, to, 0);
            }
        }
        closedir(dp);
        swept = 1;
        if (rmdir(old) == 0) break;
        // Not empty: a file came during the pass (again), or what stays cannot move (kept, named below).
        if ((errno != ENOTEMPTY && errno != EEXIST) || (idle = acted ? 0 : idle + 1) == 3) break;
    }
    struct stat ob;
    if (lstat(old, &ob) == 0)
        fprintf(stderr, "megatrain: note: %s keeps what could not be carried into %s (a name both hold, or a "
                        "permission); the next run saving into it moves what it can\n",
                old, dir);
    // Removed from DIR between the carry and the switch: removed from the new DIR too.
    for (int i = 0; swept && list && i < list->n; i++) {
        const mt_carried *c = &list->e[i];
        struct stat nb;
        join(to, sizeof to, dir, c->name);
        if (!c->moved && !c->seen && lstat(to, &nb) == 0 && nb.st_ino == c->to_ino) unlink(to);
    }
    return mt_fsync_dir(dir);
}

void mt_carry_rescue(const char *leftover, const char *dir, int files) {
    DIR *dp = opendir(leftover);
    if (!dp) return;
    struct stat db;
    int have_dir = stat(dir, &db) == 0;
    char from[P], to[P];
    for (struct dirent *e; (e = readdir(dp));) {
        struct stat sb;
        if (skip(e->d_name)) continue;
        join(from, sizeof from, leftover, e->d_name);
        join(to, sizeof to, dir, e->d_name);
        if (lstat(from, &sb) != 0) continue;
        int is_dir = S_ISDIR(sb.st_mode);
        int users = is_dir || (files && mt_ckpt_file_of(e->d_name) == MT_CKPT_FOREIGN &&
                               (S_ISLNK(sb.st_mode) || sb.st_nlink == 1)); // no other name holds it
        if (!users) {
            unlink(from); // ours, or a copy DIR holds too
            continue;
        }
        if (have_dir && move_noreplace(from, to, is_dir) == 0)
            fprintf(stderr, "megatrain: moved %s back into %s (a save was interrupted while carrying it over)\n",
                    e->d_name, dir);
        else if (have_dir && errno == EEXIST && S_ISLNK(sb.st_mode))
            unlink(from); // a symlink carried as a copy: DIR holds the name
        else
            fprintf(stderr, "megatrain: note: %s stays where an interrupted save left it\n", from);
    }
    closedir(dp);
    if (rmdir(leftover) != 0 && errno != ENOENT)
        fprintf(stderr, "megatrain: note: %s: cannot remove: %s\n", leftover, strerror(errno));
}
