// predict.c: the analytic step-time model "analytic-v1" behind mt_plan_predict.
// A simulator backend may replace it; nothing else in the planner depends on how.
//
// Notation (per micro-batch unless said): L layers of P_L params, embedding
// P_E = V*C, head P_H (final norm + lm_head when untied), N = all params;
// n = B*T tokens, G micro-batches per step; ws = 2 bytes (bf16 streaming) or 4
// (fp32); dA = NH*HD.
//   GEMM params  P_mm = L*P_L + V*C       (the embedding is a gather, no FLOPs;
//                                          the head GEMM runs tied or not)
//   forward      F_f = (2*P_mm + 4*L*dA*T) * n       attention per PaLM: 12*L*dA*T
//   backward     F_b = 2 * F_f                        per token fwd+bwd, not halved
//   recompute    F_r = (2*L*P_L + 4*L*dA*T) * n       for causal masking
//                (megatrain, naive, zero3: one extra layer forward; resident and --recompute
//                norms|swiglu|none: 0; --recompute mlp: the MLP's GEMMs, 6*F*C*L*n, as full counts
//                a whole layer where the engine skips the down projection)
//                F_* count the FLOPs (hfu); the time prices GEMMs and attention apart:
//   rate         R = peak (bf16 for paper/mixed, fp32 -- no TF32 -- for fp32) x gemm_efficiency;
//                backward GEMMs at R_b = peak x gemm_bwd_efficiency where the profile measured it
//                (bf16 only, as the sim), else R_b = R
//   attention    A_f = 2*L*dA*T*n causal FLOPs forward (as the sim and the labs count them),
//                backward 2.5 A_f, recompute A_f per extra pass, at R_a = the rate the profile
//                measured for the implementation at the work B*NH*T^2, else at T (--attention, a
//                peer's own), else MT_ATTN_ASSUMED_EFF x peak (mt_hw_attention_tflops)
//   c_f = 2*P_mm*n / R + A_f / R_a,  c_b = 4*P_mm*n / R_b + F_r,gemm / R + (2.5 + passes-1) A_f / R_a
//                (2.5 = MT_ATTN_BWD_FACTOR)
//   link         W = L*P_L*ws per pass (in), Wg = L*P_L*ws grads (out); h2d, d2h
//                pinned rates; under duplex each direction runs at f x its rate
//   optimizer    opt = N / adamw_params_per_s[precision] (the simulator's charge)
// Closed forms (chosen by the descriptor's fields, form_of below):
//   streamed (megatrain)  step = fill + opt_0 + max(c_f, (W + P_H*ws)/h2d, opt - opt_0)
//                     + (G-1) * max(c_f, W/h2d) + G * max(c_b, W/(f*h2d), Wg/(f*d2h))
//                     + drain
//              fill = (P_E' + P_L)*ws/h2d (embedding + layer 0 in before compute),
//              opt_0 = (P_E' + P_L)/rate (their update, which the next forward waits for;
//              the rest of the update runs under the first forward), drain = (P_L + P_E)*ws/d2h
//              P_E' = P_E, or with rows first (engine/embed_rows.h) the rows the step's
//              tokens can read: min(G*B*T, V/2) * C (at most; fewer for text)
//              (the last gradients out after backward); embedding/head grads (P_E+P_H)*ws
//              leave once per step inside the last backward's d2h term.
//              A rank of several (planner/ranks.c) adds its reduce-scatter: red a micro-batch on a
//              stream of its own (cuda_nccl.cu), so the backward's max gains it,
//              G * max(c_b, W/(f*h2d), Wg/(f*d2h), red), and the last two units' share of it,
//              red*(P_L + P_E)/N, runs after the compute ends, before their copies (the drain).
//   per module (zero3)  per module u (embedding, each layer, head) and pass: t = c + x - min(c, x)*ov,
//              c of a layer: its GEMMs at R and its attention at R_a as above (recompute included),
//              x = P_u*ws/h2d (f*h2d in backward, gradients flowing out), ov = min(1, bucket/P_u)
//              (the prefetch bucket, 5e7 elements by default, lets at most that much run ahead
//              of use); gradients leave as fp32 (4 B/param, as DeepSpeed offloads them):
//              backward = max(sum t, N*4/(f*d2h)) + min(reduce_bucket, N)*4/d2h (the last
//              reduce bucket; without overlap_comm all of N*4/d2h is serial);
//              step = G * (forward + backward) + opt (CPU Adam serially after backward, at the
//              mixed rate, fp32 for --precision fp32); pageable link rates when pin_memory is off
//   serial (naive)  step = G * (c_f + c_b + 2*W/h2d + Wg/d2h) + (P_E+P_H)*ws*(1/h2d + 1/d2h) + opt
//   peers (engine/peer.h, baselines/PEERS.md) take these forms with their own fields: W and Wg at
//              their wire dtypes (FSDP2: f32 both ways; DeepSpeed: f32 gradients), a third weight pass
//              ((passes-1)*W in backward and a second recompute, the official code), the optimizer
//              after backward (+ opt, no opt_0: streamed form), every pass at least its host hooks
//              (hooked(): max(device time, hooks), the excess credited to "hooks"), opt at the
//              peer's rate (its profile: mt_peer_profile).
//   resident  step = G * (c_f + max(c_b, Wg/d2h)) + P_L*ws/d2h + opt + N*ws/h2d (no recompute;
//              grads still go to the host optimizer and the updated weights come back)
// Metrics (core/METRICS.md, core/metrics.c): tflops = 6*N*G*n / step, mfu = tflops /
// bf16 dense peak, hfu = executed FLOPs / step / bf16 peak. `bound` = the resource that set the
// longest share of the step (each max() credits its winner; serial terms their own).
#include <string.h>

