// ckpt_dir.c: the checkpoint directory's lock, staging, switch and clean-up.
// Every step that changes what DIR names is a rename followed by an fsync of
// the parent, so after a crash DIR is the old checkpoint or the new one, whole.
#define _GNU_SOURCE // renameat2, RENAME_EXCHANGE
#include "checkpoint/ckpt_dir.h"
#include "checkpoint/ckpt_carry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/env.h"
#include "core/file_io.h"
#include "core/json_file.h"
#include "core/out_file.h"
#include "engine/model_io.h"

// STEM-DDDDD-of-DDDDD.safetensors (at least five digits each, 1 <= i <= n): a shard.
static int is_shard_of(const char *name, const char *stem) {
    size_t k = strlen(stem);
    if (strncmp(name, stem, k) || name[k] != '-') return 0;
    const char *p = name + k + 1;
    size_t a = strspn(p, "0123456789");
    if (a < 5 || strncmp(p + a, "-of-", 4)) return 0;
    const char *q = p + a + 4;
    size_t b = strspn(q, "0123456789");
    if (b < 5 || strcmp(q + b, ".safetensors")) return 0;
    long i = strtol(p, NULL, 10), n = strtol(q, NULL, 10);
    return i >= 1 && i <= n;
}

mt_ckpt_file_kind mt_ckpt_file_of(const char *name) {
    if (!strcmp(name, "checkpoint.json")) return MT_CKPT_MANIFEST;
    if (!strcmp(name, "config.json") || !strcmp(name, "train_state.json") ||
        !strcmp(name, "model.safetensors.index.json") || !strcmp(name, "optimizer.safetensors.index.json"))
        return MT_CKPT_SMALL;
    if (!strcmp(name, "model.safetensors") || is_shard_of(name, "model")) return MT_CKPT_WEIGHTS;
    if (!strcmp(name, "optimizer.safetensors") || is_shard_of(name, "optimizer")) return MT_CKPT_MOMENTS;
    return MT_CKPT_FOREIGN;
}

// Test hooks, so the tests can stop a save at each point that matters rather
// than hope a random SIGKILL lands there: MT_FAULT_KILL_AT=POINT[:N] kills the
// process the N-th time (default 1st) a save reaches POINT (staged, exchanged,
// moved-aside); MT_FAULT_NO_EXCHANGE=1 takes the path of a filesystem without
// RENAME_EXCHANGE.
// MT_FAULT_TERM_AT=POINT[:N] sends SIGTERM there instead, as a user's kill would.
static void fault_point(const char *name) {
    static int hits[2];
    const char *const vars[2] = {"MT_FAULT_KILL_AT", "MT_FAULT_TERM_AT"};
    const int sigs[2] = {SIGKILL, SIGTERM};
    size_t n = strlen(name);
    for (int i = 0; i < 2; i++) {
        const char *at = getenv(vars[i]);
        if (!at || strncmp(at, name, n) || (at[n] != 0 && at[n] != ':')) continue;
        if (++hits[i] >= (at[n] == ':' ? atoi(at + n + 1) : 1)) raise(sigs[i]);
    }
}


// ".NAME.tmp-PID-XXXXXXXX" or ".NAME.old-PID-XXXXXXXX" (unique_name's pattern):
// a staging or moved-aside directory of DIR.
static int is_temp_of(const char *entry, const char *name, const char *kind) {
    size_t n = strlen(name);
    if (entry[0] != '.' || strncmp(entry + 1, name, n) || entry[1 + n] != '.' || strncmp(entry + 2 + n, kind, 4))
        return 0;
    const char *p = entry + 6 + n, *dash = strchr(p, '-');
    return dash && dash > p && strspn(p, "0123456789") == (size_t)(dash - p) && strlen(dash + 1) == 8 &&
           strspn(dash + 1, "0123456789abcdef") == 8;
}

// out = dir/name ("" when it does not fit: every caller's buffer holds a path plus a name).
static void join(char *out, size_t cap, const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    out[0] = 0;
    if (a + b + 2 > cap) return;
    memcpy(out, dir, a);
    out[a] = '/';
    memcpy(out + a + 1, name, b + 1);
}

