// test_planner.c: the planner's pieces against numbers worked out by hand:
// the hardware-profile loader (good file, malformed JSON, missing or bad keys),
// the zero3 (DeepSpeed) host accounting, and the analytic step-time formulas on
// a round-number machine where the compute- and transfer-bound cases are simple.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "planner/planner.h"
#include "tests/test_util.h"

// A profile with round numbers: 100 TFLOP/s at efficiency 1 (1e14 FLOP/s),
// links of H2D_GBPS both ways, full duplex, AdamW at 1e12 params/s.
static const char *PROFILE_FMT =
    "{\"schema\": \"megatrain.hardware/1\", \"name\": \"round\", \"description\": \"test\","
    " \"gpu\": {\"name\": \"test gpu\", \"peak_tflops\": {\"bf16\": 100, \"tf32\": 50, \"fp32\": 10},"
    "   \"gemm_efficiency\": 1.0, \"hbm_gbps\": 1000, \"hbm_bytes\": 80000000000},"
    " \"link\": {\"kind\": \"test-link\", \"theory_gbps\": 100, \"h2d_gbps\": {\"pinned\": %g, \"pageable\": %g},"
    "   \"d2h_gbps\": {\"pinned\": %g, \"pageable\": %g}, \"duplex_factor\": 1.0},"
    " \"host\": {\"mem_bytes\": 100000000000, \"mem_gbps\": 100, \"cpu_cores\": 16, \"numa_nodes\": 1,"
    "   \"adamw_bytes_per_param\": {\"fp32\": 28, \"paper\": 22, \"mixed\": 28},"
    "   \"adamw_gbps\": {\"fp32\": 28000, \"paper\": 22000, \"mixed\": 28000},"
    "   \"adamw_params_per_s\": {\"fp32\": 1e12, \"paper\": 1e12, \"mixed\": 1e12}},"
    " \"sources\": {}}";

static const char *round_profile(const char *name, double gbps) {
    static char text[4096];
    snprintf(text, sizeof text, PROFILE_FMT, gbps, gbps / 2, gbps, gbps / 2);
    return mt_test_write_tmp(name, text);
}

static int near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b) + 1e-12; }

static void test_profile_loader(void) {
    mt_hw_profile hw;
    mt_status s = mt_hw_profile_load(round_profile("round.json", 100), &hw);
    CHECK(s == MT_OK, "good profile: %s", mt_last_error());
    CHECK(!strcmp(hw.name, "round") && hw.peak_tflops[MT_PEAK_BF16] == 100 && hw.peak_tflops[MT_PEAK_FP32] == 10,
          "fields %s %g", hw.name, hw.peak_tflops[0]);
    CHECK(hw.h2d_gbps == 100 && hw.d2h_pageable_gbps == 50 && hw.host_mem_bytes == 1e11 && hw.cpu_cores == 16,
          "link/host");
    CHECK(hw.adamw_params_per_s[MT_PREC_MIXED] == 1e12, "adamw rate");

    const char *bad = mt_test_write_tmp("bad.json", "{\"schema\": \"megatrain.hardware/1\", \"name\": ");
    s = mt_hw_profile_load(bad, &hw);
    CHECK(s == MT_ERR_FORMAT && strstr(mt_last_error(), "bad.json") && strstr(mt_last_error(), "malformed"),
          "malformed JSON: %s", mt_last_error());

    // Every required key, removed in turn, is named in the error.
    const char *keys[] = {"\"pinned\": 100, ", "\"duplex_factor\": 1.0", "\"gemm_efficiency\": 1.0, ",
                          "\"mem_bytes\": 100000000000, ", "\"name\": \"round\", "};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        char text[4096], cut[4096];
        snprintf(text, sizeof text, PROFILE_FMT, 100.0, 50.0, 100.0, 50.0);
        char *at = strstr(text, keys[i]);
        CHECK(at, "key %s present in the template", keys[i]);
        if (!at) continue;
        snprintf(cut, sizeof cut, "%.*s%s", (int)(at - text), text, at + strlen(keys[i]));
        // removing duplex_factor leaves a trailing comma before '}': fix it up
        char *fix = strstr(cut, ", }");
        if (fix) memmove(fix, fix + 1, strlen(fix));
        s = mt_hw_profile_load(mt_test_write_tmp("missing.json", cut), &hw);
        char want[64];
        snprintf(want, sizeof want, "%.*s", (int)(strchr(keys[i] + 1, '"') - keys[i] - 1), keys[i] + 1);
        CHECK(s == MT_ERR_FORMAT && strstr(mt_last_error(), "missing.json") && strstr(mt_last_error(), want) &&
                  strstr(mt_last_error(), "missing"),
              "missing %s: %s", want, mt_last_error());
    }
    // Out-of-range values.
    char text[4096];
    snprintf(text, sizeof text, PROFILE_FMT, -5.0, 50.0, 100.0, 50.0);
    s = mt_hw_profile_load(mt_test_write_tmp("neg.json", text), &hw);
    CHECK(s == MT_ERR_FORMAT && strstr(mt_last_error(), "link.h2d_gbps.pinned") && strstr(mt_last_error(), "positive"),
          "negative rate: %s", mt_last_error());
    s = mt_hw_profile_load(mt_test_write_tmp("schema.json", "{\"schema\": \"other/2\"}"), &hw);
    CHECK(s == MT_ERR_FORMAT && strstr(mt_last_error(), "schema"), "wrong schema: %s", mt_last_error());
    s = mt_hw_profile_load("/nonexistent/x.json", &hw);
    CHECK(s == MT_ERR_IO && strstr(mt_last_error(), "/nonexistent/x.json"), "missing file: %s", mt_last_error());
}