#include "core/metrics.h"
#include "model/layout.h"
#include "engine/device_optimizer.h"
#include "planner/planner.h"

enum { R_COMPUTE, R_H2D, R_D2H, R_OPT, R_COLL, R_HOOKS, R_COUNT };
static const char *res_names[R_COUNT] = {"compute", "h2d", "d2h", "optimizer", "collective", "hooks"};

typedef struct {
    double t[R_COUNT];
} tally;

// max over (compute, h2d, d2h, optimizer, collective) candidates; credits the winner.
static double take_max(tally *ty, double c, double in, double out, double opt, double coll) {
    double v[R_COUNT] = {c, in, out, opt, coll, 0};
    int w = 0;
    for (int i = 1; i < R_COUNT; i++)
        if (v[i] > v[w]) w = i;
    ty->t[w] += v[w];
    return v[w];
}

static double serial(tally *ty, int r, double ms) {
    ty->t[r] += ms;
    return ms;
}

// One zero3 module pass: compute c overlapped with fetch x only within the prefetch window.
static double zero3_pass(tally *ty, double c, double x, double params, double bucket) {
    double ov = params > 0 ? bucket / params : 1;
    if (ov > 1) ov = 1;
    double hidden = (c < x ? c : x) * ov;
    ty->t[R_COMPUTE] += c;
    ty->t[R_H2D] += x - hidden;
    return c + x - hidden;
}

// A pass whose device time is t under host hooks worth `hooks` ms (a peer's,
// engine/peer.h): the host issues the compute only after its hooks, so the pass
// takes the longer of the two; the excess is credited to the hooks.
static double hooked(tally *ty, double t, double hooks) {
    if (hooks <= t) return t;
    return t + serial(ty, R_HOOKS, hooks - t);
}

