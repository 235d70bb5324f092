// peer.c: the three peers (peer.h): each names its row of the schedule table
// (engine/schedule.c) and adds its own costs. Sources of every figure: baselines/PEERS.md (what each line
// below cites is the code read there, never copied).
#include "engine/peer.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file_io.h"
#include "core/env.h"

// Where the hook time per fetch in the peers' schedule rows (engine/schedule.c) comes from.
#define MT_PEER_HOOK_SOURCE "measured: results/peer_hooks.jsonl (baselines/peers/stage3_hooks.py on the 2-core dev VM, 2026-11-24)"

#define P(x) (1u << (x))
static const mt_peer peers[] = {
    {.name = "deepspeed-zero3", .schedule = "deepspeed-zero3", .like = "zero3",
     .summary = "DeepSpeed ZeRO-3, offload_param + offload_optimizer to the CPU, DeepSpeedCPUAdam",
     .precisions = P(MT_PREC_MIXED) | P(MT_PREC_FP32), .precision = MT_PREC_MIXED,
     // csrc/adam/cpu_adam_impl.cpp: one fused pass over fp32 p, g, m, v (read 16 B, write p, m, v 12 B).
     // Beside it (stage3.py): the CPU gradient norm (read g 4), unscale_and_clip (read+write g 8) and the
     // fp32 -> bf16 partition copy (read 4, write 2); fp32 training has no bf16 copy.
     .opt = {.impl = "deepspeed_cpu_adam", .what = "DeepSpeedCPUAdam (AVX + OpenMP) on the fp32 master",
             .bytes_per_param = 28, .measured_bytes_per_param = 28, .code_efficiency = 0.6,
             .host_pass_bytes = {0, 18, 12}},
     .hook_source = MT_PEER_HOOK_SOURCE},
    {.name = "fsdp2-offload", .schedule = "fsdp2-offload", .like = "megatrain",
     .summary = "PyTorch FSDP2 fully_shard per layer, CPUOffloadPolicy(pin_memory=True), torch.optim.AdamW",
     .precisions = P(MT_PREC_MIXED) | P(MT_PREC_FP32), .precision = MT_PREC_MIXED,
     // torch/optim/adamw.py on CPU tensors defaults to the per-tensor loop (foreach only for CUDA):
     // mul_ 8, lerp_ 12, mul_ 8, addcmul_ 12, sqrt 8, div 8, add_ 8, addcdiv_ 16 = 80 B per fp32 parameter.
     // Beside it: clip_grad_norm_ (norm: read 4; scale: read+write 8).
     .opt = {.impl = "torch_adamw_foreach", .what = "torch.optim.AdamW, the per-tensor loop (CPU default)",
             .bytes_per_param = 80, .measured_bytes_per_param = 80, .code_efficiency = 0.6,
             .host_pass_bytes = {0, 12, 12}},
     .hook_source = MT_PEER_HOOK_SOURCE},
    {.name = "official", .schedule = "official", .like = "megatrain",
     .summary = "the official MegaTrain code (DLYuanGod/MegaTrain), examples/sft/configs/qwen_7b_1gpu.yaml",
     .precisions = P(MT_PREC_PAPER), .precision = MT_PREC_PAPER,
     // qwen_7b_1gpu.yaml: optimizer deepspeed_adam -> DeepSpeedCPUAdam (fp32 moments) over bf16 params and
     // grads: read p 2, g 2, m 4, v 4, write p 2, m 4, v 4 = 22 B. Beside it (train.py): clip_grad_norm_ on
     // the bf16 grads (norm: read 2; scale: read+write 4) and _sync_params_to_gpu's flats (read 2, write 2).
     .opt = {.impl = "deepspeed_cpu_adam", .what = "DeepSpeedCPUAdam on bf16 params and grads, fp32 moments",
             .bytes_per_param = 22, .measured_bytes_per_param = 28, .code_efficiency = 0.6,
             .host_pass_bytes = {10, 0, 0}},
     .hook_source = "none: no module hooks (code: cpu_master.py)"},
};
#undef P
#define N_PEERS (int)(sizeof peers / sizeof *peers)