// Llama-shaped, C = F = 1000, 10 heads of 100, 10 layers, V = 1000, untied.
static mt_config round_config(void) {
    mt_config c = {0};
    c.arch = MT_ARCH_LLAMA;
    c.vocab_size = 1000;
    c.hidden_size = 1000;
    c.intermediate_size = 1000;
    c.num_layers = 10;
    c.num_heads = 10;
    c.num_kv_heads = 10;
    c.head_dim = 100;
    c.max_position_embeddings = 4096;
    c.rms_norm_eps = 1e-5f;
    c.rope_theta = 10000;
    c.torch_dtype = MT_BF16;
    c.bos_token_id = c.eos_token_id = -1;
    return c;
}

static mt_plan_input round_input(const char *schedule) {
    mt_plan_input in = {.prec = MT_PREC_PAPER,
                        .eng = {.B = 1, .T = 1000, .grad_accum = 1, .grad_slabs = 4,
                                .sched = {.ckpt_interval = 1, .weight_bufs = 2, .zero3 = mt_zero3_defaults()}}};
    if (mt_schedule_find(schedule, &in.eng.schedule) != MT_OK) {
        fprintf(stderr, "%s\n", mt_last_error());
        exit(1);
    }
    return in;
}

static void test_zero3_memory(void) {
    mt_config c = round_config();
    long long N = mt_config_params_total(&c);
    CHECK(N == 72021000LL, "params %lld (10 x 7,002,000 + 2 x 1e6 + 1000)", N);
    mt_plan_input in = round_input("zero3");
    mt_plan_memory m;
    CHECK(mt_plan_memory_compute(&c, &in, &m) == MT_OK, "%s", mt_last_error());
    CHECK(m.host_state_bytes == (size_t)N * 18, "zero3 bf16: 18 B/param (%zu)", m.host_state_bytes);
    CHECK(m.host_bytes == m.host_state_bytes + m.host_staging_bytes && m.pinned_bytes == m.host_bytes, "pinned all");
    // DeepSpeed's GPU footprint: weights = persistent (ln1, ln2 of 10 layers + final norm, all < 1e5)
    // + live (a layer, 7,002,000) + prefetch bucket 5e7; grads = reduce bucket min(5e8, N) = N plus the
    // largest module's full gradient; all bf16; plus the same checkpoints and activations.
    size_t persistent = 10 * 2000 + 1000;
    size_t ds_weights = (persistent + 7002000 + 50000000) * 2, ds_grads = ((size_t)N + 7002000) * 2;
    CHECK(m.deepspeed_gpu_bytes == ds_weights + ds_grads + m.engine.checkpoints.device + m.engine.activations.device,
          "deepspeed gpu %zu", m.deepspeed_gpu_bytes);
    // What runs is our zero3 schedule: gpu_bytes is the engine's own accounting of it.
    mt_engine_footprint ep = mt_engine_footprint_of(&c, MT_PREC_PAPER, &in.eng, MT_BF16, 0, 0);
    CHECK(m.gpu_bytes == ep.device_bytes && m.engine.weights.device == ep.weights.device &&
              m.engine.grads.device == ep.grads.device,
          "zero3 gpu %zu vs engine %zu", m.gpu_bytes, ep.device_bytes);

    in.prec = MT_PREC_FP32;
    CHECK(mt_plan_memory_compute(&c, &in, &m) == MT_OK && m.host_state_bytes == (size_t)N * 16, "zero3 fp32: 16 B/param");
    in.eng.sched.zero3.pin_memory = 0;
    CHECK(mt_plan_memory_compute(&c, &in, &m) == MT_OK && m.pinned_bytes == 0, "pin_memory off: nothing pinned");

    // megatrain on the same model: the engine's 12 B/param, page-aligned per region.
    in = round_input("megatrain");
    CHECK(mt_plan_memory_compute(&c, &in, &m) == MT_OK, "%s", mt_last_error());
    CHECK(near((double)m.host_state_bytes, 12.0 * (double)N, 1e-3), "megatrain state %zu vs 12N", m.host_state_bytes);
    CHECK(m.host_state_bytes == mt_model_host_bytes(&c, MT_PREC_PAPER), "megatrain = engine accounting");

    // Feasibility: 100 GB profile less 5% = 95 GB.
    mt_hw_profile hw;
    CHECK(mt_hw_profile_load(round_profile("fit.json", 100), &hw) == MT_OK, "%s", mt_last_error());
    mt_plan_fit f;
    mt_plan_check_fit(&m, &hw, &f);
    CHECK(f.fits && f.n_short == 0 && f.host_have_bytes == 95e9, "fits %d", f.fits);
    hw.host_mem_bytes = 1e8; // 95 MB: short of host
    mt_plan_check_fit(&m, &hw, &f);
    CHECK(!f.fits && f.n_short == 1 && !strcmp(f.shortfall[0].resource, "host") &&
              f.shortfall[0].need_bytes == (double)m.host_bytes && f.shortfall[0].have_bytes == 95e6,
          "host shortfall");
    hw.hbm_bytes = 1e9; // below the 1 GiB reserve: no GPU room at all
    mt_plan_check_fit(&m, &hw, &f);
    CHECK(!f.fits && f.n_short == 2 && !strcmp(f.shortfall[1].resource, "gpu") && f.gpu_have_bytes == 0, "gpu shortfall");
}