// What every closed form shares: the model, the machine and the descriptor.
typedef struct {
    const mt_config *c;
    const mt_schedule_desc *s; // resolved
    const mt_hw_profile *hw;
    mt_precision prec;
    int fp32;
    double L, PL, N, VC, PE, PH, dA, T, n, G, ws, R, h2d, d2h, f;
    double PEf;       // the embedding's parameters the next forward waits for (rows first: its rows')
    double Rb;        // backward GEMMs' rate (FLOP/ms): R unless the profile measured them
    double Ff, Fb, Fr, cf, cb, W, Wg, EH, opt;
    int spec_units;            // speculative step: the window (0: off)
    double opt_s;              // the window's update (ms), written out of place: no copies
    double rollback_rate;      // fraction of steps that roll back
    double wsi, gs;   // bytes per parameter on the link: weights in, gradients out (a peer's f32 wires)
    double passes;    // layer loads per micro-batch: 2, or 3 (weight_passes: the official code's)
    double hook_ms;   // host hooks per layer fetch (fetch_overhead_ms x the fetches a layer takes)
    double Ra;        // attention's rate (FLOP/ms): the implementation's measured one at T, else assumed
    double share;     // the share of each gradient this rank copies out (1: one GPU; 1/N: planner/ranks.c)
    double red;       // a rank's reduce-scatter a micro-batch, on the collective's stream (ms; 0: one GPU)
    // The split (--device-optimizer): 1 where the embedding, the head, layer 0 stay on the host (0: the
    // device updates it, and nothing of it crosses the link); its device AdamW (ms, before the next loads).
    double xE, xH, xL0, dev_ms;
    double opt_pp;    // the optimizer's ms per parameter of the model (its share and any all-gather, spread)
} terms;

// Each form returns the step time, credits the tally, and may set the link
// bytes, the rates they move at and the formula.
typedef struct {
    double step, h2d_rate, d2h_rate;
} form_out;

// Layers stream through the device ring under the compute; unit u's update
// runs under the next forward, which waits only for embedding and layer 0.
// A peer in this shape (engine/peer.h) may load each layer three times, send f32
// weights and gradients, run its optimizer after backward and spend host time in
// hooks per layer fetch; with none of those this is megatrain's form exactly.
// `rem`: the overlapped optimizer work left when the backward ends (all of it
// without speculation); a serial optimizer's runs after it, whole.
static double streamed_step(const terms *t, tally *ty, double rem) {
    const double PE = t->PE, PL = t->PL, PH = t->PH, ws = t->ws, h2d = t->h2d, d2h = t->d2h, f = t->f;
    const double W = t->W, Wg = t->Wg, cf = t->cf, cb = t->cb, L = t->L;
    const double wsi = t->wsi, gs = t->gs, P = t->passes, EHg = (t->xE * PE + t->xH * PH) * gs * t->share;
    const int G = (int)t->G, serial_opt = !t->s->optimizer_overlapped;
    const double xE = t->xE, xH = t->xH, xL0 = t->xL0;
    double opt0 = serial_opt ? 0 : (xE * t->PEf + xL0 * PL) * t->opt_pp;
    if (opt0 > rem) opt0 = rem; // speculated already: the next forward need not wait for it
    double fill = (xE * t->PEf * ws + xL0 * PL * wsi) / h2d, drain = (xL0 * PL + xE * PE) * gs * t->share / d2h;
    double step = serial(ty, R_H2D, fill) + serial(ty, R_OPT, opt0) + serial(ty, R_D2H, drain);
    step += serial(ty, R_OPT, t->dev_ms); // the device's units, on the load stream before the next step's loads
    step += hooked(ty, take_max(ty, cf, (W + xH * PH * ws) / h2d, 0, serial_opt ? 0 : rem - opt0, 0), L * t->hook_ms);
    for (int k = 1; k < G; k++) step += hooked(ty, take_max(ty, cf, W / h2d, 0, 0, 0), L * t->hook_ms);
    for (int k = 0; k < G; k++) {
        double out_b = (Wg + (k == G - 1 ? EHg : 0)) / (f * d2h);
        step += hooked(ty, take_max(ty, cb, (P - 1) * W / (f * h2d), out_b, 0, t->red), (P - 1) * L * t->hook_ms);
    }
    // A rank's last two units (layer 0, the embedding) are reduced after the compute ends; their
    // copies (the drain) wait for it. Every unit is reduced, the split's device units too.
    if (t->red > 0) step += serial(ty, R_COLL, t->red * (PL + PE) / t->N);
    if (serial_opt) step += serial(ty, R_OPT, t->opt);
    return step;
}

