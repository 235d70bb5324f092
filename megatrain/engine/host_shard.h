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
struct mt_hosts;
// The optimizer state sharded: gives the pages of u's moments and f32 master outside host h's
// slice back to the kernel (they read as zeros, hold no memory until written), so a host
// holds the streamed parameters and gradients whole and the state of its slice only.
void mt_host_shard_release(struct mt_unit *u, int H, int h);
// Every host's slice of u's moments and master to every host (a save writes them whole).
mt_status mt_host_shard_collect(struct mt_unit *u, struct mt_hosts *hosts);

#endif