int mt_peer_count(void) { return N_PEERS; }
const mt_peer *mt_peer_at(int i) { return i >= 0 && i < N_PEERS ? &peers[i] : NULL; }

mt_status mt_peer_find(const char *name, const mt_peer **out) {
    char known[256] = "";
    for (int i = 0; i < N_PEERS; i++) {
        if (!strcmp(name, peers[i].name)) {
            *out = &peers[i];
            return MT_OK;
        }
        size_t n = strlen(known);
        snprintf(known + n, sizeof known - n, "%s%s", i ? ", " : "", peers[i].name);
    }
    return mt_fail(MT_ERR_ARG, "--peer: unknown value '%s' (expected one of: %s)", name, known);
}

const mt_schedule_desc *mt_peer_schedule(const mt_peer *p) { return mt_schedule_row(p->schedule); }

mt_status mt_peer_check_precision(const mt_peer *p, mt_precision prec) {
    if (p->precisions & (1u << prec)) return MT_OK;
    char ok[64] = "";
    for (int q = 0; q < 3; q++)
        if (p->precisions & (1u << q)) {
            size_t n = strlen(ok);
            snprintf(ok + n, sizeof ok - n, "%s%s", n ? ", " : "", mt_precision_name((mt_precision)q));
        }
    return mt_fail(MT_ERR_ARG, "--precision %s: --peer %s does not run it (it runs: %s; baselines/PEERS.md)",
                   mt_precision_name(prec), p->name, ok);
}

const char *mt_peer_rates_path(void) {
    static char buf[PATH_MAX + 64];
    const char *env = NULL;
    if (mt_env_text("MT_CPU_OPTIMIZERS", &env) == MT_OK && env) return env; // a bad value: refused by the CLI
    const char *dir = mt_hw_profile_dir(); // <repo>/experiments/hardware
    if (!dir) return NULL;
    snprintf(buf, sizeof buf, "%s/../../results/cpu_optimizers.jsonl", dir);
    return access(buf, R_OK) == 0 ? buf : NULL;
}

// The last row of `impl` in the measurements: params/s and the triad beside it (0 when none).
static mt_status measured_rate(const char *path, const char *impl, double *params_per_s, double *triad_gb_s) {
    *params_per_s = *triad_gb_s = 0;
    int fd;
    MT_TRY(mt_file_open_regular(path, "the CPU optimizer measurements", &fd, NULL)); // never blocks on a FIFO
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return mt_fail(MT_ERR_IO, "%s: cannot read the CPU optimizer measurements", path);
    }
    char line[8192];
    int ln = 0;
    mt_status s = MT_OK;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (line[strspn(line, " \t\r\n")] == 0) continue;
        cJSON *j = cJSON_Parse(line);
        if (!j) {
            s = mt_fail(MT_ERR_FORMAT, "%s:%d: not a JSON object", path, ln);
            break;
        }
        const cJSON *im = cJSON_GetObjectItemCaseSensitive(j, "impl");
        const cJSON *pp = cJSON_GetObjectItemCaseSensitive(j, "params_per_s");
        const cJSON *tr = cJSON_GetObjectItemCaseSensitive(j, "triad_gb_s");
        if (cJSON_IsString(im) && !strcmp(im->valuestring, impl)) {
            if (!cJSON_IsNumber(pp) || !cJSON_IsNumber(tr) || !(pp->valuedouble > 0) || !(tr->valuedouble > 0)) {
                cJSON_Delete(j);
                s = mt_fail(MT_ERR_FORMAT, "%s:%d: %s: params_per_s and triad_gb_s must be positive numbers", path,
                            ln, impl);
                break;
            }
            *params_per_s = pp->valuedouble;
            *triad_gb_s = tr->valuedouble;
        }
        cJSON_Delete(j);
    }
    fclose(f);
    return s;
}