static void streamed_form(const terms *t, tally *ty, mt_plan_prediction *out, form_out *r) {
    const int serial_opt = !t->s->optimizer_overlapped;
    out->h2d_bytes = t->passes * t->G * t->W + (t->PE + t->PH) * t->ws;
    out->d2h_bytes = t->G * t->Wg + (t->PE + t->PH) * t->gs * t->share;
    out->formula = serial_opt ? "fill + max(c_f, (W+P_H*ws)/h2d) + (G-1)*max(c_f, W/h2d) "
                                "+ G*max(c_b, (passes-1)*W/(f*h2d), Wg/(f*d2h)) + drain + opt (serial); each pass at "
                                "least its hooks; W, Wg at the peer's wire dtypes"
                              : "fill + opt_0 + max(c_f, (W+P_H*ws)/h2d, opt-opt_0) + (G-1)*max(c_f, W/h2d) "
                                "+ G*max(c_b, W/(f*h2d), Wg/(f*d2h)) + drain";
    if (t->red > 0 && !serial_opt)
        out->formula = "fill + opt_0 + max(c_f, (W+P_H*ws)/h2d, opt-opt_0) + (G-1)*max(c_f, W/h2d) "
                       "+ G*max(c_b, W/(f*h2d), Wg/(f*d2h), red) + red*(P_L+P_E)/N + drain (red: the rank's "
                       "reduce-scatter a micro-batch, on its own stream)";
    if (!t->spec_units) {
        r->step = streamed_step(t, ty, t->opt);
        return;
    }
    // Speculative: the window's updates (opt_s), out of place, run under the last
    // backward as gradients become final; the fraction x of them that fits in c_b is
    // done when the norm is known, the rest of the update (rem = opt - x*opt_s) runs in
    // forward order under the next forward as above. A rollback drops what was
    // speculated (nothing to restore) and does all of opt again.
    double x = t->opt_s > 0 ? t->cb / t->opt_s : 1;
    if (x > 1) x = 1;
    tally t0 = {{0}}, t1 = {{0}};
    double s0 = streamed_step(t, &t0, t->opt - x * t->opt_s), s1 = streamed_step(t, &t1, t->opt);
    double rate = t->rollback_rate;
    for (int i = 0; i < R_COUNT; i++) ty->t[i] += (1 - rate) * t0.t[i] + rate * t1.t[i];
    out->step_ms_no_rollback = s0;
    out->rollback_cost_ms = s1 - s0;
    out->formula = "speculative: the streamed form with opt -> rem = opt - x*opt_s (x = min(1, c_b/opt_s): the "
                   "window's share of the update done under the last backward, out of place); a rollback step: rem = "
                   "opt; step = (1 - rollback_rate)*no_rollback + rollback_rate*rollback";
    r->step = (1 - rate) * s0 + rate * s1;
}

