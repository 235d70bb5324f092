// peer.c: the three peers (peer.h) as descriptors from the schedule table plus
// their own costs. Sources of every figure: baselines/PEERS.md (what each line
// below cites is the code read there, never copied).
#include "engine/peer.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file_io.h"

// Host time a framework's hooks spend per fetch before the compute can be issued,
// measured (PEERS.md, "hooks"): results/peer_hooks.jsonl, rows "fwd_bwd", the median
// over 11 interleaved rounds of `~/.cache/megatrain/peers-venv/bin/python
// baselines/peers/stage3_hooks.py --rounds 11 --steps 30` on the 2-core dev VM (Intel
// Xeon, CPU only, DeepSpeed 0.19.8 on its CPU accelerator, torch 2.15), 2026-11-24.
// Each is the per-layer hook time (a tiny Llama under the framework minus plain torch,
// the slope over depths 2 and 8) divided by the fetches our model charges a layer:
// DeepSpeed 6 submodules x 2 loads (forward; the backward's recompute), FSDP2 1 x 2.
// That VM's CPU; a target host's may be faster.
#define MT_PEER_DS_HOOK_MS 0.586    // range 0.517-0.757 (0.171 ms per fetch_sub_module call, 41 a layer)
#define MT_PEER_FSDP2_HOOK_MS 0.874 // range 0.468-1.022 (0.582 ms per FSDPParamGroup.unshard, 3 a layer)
#define MT_PEER_HOOK_SOURCE "measured: results/peer_hooks.jsonl (baselines/peers/stage3_hooks.py on the 2-core dev VM, 2026-11-24)"

// DeepSpeed ZeRO-3 with offload_param and offload_optimizer to the CPU: the zero3
// schedule (per-submodule fetch within the prefetch bucket, fp32 gradients out,
// per-layer checkpoints, DeepSpeedCPUAdam after backward) plus its hooks and its
// host state: bf16 partition 2 + fp32 master 4 + fp32 m, v 8 + fp32 grad 4 = 18 B
// (fp32 training: 16 B, no bf16 partition).
static void deepspeed_describe(mt_schedule_desc *d) {
    d->name = "deepspeed-zero3";
    d->summary = "DeepSpeed ZeRO-3 + CPU offload as it runs: per-submodule fetch through Python hooks, fp32 "
                 "gradients out, DeepSpeedCPUAdam on the fp32 master after backward, then the bf16 copy";
    d->fetch_overhead_ms = MT_PEER_DS_HOOK_MS;
    d->attention_kernel = "torch_sdpa"; // the HF model with attn_implementation="sdpa" (baselines/peers)
    d->host_bytes_per_param[MT_PREC_PAPER] = 0; // refused (mt_peer_check_precision)
    d->host_bytes_per_param[MT_PREC_MIXED] = 18;
    d->host_bytes_per_param[MT_PREC_FP32] = 16;
}

// PyTorch FSDP2 fully_shard per decoder layer and the root, CPUOffloadPolicy(pin_memory=True),
// MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), world size 1: a layer
// is one fetch (its fp32 shard copied in, cast to bf16 on the device), the next
// one in flight behind it; every layer checkpointed; fp32 gradients offloaded;
// torch.optim.AdamW on the CPU after backward. 16 B/param on the host.
static void fsdp2_describe(mt_schedule_desc *d) {
    d->name = "fsdp2-offload";
    d->summary = "PyTorch FSDP2 with CPUOffloadPolicy on one GPU: per-layer fetch of fp32 shards cast on the device, "
                 "fp32 gradients out, torch AdamW on the CPU after backward";
    d->takes = 0;
    d->weight_bufs = 2;
    d->ckpt_interval = 1;
    d->offload_checkpoints = 0;
    d->param_wire_f32 = 1;
    d->grad_wire_f32 = 1;
    d->optimizer_overlapped = 0;
    d->optimizer_master = 1;
    d->fetch_overhead_ms = MT_PEER_FSDP2_HOOK_MS;
    d->attention_kernel = "torch_sdpa"; // as DeepSpeed's: the HF model with SDPA
    d->host_bytes_per_param[MT_PREC_MIXED] = 16;
    d->host_bytes_per_param[MT_PREC_FP32] = 16;
}

// The official MegaTrain (DLYuanGod/MegaTrain, infinity/model/cpu_master.py and
// examples/sft/train.py): double-buffered layer streaming, a checkpoint every 4
// layers, each layer loaded in forward, in its block's recompute and again in
// backward (where autograd re-runs its forward), bound by copying the flat
// buffer into a layer template, bf16 gradients out, the optimizer after backward,
// then the pinned bf16 flats refreshed. Host: bf16 params 2 + bf16 grads 2 +
// fp32 m, v 8 + pinned bf16 flats 2 = 14 B/param.
static void official_describe(mt_schedule_desc *d) {
    d->name = "official";
    d->summary = "the official MegaTrain code: 3 weight passes, checkpoint every 4 layers, copy bind, "
                 "DeepSpeedCPUAdam after backward, then the pinned bf16 flats refreshed";
    d->takes = 0;
    d->weight_bufs = 2;
    d->ckpt_interval = 4;
    d->offload_checkpoints = 0;
    d->bind = MT_BIND_COPY;
    d->weight_passes = 3;
    // attn_implementation flash_attention_2 (qwen_7b_1gpu.yaml): the flash-attn package, which the GPU
    // machine lacks; PyTorch's SDPA flash backend runs FlashAttention-2's kernels and stands in for it
    d->attention_kernel = "torch_sdpa_flash";
    d->optimizer_overlapped = 0;
    d->host_bytes_per_param[MT_PREC_PAPER] = 14;
}

