// host_shard.h: which slice of a unit each host owns (several hosts, engine/hosts.h). The
// one decision the sum across hosts (it adds the hosts' contributions to a slice on its
// owner), the sharded optimizer (the owner alone updates it) and the per-shard checkpoints
// (a shard file holds one slice) all read, so they always agree.
#ifndef MT_HOST_SHARD_H
#define MT_HOST_SHARD_H

#include <stddef.h>

#include "core/status.h"

// Slices start on a multiple of this many elements (a cache line of f32, 32 bf16): no two
// hosts write one line, and the split does not depend on the dtype.
#define MT_HOST_SHARD_ALIGN ((size_t)64)

// Host h's slice of a unit of n elements among H hosts: [*off, *off + *count), contiguous,
// in host order, covering n once; the last hosts' slices may be shorter or empty.
void mt_host_shard_range(size_t n, int H, int h, size_t *off, size_t *count);

struct mt_unit;
struct mt_model;
struct mt_hosts;
// The optimizer state sharded: gives the pages of u's moments and f32 master outside host h's
// slice back to the kernel (they read as zeros, hold no memory until written), so a host
// holds the streamed parameters and gradients whole and the state of its slice only.
void mt_host_shard_release(struct mt_unit *u, int H, int h);

// A save of the sharded state with --save-layout host0 (else host_shard_save.h: every host
// writes its own), written by host 0 alone in the usual layout, one tensor at a
// time: before host 0 writes a tensor of the moments or the master (mt_st_entry.fetch) it
// asks the other hosts, which serve until it says done, for their slices of that tensor, and
// after (drop) lets the pages it does not own go again: host 0 holds one tensor more, never
// the whole state. A load reads every tensor whole and drops what is not this host's.
// With per_host, a save is written by every host at once instead (engine/host_shard_save.h):
// host 0 says so through the same serve loop.
typedef struct mt_model_shards {
    struct mt_hosts *hosts;
    struct mt_model *m;
    int per_host; // --save-layout hosts (the default when sharded); 0: host0
} mt_model_shards;
// Host 0: completes data (numel f32 of a unit's m, v or master) from the others; any other
// pointer is complete already (the parameters are whole everywhere): nothing to do.
mt_status mt_host_shard_fetch(const void *shards, const void *data, size_t numel);
// The pages of data (as fetch takes it) outside this host's slice, given back.
void mt_host_shard_drop(const void *shards, const void *data, size_t numel);
// The other hosts: serve host 0's fetches until it is done (host 0 calls mt_host_shard_done
// after every save it begins, written or failed, so no host waits forever).
mt_status mt_host_shard_serve(const mt_model_shards *s);
mt_status mt_host_shard_done(const mt_model_shards *s);

#endif
