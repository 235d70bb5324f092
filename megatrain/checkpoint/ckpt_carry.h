// ckpt_carry.h: what of the user's a save carries from the checkpoint directory
// DIR into the new one (checkpoint/ckpt_dir.h switches them). Before the switch DIR's
// foreign entries are carried into the staged directory (files hard-linked,
// symlinks remade, subdirectories moved) and the checkpoint files given the
// modes their predecessors in DIR had. After it, the previous directory is swept:
// what appeared or was replaced there since the carry (a file written into DIR
// while the save ran) is moved into the new DIR, what the user removed since is
// removed from it, and the previous directory goes only once it is empty.
#ifndef MT_CKPT_CARRY_H
#define MT_CKPT_CARRY_H

#include <sys/types.h>

#include "core/status.h"

typedef struct {
    char name[256];
    ino_t from_ino, to_ino; // the entry in DIR when carried, and its carried copy
    int moved, seen;        // moved: a subdirectory (renamed, not copied); seen: still in DIR at the sweep
} mt_carried;

typedef struct {
    mt_carried *e;
    int n, cap;
} mt_carry_list;

// Carries DIR's foreign entries into staged, recording each in list (may be
// NULL); a trial links and remakes but moves nothing. Errors name DIR and the entry.
mt_status mt_carry_into(const char *dir, const char *staged, int trial, mt_carry_list *list);
// Gives staged's checkpoint files the permission bits of the same file in DIR
// (else of one of its kind, else of DIR's checkpoint.json), so a checkpoint the
// user made private stays private.
mt_status mt_carry_modes(const char *dir, const char *staged);
// After the switch: empties old (the previous checkpoint) into dir by list's
// record, as said above, and removes it; entries that keep appearing in old (a
// writer whose working directory it is) are moved for as long as they come. A
// subdirectory made again in DIR while the carried one was away joins it.
mt_status mt_carry_sweep(const char *old, const char *dir, mt_carry_list *list);
// Removes a leftover of a given-up or killed save (no record), first moving its
// subdirectories into dir where the name is free, and with `files` also the
// plain files and links no other name holds (written into DIR while a killed save
// switched); what cannot move stays, named on stderr.
void mt_carry_rescue(const char *leftover, const char *dir, int files);
void mt_carry_list_free(mt_carry_list *l);

#endif
