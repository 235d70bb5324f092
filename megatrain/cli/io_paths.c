// io_paths.c: inputs vs outputs, compared as files (a symlink, a hard link or
// another spelling of the same path is the same file), and outputs probed for
// writability without creating anything.
#define _DEFAULT_SOURCE // realpath
#include "backend/backend_registry.h"
#include "cli/io_paths.h"

#include "backend/backend.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/ckpt_dir.h"
#include "core/file_io.h"
#include "core/out_file.h"
#include "model/hardware_profile.h"

#define MAX_FILES 512
#define P 4200

typedef struct {
    const char *option; // "--data", "--model", ...
    char path[P];       // as the user wrote it (or DIR/name)
    char norm[P];       // resolved: realpath, or realpath(parent)/name when it does not exist
    int exists;
    dev_t dev;
    ino_t ino;
} io_file;

typedef struct {
    io_file *in, *out;
    int n_in, n_out;
} io_set;

static void describe(io_file *f, const char *option, const char *path) {
    memset(f, 0, sizeof *f);
    f->option = option;
    snprintf(f->path, sizeof f->path, "%s", path);
    struct stat sb;
    if (stat(path, &sb) == 0) {
        f->exists = 1;
        f->dev = sb.st_dev;
        f->ino = sb.st_ino;
    }
    char buf[PATH_MAX];
    if (f->exists && realpath(path, buf)) {
        snprintf(f->norm, sizeof f->norm, "%s", buf);
        return;
    }
    char parent[P];
    mt_path_dirname(path, parent, sizeof parent);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (realpath(parent, buf)) snprintf(f->norm, sizeof f->norm, "%s/%s", strcmp(buf, "/") ? buf : "", base);
    else snprintf(f->norm, sizeof f->norm, "%s", path);
}

static int same_file(const io_file *a, const io_file *b) {
    if (a->exists && b->exists) return a->dev == b->dev && a->ino == b->ino;
    return !strcmp(a->norm, b->norm);
}

static mt_status add_input(io_set *s, const char *option, const char *path) {
    if (s->n_in >= MAX_FILES) return MT_OK; // a directory of hundreds of shards: the first ones are compared
    describe(&s->in[s->n_in++], option, path);
    return MT_OK;
}

// Every regular file directly inside DIR (an HF directory or a checkpoint), or
// the path itself when it is a file.
static mt_status add_input_tree(io_set *s, const char *option, const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) return add_input(s, option, path);
    DIR *dp = opendir(path);
    if (!dp) return MT_OK; // the loader reports it, naming the file
    char p[P];
    for (struct dirent *e; (e = readdir(dp));) {
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (e->d_name[0] != '.' && stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) add_input(s, option, p);
    }
    closedir(dp);
    return MT_OK;
}

