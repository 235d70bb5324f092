// peer.h: peers as they really run (`--peer NAME`, sim and plan only): a schedule row (schedule.c,
// `.peer = 1`) plus the costs only a peer has (host bytes per parameter, link dtypes, its CPU optimizer,
// hook time per fetch); every figure's source is in baselines/PEERS.md. The optimizer's rate is params/s
// per byte/s of STREAM triad (results/cpu_optimizers.jsonl), scaled by the target's host.mem_gbps.
#ifndef MT_PEER_H
#define MT_PEER_H

#include "engine/host_state.h"
#include "engine/schedule.h"
#include "model/hardware_profile.h"

// A peer's CPU optimizer.
typedef struct {
    const char *impl;            // its row in results/cpu_optimizers.jsonl ("deepspeed_cpu_adam", ...)
    const char *what;            // one line: what runs, in the peer's dtypes
    double bytes_per_param;      // what one update reads and writes per parameter (from its code)
    double measured_bytes_per_param; // the same for the fp32 configuration results/ measures it in
    double code_efficiency;      // default: the fraction of triad bandwidth it reaches (assumed, until measured)
    double host_pass_bytes[3];   // by mt_precision: serial host passes beside the update, bytes per parameter
} mt_peer_optimizer;

typedef struct mt_peer mt_peer;
struct mt_peer {
    const char *name;            // --peer NAME
    const char *schedule;        // its row of the schedule table (.peer = 1): ckpt interval, bind, passes,
                                 // wire dtypes, overlap, hooks, host bytes per parameter
    const char *like;            // the schedule of ours whose walk its row shares (plan: schedule_base)
    const char *summary;
    unsigned precisions;         // 1 << mt_precision for each precision it runs
    mt_precision precision;      // the one it runs in practice (the default)
    mt_peer_optimizer opt;
    const char *hook_source;     // where its hook time per fetch (fetch_overhead_ms) comes from
};

int mt_peer_count(void);
const mt_peer *mt_peer_at(int i);
// Peer by name; an unknown name fails naming --peer and the known names.
mt_status mt_peer_find(const char *name, const mt_peer **out);
// The peer's descriptor: its row of the schedule table.
const mt_schedule_desc *mt_peer_schedule(const mt_peer *p);
// Refuses (one line naming --precision) a precision the peer does not run.
mt_status mt_peer_check_precision(const mt_peer *p, mt_precision prec);

// The optimizer's rate on a machine, and where it came from.
typedef struct {
    double params_per_triad_byte; // params/s per byte/s of triad bandwidth
    double update_params_per_s;   // the update alone on the target
    double params_per_s;          // with the serial host passes: what the step pays per parameter
    char source[640];             // "results/cpu_optimizers.jsonl (...)" or "assumed: ..."
} mt_peer_rate;

// The file the measured rates are read from: $MT_CPU_OPTIMIZERS, else
// results/cpu_optimizers.jsonl beside the hardware profiles' tree (NULL when neither exists).
const char *mt_peer_rates_path(void);
// The rate of p's optimizer on `hw` (host.mem_gbps) in precision prec.
mt_status mt_peer_rate_of(const mt_peer *p, mt_precision prec, const mt_hw_profile *hw, mt_peer_rate *out);
// `hw` as the peer runs on it: its optimizer's rate in place of ours, for every
// precision (the planner's and the simulator's AdamW charge read it), and its kernels'
// speed (the GEMM efficiencies, the HBM rate and the measured kernel rates divided by its
// row's eager_scale).
mt_status mt_peer_profile(const mt_peer *p, mt_precision prec, const mt_hw_profile *hw, mt_hw_profile *out,
                          mt_peer_rate *rate);

#endif