// A unique suffix: pid and 32 random bits, so two runs never pick the same name.
static void unique_name(char *out, size_t cap, const char *name, const char *kind) {
    unsigned r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) r = (unsigned)time(NULL) ^ (unsigned)clock();
    snprintf(out, cap, ".%s.%s-%ld-%08x", name, kind, (long)getpid(), r);
}

// DIR -> absolute parent + name. A DIR that exists is resolved through symlinks
// (the switch must replace the directory, not the link); otherwise its parent is
// created and resolved.
static mt_status resolve(mt_ckpt_dir *d, const char *dir) {
    char buf[MT_CKPT_PATH_MAX], abs[MT_CKPT_PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return mt_fail(MT_ERR_ARG, "%s %s: path too long", d->option, dir);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = 0;
    struct stat sb;
    // A symlink to a directory not made yet: follow it by hand (realpath cannot).
    for (int hops = 0; lstat(buf, &sb) == 0 && S_ISLNK(sb.st_mode) && stat(buf, &sb) != 0 && hops < 16; hops++) {
        char target[MT_CKPT_PATH_MAX], parent[MT_CKPT_PATH_MAX];
        ssize_t k = readlink(buf, target, sizeof target - 1);
        if (k <= 0) break;
        target[k] = 0;
        mt_path_dirname(buf, parent, sizeof parent);
        if (target[0] == '/') snprintf(buf, sizeof buf, "%s", target);
        else if (snprintf(abs, sizeof abs, "%s/%s", parent, target) < (int)sizeof abs) snprintf(buf, sizeof buf, "%s", abs);
        n = strlen(buf);
        while (n > 1 && buf[n - 1] == '/') buf[--n] = 0;
    }
    if (lstat(buf, &sb) == 0 && !S_ISDIR(sb.st_mode) && !S_ISLNK(sb.st_mode))
        return mt_fail(MT_ERR_IO, "%s %s: exists and is not a directory", d->option, dir);
    if (stat(buf, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) return mt_fail(MT_ERR_IO, "%s %s: exists and is not a directory", d->option, dir);
        if (!realpath(buf, abs)) return mt_fail(MT_ERR_IO, "%s %s: cannot resolve: %s", d->option, dir, strerror(errno));
    } else {
        char parent[MT_CKPT_PATH_MAX];
        mt_path_dirname(buf, parent, sizeof parent);
        const char *base = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
        MT_TRY(mt_make_dir(parent, d->option));
        if (!realpath(parent, abs))
            return mt_fail(MT_ERR_IO, "%s %s: cannot resolve %s: %s", d->option, dir, parent, strerror(errno));
        size_t k = strlen(abs);
        if (snprintf(abs + k, sizeof abs - k, "%s%s", k > 1 ? "/" : "", base) >= (int)(sizeof abs - k))
            return mt_fail(MT_ERR_ARG, "%s %s: path too long", d->option, dir);
    }
    if (!strcmp(abs, "/")) return mt_fail(MT_ERR_ARG, "%s %s: cannot replace the root directory", d->option, dir);
    snprintf(d->dir, sizeof d->dir, "%s", abs);
    mt_path_dirname(abs, d->parent, sizeof d->parent);
    snprintf(d->name, sizeof d->name, "%s", strrchr(abs, '/') + 1);
    if (strlen(strrchr(abs, '/') + 1) >= sizeof d->name - 32)
        return mt_fail(MT_ERR_ARG, "%s %s: directory name too long", d->option, dir);
    return MT_OK;
}

static mt_status prove_switch(mt_ckpt_dir *d, const char *shown);

static mt_status take_lock(mt_ckpt_dir *d, const char *shown) {
    char lock[MT_CKPT_PATH_MAX + 512], pid[32] = "";
    snprintf(lock, sizeof lock, "%s/.%s.lock", d->parent, d->name);
    // Never through a link or into another kind of file: the holder's pid is
    // written into the lock, and a planted link would aim that write elsewhere.
    struct stat sb;
    if (lstat(lock, &sb) == 0 && !S_ISREG(sb.st_mode))
        return mt_fail(MT_ERR_IO, "%s %s: the lock %s is %s, not a plain file: megatrain will not write through it; "
                                  "remove it",
                       d->option, shown, lock, mt_file_kind(sb.st_mode));
    d->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (d->lock_fd < 0)
        return mt_fail(MT_ERR_IO, "%s %s: cannot create the lock %s: %s%s", d->option, shown, lock, strerror(errno),
                       errno == ELOOP ? " (it is a symbolic link: remove it)" : "");
    if (fstat(d->lock_fd, &sb) != 0 || !S_ISREG(sb.st_mode)) { // swapped in since the lstat
        close(d->lock_fd);
        d->lock_fd = -1;
        return mt_fail(MT_ERR_IO, "%s %s: the lock %s is not a plain file: remove it", d->option, shown, lock);
    }
    if (flock(d->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        ssize_t r = pread(d->lock_fd, pid, sizeof pid - 1, 0);
        pid[r > 0 ? r : 0] = 0;
        pid[strcspn(pid, "\n")] = 0;
        close(d->lock_fd);
        d->lock_fd = -1;
        if (err == EWOULDBLOCK)
            return mt_fail(MT_ERR_IO, "%s %s: another megatrain (pid %s) is writing this checkpoint; one writer at a "
                                      "time: wait for it, or save elsewhere",
                           d->option, shown, pid[0] ? pid : "unknown");
        return mt_fail(MT_ERR_IO, "%s %s: cannot lock %s: %s", d->option, shown, lock, strerror(err));
    }
    // The holder's pid, for the message a refused second writer prints (best
    // effort); not into a lock with other hard links, whose content is another file's too.
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (sb.st_nlink != 1 || ftruncate(d->lock_fd, 0) != 0 || pwrite(d->lock_fd, pid, (size_t)n, 0) != n) {
        // only a refused second writer's message reads it: not worth failing the run for
    }
    return MT_OK;
}

// Removes a staging directory or a previous checkpoint a save left, the user's
// entries in it put back first (ckpt_carry.h); `files`: a killed save's, whose
// sole copies of files are the user's too.
static void remove_leftover(const mt_ckpt_dir *d, const char *path, int files) { mt_carry_rescue(path, d->dir, files); }

// Under the lock: puts a moved-aside checkpoint back when DIR is missing (a crash
// between the two renames of the fallback switch), then removes leftovers.
static mt_status tidy(mt_ckpt_dir *d) {
    struct stat sb;
    int have_dir = stat(d->dir, &sb) == 0;
    DIR *dp = opendir(d->parent);
    if (!dp) return mt_fail(MT_ERR_IO, "%s %s: cannot list %s: %s", d->option, d->dir, d->parent, strerror(errno));
    char p[MT_CKPT_PATH_MAX + 512];
    mt_status s = MT_OK;
    for (struct dirent *e; (e = readdir(dp)) && s == MT_OK;) {
        int tmp = is_temp_of(e->d_name, d->name, "tmp-"), old = is_temp_of(e->d_name, d->name, "old-");
        if (!tmp && !old) continue;
        join(p, sizeof p, d->parent, e->d_name);
        if (old && !have_dir) {
            if (rename(p, d->dir) != 0)
                s = mt_fail(MT_ERR_IO, "%s %s: cannot restore the previous checkpoint from %s: %s", d->option, d->dir,
                            p, strerror(errno));
            else {
                s = mt_fsync_dir(d->parent);
                have_dir = 1;
                fprintf(stderr, "megatrain: restored %s from %s (a save was interrupted while switching)\n", d->dir, p);
            }
            continue;
        }
        remove_leftover(d, p, 1);
    }
    closedir(dp);
    return s;
}

// 1 when path is the root of a mount (a bind mount of the same filesystem
// included, where statx says; else by device against `within`).
static int is_mount_root(const char *path, dev_t within) {
    struct statx x;
    if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &x) == 0 &&
        (x.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
        return (x.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
    struct stat sb;
    return lstat(path, &sb) == 0 && sb.st_dev != within;
}

// DIR must be absent, empty, or a checkpoint; a subdirectory in it is moved into
// each new checkpoint (ckpt_carry.h), so none may be a mount point.
static mt_status check_target(mt_ckpt_dir *d, const char *shown) {
    DIR *dp = opendir(d->dir);
    if (!dp)
        return errno == ENOENT ? MT_OK : mt_fail(MT_ERR_IO, "%s %s: cannot open: %s", d->option, shown, strerror(errno));
    int ours = 0;
    char p[MT_CKPT_PATH_MAX + 512], first[256] = "", subdir[256] = "";
    for (struct dirent *e; (e = readdir(dp));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        join(p, sizeof p, d->dir, e->d_name);
        struct stat sb;
        struct stat db;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode) && !subdir[0] && stat(d->dir, &db) == 0 &&
            is_mount_root(p, db.st_dev))
            snprintf(subdir, sizeof subdir, "%s", e->d_name);
        if (!strcmp(e->d_name, "checkpoint.json") || !strcmp(e->d_name, "train_state.json")) ours = 1;
        if (!first[0]) snprintf(first, sizeof first, "%s", e->d_name);
    }
    closedir(dp);
    if (!ours && first[0])
        return mt_fail(MT_ERR_IO,
                       "%s %s: exists and is not a megatrain checkpoint (no checkpoint.json; it holds '%s'); a save "
                       "replaces the directory as a whole, so give a new or empty one",
                       d->option, shown, first);
    if (subdir[0])
        return mt_fail(MT_ERR_IO, "%s %s: holds the mount point '%s'; a save moves the directory's subdirectories into "
                                  "each new checkpoint, which a mount point cannot be: unmount it or save elsewhere",
                       d->option, shown, subdir);
    return MT_OK;
}

// The step DIR holds, from its checkpoint.json (-1 when it has none or cannot say).
static int read_step(const char *dir) {
    char p[MT_CKPT_PATH_MAX + 512];
    join(p, sizeof p, dir, "checkpoint.json");
    if (access(p, F_OK) != 0) return -1;
    cJSON *j = NULL;
    if (mt_json_load(p, "a megatrain checkpoint manifest", 64u << 20, &j) != MT_OK) return -1;
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "step");
    int step = cJSON_IsNumber(s) ? (int)s->valuedouble : -1;
    cJSON_Delete(j);
    return step;
}