// Each submodule fetched within the prefetch window, gradients out in the wire
// dtype (f32) under the backward but for the last reduce bucket, the optimizer
// after backward (DeepSpeed ZeRO-3 offload's shape).
static void per_module_form(const terms *t, tally *ty, mt_plan_prediction *out, form_out *r) {
    const mt_config *c = t->c;
    const mt_schedule_desc *s = t->s;
    const double PE = t->PE, PL = t->PL, PH = t->PH, VC = t->VC, N = t->N, ws = t->ws, f = t->f, n = t->n, R = t->R;
    const double dA = t->dA, T = t->T, G = t->G;
    const double zh2d = s->host_pinned ? t->h2d : t->hw->h2d_pageable_gbps * 1e6;
    const double zd2h = s->host_pinned ? t->d2h : t->hw->d2h_pageable_gbps * 1e6;
    const double gs = s->grad_wire_f32 ? 4 : ws, bucket = (double)s->prefetch_elems;
    const double Phead = c->tie_word_embeddings ? VC + PH : PH; // tied: the head fetches the embedding again
    const double a_f = 2 * dA * T * n / t->Ra; // one layer's causal attention forward
    const double cf_layer = 2 * PL * n / R + a_f, cf_head = 2 * VC * n / R;
    const double cb_layer = 4 * PL * n / t->Rb + MT_ATTN_BWD_FACTOR * a_f + cf_layer, cb_head = 2 * (2 * VC * n / t->Rb);
    // Backward: with the gradient offload on its own stream it shares the link (duplex) and
    // hides under backward but for the last reduce bucket; on the compute stream it is serial.
    const int overlap = !s->grads_on_compute;
    const double fb = overlap ? f : 1;
    const double H = t->hook_ms; // a peer's hooks per layer fetch (its submodules' fetches)
    double step = 0;
    for (int m = 0; m < (int)G; m++) {
        step += zero3_pass(ty, 0, PE * ws / zh2d, PE, bucket);
        for (int l = 0; l < c->num_layers; l++)
            step += hooked(ty, zero3_pass(ty, cf_layer, PL * ws / zh2d, PL, bucket), H);
        step += zero3_pass(ty, cf_head, Phead * ws / zh2d, Phead, bucket);
        tally tb = {{0}};
        double bwd = zero3_pass(&tb, cb_head, Phead * ws / (fb * zh2d), Phead, bucket);
        for (int l = 0; l < c->num_layers; l++)
            bwd += hooked(&tb, zero3_pass(&tb, cb_layer, PL * ws / (fb * zh2d), PL, bucket), H);
        bwd += zero3_pass(&tb, 0, PE * ws / (fb * zh2d), PE, bucket);
        for (int i = 0; i < R_COUNT; i++) ty->t[i] += tb.t[i];
        step += bwd;
        if (overlap) {
            double grads_out = N * gs / (f * zd2h);
            if (grads_out > bwd) step += serial(ty, R_D2H, grads_out - bwd);
            double rb = N < (double)s->zero3.reduce_bucket_size ? N : (double)s->zero3.reduce_bucket_size;
            step += serial(ty, R_D2H, rb * gs / zd2h);
        } else {
            step += serial(ty, R_D2H, N * gs / zd2h);
        }
    }
    step += serial(ty, R_OPT, t->opt);
    out->h2d_bytes = 2 * G * (N + (c->tie_word_embeddings ? VC : 0)) * ws;
    out->d2h_bytes = G * N * gs;
    out->formula = "G*(sum_u [c_u + x_u - min(c_u,x_u)*min(1,bucket/P_u)] fwd + same bwd (x at duplex rate) "
                   "+ last reduce bucket min(reduce_bucket,N)*4/d2h (overlap_comm; else N*4/d2h)) + opt (serial); "
                   "pageable rates when pin_memory is off";
    r->step = step;
    r->h2d_rate = zh2d;
    r->d2h_rate = zd2h;
}

// One stream: every transfer, the compute and the optimizer add up.
static void serial_form(const terms *t, tally *ty, mt_plan_prediction *out, form_out *r) {
    double step = 0;
    for (int k = 0; k < (int)t->G; k++)
        step += serial(ty, R_COMPUTE, t->cf + t->cb) + serial(ty, R_H2D, 2 * t->W / t->h2d) +
                serial(ty, R_D2H, t->Wg / t->d2h);
    step += serial(ty, R_H2D, t->EH / t->h2d) + serial(ty, R_D2H, t->EH / t->d2h) + serial(ty, R_OPT, t->opt);
    out->formula = "G*(c_f + c_b + 2*W/h2d + Wg/d2h) + (P_E+P_H)*ws*(1/h2d + 1/d2h) + opt (all serial)";
    r->step = step;
}

// Every layer resident: no recompute, gradients still go to the host optimizer
// and the updated weights come back once per step.
static void resident_form(const terms *t, tally *ty, mt_plan_prediction *out, form_out *r) {
    double step = 0;
    for (int k = 0; k < (int)t->G; k++) {
        step += serial(ty, R_COMPUTE, t->cf);
        step += take_max(ty, t->cb, 0, t->Wg / t->d2h, 0, 0);
    }
    step += serial(ty, R_D2H, t->PL * t->ws / t->d2h) + serial(ty, R_OPT, t->opt) + serial(ty, R_H2D, t->N * t->ws / t->h2d);
    out->h2d_bytes = t->N * t->ws;
    out->d2h_bytes = t->G * t->Wg + t->EH;
    out->formula = "G*(c_f + max(c_b, Wg/d2h)) + P_L*ws/d2h + opt + N*ws/h2d (no recompute)";
    r->step = step;
}

