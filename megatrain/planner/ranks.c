// ranks.c: `plan --gpus N --hosts H`: N data-parallel GPUs on each of H hosts, priced by the
// single-GPU closed form (predict.c) for one rank plus what the ranks share. Nothing here
// models a layer: a rank is mt_plan_predict over its B/(N*H) rows with
//   its link     h2d, d2h = min(the GPU's own pinned rate, the PCIe switch uplink / k), k = the
//                GPUs behind one switch, filled in device order: k = min(N, multi.gpus_per_pcie_switch)
//   its gradient ours: NCCL's ring reduce-scatter of every unit, (N-1)/N * P * gs bytes per GPU and
//                micro-batch at the collective rate (multi.collective_gbps, else multi.nvlink_gbps, else
//                the rank's PCIe rate; not charged against the uplink its copies use), on a stream of
//                its own (where cuda_nccl.cu runs it: under the backward, predict.c's red), then each
//                rank copies 1/N of the reduced gradient out (rank_grad_share);
//                the official code's (dp_host_add): every rank copies its whole gradient out and adds it
//                into the one host gradient under one lock: N * P * gs * 3 bytes of host memory per
//                micro-batch (read slab, read and write the sum), no collective.
// What the ranks share beyond the links: host memory. Per step it carries N ranks' weight reads
// (N * h2d_bytes), the gradients written (N * d2h_bytes), the host adds (official) and AdamW once per
// parameter (adamw_bytes_per_param * P), so the step is at least that traffic / host.mem_gbps:
//   step = max(rank step, host traffic / mem_gbps) + hosts
// Hosts (engine/hosts_mpi.c, host_shard.h), the optimizer state sharded (the default under mpirun):
// each unit's gradient is reduce-scattered (every host receives the H contributions to the slice
// it owns and adds them in host order), the owner updates its slice, the updated parameters are
// all-gathered. Per host, S = P * gs; one reduce-scatter sends and receives (H-1)/H S on the NIC
// and moves 2S (staging) + (H+1)/H S (the ordered add) through memory:
//   rs = (H-1)/H S / nic + (2 + (H+1)/H) S / mem_gbps
// With one GPU per host the gradients are sliced too (engine/collective_hosts.c): every micro-batch
// of every unit is reduce-scattered by the drain as it lands, under the rest of the backward, so
// the step waits only for what the backward (taken as 2/3 of the compute: two of each layer's three
// GEMMs) does not cover, and at least for the last unit's (the embedding's, PE/P of rs):
//   hosts = max(G rs - 2/3 compute, PE/P rs)
// With N > 1 GPUs per host each host sums its ranks first and the hosts' sum runs after the
// backward, before the norm: hosts = rs.
// The all-gather runs on the optimizer worker, each unit after its update, under the next forward
// as the update is: the rank's optimizer is 1/H of the update plus
//   gather = (H-1)/H S / nic + 2 (H-1)/H S / mem_gbps
// (predict.c: rank_opt_share, rank_opt_extra_ms); AdamW's host traffic is 1/H of one host's.
// The speculative step is off (cli/cmd_train.c turns it off across hosts).
// Memory per host: the streamed parameters whole; the moments (and master) of 1/H, and with one GPU
// per host the gradients' sum of 1/H too (else whole); N ranks' staging (engine.h
// mt_engine_check_host_memory_ranks); the staging of the sum (its send and receive: the step's, or
// with one GPU per host the drain's, whose step lane is then never written) and of the worker's
// gather (its receive): 3 buffers of H pieces, each piece written only as far as one round reaches,
// min(chunk, the largest unit's slice).
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/metrics.h"
#include "planner/planner.h"

static mt_status missing(const mt_hw_profile *hw, const char *key, const char *why) {
    return mt_fail(MT_ERR_ARG, "plan %s: profile %s has no %s (experiments/hardware/README.md, multi.*); a profile of "
                               "the machine with several GPUs has it, e.g. --hardware hgx-h100-8x",
                   why, hw->name, key);
}

mt_status mt_plan_ranks_check(const mt_hw_profile *hw, int gpus, int hosts) {
    char why[64];
    snprintf(why, sizeof why, "--gpus %d%s%.0d", gpus, hosts > 1 ? " --hosts " : "", hosts > 1 ? hosts : 0);
    const mt_hw_multi *m = &hw->multi;
    if (gpus > 1) {
        if (!m->gpus_per_host) return missing(hw, "multi.gpus_per_host", why);
        if (gpus > m->gpus_per_host)
            return mt_fail(MT_ERR_ARG, "plan --gpus %d: profile %s has %d GPUs per host (multi.gpus_per_host); for more, "
                                       "add hosts: --hosts H",
                           gpus, hw->name, m->gpus_per_host);
        if (!m->gpus_per_pcie_switch) return missing(hw, "multi.gpus_per_pcie_switch", why);
        if (!m->pcie_uplink_gbps) return missing(hw, "multi.pcie_switch_uplink_gbps", why);
    }
    if (hosts > 1 && !m->nic_gbps) return missing(hw, "multi.nic_gbps", why);
    return MT_OK;
}