mt_status mt_ckpt_dir_open(mt_ckpt_dir *d, const char *dir, const char *option) {
    memset(d, 0, sizeof *d);
    d->lock_fd = -1;
    d->option = option;
    d->committed_step = -1;
    MT_TRY(resolve(d, dir));
    if (access(d->parent, W_OK | X_OK) != 0)
        return mt_fail(MT_ERR_IO, "%s %s: cannot write in %s: %s", option, dir, d->parent, strerror(errno));
    // What DIR holds is checked before the lock file is made beside it, and again
    // after tidy() may have restored it.
    mt_status s = check_target(d, dir);
    if (s != MT_OK) return s;
    s = take_lock(d, dir);
    if (s == MT_OK) s = tidy(d);
    if (s == MT_OK) s = check_target(d, dir);
    if (s == MT_OK) s = prove_switch(d, dir);
    if (s != MT_OK) {
        mt_ckpt_dir_close(d);
        return s;
    }
    d->committed_step = read_step(d->dir);
    return MT_OK;
}

// The mode the new checkpoint directory takes: DIR's, with the owner's rwx while
// it is written and swept (a read-only DIR gets its mode back at the end).
static mode_t staged_mode(mode_t dir_mode) { return (dir_mode & 07777) | S_IRWXU; }

mt_status mt_ckpt_dir_stage(mt_ckpt_dir *d) {
    mt_ckpt_dir_discard(d);
    char name[300];
    for (int tries = 0; tries < 8; tries++) {
        unique_name(name, sizeof name, d->name, "tmp");
        join(d->staged, sizeof d->staged, d->parent, name);
        // Private until it is given DIR's mode (a checkpoint the user made private
        // is never readable by others while it is written); a first save's as mkdir's.
        struct stat sb;
        int exists = stat(d->dir, &sb) == 0;
        if (mkdir(d->staged, exists ? 0700 : 0777) == 0) {
            if (exists && mt_file_copy_mode(-1, d->staged, &sb, staged_mode(sb.st_mode)) != MT_OK) {
                mt_status s = mt_fail(MT_ERR_IO, "%s %s: %s", d->option, d->dir, mt_last_error());
                rmdir(d->staged);
                d->staged[0] = 0;
                return s;
            }
            return MT_OK;
        }
        if (errno != EEXIST) break;
    }
    mt_status s = mt_fail(MT_ERR_IO, "%s %s: cannot create %s: %s", d->option, d->dir, d->staged, strerror(errno));
    d->staged[0] = 0;
    return s;
}

