// ckpt_dir.h: a checkpoint directory committed as one unit. A save writes a
// complete new checkpoint into a fresh sibling directory (.NAME.tmp-PID-RANDOM),
// fsyncs it, and switches it in with one atomic exchange of the two directories
// (renameat2 RENAME_EXCHANGE); the previous checkpoint is removed only after the
// switch. Where the filesystem cannot exchange, DIR moves aside to .NAME.old-*
// first and the next writer moves it back if a crash came in between. A writer
// holds flock(.NAME.lock) for its whole run, so a second writer fails at once.
// What DIR holds that megatrain does not write (a tokenizer, a log, a
// subdirectory) is carried into each new checkpoint, also what is written into
// DIR while the save switches, and the new checkpoint keeps DIR's modes
// (checkpoint/ckpt_carry.h). The lock is a plain file, never followed through a link.
#ifndef MT_CKPT_DIR_H
#define MT_CKPT_DIR_H

#include <stddef.h>

#include "core/status.h"

#define MT_CKPT_PATH_MAX 4096

typedef struct {
    char dir[MT_CKPT_PATH_MAX];    // DIR, absolute, symlinks resolved
    char parent[MT_CKPT_PATH_MAX]; // where DIR, its lock and its temporaries live
    char name[256];
    const char *option;            // "--save": errors name it
    int lock_fd;
    char staged[MT_CKPT_PATH_MAX + 512]; // the save being written ("" when none)
    int committed_step;            // step DIR holds (-1: none yet)
} mt_ckpt_dir;

// The files a checkpoint consists of (what a save writes and replaces), by name:
// config.json, train_state.json, checkpoint.json; the weights as model.safetensors
// or HF shards model-00001-of-0000N.safetensors with model.safetensors.index.json;
// the optimizer state the same way under the stem "optimizer".
typedef enum {
    MT_CKPT_FOREIGN = 0,  // not a checkpoint file: carried over into the next save
    MT_CKPT_SMALL = 1,    // config.json, train_state.json, an index (CRC-32 in the manifest)
    MT_CKPT_WEIGHTS = 2,  // model.safetensors or one of its shards
    MT_CKPT_MOMENTS = 3,  // optimizer.safetensors or one of its shards
    MT_CKPT_MANIFEST = 4, // checkpoint.json
} mt_ckpt_file_kind;
mt_ckpt_file_kind mt_ckpt_file_of(const char *name);

// Resolves DIR (creating its parent), takes the writer lock (a second writer is
// refused naming the holder's pid), restores DIR from an interrupted switch,
// removes the leftovers of killed saves, and refuses a DIR that is not a
// megatrain checkpoint, an empty directory or absent. Then proves the switch
// (before any training): a staging directory made, DIR's files linked into it,
// DIR renamed aside and back; a mount point (DIR, or a subdirectory in it) is refused.
mt_status mt_ckpt_dir_open(mt_ckpt_dir *d, const char *dir, const char *option);
// A fresh, empty staging directory beside DIR, as private as DIR: d->staged.
mt_status mt_ckpt_dir_stage(mt_ckpt_dir *d);
// Carries DIR's foreign files over and its modes, fsyncs, switches d->staged in
// as DIR, sweeps what came late into the previous checkpoint over into DIR and
// removes it; d->committed_step = step.
mt_status mt_ckpt_dir_commit(mt_ckpt_dir *d, int step);
// Removes d->staged (a save given up); DIR is untouched.
void mt_ckpt_dir_discard(mt_ckpt_dir *d);
// Discards what is staged and releases the lock.
void mt_ckpt_dir_close(mt_ckpt_dir *d);
// For a reader of DIR that does not exist: names the .NAME.old-* directory that
// holds its checkpoint after an interrupted switch, or returns 0.
int mt_ckpt_dir_find_moved(const char *dir, char *out, size_t cap);

#endif