mt_status mt_peer_rate_of(const mt_peer *p, mt_precision prec, const mt_hw_profile *hw, mt_peer_rate *out) {
    memset(out, 0, sizeof *out);
    MT_TRY(mt_peer_check_precision(p, prec));
    if (!(hw->host_mem_gbps > 0))
        return mt_fail(MT_ERR_ARG, "--peer %s: the hardware profile %s has no host.mem_gbps to scale its optimizer "
                                   "by", p->name, hw->name);
    // The profile's own host first (the peer's pass beside our engine's paper pass there, the pass
    // the profile's paper rate was calibrated from), where it measured this peer's optimizer; else
    // the dev machine's rows (beside our fp32 pass).
    char host_rows[PATH_MAX + 300] = "";
    const char *dir = mt_hw_profile_dir(), *path = NULL, *ours_impl = "megatrain_adamw";
    int ours_mode = MT_ADAMW_FP32;
    double pps = 0, ours = 0, triad = 0, triad_ours = 0;
    if (hw->cpu_optimizers[0] && dir) {
        snprintf(host_rows, sizeof host_rows, "%s/../../%s", dir, hw->cpu_optimizers);
        MT_TRY(measured_rate(host_rows, p->opt.impl, &pps, &triad));
        MT_TRY(measured_rate(host_rows, "megatrain_adamw_paper", &ours, &triad_ours));
        if (pps > 0 && ours > 0) path = host_rows, ours_impl = "megatrain_adamw_paper", ours_mode = MT_ADAMW_PAPER;
    }
    if (!path && (path = mt_peer_rates_path())) {
        MT_TRY(measured_rate(path, p->opt.impl, &pps, &triad));
        MT_TRY(measured_rate(path, ours_impl, &ours, &triad_ours));
    }
    double triad_bps = hw->host_mem_gbps * 1e9;
    if (pps > 0 && ours > 0) {
        // Measured beside our AdamW in one run, on one CPU (DeepSpeedCPUAdam moves 28 B): the ratio carries
        // to the target, whose AdamW rate the profile gives our engine too, so both sides of a comparison
        // share the profile's figure. (The ratio to the triad does not carry: a loaded or small host can run a
        // fused pass above its own triad figure.) Rescaled by the bytes this peer's dtypes move.
        double width = p->opt.measured_bytes_per_param / p->opt.bytes_per_param;
        out->update_params_per_s = pps / ours * width * hw->adamw_params_per_s[ours_mode];
        out->params_per_triad_byte = out->update_params_per_s / triad_bps;
        snprintf(out->source, sizeof out->source,
                 "measured: %s (%s at %.3g x %s, x%.3g for %.0f B/param, on the profile's AdamW rate)",
                 path == host_rows ? hw->cpu_optimizers : path, p->opt.impl, pps / ours, ours_impl, width,
                 p->opt.bytes_per_param);
    } else {
        out->params_per_triad_byte = p->opt.code_efficiency / p->opt.bytes_per_param;
        out->update_params_per_s = out->params_per_triad_byte * triad_bps;
        snprintf(out->source, sizeof out->source,
                 "assumed until results/cpu_optimizers.jsonl has %s and megatrain_adamw rows: %.0f B/param (its "
                 "code) at %.2f x triad", p->opt.impl, p->opt.bytes_per_param, p->opt.code_efficiency);
    }
    double s_per_param = 1 / out->update_params_per_s + p->opt.host_pass_bytes[prec] / triad_bps;
    out->params_per_s = 1 / s_per_param;
    return MT_OK;
}

mt_status mt_peer_profile(const mt_peer *p, mt_precision prec, const mt_hw_profile *hw, mt_hw_profile *out,
                          mt_peer_rate *rate) {
    mt_peer_rate r;
    MT_TRY(mt_peer_rate_of(p, prec, hw, &r));
    *out = *hw;
    for (int q = 0; q < 3; q++) out->adamw_params_per_s[q] = r.params_per_s;
    // Its kernels (HF's model in eager PyTorch) take eager_scale times ours: every GEMM and
    // memory-bound op is priced by these rates (ours measured, where the profile has them);
    // attention keeps its own measured table.
    double es = mt_peer_schedule(p)->eager_scale;
    if (es > 0) {
        out->gemm_efficiency /= es, out->hbm_gbps /= es, out->gemm_bwd_efficiency /= es;
        for (int k = 0; k < MT_HW_KERNELS; k++) out->kernel_gbps[k] /= es;
    }
    if (rate) *rate = r;
    return MT_OK;
}
