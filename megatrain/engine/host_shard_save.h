// host_shard_save.h: a checkpoint of the sharded state written by every host at once
// (--save-layout hosts, the default when the optimizer state is sharded): no host holds or
// fetches another's moments. Host h writes
// - the Adam moments of its own slices, each piece NAME.exp_avg[START:STOP] (and .exp_avg_sq) a
//   1-D run of the flattened tensor's elements, in files optimizer-0000k-of-0000N.safetensors of
//   --shard-size (one a host unless its share is larger), numbered host after host;
// - the HF weights files model-0000k-of-0000N.safetensors with k % H == h (N from --shard-size,
//   as one host would cut them). The bf16/f32 parameters are whole on every host; in mixed the
//   file holds the f32 master, so its writer gathers each tensor's master just before writing
//   it (rounds: host_shard_save.c) and lets the pages go after: a host holds one tensor more.
// Host 0 writes both indexes (optimizer.safetensors.index.json is HF's plus "slices": piece ->
// {tensor, start, stop}); after every host wrote, all agree and every host checks it sees every
// file (a --save directory the hosts do not share fails here, with a hint), then host 0 alone
// writes the rest and switches the checkpoint in (cli/cmd_train.c).
// Any number of hosts, one included, loads it: each reads the pieces overlapping its slices.
#ifndef MT_HOST_SHARD_SAVE_H
#define MT_HOST_SHARD_SAVE_H

#include <stdint.h>

#include "engine/host_shard.h"
#include "engine/model_io.h"

// Host 0 (from mt_model_save): tells the serving hosts to write their parts into dir, writes its
// own, and returns every file's tensor records once all hosts wrote and see each other's files.
mt_status mt_host_shard_save(const mt_model_shards *s, const char *dir, size_t shard_bytes,
                             mt_tensor_records *weights, mt_tensor_records *moments);
// The other hosts (mt_host_shard_serve, on host 0's command): their part of that save. Its own
// failure is said on stderr and agreed with the others (host 0 fails the save); MT_OK then.
mt_status mt_host_shard_save_follow(const mt_model_shards *s, const uint64_t cmd[5]);
// Before a run trains, on every host (parent, name: --save's, host 0's; NULL elsewhere): each host
// makes a file beside --save and looks for every other's, so a --save the hosts do not share
// fails before the first step, naming the host and the file, with a hint.
mt_status mt_host_shard_check_shared(const mt_model_shards *s, const char *parent, const char *name);
// *yes = 1 when DIR's optimizer state is the per-host slices (its index has "slices").
mt_status mt_host_shard_saved_per_host(const char *dir, int *yes);
// Reads the pieces overlapping this host's slices (all of them without m->shards), each checked
// against its record in `expect`; a range the pieces do not cover is an error naming the index.
mt_status mt_host_shard_load_optimizer(mt_model *m, const char *dir, const mt_tensor_records *expect);

#endif
