// plan_tokens_per_day.c: `plan --tokens-per-day X`: the fewest GPUs on one host, then the
// fewest full hosts, whose projected rate reaches X; every candidate kept, as --batch auto
// keeps its own (the JSON: plan_json.c).
#include <stdlib.h>

#include "planner/plan_build.h"

#define MT_PLAN_MAX_HOSTS 1024 // the search stops here: past it the answer is "not reached"

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
                                 mt_plan_tpd_search *o) {
    *o = (mt_plan_tpd_search){.target = target, .batch_per_gpu = in->eng.B, .stop = ""};
    int per_host = hw->multi.gpus_per_host > 0 ? hw->multi.gpus_per_host : 1;
    int n = 1, h = 1, cap = 0;
    for (;;) {
        mt_plan_ranks r;
        int fits;
        MT_TRY(try_one(c, in, hw, n, h, &r, &fits));
        if (o->n == cap) {
            cap = cap ? 2 * cap : 16;
            mt_plan_tpd_candidate *grown = realloc(o->c, (size_t)cap * sizeof *grown);
            if (!grown) return mt_fail(MT_ERR_MEMORY, "plan --tokens-per-day: out of memory");
            o->c = grown;
        }
        double per_day = r.tokens_per_s * 86400;
        o->c[o->n++] = (mt_plan_tpd_candidate){.gpus = n, .hosts = h, .fits = fits, .tokens_per_day = per_day,
                                               .tokens_per_s = r.tokens_per_s,
                                               .scaling_efficiency = r.scaling_efficiency,
                                               .host_bytes_per_host = r.host0_bytes, .bound = r.bound};
        o->gpus = n, o->hosts = h;
        if (fits && per_day >= target) {
            o->reached = 1;
            break;
        }
        // The next: one more GPU on this host, then whole hosts (multi.* must allow it: its check names the key).
        if (n < per_host) n++;
        else if (h < MT_PLAN_MAX_HOSTS && hw->multi.nic_gbps > 0) h++;
        else {
            o->stop = hw->multi.nic_gbps > 0
                          ? "up to the profile's GPUs per host and 1024 hosts"
                          : "up to the profile's GPUs per host: it has no multi.nic_gbps for more hosts";
            break;
        }
    }
    return MT_OK;
}

void mt_plan_tpd_search_free(mt_plan_tpd_search *s) {
    free(s->c);
    s->c = NULL;
    s->n = 0;
}