// Proves before training what a save's switch does, so a run never trains only
// to find its checkpoint cannot go in: a staging directory is made beside DIR,
// DIR's own files linked into it, and the staged directory renamed to DIR's
// name (the first save) or DIR renamed aside and back (a mount point cannot be
// renamed, nor a directory a sticky parent keeps from us). Aside is the
// .NAME.old-* name of the fallback switch, so a crash in between is repaired by
// the next writer (tidy) and named by --resume.
static mt_status prove_switch_masked(mt_ckpt_dir *d, const char *shown);

// The stop signals (a user's Ctrl-C, a kill) are held while DIR is renamed aside and
// back, so one that lands then acts after DIR is back, not with DIR missing. Before
// training their default action ends the run: nothing else is half done then.
static mt_status prove_switch(mt_ckpt_dir *d, const char *shown) {
    sigset_t stop, was;
    sigemptyset(&stop);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
    for (int i = 0; i < 5; i++) sigaddset(&stop, sigs[i]);
    pthread_sigmask(SIG_BLOCK, &stop, &was);
    mt_status s = prove_switch_masked(d, shown);
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    return s;
}

static mt_status prove_switch_masked(mt_ckpt_dir *d, const char *shown) {
    char why[MT_CKPT_PATH_MAX + 1024] = "";
    MT_TRY(mt_ckpt_dir_stage(d));
    struct stat sb, pb;
    int exists = stat(d->dir, &sb) == 0;
    if (mt_carry_into(d->dir, d->staged, 1, NULL) != MT_OK) snprintf(why, sizeof why, "%s", mt_last_error());
    else if (!exists && rename(d->staged, d->dir) == 0) { // the first save's rename, and back
        if (rename(d->dir, d->staged) != 0) rmdir(d->dir);
    } else if (!exists) {
        snprintf(why, sizeof why, "cannot rename a directory into place as %s: %s", d->dir, strerror(errno));
    }
    mt_ckpt_dir_discard(d);
    if (why[0])
        return mt_fail(MT_ERR_IO, "%s %s: a save could not be switched in here: %s; checked before training", d->option,
                       shown, why);
    if (!exists) return MT_OK;
    if (stat(d->parent, &pb) == 0 && is_mount_root(d->dir, pb.st_dev))
        return mt_fail(MT_ERR_IO, "%s %s: is a mount point; a save writes a new directory beside it and renames it "
                                  "into its place, which a mount point cannot take: save into a directory inside it",
                       d->option, shown);
    char name[300], aside[MT_CKPT_PATH_MAX + 512];
    unique_name(name, sizeof name, d->name, "old");
    join(aside, sizeof aside, d->parent, name);
    if (rename(d->dir, aside) != 0) {
        int err = errno;
        return mt_fail(MT_ERR_IO, "%s %s: cannot be renamed (%s)%s; a save writes a new directory beside it and "
                                  "renames it into its place: save into a directory inside it, or elsewhere",
                       d->option, shown, strerror(err), err == EBUSY ? ": a mount point (a bind mount?)" : "");
    }
    fault_point("proved-aside");
    if (rename(aside, d->dir) != 0)
        return mt_fail(MT_ERR_IO, "%s %s: cannot rename it back from %s: %s (the checkpoint is there; the next --save "
                                  "%s puts it back)",
                       d->option, shown, aside, strerror(errno), shown);
    return mt_fsync_dir(d->parent);
}

