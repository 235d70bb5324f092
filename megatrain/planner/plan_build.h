// plan_build.h: one plan in two steps: mt_plan_build computes it (memory, fit, prediction,
// the --batch auto and --tokens-per-day searches) into mt_plan_built, and mt_plan_json writes
// that as the JSON object of schema megatrain.plan/1: what `megatrain plan` prints, and what
// `plan --compare` builds once per profile, so a comparison's column is that profile's plan.
#ifndef MT_PLAN_BUILD_H
#define MT_PLAN_BUILD_H

#include <cjson/cJSON.h>

#include "engine/peer.h"
#include "planner/planner.h"

// What a plan is asked: `megatrain plan`'s options in the planner's terms.
typedef struct {
    const char *config_src; // --model or --config as typed: the plan names it
    mt_plan_input in;       // the engine's options and the rollback rate (prec and attention: below)
    const char *precision, *attention;
    const char *hardware;   // --hardware NAME, PATH or measured; NULL: this machine, no rates
    float host_mem_gb;      // host memory to assume instead of the profile's (0: the profile's)
    float nic_gbps;         // --hosts: each host's NIC to assume instead of multi.nic_gbps (0: the profile's)
    const char *peer;       // --peer NAME, or NULL
    int batch_auto;
    int recompute_given;    // --recompute typed: --batch auto keeps it
    float tokens_per_day;   // > 0: the fewest GPUs, then hosts, whose rate reaches it
    int gpus, hosts;
    int max_context;        // also the longest --seq-len that fits
} mt_plan_request;

// One candidate of the --tokens-per-day search.
typedef struct {
    int gpus, hosts, fits;
    double tokens_per_day, tokens_per_s, scaling_efficiency, host_bytes_per_host;
    const char *bound;
} mt_plan_tpd_candidate;

typedef struct {
    double target;
    int batch_per_gpu;
    mt_plan_tpd_candidate *c; // every candidate compared, in order
    int n;
    int reached;
    int gpus, hosts;          // the choice: the first that reached, else the last compared
    const char *stop;         // why the search stopped short ("" when reached)
} mt_plan_tpd_search;

// A plan, computed: what the JSON step writes, and what --compare prices further (the sim's step).
typedef struct {
    mt_plan_request rq;
    mt_config cfg;
    mt_plan_input in;  // after --batch auto's choice (B: every rank's rows)
    mt_plan_input in1; // what one GPU computes: all of it, or one rank's rows
    mt_hw_profile hw;
    int have_rates, gpu_known, several;
    int fits;
    const mt_peer *peer; // a --peer plan (the sim check skips peers, as --batch auto does)
    mt_peer_rate peer_rate;
    mt_batch_search bs;
    mt_plan_tpd_search tpd;
    mt_plan_ranks rk;
    mt_plan_memory mem;
    mt_plan_prediction pr;
    mt_plan_fit fit;
    mt_schedule_desc rs; // the schedule resolved: a peer binds as it does
    int max_seq_len;
    char profile_path[4096]; // the profile's file ("" for measured or no --hardware)
} mt_plan_built;

// Plans the request on cfg (loaded and validated). *b is mt_plan_built_free's to release,
// also after an error. Errors: one line (mt_last_error).
mt_status mt_plan_build(const mt_config *cfg, const mt_plan_request *rq, mt_plan_built *b);
void mt_plan_built_free(mt_plan_built *b);
// The plan's JSON object; *out is the caller's to cJSON_Delete.
mt_status mt_plan_json(const mt_plan_built *b, cJSON **out);

// plan_tokens_per_day.c: the --tokens-per-day search (in->eng.B rows per GPU).
mt_status mt_plan_tokens_per_day(const mt_config *c, const mt_plan_input *in, const mt_hw_profile *hw, double target,
                                 mt_plan_tpd_search *out);
void mt_plan_tpd_search_free(mt_plan_tpd_search *s);

#endif