// What the path names must be a kind the option writes (core/out_file.h: a
// regular file, a symlink followed to one, or for a stream a device or FIFO);
// a file's directory must exist and take new files (a temporary is renamed
// over it), except for a --log that exists (opened in place).
static mt_status probe_writable(const io_file *f, mt_out_kind kind) {
    char dest[P], parent[P];
    int in_place;
    MT_TRY(mt_out_resolve(f->option, f->path, kind, dest, sizeof dest, &in_place));
    if (in_place) {
        if (access(dest, W_OK) != 0)
            return mt_fail(MT_ERR_IO, "%s %s: not writable: %s", f->option, f->path, strerror(errno));
        return MT_OK;
    }
    mt_path_dirname(dest, parent, sizeof parent);
    struct stat sb;
    if (stat(parent, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return mt_fail(MT_ERR_IO, "%s %s: the directory %s does not exist", f->option, f->path, parent);
    int exists = stat(dest, &sb) == 0;
    if (exists && access(dest, W_OK) != 0)
        return mt_fail(MT_ERR_IO, "%s %s: not writable: %s", f->option, f->path, strerror(errno));
    if (!(exists && !strcmp(f->option, "--log")) && access(parent, W_OK | X_OK) != 0)
        return mt_fail(MT_ERR_IO, "%s %s: cannot create files in %s: %s", f->option, f->path, parent, strerror(errno));
    return MT_OK;
}

static int is_ckpt_name(const char *name) { return mt_ckpt_file_of(name) != MT_CKPT_FOREIGN; }

static const char *base_of(const char *path) { return strrchr(path, '/') ? strrchr(path, '/') + 1 : path; }

// 1 when f lies directly in directory d and a save there writes its name.
static int written_by_save(const io_file *f, const io_file *d) {
    char parent[P];
    mt_path_dirname(f->norm, parent, sizeof parent);
    return !strcmp(parent, d->norm) && is_ckpt_name(base_of(f->norm));
}

static mt_status check(const mt_options *o, io_set *s) {
    int sim = (mt_backend_caps_of(o->backend) & MT_CAP_VIRTUAL_TIME) != 0; // it reads a hardware profile
    if (o->model) MT_TRY(add_input_tree(s, "--model", o->model));
    if (o->config) MT_TRY(add_input(s, "--config", o->config));
    if (o->data && strcmp(o->data, "synthetic") && strcmp(o->data, "embedded")) MT_TRY(add_input(s, "--data", o->data));
    if (o->resume) MT_TRY(add_input_tree(s, "--resume", o->resume));
    char hw[P];
    if (sim && o->hardware && mt_hw_profile_find(o->hardware, hw, sizeof hw) == MT_OK)
        MT_TRY(add_input(s, "--hardware", hw));

    char ops[P];
    const char *outs[4][2] = {{"--log", o->log}, {"--trace", o->trace}, {"--dump-grads", o->dump_grads}, {0, 0}};
    if (o->trace && sim) {
        char dest[P];
        int in_place;
        MT_TRY(mt_out_resolve("--trace", o->trace, MT_OUT_STREAM, dest, sizeof dest, &in_place));
        if (in_place) // its .ops.json would be made beside a device node (in /dev)
            return mt_fail(MT_ERR_ARG, "--trace %s: is a device or FIFO; with --backend sim the op timeline is written "
                                       "beside it as %s.ops.json: name a regular file",
                           o->trace, o->trace);
        snprintf(ops, sizeof ops, "%s.ops.json", o->trace);
        outs[3][0] = "--trace (its .ops.json)";
        outs[3][1] = ops;
    }
    for (int i = 0; i < 4; i++)
        if (outs[i][1]) describe(&s->out[s->n_out++], outs[i][0], outs[i][1]);

    io_file save, model_dir;
    if (o->save) describe(&save, "--save", o->save);
    if (o->model) describe(&model_dir, "--model", o->model);
    io_file resume_dir;
    if (o->resume) describe(&resume_dir, "--resume", o->resume);

    for (int i = 0; i < s->n_out; i++) {
        const io_file *f = &s->out[i];
        for (int k = 0; k < s->n_in; k++)
            if (same_file(f, &s->in[k]))
                return mt_fail(MT_ERR_ARG, "%s %s: is the %s file %s; an output never overwrites an input", f->option,
                               f->path, s->in[k].option, s->in[k].path);
        for (int k = 0; k < i; k++)
            if (same_file(f, &s->out[k]))
                return mt_fail(MT_ERR_ARG, "%s %s: %s writes the same file", f->option, f->path, s->out[k].option);
        if (o->save && same_file(f, &save))
            return mt_fail(MT_ERR_ARG, "%s %s: is the --save directory", f->option, f->path);
        if (o->save && written_by_save(f, &save))
            return mt_fail(MT_ERR_ARG, "%s %s: a save into %s writes this file; name another", f->option, f->path,
                           o->save);
        MT_TRY(probe_writable(f, !strcmp(f->option, "--log") || !strcmp(f->option, "--trace") ? MT_OUT_STREAM
                                                                                                : MT_OUT_FILE));
    }
    if (o->save) {
        if (o->model && same_file(&save, &model_dir))
            return mt_fail(MT_ERR_ARG, "--save %s: is the --model directory; a save would replace the model it starts "
                                       "from (save elsewhere, or --resume from a checkpoint)",
                           o->save);
        int in_place = o->resume && same_file(&save, &resume_dir);
        for (int k = 0; k < s->n_in; k++) {
            if (in_place && !strcmp(s->in[k].option, "--resume")) continue;
            if (written_by_save(&s->in[k], &save))
                return mt_fail(MT_ERR_ARG, "--save %s: would overwrite the %s file %s; an output never overwrites an input",
                               o->save, s->in[k].option, s->in[k].path);
        }
    }
    return MT_OK;
}

mt_status mt_check_io_paths(const mt_options *o) {
    io_set s = {0};
    s.in = calloc(MAX_FILES, sizeof *s.in);
    s.out = calloc(4, sizeof *s.out);
    mt_status st = s.in && s.out ? check(o, &s) : mt_fail(MT_ERR_MEMORY, "out of memory");
    free(s.in);
    free(s.out);
    return st;
}