// One rank's copy rate: its own link, or its share of the switch's uplink.
static double rank_rate(double own, double uplink, int k, int *limited) {
    double share = uplink > 0 ? uplink / k : own;
    if (share < own) {
        *limited = 1;
        return share;
    }
    return own;
}

mt_status mt_plan_ranks_predict(const mt_config *c, const mt_plan_input *in0, const mt_hw_profile *hw, int gpus,
                                int hosts, mt_plan_ranks *out) {
    memset(out, 0, sizeof *out);
    MT_TRY(mt_plan_ranks_check(hw, gpus, hosts));
    const int R = gpus * hosts;
    if (in0->eng.B % R)
        return mt_fail(MT_ERR_ARG, "plan --batch %d is not divisible by %d GPUs x %d hosts: each rank takes B/(N x H) "
                                   "rows of every micro-batch",
                       in0->eng.B, gpus, hosts);
    mt_plan_input in = *in0;
    in.eng.B = in0->eng.B / R;
    if (hosts > 1) in.eng.sched.speculative = 0; // off across hosts (cli/cmd_train.c)
    mt_schedule_desc s;
    mt_schedule_resolve(in.eng.schedule, &in.eng.sched, c, &s);
    if (s.peer && !s.dp_host_add)
        return mt_fail(MT_ERR_ARG, "plan --gpus/--hosts: --peer %s has no model of its several-GPU mode "
                                   "(baselines/PEERS.md); drop --gpus/--hosts", s.name);
    if (s.serial_link || s.weights_resident || s.submodule_fetch)
        return mt_fail(MT_ERR_ARG, "plan --gpus/--hosts: prices the streamed schedules (megatrain, the official code); "
                                   "--schedule %s is not priced for several GPUs",
                       s.name);
    const double P = (double)mt_config_params_total(c);
    const int fp32 = in.prec == MT_PREC_FP32;
    const double gs = fp32 ? 4 : 2; // the host gradient's dtype: bf16 but under fp32
    const double G = in.eng.grad_accum;

    // The rank's link: its own, or its share of the switch uplink.
    mt_hw_profile rh = *hw;
    const mt_hw_multi *m = &hw->multi;
    int k = gpus > 1 ? (gpus < m->gpus_per_pcie_switch ? gpus : m->gpus_per_pcie_switch) : 1;
    int lim = 0;
    rh.h2d_gbps = rank_rate(hw->h2d_gbps, gpus > 1 ? m->pcie_uplink_gbps : 0, k, &lim);
    rh.d2h_gbps = rank_rate(hw->d2h_gbps, gpus > 1 ? m->pcie_uplink_gbps : 0, k, &lim);
    out->gpus = gpus, out->hosts = hosts, out->rank_batch = in.eng.B, out->gpus_per_uplink = k;
    out->h2d_gbps = rh.h2d_gbps, out->d2h_gbps = rh.d2h_gbps;
    out->link_limit = lim ? "pcie switch uplink, shared" : "the GPU's own link";
    out->host_add = s.dp_host_add;

    // The gradient: ours a reduce-scatter then 1/N out; the official code's whole gradient out and a host add.
    if (gpus > 1 && !s.dp_host_add) {
        out->collective_gbps = m->collective_gbps > 0 ? m->collective_gbps : m->nvlink_gbps > 0 ? m->nvlink_gbps : rh.d2h_gbps;
        out->collective_link = m->collective_gbps > 0 ? "collective_gbps" : m->nvlink_gbps > 0 ? "nvlink" : "pcie";
        double per_mb = (double)(gpus - 1) / gpus * P * gs;
        out->reduce_bytes_per_gpu = G * per_mb;
        in.rank_reduce_ms = per_mb / (out->collective_gbps * 1e6);
        out->reduce_ms = G * in.rank_reduce_ms;
        in.rank_grad_share = 1.0 / gpus;
    }
    if (hosts > 1) { // the update's share and its all-gather, on the optimizer worker (engine/optimizer_worker.c)
        double S = P * gs, H = hosts;
        out->gather_ms = (H - 1) / H * S / (m->nic_gbps * 1e6) + 2 * (H - 1) / H * S / (hw->host_mem_gbps * 1e6);
        in.rank_opt_share = 1.0 / H;
        in.rank_opt_extra_ms = out->gather_ms;
    }
    MT_TRY(mt_plan_predict(c, &in, &rh, &out->rank));
    out->d2h_bytes_per_gpu = out->rank.d2h_bytes;

    // Host memory traffic per step, one host.
    const mt_precision op = s.optimizer_master && !fp32 ? MT_PREC_MIXED : in.prec;
    double abpp = hw->adamw_bytes_per_param[op];
    if (!(abpp > 0) && gpus > 1) return missing(hw, "host.adamw_bytes_per_param", "--gpus");
    out->host_add_bytes = s.dp_host_add && gpus > 1 ? G * gpus * P * gs * 3 : 0;
    out->host_traffic_bytes = gpus * (out->rank.h2d_bytes + out->rank.d2h_bytes) + out->host_add_bytes + abpp * P / hosts;
    out->host_floor_ms = gpus > 1 ? out->host_traffic_bytes / (hw->host_mem_gbps * 1e6) : 0;
    double step = out->rank.step_ms;
    out->bound = out->rank.bound;
    if (out->host_floor_ms > step) {
        step = out->host_floor_ms;
        out->bound = "host_memory";
    }
    if (hosts > 1) {
        double S = P * gs, nic = m->nic_gbps * 1e6, mem = hw->host_mem_gbps * 1e6, H = hosts;
        double PE = (double)c->vocab_size * c->hidden_size, rounds;
        out->grads_sliced = gpus == 1; // engine: cli/cmd_train.c mt_state_slice.grads
        rounds = out->grads_sliced ? G : 1;
        out->link_bytes_per_host = (rounds + 1) * (H - 1) / H * S;
        out->hosts_mem_bytes = (rounds * (2 + (H + 1) / H) + 2 * (H - 1) / H) * S;
        double rs = (H - 1) / H * S / nic + (2 + (H + 1) / H) * S / mem;
        // The reduce-scatter: under the backward, unit by unit (sliced), or before the norm; the
        // all-gather is in the rank's optimizer.
        out->hosts_rs_ms = rs;
        out->hosts_backward_ms = out->grads_sliced ? 2.0 / 3 * out->rank.compute_ms : 0;
        out->hosts_ms = out->grads_sliced ? fmax(G * rs - out->hosts_backward_ms, PE / P * rs) : rs;
        // The link each host needs for the sum to hide under the backward: G rs <= backward solved
        // for the NIC; 0 where the memory's part alone outlasts the backward (no NIC hides it).
        double mem_ms = G * (2 + (H + 1) / H) * S / mem, room = out->hosts_backward_ms - mem_ms;
        out->nic_gbps_to_hide = out->grads_sliced && room > 0 ? G * (H - 1) / H * S / (room * 1e6) : 0;
        step += out->hosts_ms;
        double state = (in.prec == MT_PREC_MIXED ? 12 : 8) * P; // m, v (and the f32 master)
        if (out->grads_sliced) state += S;
        out->state_saved_bytes = (H - 1) / H * state;
    }
    out->step_ms = step;
    out->tokens = (double)in0->eng.B * in0->eng.T * G;
    out->tokens_per_s = mt_metric_tokens_per_s(out->tokens, step);
    out->tflops = mt_metric_tflops(P, out->tokens, step);
    out->tflops_per_gpu = out->tflops / R;

    // The same rank alone on one GPU (the plain closed form at the rank's batch): what N*H GPUs would give
    // with nothing shared.
    mt_plan_input one = *in0;
    one.eng.B = in.eng.B;
    mt_plan_prediction p1;
    MT_TRY(mt_plan_predict(c, &one, hw, &p1));
    out->one_gpu_tokens_per_s = p1.tokens_per_s;
    out->scaling_efficiency = out->tokens_per_s / (R * p1.tokens_per_s);

    // Memory per host: one state less the slices other hosts keep, N ranks' staging, the sum's staging.
    mt_plan_memory mem;
    MT_TRY(mt_plan_memory_compute(c, &in, &mem));
    out->unsharded_bytes_per_host = (double)mem.host_bytes + (gpus - 1) * (double)mem.host_staging_bytes;
    out->host_bytes_per_host = out->unsharded_bytes_per_host;
    out->pinned_bytes_per_host = (double)mem.pinned_bytes + (gpus - 1) * (double)mem.host_staging_bytes;
    if (hosts > 1) {
        double PL = (double)mt_config_params_per_layer(c), PE = (double)c->vocab_size * c->hidden_size;
        double PH = P - c->num_layers * PL - PE; // final norm + head (tied: the norm alone)
        double unit = (PL > PE ? PL : PE) * gs;
        if (PH * gs > unit) unit = PH * gs;
        out->largest_unit_bytes = unit;
        double chunk = (double)MT_PLAN_HOSTS_CHUNK_BYTES;
        if (chunk * hosts > (double)(1ULL << 30)) chunk = (double)(1ULL << 30) / hosts;
        double slice = ceil(unit / hosts); // the pages a round touches (engine/hosts_mpi.c piece())
        out->staging_bytes = 3.0 * hosts * (chunk < slice ? chunk : slice);
        out->unsharded_bytes_per_host += out->staging_bytes;
        out->host_bytes_per_host = out->unsharded_bytes_per_host - out->state_saved_bytes;
        if (out->grads_sliced) out->pinned_bytes_per_host -= P * gs; // the sliced sums are pageable
    }
    out->host0_bytes = out->host_bytes_per_host; // host 0 holds what the others do
    out->gpu_bytes = (double)mem.gpu_bytes;
    return MT_OK;
}
