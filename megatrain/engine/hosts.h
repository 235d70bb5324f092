// hosts.h: several hosts (MPI, one process per host), each running its --gpus ranks over its share of
// the batch. Each unit's host gradient is summed across hosts in one fixed order (as one host adds its
// ranks), slice by owner (host_shard.h), then all-gathered; the optimizer runs identically on every host,
// or on its slice when sharded. Host 0 alone writes stdout and --log; every host its part of --save
// (engine/host_shard_save.h), or host 0 all of it (--save-layout host0).
#ifndef MT_HOSTS_H
#define MT_HOSTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"

typedef struct mt_hosts mt_hosts;
struct mt_hosts {
    int rank, n; // this host's place, and the hosts
    // grad (n elements of t) <- the sum of every host's, in host order, on every host.
    mt_status (*reduce_grad)(mt_hosts *h, void *grad, mt_dtype t, size_t n);
    // The owner's slice of grad (mt_host_shard_range) <- the sum of every host's, in host
    // order; the rest of grad is left as it was (this host's own contribution).
    mt_status (*reduce_scatter)(mt_hosts *h, void *grad, mt_dtype t, size_t n);
    // The owner's slice of dst (a unit of n elements of t; nothing else of dst is read or written)
    // <- (first ? 0 : that slice) + every host's contribution src, added in host order: one
    // micro-batch of the sum, unit by unit, on the drain thread (engine/collective_hosts.c), on a
    // communicator of its own. NULL where MPI gives one thread only (the sum then waits for the step).
    mt_status (*reduce_scatter_add)(mt_hosts *h, const void *src, void *dst, mt_dtype t, size_t n, int first);
    // x (n elements of elem_bytes) <- every host's own slice of it, on every host.
    mt_status (*all_gather)(mt_hosts *h, void *x, size_t elem_bytes, size_t n);
    // The same on a second communicator of its own, for the optimizer worker's thread while the
    // main thread runs the step (engine/optimizer_worker.c); NULL where MPI gives one thread only.
    mt_status (*all_gather_worker)(mt_hosts *h, void *x, size_t elem_bytes, size_t n);
    // Host 0's x[lo, hi) <- every host's own slice of it (the others send theirs; host 0's stays).
    mt_status (*gather_to_0)(mt_hosts *h, void *x, size_t elem_bytes, size_t n, size_t lo, size_t hi);
    // Host root's x[lo, hi) <- every host's own slice of it, as gather_to_0 (a per-host save's
    // writer of a weights file gathers the f32 master of its tensors, engine/host_shard_save.c).
    mt_status (*gather_to)(mt_hosts *h, void *x, size_t elem_bytes, size_t n, size_t lo, size_t hi, int root);
    // Host 0's v[0..n-1] to every host.
    mt_status (*bcast_u64)(mt_hosts *h, uint64_t *v, int n);
    // v[i] <- the sum of every host's v[i], added in host order, on every host.
    mt_status (*sum_f64)(mt_hosts *h, double *v, int n);
    // all[n * hosts] <- every host's n floats, host after host, on every host.
    mt_status (*gather)(mt_hosts *h, const float *mine, size_t n, float *all);
    // v[0..n-1] <- the largest of every host's v[i], on every host: a stop that one host saw
    // (a signal, lost output) agreed at the same step boundary by all (cli/cmd_train.c).
    mt_status (*agree_max)(mt_hosts *h, int *v, int n);
    // Ends the run on every host: after an error (abort = 1) the others would wait forever.
    void (*destroy)(mt_hosts *h, int abort);
};

// The job's size from mpirun's environment (OMPI_COMM_WORLD_SIZE, else PMI_SIZE); 0 when
// neither is set; a value that is not a whole number >= 1 is an error.
mt_status mt_hosts_size_from_env(int *n);
// 1 when this process was started by mpirun (Open MPI's or PMI's environment).
int mt_hosts_launched(void);
// Joins the MPI job (MPI_Init). Built without MPI: an error saying so, with a hint.
mt_status mt_hosts_mpi_create(mt_hosts **out);

#endif