// Which closed form prices a descriptor: its fields decide, never its name.
static void (*form_of(const mt_schedule_desc *s))(const terms *, tally *, mt_plan_prediction *, form_out *) {
    if (s->serial_link) return serial_form;
    if (s->weights_resident) return resident_form;
    if (s->submodule_fetch) return per_module_form;
    return streamed_form;
}

// The terms with the split `want` applied (engine/device_optimizer.h, as mt_plan_devopt chooses):
// the device's units leave the host's AdamW, the link and the drain, and their device AdamW runs
// before the next step's loads. Sets out's devopt_* fields.
static terms split_terms(const terms *t, const mt_plan_input *in, const mt_schedule_desc *s, int want,
                         mt_plan_prediction *out) {
    terms ts = *t;
    int L = (int)t->L;
    unsigned char on[L + 2];
    size_t bytes;
    int n = mt_plan_devopt(t->c, in, want, on, &bytes);
    out->devopt_units = n, out->devopt_params = 0, out->devopt_gpu_bytes = (double)bytes, out->devopt_adamw_ms = 0;
    if (!n) return ts;
    double Ld = 0;
    for (int i = 0; i < L; i++) Ld += on[1 + i];
    ts.xE = on[0] ? 0 : 1, ts.xH = on[L + 1] ? 0 : 1, ts.xL0 = L > 0 && on[1] ? 0 : 1;
    double P = (1 - ts.xE) * t->PE + (1 - ts.xH) * t->PH + Ld * t->PL;
    ts.W = (t->L - Ld) * t->PL * t->wsi;
    ts.Wg = (t->L - Ld) * t->PL * t->gs * t->share;
    ts.opt = (t->N - P) * t->opt_pp;
    if (t->spec_units) { // the window's host units only (layers L-1 down, then the embedding)
        double Pw = 0;
        for (int k = 0; k < t->spec_units; k++) Pw += k < L ? (on[L - k] ? 0 : t->PL) : ts.xE * t->PE;
        ts.opt_s = Pw * t->opt_pp;
    }
    ts.dev_ms = mt_plan_devopt_adamw_ms(t->hw, in->prec, P);
    out->devopt_params = P;
    out->devopt_adamw_ms = ts.dev_ms;
    return ts;
}