static mt_status switch_in(mt_ckpt_dir *d, int exists);

mt_status mt_ckpt_dir_commit(mt_ckpt_dir *d, int step) {
    if (!d->staged[0]) return mt_fail(MT_ERR_ARG, "%s %s: nothing staged to commit", d->option, d->dir);
    struct stat sb = {0};
    int exists = stat(d->dir, &sb) == 0;
    mode_t dir_mode = sb.st_mode & 07777;
    mt_carry_list carried = {0};
    mt_status s = mt_carry_into(d->dir, d->staged, 0, &carried);
    if (s == MT_OK) s = mt_carry_modes(d->dir, d->staged);
    if (s == MT_OK && exists) s = mt_file_copy_mode(-1, d->staged, &sb, staged_mode(dir_mode)); // DIR's, as it is now
    if (s == MT_OK) s = mt_fsync_dir(d->staged);
    if (s == MT_OK) {
        fault_point("staged");
        s = switch_in(d, exists); // d->staged now names the previous checkpoint ("" for a first save)
    }
    if (s != MT_OK) {
        mt_carry_list_free(&carried);
        return s;
    }
    d->committed_step = step;
    if (d->staged[0] && mt_carry_sweep(d->staged, d->dir, &carried) != MT_OK) // the save stands; the next run tidies
        fprintf(stderr, "megatrain: note: %s\n", mt_last_error());
    mt_carry_list_free(&carried);
    d->staged[0] = 0;
    if (exists && staged_mode(dir_mode) != dir_mode && chmod(d->dir, dir_mode) != 0)
        fprintf(stderr, "megatrain: note: %s: cannot give it back its mode %04o: %s\n", d->dir, (unsigned)dir_mode,
                strerror(errno));
    if (stat(d->dir, &sb) == 0) return MT_OK;
    return mt_fail(MT_ERR_IO, "%s %s: missing after the switch", d->option, d->dir);
}