#define P(x) (1u << (x))
static const mt_peer peers[] = {
    {.name = "deepspeed-zero3", .schedule = "zero3",
     .summary = "DeepSpeed ZeRO-3, offload_param + offload_optimizer to the CPU, DeepSpeedCPUAdam",
     .precisions = P(MT_PREC_MIXED) | P(MT_PREC_FP32), .precision = MT_PREC_MIXED,
     // csrc/adam/cpu_adam_impl.cpp: one fused pass over fp32 p, g, m, v (read 16 B, write p, m, v 12 B).
     // Beside it (stage3.py): the CPU gradient norm (read g 4), unscale_and_clip (read+write g 8) and the
     // fp32 -> bf16 partition copy (read 4, write 2); fp32 training has no bf16 copy.
     .opt = {.impl = "deepspeed_cpu_adam", .what = "DeepSpeedCPUAdam (AVX + OpenMP) on the fp32 master",
             .bytes_per_param = 28, .measured_bytes_per_param = 28, .code_efficiency = 0.6, .host_pass_bytes = {0, 18, 12}},
     .hook_source = MT_PEER_HOOK_SOURCE, .describe = deepspeed_describe},
    {.name = "fsdp2-offload", .schedule = "megatrain",
     .summary = "PyTorch FSDP2 fully_shard per layer, CPUOffloadPolicy(pin_memory=True), torch.optim.AdamW",
     .precisions = P(MT_PREC_MIXED) | P(MT_PREC_FP32), .precision = MT_PREC_MIXED,
     // torch/optim/adamw.py on CPU tensors defaults to the per-tensor loop (foreach only for CUDA):
     // mul_ 8, lerp_ 12, mul_ 8, addcmul_ 12, sqrt 8, div 8, add_ 8, addcdiv_ 16 = 80 B per fp32 parameter.
     // Beside it: clip_grad_norm_ (norm: read 4; scale: read+write 8).
     .opt = {.impl = "torch_adamw_foreach", .what = "torch.optim.AdamW, the per-tensor loop (CPU default)",
             .bytes_per_param = 80, .measured_bytes_per_param = 80, .code_efficiency = 0.6, .host_pass_bytes = {0, 12, 12}},
     .hook_source = MT_PEER_HOOK_SOURCE, .describe = fsdp2_describe},
    {.name = "official", .schedule = "megatrain",
     .summary = "the official MegaTrain code (DLYuanGod/MegaTrain), examples/sft/configs/qwen_7b_1gpu.yaml",
     .precisions = P(MT_PREC_PAPER), .precision = MT_PREC_PAPER,
     // qwen_7b_1gpu.yaml: optimizer deepspeed_adam -> DeepSpeedCPUAdam (fp32 moments) over bf16 params and
     // grads: read p 2, g 2, m 4, v 4, write p 2, m 4, v 4 = 22 B. Beside it (train.py): clip_grad_norm_ on
     // the bf16 grads (norm: read 2; scale: read+write 4) and _sync_params_to_gpu's flats (read 2, write 2).
     .opt = {.impl = "deepspeed_cpu_adam", .what = "DeepSpeedCPUAdam on bf16 params and grads, fp32 moments",
             .bytes_per_param = 22, .measured_bytes_per_param = 28, .code_efficiency = 0.6, .host_pass_bytes = {10, 0, 0}},
     .hook_source = "none: no module hooks (code: cpu_master.py)", .describe = official_describe},
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

const mt_schedule_desc *mt_peer_schedule(const mt_peer *p) {
    static mt_schedule_desc built[N_PEERS];
    static int done[N_PEERS];
    int i = (int)(p - peers);
    if (i < 0 || i >= N_PEERS) return NULL;
    if (!done[i]) {
        const mt_schedule_desc *base = NULL;
        if (mt_schedule_find(p->schedule, &base) != MT_OK) return NULL;
        built[i] = *base;
        p->describe(&built[i]);
        done[i] = 1;
    }
    return &built[i];
}

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
    const char *env = getenv("MT_CPU_OPTIMIZERS");
    if (env && *env) return env;
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
    const char *path = mt_peer_rates_path();
    double pps = 0, ours = 0, triad = 0, triad_ours = 0;
    if (path) {
        MT_TRY(measured_rate(path, p->opt.impl, &pps, &triad));
        MT_TRY(measured_rate(path, "megatrain_adamw", &ours, &triad_ours));
    }
    double triad_bps = hw->host_mem_gbps * 1e9;
    if (pps > 0 && ours > 0) {
        // Measured beside our AdamW in one run, on one CPU, in fp32 (DeepSpeedCPUAdam moves 28 B there): the
        // ratio carries to the target, whose AdamW rate the profile gives our engine too, so both sides of a
        // comparison share the profile's assumption. (The ratio to the triad does not carry: a loaded or small
        // host can run a fused pass above its own triad figure.) Rescaled by the bytes this peer's dtypes move.
        double width = p->opt.measured_bytes_per_param / p->opt.bytes_per_param;
        out->update_params_per_s = pps / ours * width * hw->adamw_params_per_s[MT_ADAMW_FP32];
        out->params_per_triad_byte = out->update_params_per_s / triad_bps;
        snprintf(out->source, sizeof out->source,
                 "measured: %s (%s at %.3g x megatrain_adamw, x%.3g for %.0f B/param, on the profile's AdamW rate)",
                 path, p->opt.impl, pps / ours, width, p->opt.bytes_per_param);
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
    if (rate) *rate = r;
    return MT_OK;
}
