// plan_ranks.c: what `plan --gpus N --hosts H` and `plan --tokens-per-day X` add to a plan:
// the "ranks" object (planner/ranks.c, every term the step was priced with) and the
// "tokens_per_day" search (the fewest GPUs on one host, then the fewest full hosts, whose
// projected rate reaches X; each candidate compared, as --batch auto lists its own).
#include <stdio.h>

#include "cli/plan_build.h"

#define MT_PLAN_MAX_HOSTS 1024 // the search stops here: past it the answer is "not reached"

static void num(cJSON *o, const char *k, double v) { cJSON_AddNumberToObject(o, k, v); }

void mt_plan_ranks_json(cJSON *j, const mt_plan_ranks *r) {
    cJSON *o = cJSON_AddObjectToObject(j, "ranks");
    num(o, "gpus", r->gpus);
    num(o, "hosts", r->hosts);
    num(o, "batch_per_gpu", r->rank_batch);
    cJSON_AddStringToObject(o, "gradients", r->host_add ? "host add under one lock (every rank copies its whole "
                                                          "gradient out; the official code's workers, no NCCL)"
                                                        : "NCCL reduce-scatter, each rank copies 1/N out");
    num(o, "gpus_per_pcie_uplink", r->gpus_per_uplink);
    num(o, "h2d_gbps_per_gpu", r->h2d_gbps);
    num(o, "d2h_gbps_per_gpu", r->d2h_gbps);
    cJSON_AddStringToObject(o, "link_limit", r->link_limit);
    if (r->collective_gbps > 0) {
        num(o, "collective_gbps", r->collective_gbps);
        cJSON_AddStringToObject(o, "collective_link", r->collective_link);
        num(o, "reduce_scatter_bytes_per_gpu", r->reduce_bytes_per_gpu);
        num(o, "reduce_scatter_ms", r->reduce_ms);
    }
    num(o, "d2h_bytes_per_gpu", r->d2h_bytes_per_gpu);
    num(o, "h2d_bytes_per_gpu", r->rank.h2d_bytes);
    if (r->host_add_bytes > 0) num(o, "host_add_bytes", r->host_add_bytes);
    num(o, "host_traffic_bytes", r->host_traffic_bytes);
    num(o, "host_floor_ms", r->host_floor_ms);
    num(o, "rank_step_ms", r->rank.step_ms);
    if (r->hosts > 1) {
        cJSON *h = cJSON_AddObjectToObject(o, "across_hosts");
        cJSON_AddStringToObject(h, "design", "optimizer state sharded: each unit's gradient reduce-scattered (each host "
                                             "adds the hosts' contributions to its slice in host order), each host "
                                             "updates its slice, the parameters all-gathered (engine/hosts_mpi.c)");
        num(h, "link_bytes_per_host", r->link_bytes_per_host); // sent, and received alike
        num(h, "mem_bytes_per_host", r->hosts_mem_bytes);
        num(h, "ms", r->hosts_ms); // the reduce-scatter, after the backward
        num(h, "gather_ms", r->gather_ms); // the all-gather, in the rank's optimizer under the next forward
        num(h, "largest_unit_bytes", r->largest_unit_bytes);
        num(h, "state_bytes_not_kept_per_host", r->state_saved_bytes);
        num(h, "staging_bytes_per_host", r->staging_bytes);
        num(h, "unsharded_bytes_per_host", r->unsharded_bytes_per_host); // --shard-optimizer off
    }
    num(o, "step_ms", r->step_ms);
    num(o, "tokens_per_s", r->tokens_per_s);
    num(o, "tflops", r->tflops);
    num(o, "tflops_per_gpu", r->tflops_per_gpu);
    num(o, "one_gpu_tokens_per_s", r->one_gpu_tokens_per_s);
    num(o, "scaling_efficiency", r->scaling_efficiency);
    cJSON_AddStringToObject(o, "bound", r->bound);
    num(o, "host_bytes_per_host", r->host_bytes_per_host);
    num(o, "host0_bytes", r->host0_bytes);
    num(o, "gpu_bytes_per_gpu", r->gpu_bytes);
    cJSON_AddStringToObject(o, "model", "closed form (planner/ranks.c over predict.c's analytic-v1); the sim prices "
                                        "one GPU only");
}

// One candidate: --batch rows on each GPU. Fits: a host's memory (the state sharded) within the profile's.
static mt_status try_one(const mt_config *c, const mt_plan_input *in, const mt_hw_profile *hw, int n, int h,
                         mt_plan_ranks *r, int *fits) {
    mt_plan_input x = *in;
    x.eng.B = in->eng.B * n * h;
    MT_TRY(mt_plan_ranks_predict(c, &x, hw, n, h, r));
    *fits = r->host0_bytes <= hw->host_mem_bytes * (1.0 - MT_PLAN_HOST_RESERVE);
    return MT_OK;
}

mt_status mt_plan_tokens_per_day(const mt_config *c, const mt_plan_input *in, const mt_hw_profile *hw, double target,
                                 cJSON *j, int *gpus, int *hosts) {
    cJSON *o = cJSON_AddObjectToObject(j, "tokens_per_day");
    num(o, "target", target);
    num(o, "batch_per_gpu", in->eng.B);
    cJSON *arr = cJSON_AddArrayToObject(o, "candidates");
    int per_host = hw->multi.gpus_per_host > 0 ? hw->multi.gpus_per_host : 1;
    int found = 0, n = 1, h = 1;
    const char *stop = "";
    for (;;) {
        mt_plan_ranks r;
        int fits;
        MT_TRY(try_one(c, in, hw, n, h, &r, &fits));
        double per_day = r.tokens_per_s * 86400;
        cJSON *e = cJSON_CreateObject();
        num(e, "gpus", n);
        num(e, "hosts", h);
        num(e, "tokens_per_day", per_day);
        num(e, "tokens_per_s", r.tokens_per_s);
        num(e, "scaling_efficiency", r.scaling_efficiency);
        num(e, "host_bytes_per_host", r.host0_bytes);
        cJSON_AddBoolToObject(e, "fits", fits);
        cJSON_AddStringToObject(e, "bound", r.bound);
        cJSON_AddItemToArray(arr, e);
        *gpus = n, *hosts = h;
        if (fits && per_day >= target) {
            found = 1;
            break;
        }
        // The next: one more GPU on this host, then whole hosts (multi.* must allow it: its check names the key).
        if (n < per_host) n++;
        else if (h < MT_PLAN_MAX_HOSTS && hw->multi.nic_gbps > 0) h++;
        else {
            stop = hw->multi.nic_gbps > 0 ? "up to the profile's GPUs per host and 1024 hosts"
                                          : "up to the profile's GPUs per host: it has no multi.nic_gbps for more hosts";
            break;
        }
    }
    cJSON_AddBoolToObject(o, "reached", found);
    num(o, "gpus", *gpus);
    num(o, "hosts", *hosts);
    char why[300];
    if (found)
        snprintf(why, sizeof why, "the fewest GPUs (one host first, then whole hosts) whose projected tokens/s x 86400 "
                                  "reaches the target within host memory; %d compared", cJSON_GetArraySize(arr));
    else
        snprintf(why, sizeof why, "no candidate reaches the target (%d compared; %s); the plan is the last one's",
                 cJSON_GetArraySize(arr), stop);
    cJSON_AddStringToObject(o, "why", why);
    return MT_OK;
}