mt_status mt_plan_predict(const mt_config *c, const mt_plan_input *in, const mt_hw_profile *hw, mt_plan_prediction *out) {
    memset(out, 0, sizeof *out);
    MT_TRY(mt_plan_input_validate(c, in));
    mt_schedule_desc s;
    mt_schedule_resolve(in->eng.schedule, &in->eng.sched, c, &s);
    terms t = {.c = c, .s = &s, .hw = hw, .prec = in->prec, .fp32 = in->prec == MT_PREC_FP32};
    const double L = t.L = c->num_layers, PL = t.PL = (double)mt_config_params_per_layer(c);
    const double N = t.N = (double)mt_config_params_total(c);
    const double VC = t.VC = (double)c->vocab_size * c->hidden_size, PE = t.PE = VC, PH = t.PH = N - L * PL - PE;
    t.PEf = PE;
    if (s.rows_first && !c->tie_word_embeddings) { // at most the step's tokens' rows, at most half the table
        double rows = (double)in->eng.grad_accum * in->eng.B * in->eng.T, half = (double)(c->vocab_size / 2);
        t.PEf = (rows < half ? rows : half) * c->hidden_size;
    }
    const double Pmm = L * PL + VC, dA = t.dA = (double)c->num_heads * c->head_dim, T = t.T = in->eng.T;
    const double n = t.n = (double)in->eng.B * in->eng.T, G = t.G = in->eng.grad_accum;
    const int fp32 = t.fp32;
    const double ws = t.ws = fp32 ? 4 : 2;
    const double R = t.R = hw->peak_tflops[fp32 ? MT_PEAK_FP32 : MT_PEAK_BF16] * 1e12 * hw->gemm_efficiency / 1e3; // FLOP/ms
    const double Rb = t.Rb = !fp32 && hw->gemm_bwd_efficiency > 0
                                 ? hw->peak_tflops[MT_PEAK_BF16] * 1e12 * hw->gemm_bwd_efficiency / 1e3
                                 : R; // the backward GEMMs, as the sim prices them
    const double h2d = t.h2d = hw->h2d_gbps * 1e6, d2h = t.d2h = hw->d2h_gbps * 1e6;                       // B/ms
    t.f = hw->duplex_factor;
    // --recompute as the engine resolves it (auto: against the plan's device memory).
    mt_dtype act = fp32 ? MT_F32 : MT_BF16;
    mt_engine_footprint fp = mt_engine_footprint_of(c, in->prec, &in->eng, act, in->gpu_free_bytes, 0);
    if (s.takes & MT_TAKES_RECOMPUTE) mt_schedule_set_recompute(&s, fp.recompute);
    const int recompute = !s.keep_activations;
    // Layers kept whole but for the MLP, streamed (--recompute mlp): backward recomputes the gate/up
    // GEMM per chunk. Priced as the MLP's three GEMMs (6*F*C a token), the convention F_r keeps for
    // full (a whole layer, where the engine's recompute skips the down projection: the golden
    // records pin it), so that the policies differ by what they really save. The resident form,
    // pinned too, has always left its gate/up recompute out.
    const double Fgu = s.keep_activations && !s.keep_mlp && !s.weights_resident
                           ? 6.0 * c->intermediate_size * c->hidden_size * L * n : 0;

    const double Ff = t.Ff = (2 * Pmm + 4 * L * dA * T) * n, Fb = t.Fb = 2 * Ff;
    // Three weight passes (the official code) recompute each layer twice: its block's recompute and the
    // forward autograd re-runs inside its backward.
    t.passes = s.weight_passes == 3 ? 3 : 2;
    const double extra = recompute ? t.passes - 1 : 0; // layer forwards re-run per micro-batch
    const double Fr = t.Fr = extra * (2 * L * PL + 4 * L * dA * T) * n + Fgu;
    // Attention at its implementation's own rate, GEMMs at R (the backward's at Rb).
    out->attention_kernel = s.attention_kernel ? s.attention_kernel : mt_attn_kernel_name(in->attention, !fp32);
    const double Ra = t.Ra = mt_hw_attention_tflops(hw, out->attention_kernel, !fp32, in->eng.B, c->num_heads, T,
                                                    &out->attention_source) * 1e9;
    const double Af = 2 * L * dA * T * n, ca_f = Af / Ra, ca_b = (MT_ATTN_BWD_FACTOR + extra) * Af / Ra;
    out->attention_tflops = Ra / 1e9;
    out->attention_ms = G * (ca_f + ca_b);
    // (R / Rb: 1 exactly without a measured backward rate, so such a plan is what it was)
    const double cf = t.cf = 2 * Pmm * n / R + ca_f,
                 cb = t.cb = (4 * Pmm * n * (R / Rb) + extra * 2 * L * PL * n + Fgu) / R + ca_b;
    t.wsi = s.param_wire_f32 && in->prec == MT_PREC_MIXED ? 4 : ws; // the peer's f32 shards cross as f32
    t.gs = s.grad_wire_f32 ? 4 : ws;
    if (s.fetch_overhead_ms > 0) {
        mt_unit_layout le, ll, lh;
        size_t pieces[MT_MAX_SUBMODULES + 1];
        mt_layout_build(c, &le, &ll, &lh);
        t.hook_ms = s.fetch_overhead_ms * (s.submodule_fetch ? mt_layout_submodules(&ll, pieces) : 1);
    }
    // A rank of several (planner/ranks.c): it copies out its share of each reduced gradient, and
    // its collective runs on a stream of its own (only the streamed form is priced for several:
    // ranks.c refuses the others); one GPU: share 1, no collective.
    const double share = t.share = in->rank_grad_share > 0 ? in->rank_grad_share : 1;
    t.red = in->rank_reduce_ms;
    const double W = t.W = L * PL * t.wsi, Wg = t.Wg = L * PL * t.gs * share, EH = t.EH = (PE + PH) * ws;
    const mt_precision opt_prec = s.optimizer_master && !fp32 ? MT_PREC_MIXED : in->prec;
    // Sharded across hosts (planner/ranks.c): this host updates its share, then all-gathers it.
    const double oshare = in->rank_opt_share > 0 ? in->rank_opt_share : 1;
    t.opt_pp = oshare / hw->adamw_params_per_s[opt_prec] * 1e3 + (N > 0 ? in->rank_opt_extra_ms / N : 0);
    t.opt = N * t.opt_pp;

    // The speculative window, as the engine resolves it against the plan's host memory (fp above).
    t.spec_units = s.speculative ? fp.spec_window : 0;
    if (t.spec_units) {
        double Pw = 0; // parameters in the window: layers L-1 down, then the embedding (never the head)
        for (int k = 0; k < t.spec_units; k++) Pw += k < L ? PL : PE;
        t.opt_s = Pw * t.opt_pp;
        t.rollback_rate = in->rollback_rate;
    }
    out->spec_units = t.spec_units;
    out->spare_bytes = (double)fp.optimizer.host;

    t.xE = t.xH = t.xL0 = 1;

    tally ty = {{0}};
    out->h2d_bytes = 2 * G * W + EH;
    out->d2h_bytes = G * Wg + EH;
    form_out r = {0, h2d, d2h};
    // The split: priced where layers stream (the streamed form); the other forms keep every unit on the host.
    int split = form_of(&s) == streamed_form;
    terms ts = split_terms(&t, in, &s, split ? in->eng.device_optimizer : MT_DEVOPT_OFF, out);
    form_of(&s)(&ts, &ty, out, &r);
    double step = r.step;
    if (split) { // the step with the split off, and (off) with auto's
        tally scratch = {{0}};
        mt_plan_prediction o2 = *out;
        form_out r2 = r;
        streamed_form(&t, &scratch, &o2, &r2);
        out->step_ms_split_off = r2.step;
        if (in->eng.device_optimizer == MT_DEVOPT_OFF) {
            mt_plan_prediction o3 = *out;
            terms ta = split_terms(&t, in, &s, MT_DEVOPT_AUTO, &o3);
            streamed_form(&ta, &scratch, &o3, &r2);
            out->devopt_auto_units = o3.devopt_units;
            out->devopt_auto_gpu_bytes = o3.devopt_gpu_bytes;
            out->devopt_auto_step_ms = r2.step;
        }
        if (out->devopt_units) { // what crosses the link: the host's units only
            out->h2d_bytes = t.passes * G * ts.W + (ts.xE * PE + ts.xH * PH) * ws;
            out->d2h_bytes = G * ts.Wg + (ts.xE * PE + ts.xH * PH) * t.gs * share;
        }
    }
    int w = 0;
    for (int i = 1; i < R_COUNT; i++)
        if (ty.t[i] > ty.t[w]) w = i;

    const double peak_bf16 = hw->peak_tflops[MT_PEAK_BF16];
    out->model = "analytic-v1";
    out->tokens = (long long)in->eng.B * in->eng.T * in->eng.grad_accum;
    out->flops_6n = 6 * N * (double)out->tokens;
    out->flops_executed = G * (Ff + Fb + Fr);
    out->compute_ms = G * (cf + cb);
    out->h2d_ms = out->h2d_bytes / r.h2d_rate;
    out->d2h_ms = out->d2h_bytes / r.d2h_rate;
    out->optimizer_ms = ts.opt;
    out->exposed_ms = step - out->compute_ms;
    out->step_ms = step;
    if (!t.spec_units) out->step_ms_no_rollback = step;
    out->tokens_per_s = mt_metric_tokens_per_s((double)out->tokens, step);
    out->tflops = mt_metric_tflops(N, (double)out->tokens, step);
    out->mfu = mt_metric_mfu(out->tflops, peak_bf16);
    out->hfu = mt_metric_hfu(out->flops_executed, step, peak_bf16);
    out->days_per_billion_tokens = mt_metric_days_per_billion_tokens(out->tokens_per_s);
    out->bound = res_names[w];
    return MT_OK;
}