// Hand-worked numbers for round_config at B=1, T=1000 (n = 1000 tokens):
//   P_L = 7,002,000, L = 10, P_E = 1e6, P_H = 1,001,000, P_mm = 70.02e6 + 1e6 = 71.02e6, dA = 1000
//   F_f = (2*71.02e6 + 4*10*1000*1000) * 1000 = 182.04e9, F_b = 364.08e9,
//   F_r = (2*70.02e6 + 40e6) * 1000 = 180.04e9 (the FLOPs hfu counts); the time prices GEMMs at
//   R = 1e14 FLOP/s and attention apart, causal, at the assumed 0.35 x the 100 TFLOP/s peak:
//   a = 2*dA*T*n / 3.5e13 s = 0.0571428... ms per layer forward (A), backward 2.5 a, recompute a:
//   c_f = 2*P_mm*n/R + 10 a = 1.4204 + 0.571428... = 1.991828...
//   c_b = (4*P_mm*n + 2*10*P_L*n)/R + 3.5 * 10 a = 4.2412 + 2.0 = 6.2412 ms
//   W = Wg = 70.02e6 * 2 = 140.04e6 B; EH = (P_E + P_H) * 2 = 4.002e6 B; opt = N / 1e12 = 0.072021 ms
static void test_predict(void) {
    mt_config c = round_config();
    mt_hw_profile hw;
    mt_plan_prediction p;
    CHECK(mt_hw_profile_load(round_profile("r100.json", 100), &hw) == MT_OK, "%s", mt_last_error());

    // 100 GB/s: compute bound. fill = drain = 8.002e6*2 / 1e11 s = 0.16004 ms, opt_0 = 0.008002 ms,
    // forward max(c_f, (140.04e6 + 2.002e6)/1e11 s = 1.42042, 0.064019) = c_f,
    // backward max(6.2412, 1.4004, (140.04e6 + 4.002e6)/1e11 s = 1.44042) = 6.2412.
    const double a = 2e9 / 3.5e13 * 1e3, cf = 1.4204 + 10 * a, cb = 4.2412 + 35 * a;
    mt_plan_input in = round_input("megatrain");
    CHECK(mt_plan_predict(&c, &in, &hw, &p) == MT_OK, "%s", mt_last_error());
    CHECK(near(p.compute_ms, cf + cb, 1e-9), "compute %.9g", p.compute_ms);
    CHECK(near(p.attention_ms, 45 * a, 1e-9) && !strcmp(p.attention_kernel, "cudnn") && near(p.attention_tflops, 35, 1e-12) &&
              !strncmp(p.attention_source, "assumed", 7),
          "attention %.9g ms, %s at %g TFLOP/s (%s)", p.attention_ms, p.attention_kernel, p.attention_tflops,
          p.attention_source);
    CHECK(near(p.optimizer_ms, 0.072021, 1e-9), "optimizer %.9g", p.optimizer_ms);
    CHECK(near(p.step_ms, 0.16004 + 0.008002 + 0.16004 + cf + cb, 1e-9), "compute-bound step %.9g", p.step_ms);
    CHECK(!strcmp(p.bound, "compute"), "bound %s", p.bound);
    CHECK(p.tokens == 1000 && near(p.flops_6n, 6 * 72021000.0 * 1000, 1e-12), "6N tokens");
    CHECK(near(p.tflops, 6 * 72021000.0 * 1000 / (p.step_ms / 1e3) / 1e12, 1e-12) && near(p.mfu, p.tflops / 100, 1e-12),
          "tflops %.6g mfu %.6g", p.tflops, p.mfu);
    CHECK(near(p.days_per_billion_tokens, 1e9 / (1000 / (p.step_ms / 1e3)) / 86400, 1e-12), "days/Btok");
    CHECK(near(p.flops_executed, 182.04e9 + 364.08e9 + 180.04e9, 1e-12), "executed %.9g", p.flops_executed);

    // 10 GB/s: transfer bound. fill = drain = 1.6004, forward (140.04e6 + 2.002e6)/1e10 s = 14.2042,
    // backward max(6.2412, 14.004, 14.4042) = 14.4042 (d2h: layer grads + embedding/head grads).
    CHECK(mt_hw_profile_load(round_profile("r10.json", 10), &hw) == MT_OK, "%s", mt_last_error());
    CHECK(mt_plan_predict(&c, &in, &hw, &p) == MT_OK, "%s", mt_last_error());
    CHECK(near(p.step_ms, 1.6004 + 0.008002 + 1.6004 + 14.2042 + 14.4042, 1e-9), "transfer-bound step %.9g", p.step_ms);
    CHECK(!strcmp(p.bound, "d2h"), "bound %s (d2h 1.6004 + 14.4042 > h2d 1.6004 + 14.2042)", p.bound);

    // naive, 100 GB/s: everything serial: c_f + c_b + 2W/h2d + Wg/d2h + EH/h2d + EH/d2h + opt.
    CHECK(mt_hw_profile_load(round_profile("r100.json", 100), &hw) == MT_OK, "%s", mt_last_error());
    in = round_input("naive");
    CHECK(mt_plan_predict(&c, &in, &hw, &p) == MT_OK, "%s", mt_last_error());
    CHECK(near(p.step_ms, cf + cb + 2.8008 + 1.4004 + 0.04002 + 0.04002 + 0.072021, 1e-9), "naive step %.9g", p.step_ms);

    // resident: no recompute: c_b = 4*P_mm*n/R + 2.5 * 10 a = 2.8408 + 25 a; grads out hide under
    // backward; + last layer out 0.14004 + opt + all weights back in N*2/1e11 s = 1.44042.
    in = round_input("resident");
    CHECK(mt_plan_predict(&c, &in, &hw, &p) == MT_OK, "%s", mt_last_error());
    CHECK(near(p.step_ms, cf + 2.8408 + 25 * a + 0.14004 + 0.072021 + 1.44042, 1e-9), "resident step %.9g", p.step_ms);

    // zero3 at 100 GB/s, prefetch bucket 5e7 >= every module: full overlap per module, so each
    // module costs max(c, x); x = P*2/1e11 s. Layer c: forward 2*7.002e6*1000/1e14 s + a =
    // 0.14004 + a ms, backward 0.28008 + 2.5 a + the recompute; x = 0.14004.
    //   forward  = embedding 0.02 (x only) + 10 * (0.14004 + a) + head max(2e9/1e14 s = 0.02, 0.02002)
    //   backward = head max(0.04, 0.02002) + 10 * (0.42012 + 3.5 a) + embedding 0.02, longer than
    //              the fp32 gradients out N*4/1e11 s = 2.88084, which then add the last reduce
    //              bucket (all of N < 5e8) 2.88084; + CPU Adam 0.072021 serially.
    in = round_input("zero3");
    CHECK(mt_plan_predict(&c, &in, &hw, &p) == MT_OK, "%s", mt_last_error());
    double fwd = 0.02 + 10 * (0.14004 + a) + 0.02002, bwd = 0.04 + 10 * (0.42012 + 3.5 * a) + 0.02;
    CHECK(near(p.step_ms, fwd + bwd + 2.88084 + 0.072021, 1e-9), "zero3 step %.9g vs %.9g", p.step_ms,
          fwd + bwd + 2.88084 + 0.072021);

    // Gradient accumulation: G micro-batches cost G times the pipeline, the optimizer once.
    in = round_input("naive");
    in.eng.grad_accum = 3;
    CHECK(mt_plan_predict(&c, &in, &hw, &p) == MT_OK, "%s", mt_last_error());
    CHECK(near(p.step_ms, 3 * (cf + cb + 2.8008 + 1.4004) + 0.04002 + 0.04002 + 0.072021, 1e-9), "naive G=3 %.9g",
          p.step_ms);
    CHECK(p.tokens == 3000, "tokens %lld", p.tokens);
}

int main(void) {
    mt_test_tmpdir_make("mt_test_planner");
    test_profile_loader();
    test_zero3_memory();
    test_predict();
    return mt_test_finish("test_planner");
}