// Puts d->staged in as DIR: one exchange, or (no exchange on this filesystem)
// DIR aside and the new one in. On success d->staged names the previous
// checkpoint, or is "" when there was none.
static mt_status switch_in(mt_ckpt_dir *d, int exists) {
    int exchanged = 0;
    if (exists && !mt_env_flag("MT_FAULT_NO_EXCHANGE")) {
        exchanged = renameat2(AT_FDCWD, d->staged, AT_FDCWD, d->dir, RENAME_EXCHANGE) == 0;
        if (!exchanged && errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
            return mt_fail(MT_ERR_IO, "%s %s: cannot switch in the new checkpoint: %s", d->option, d->dir,
                           strerror(errno));
    }
    if (!exists) { // the first save: nothing to replace
        if (rename(d->staged, d->dir) != 0)
            return mt_fail(MT_ERR_IO, "%s %s: cannot rename %s into place: %s", d->option, d->dir, d->staged,
                           strerror(errno));
        d->staged[0] = 0;
    } else if (exchanged) { // DIR is the new checkpoint; the old one now has the staged name
        MT_TRY(mt_fsync_dir(d->parent));
        fault_point("exchanged");
    } else { // no exchange on this filesystem: DIR aside, the new one in, the old one out
        char name[300], aside[MT_CKPT_PATH_MAX + 512];
        unique_name(name, sizeof name, d->name, "old");
        join(aside, sizeof aside, d->parent, name);
        if (rename(d->dir, aside) != 0)
            return mt_fail(MT_ERR_IO, "%s %s: cannot move the previous checkpoint aside: %s", d->option, d->dir,
                           strerror(errno));
        MT_TRY(mt_fsync_dir(d->parent));
        fault_point("moved-aside");
        if (rename(d->staged, d->dir) != 0) {
            mt_status s = mt_fail(MT_ERR_IO, "%s %s: cannot rename %s into place: %s", d->option, d->dir, d->staged,
                                  strerror(errno));
            if (rename(aside, d->dir) != 0) fprintf(stderr, "megatrain: the previous checkpoint is in %s\n", aside);
            return s;
        }
        snprintf(d->staged, sizeof d->staged, "%s", aside); // swept and removed, like an exchanged one
    }
    return mt_fsync_dir(d->parent);
}

void mt_ckpt_dir_discard(mt_ckpt_dir *d) {
    if (!d->staged[0]) return;
    remove_leftover(d, d->staged, 0); // its files are links to DIR's
    d->staged[0] = 0;
}

void mt_ckpt_dir_close(mt_ckpt_dir *d) {
    mt_ckpt_dir_discard(d);
    if (d->lock_fd >= 0) close(d->lock_fd); // releases the flock
    d->lock_fd = -1;
}

int mt_ckpt_dir_find_moved(const char *dir, char *out, size_t cap) {
    char buf[MT_CKPT_PATH_MAX], parent[MT_CKPT_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", dir);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = 0;
    mt_path_dirname(buf, parent, sizeof parent);
    const char *name = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
    DIR *dp = opendir(parent);
    if (!dp) return 0;
    int found = 0;
    for (struct dirent *e; (e = readdir(dp)) && !found;)
        if (is_temp_of(e->d_name, name, "old-")) {
            snprintf(out, cap, "%s/%s", parent, e->d_name);
            found = 1;
        }
    closedir(dp);
    return found;
}
