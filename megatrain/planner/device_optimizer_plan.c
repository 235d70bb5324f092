// device_optimizer_plan.c: the split (--device-optimizer, engine/device_optimizer.h) as a
// plan sees it: the units the engine would choose against the plan's GPU memory, and their
// bytes. The engine's own choice (engine.c devopt_choose) with the plan's free memory.
#include "model/hardware_profile.h"
#include "engine/device_optimizer.h"
#include "planner/planner.h"

int mt_plan_devopt(const mt_config *c, const mt_plan_input *in, int want, unsigned char *on, size_t *bytes) {
    *bytes = 0;
    for (int u = 0; u < c->num_layers + 2; u++) on[u] = 0;
    if (want == MT_DEVOPT_OFF || (want == MT_DEVOPT_AUTO && !in->gpu_free_bytes)) return 0;
    mt_dtype act = in->prec == MT_PREC_FP32 ? MT_F32 : MT_BF16;
    size_t free_b = in->gpu_free_bytes;
    size_t plan = mt_engine_footprint_of(c, in->prec, &in->eng, act, free_b, 0).device_bytes;
    size_t keep = free_b / 16, spare = free_b > plan + keep ? free_b - plan - keep : 0;
    return mt_devopt_choose(c, in->prec, want, spare, on, bytes);
}

// Device AdamW of P parameters at the profile's HBM rate: read g, p or master, m, v; write them.
double mt_plan_devopt_adamw_ms(const mt_hw_profile *hw, mt_precision p, double params) {
    double ws = p == MT_PREC_FP32 ? 4 : 2, bytes = ws + 16 + (p == MT_PREC_MIXED ? 8 + ws : 2 * ws);
    bytes += 3 * ws + ws; // the micro-batches' sum (one add pass) and its sum of squares
    return hw->hbm_gbps > 0 ? params * bytes / (hw->hbm_gbps * MT_SIM_HBM_EFF * 1e6) : 0; // as the sim prices it
}
