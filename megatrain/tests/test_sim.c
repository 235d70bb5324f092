// test_sim.c: the sim backend. (1) Closed-form timelines through the backend
// API on a round-number profile: back-to-back GEMMs, solo transfers, duplex
// slowdown, an event chain across the three streams, a two-buffer pipeline.
// (2) Memory: fake device memory with a real OOM, unbacked host memory (a
// 1.5 TB model state "fits"). (3) Through the real engine: the op sequence per
// stream matches the schedule's closed-form counts, the simulated time is a
// pure function of the profile, and a 120B-class step on h200-1.5t simulates
// in seconds with a step time between its compute and compute+transfer bounds.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend_call.h"
#include "backend/backend_registry.h"
#include "backends/sim/sim.h"
#include "core/vclock.h"
#include "engine/engine.h"
#include "model/config.h"
#include "test_util.h"

// Round numbers so every expected time below is arithmetic on these figures.
#define P_BF16 1000.0  // TFLOP/s
#define P_FP32 100.0
#define P_EFF 0.5
#define P_HBM 1000.0   // GB/s (x MT_SIM_HBM_EFF)
#define P_H2D 50.0     // GB/s pinned; pageable half
#define P_D2H 40.0
#define P_DUPLEX 0.5
#define P_HOST_GBPS 100.0
static const char *test_profile_json(int omit_duplex) {
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"schema\":\"megatrain.hardware/1\",\"name\":\"test-round\",\"gpu\":{\"name\":\"Round GPU\","
             "\"peak_tflops\":{\"bf16\":%g,\"tf32\":500,\"fp32\":%g},\"gemm_efficiency\":%g,\"hbm_gbps\":%g,"
             "\"hbm_bytes\":80000000000},\"link\":{\"kind\":\"pcie-gen5-x16\",\"theory_gbps\":63,"
             "\"h2d_gbps\":{\"pinned\":%g,\"pageable\":%g},\"d2h_gbps\":{\"pinned\":%g,\"pageable\":%g}%s},"
             "\"host\":{\"mem_bytes\":1000000000000,\"mem_gbps\":%g,\"cpu_cores\":16,\"numa_nodes\":1,"
             "\"adamw_params_per_s\":{\"fp32\":1e9,\"paper\":2e9,\"mixed\":1e9}}}",
             P_BF16, P_FP32, P_EFF, P_HBM, P_H2D, P_H2D / 2, P_D2H, P_D2H / 2,
             omit_duplex ? "" : ",\"duplex_factor\":0.5", P_HOST_GBPS);
    return buf;
}

static char prof_path[1024];

static mt_backend *sim(mt_dtype act) {
    mt_backend *be = NULL;
    mt_status s = mt_backend_sim_create(prof_path, act, &be);
    if (s != MT_OK) {
        fprintf(stderr, "sim create: %s\n", mt_last_error());
        exit(1);
    }
    return be;
}

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) + 1.0); }

#define L_MS MT_SIM_LAUNCH_MS
#define HBM_BYTES_PER_MS (P_HBM * MT_SIM_HBM_EFF * 1e6)

// ---- (1) closed forms ----

static double gemm_cost_ms(double peak_tflops, double M, double N, double K) {
    double W = M * N * K;
    double eff = P_EFF * W / (W + MT_SIM_GEMM_HALF_MACS) * fmin(1.0, fmin(M, fmin(N, K)) / MT_SIM_GEMM_FULL_DIM);
    return 2 * W / (peak_tflops * 1e9 * eff);
}

static void test_pure_compute(void) {
    const int n = 10, D = 4096;
    mt_backend *be = sim(MT_BF16);
    mt_event *e0, *e1;
    mt_backend_event_create(be, &e0);
    mt_backend_event_create(be, &e1);
    mt_backend_event_record(be, e0, MT_STREAM_COMPUTE);
    for (int i = 0; i < n; i++) mt_backend_matmul_fwd(be, NULL, NULL, NULL, NULL, MT_BF16, D, D, D);
    mt_backend_event_record(be, e1, MT_STREAM_COMPUTE);
    float ms = 0;
    mt_backend_event_elapsed_ms(be, e0, e1, &ms);
    double c = gemm_cost_ms(P_BF16, D, D, D);
    CHECK(near(ms, L_MS + n * c) || fabs(ms - (L_MS + n * c)) < 1e-5, "10 GEMMs: %.6f ms, expected %.6f", ms, L_MS + n * c);
    mt_backend_stream_sync(be, MT_STREAM_COMPUTE);
    CHECK(near(mt_vclock_now(), L_MS + n * c), "host after stream_sync at %.6f, expected %.6f", mt_vclock_now(), L_MS + n * c);
    mt_sim_stats st;
    mt_sim_stats_get(be, &st);
    CHECK(near(st.compute_busy_ms, n * c), "compute busy %.6f, expected %.6f", st.compute_busy_ms, n * c);
    CHECK(near(st.flops, n * 2.0 * D * D * D), "flops %.4g", st.flops);
    CHECK(mt_sim_count_ops(be, MT_STREAM_COMPUTE, "matmul_fwd") == n, "op count");
    // backward = the two GEMMs (dinp, dw), each of forward's size
    double t0 = mt_vclock_now();
    mt_backend_matmul_bwd(be, (void *)1, (void *)1, NULL, NULL, NULL, NULL, MT_BF16, D, D, D, 0);
    mt_backend_stream_sync(be, MT_STREAM_COMPUTE);
    CHECK(near(mt_vclock_now() - t0, L_MS + 2 * c), "matmul_bwd %.6f, expected %.6f", mt_vclock_now() - t0, L_MS + 2 * c);
    // small GEMMs lose efficiency by the stated curve (M = 32 halves it)
    t0 = mt_vclock_now();
    mt_backend_matmul_fwd(be, NULL, NULL, NULL, NULL, MT_BF16, 32, 8192, 8192);
    mt_backend_stream_sync(be, MT_STREAM_COMPUTE);
    double cs = gemm_cost_ms(P_BF16, 32, 8192, 8192);
    double bytes_ms = (32.0 * 8192 * 2 + 8192.0 * 8192 * 2 + 32.0 * 8192 * 2) / HBM_BYTES_PER_MS;
    CHECK(near(mt_vclock_now() - t0, L_MS + fmax(cs, bytes_ms)), "skinny GEMM %.6f, expected %.6f",
          mt_vclock_now() - t0, L_MS + fmax(cs, bytes_ms));
    mt_backend_event_destroy(be, e0);
    mt_backend_event_destroy(be, e1);
    mt_backend_destroy(be);

    // fp32 activations price at the fp32 peak (real fp32, no TF32): 10x slower here
    be = sim(MT_F32);
    mt_backend_matmul_fwd(be, NULL, NULL, NULL, NULL, MT_F32, D, D, D);
    mt_backend_stream_sync(be, MT_STREAM_COMPUTE);
    CHECK(near(mt_vclock_now(), L_MS + gemm_cost_ms(P_FP32, D, D, D)), "fp32 GEMM %.6f", mt_vclock_now());
    mt_backend_destroy(be);
}

static void test_pure_transfer(void) {
    mt_backend *be = sim(MT_BF16);
    void *h = NULL, *d = NULL;
    CHECK(mt_backend_host_alloc(be, 1000000000, &h) == MT_OK, "host_alloc 1 GB: %s", mt_last_error());
    CHECK(mt_backend_dev_alloc(be, 1000000000, &d) == MT_OK, "dev_alloc 1 GB");
    mt_backend_copy(be, d, h, 1000000000, MT_COPY_H2D, MT_STREAM_H2D);
    mt_backend_stream_sync(be, MT_STREAM_H2D);
    double a = 1e9 / (P_H2D * 1e6); // 20 ms
    CHECK(near(mt_vclock_now(), L_MS + a), "pinned H2D 1 GB ends %.6f, expected %.6f", mt_vclock_now(), L_MS + a);
    static char pageable[16]; // never read: the sim touches no data
    double t0 = mt_vclock_now();
    mt_backend_copy(be, d, pageable, 1000000000, MT_COPY_H2D, MT_STREAM_H2D);
    mt_backend_stream_sync(be, MT_STREAM_H2D);
    CHECK(near(mt_vclock_now() - t0, L_MS + 2 * a), "pageable H2D 1 GB %.6f, expected %.6f", mt_vclock_now() - t0, L_MS + 2 * a);
    t0 = mt_vclock_now();
    mt_backend_copy(be, h, d, 1000000000, MT_COPY_D2H, MT_STREAM_D2H);
    mt_backend_stream_sync(be, MT_STREAM_D2H);
    CHECK(near(mt_vclock_now() - t0, L_MS + 1e9 / (P_D2H * 1e6)), "pinned D2H 1 GB %.6f", mt_vclock_now() - t0);
    mt_sim_stats st;
    mt_sim_stats_get(be, &st);
    CHECK(near(st.link_bytes[0], 2e9) && near(st.link_bytes[1], 1e9), "link bytes %.4g %.4g", st.link_bytes[0], st.link_bytes[1]);
    mt_backend_dev_free(be, d);
    mt_backend_host_free(be, h, 1000000000);
    mt_backend_destroy(be);
}

static void test_duplex(void) {
    mt_backend *be = sim(MT_BF16);
    void *h = NULL, *d = NULL;
    mt_backend_host_alloc(be, 1000000000, &h);
    mt_backend_dev_alloc(be, 1000000000, &d);
    // H2D placed first: full rate. D2H issued one launch later overlaps it: its
    // overlapped part runs at duplex x rate, the rest at full rate.
    mt_backend_copy(be, d, h, 1000000000, MT_COPY_H2D, MT_STREAM_H2D);
    mt_backend_copy(be, h, d, 1000000000, MT_COPY_D2H, MT_STREAM_D2H);
    mt_backend_stream_sync(be, MT_STREAM_H2D);
    double h2d_end = L_MS + 1e9 / (P_H2D * 1e6);
    CHECK(near(mt_vclock_now(), h2d_end), "duplex: H2D ends %.6f, expected %.6f", mt_vclock_now(), h2d_end);
    mt_backend_stream_sync(be, MT_STREAM_D2H);
    double r = P_D2H * 1e6, d2h_start = 2 * L_MS, overlap = h2d_end - d2h_start;
    double left = 1e9 - P_DUPLEX * r * overlap, d2h_end = h2d_end + left / r;
    CHECK(near(mt_vclock_now(), d2h_end), "duplex: D2H ends %.6f, expected %.6f (solo would be %.6f)", mt_vclock_now(),
          d2h_end, d2h_start + 1e9 / r);
    // a D2H that fits inside a running H2D runs entirely at the duplex rate
    double t0 = mt_vclock_now();
    mt_backend_copy(be, d, h, 1000000000, MT_COPY_H2D, MT_STREAM_H2D);
    mt_backend_copy(be, h, d, 100000000, MT_COPY_D2H, MT_STREAM_D2H);
    mt_backend_stream_sync(be, MT_STREAM_D2H);
    CHECK(near(mt_vclock_now(), t0 + 2 * L_MS + 1e8 / (P_DUPLEX * r)), "duplex: short D2H ends %.6f, expected %.6f",
          mt_vclock_now(), t0 + 2 * L_MS + 1e8 / (P_DUPLEX * r));
    mt_backend_destroy(be);
}

static void test_event_chain(void) {
    mt_backend *be = sim(MT_BF16);
    void *h = NULL, *d = NULL;
    mt_backend_host_alloc(be, 1000000000, &h);
    mt_backend_dev_alloc(be, 1000000000, &d);
    mt_event *e1, *e2, *e3;
    mt_backend_event_create(be, &e1);
    mt_backend_event_create(be, &e2);
    mt_backend_event_create(be, &e3);
    // copy in (20 ms) -> compute waits -> 10 ms of compute -> copy out waits -> 25 ms
    mt_backend_copy(be, d, h, 1000000000, MT_COPY_H2D, MT_STREAM_H2D);
    mt_backend_event_record(be, e1, MT_STREAM_H2D);
    mt_backend_stream_wait(be, MT_STREAM_COMPUTE, e1);
    mt_backend_memset_zero(be, d, (size_t)(10 * HBM_BYTES_PER_MS), MT_STREAM_COMPUTE);
    mt_backend_event_record(be, e2, MT_STREAM_COMPUTE);
    mt_backend_stream_wait(be, MT_STREAM_D2H, e2);
    mt_backend_copy(be, h, d, 1000000000, MT_COPY_D2H, MT_STREAM_D2H);
    mt_backend_event_record(be, e3, MT_STREAM_D2H);
    mt_backend_event_sync(be, e3);
    double expect = L_MS + 20 + 10 + 25;
    CHECK(near(mt_vclock_now(), expect), "chain ends %.6f, expected %.6f (the sum)", mt_vclock_now(), expect);
    float ms = 0;
    mt_backend_event_elapsed_ms(be, e1, e2, &ms);
    CHECK(fabs(ms - 10) < 1e-4, "compute between events %.6f ms, expected 10", ms);
    mt_sim_stats st;
    mt_sim_stats_get(be, &st);
    CHECK(near(st.makespan_ms, expect), "makespan %.6f", st.makespan_ms);
    CHECK(near(st.h2d_busy_ms, 20) && near(st.compute_busy_ms, 10) && near(st.d2h_busy_ms, 25), "busy %.4f %.4f %.4f",
          st.h2d_busy_ms, st.compute_busy_ms, st.d2h_busy_ms);
    mt_backend_event_destroy(be, e1);
    mt_backend_event_destroy(be, e2);
    mt_backend_event_destroy(be, e3);
    mt_backend_destroy(be);
}

// Two weight buffers, prefetch one layer ahead (as engine/step.c issues it):
// makespan = launch + min(a,c) + L * max(a,c)  (fill, steady state, drain).
static double pipeline(double a_ms, double c_ms, int L) {
    mt_backend *be = sim(MT_BF16);
    void *h = NULL, *buf[2];
    size_t load_bytes = (size_t)(a_ms * P_H2D * 1e6);
    mt_backend_host_alloc(be, load_bytes, &h);
    mt_event *loaded[2], *freed[2];
    for (int i = 0; i < 2; i++) {
        mt_backend_dev_alloc(be, load_bytes, &buf[i]);
        mt_backend_event_create(be, &loaded[i]);
        mt_backend_event_create(be, &freed[i]);
    }
    for (int i = -1; i < L; i++) {
        int next = i + 1;
        if (next < L) { // issue load of layer i+1 into buffer (i+1)%2 once compute of i-1 freed it
            mt_backend_stream_wait(be, MT_STREAM_H2D, freed[next % 2]);
            mt_backend_copy(be, buf[next % 2], h, load_bytes, MT_COPY_H2D, MT_STREAM_H2D);
            mt_backend_event_record(be, loaded[next % 2], MT_STREAM_H2D);
        }
        if (i < 0) continue;
        mt_backend_stream_wait(be, MT_STREAM_COMPUTE, loaded[i % 2]);
        mt_backend_memset_zero(be, buf[i % 2], (size_t)(c_ms * HBM_BYTES_PER_MS), MT_STREAM_COMPUTE);
        mt_backend_event_record(be, freed[i % 2], MT_STREAM_COMPUTE);
    }
    mt_backend_stream_sync(be, MT_STREAM_COMPUTE);
    double t = mt_vclock_now();
    for (int i = 0; i < 2; i++) {
        mt_backend_event_destroy(be, loaded[i]);
        mt_backend_event_destroy(be, freed[i]);
    }
    mt_backend_destroy(be);
    return t;
}

static void test_pipeline(void) {
    const int L = 8;
    double cases[][2] = {{10, 5}, {10, 20}, {10, 10}};
    for (int k = 0; k < 3; k++) {
        double a = cases[k][0], c = cases[k][1];
        double t = pipeline(a, c, L), expect = L_MS + fmin(a, c) + L * fmax(a, c);
        CHECK(fabs(t - expect) < 1e-6, "pipeline a=%g c=%g: %.6f ms, expected %.6f", a, c, t, expect);
    }
}

static void test_host_work(void) {
    mt_backend *be = sim(MT_BF16);
    double acc = mt_backend_host_work_ms(be, MT_HOST_GRAD_ACCUMULATE, 1000000000, MT_BF16, 0);
    CHECK(near(acc, 1e9 * 4 * 2 / (P_HOST_GBPS * 1e6)), "grad accumulate 1e9 bf16: %.4f ms", acc);
    CHECK(near(mt_backend_host_work_ms(be, MT_HOST_ADAMW, 2000000000, MT_BF16, 0), 1000), "adamw paper");
    CHECK(near(mt_backend_host_work_ms(be, MT_HOST_ADAMW, 1000000000, MT_BF16, 1), 1000), "adamw mixed");
    CHECK(near(mt_backend_host_work_ms(be, MT_HOST_ADAMW, 1000000000, MT_F32, 0), 1000), "adamw fp32");
    mt_sim_stats st;
    mt_sim_stats_get(be, &st);
    CHECK(st.n_host_lanes == 1 && !strcmp(st.host_lane_name[0], "host"), "the creating thread's lane is \"host\" (%d, %s)",
          st.n_host_lanes, st.host_lane_name[0]);
    mt_backend_destroy(be);
}

// Attention priced per implementation: the profile's measured table for the kernel
// chosen (interpolated in log T, flat beyond its ends), the assumed fraction of peak
// for a kernel it did not measure or for f32 activations; a table without its source
// or with T out of order is refused naming the key.
static const char *with_attention(const char *tables, const char *sources) {
    static char buf[8192];
    const char *base = test_profile_json(0);
    const char *gpu_end = strstr(base, "\"hbm_bytes\":80000000000");
    snprintf(buf, sizeof buf, "%.*s\"attention_tflops\":%s,%s%s", (int)(gpu_end - base), base, tables,
             gpu_end, "");
    size_t n = strlen(buf);
    snprintf(buf + n - 1, sizeof buf - n + 1, ",\"sources\":%s}", sources); // replace the closing brace
    return buf;
}

static double attention_fwd_ms(mt_backend *be, int T) {
    double t0 = mt_vclock_now();
    mt_backend_attention_fwd(be, NULL, NULL, NULL, 1, T, 32, 8, 128);
    mt_backend_stream_sync(be, MT_STREAM_COMPUTE);
    return mt_vclock_now() - t0 - L_MS;
}

static void test_attention_pricing(void) {
    const char *tables = "{\"native\":[[1024,100],[16384,300]],\"torch_sdpa\":[[4096,200]]}";
    const char *srcs = "{\"gpu.attention_tflops.native\":\"test: native\",\"gpu.attention_tflops.torch_sdpa\":\"test\"}";
    char good[1024];
    snprintf(good, sizeof good, "%s", mt_test_write_tmp("attn.json", with_attention(tables, srcs)));
    mt_hw_profile p;
    CHECK(mt_hw_profile_load(good, &p) == MT_OK, "profile with attention tables: %s", mt_last_error());
    const char *src = NULL;
    CHECK(near(mt_hw_attention_tflops(&p, "native", 1, 1, 32, 4096, &src), 200) && !strcmp(src, "test: native"),
          "native at 4k: log-T midpoint of 100 and 300, its source (%s)", src ? src : "null");
    CHECK(near(mt_hw_attention_tflops(&p, "native", 1, 1, 32, 512, NULL), 100), "below the table: its first point");
    CHECK(near(mt_hw_attention_tflops(&p, "native", 1, 1, 32, 1 << 20, NULL), 300), "beyond the table: its last point");
    CHECK(near(mt_hw_attention_tflops(&p, "cudnn", 1, 1, 32, 4096, &src), MT_ATTN_ASSUMED_EFF * P_BF16) &&
              !strncmp(src, "assumed", 7), "cudnn unmeasured: the assumed fraction of peak");
    CHECK(near(mt_hw_attention_tflops(&p, "native", 0, 1, 32, 4096, NULL), MT_ATTN_ASSUMED_EFF * P_FP32),
          "f32 activations: the measurement (bf16) does not apply");

    // through the backend: --attention picks the table, a peer's kernel its own
    mt_backend *be = NULL;
    CHECK(mt_backend_sim_create(good, MT_BF16, &be) == MT_OK, "sim on the attention profile");
    const int T = 4096;
    double flops = 2.0 * 32 * (double)T * T * 128;
    CHECK(!strcmp(mt_sim_attention_kernel(be), "cudnn"), "auto on bf16 prices cudnn, as the cuda backend picks it");
    double ms_auto = attention_fwd_ms(be, T);
    CHECK(near(ms_auto, flops / (MT_ATTN_ASSUMED_EFF * P_BF16 * 1e9)), "cudnn (unmeasured) %.6f ms", ms_auto);
    CHECK(mt_backend_set_attention(be, MT_ATTN_NATIVE) == MT_OK, "--attention native on sim");
    double ms_native = attention_fwd_ms(be, T);
    CHECK(near(ms_native, flops / (200 * 1e9)), "native at its measured 200 TFLOP/s: %.6f ms", ms_native);
    CHECK(mt_sim_set_attention_kernel(be, "torch_sdpa") == MT_OK, "a peer's kernel");
    CHECK(near(attention_fwd_ms(be, T), flops / (200 * 1e9)), "torch_sdpa at 200");
    double t0 = mt_vclock_now();
    mt_backend_attention_bwd(be, NULL, NULL, NULL, NULL, NULL, 1, T, 32, 8, 128);
    mt_backend_stream_sync(be, MT_STREAM_COMPUTE);
    CHECK(near(mt_vclock_now() - t0 - L_MS, MT_ATTN_BWD_FACTOR * flops / (200 * 1e9)), "backward at the same rate");
    mt_backend_destroy(be);

    // refused: a table without its source, T not ascending, a rate out of range
    struct { const char *tables, *srcs, *says; } bad[] = {
        {"{\"native\":[[1024,100]]}", "{}", "every attention table needs its source"},
        {"{\"native\":[[4096,100],[1024,90]]}", "{\"gpu.attention_tflops.native\":\"x\"}", "ascending"},
        {"{\"native\":[[1024,1e9]]}", "{\"gpu.attention_tflops.native\":\"x\"}", "outside"},
        {"{\"native\":[1024,100]}", "{\"gpu.attention_tflops.native\":\"x\"}", "expected [T, tflops]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *path = mt_test_write_tmp("attn-bad.json", with_attention(bad[i].tables, bad[i].srcs));
        mt_status s = mt_hw_profile_load(path, &p);
        CHECK(s == MT_ERR_FORMAT && strstr(mt_last_error(), bad[i].says) &&
                  strstr(mt_last_error(), "gpu.attention_tflops"),
              "bad table %zu refused naming the key: %s", i, mt_last_error());
    }
}

// ---- (2) memory and errors ----

static void test_memory_and_errors(void) {
    mt_backend *be = sim(MT_BF16);
    mt_device_info info;
    mt_backend_device_info(be, &info);
    CHECK(!strncmp(info.name, "sim: test-round", 15) && info.mem_total_bytes == 80000000000ull && info.numa_node == -1 &&
              info.host_mem_avail_bytes == 1000000000000ull,
          "device_info: %s %zu", info.name, info.mem_total_bytes);
    void *a = NULL, *b = NULL;
    CHECK(mt_backend_dev_alloc(be, 60000000000ull, &a) == MT_OK, "60 GB of 80");
    mt_status s = mt_backend_dev_alloc(be, 30000000000ull, &b);
    CHECK(s == MT_ERR_MEMORY && strstr(mt_last_error(), "GiB") && strstr(mt_last_error(), "in use"),
          "a device OOM names the numbers: %s", mt_last_error());
    mt_backend_device_info(be, &info);
    CHECK(info.mem_free_bytes == 20000000000ull, "free after 60 GB: %zu", info.mem_free_bytes);
    mt_backend_dev_free(be, a);
    CHECK(mt_backend_dev_alloc(be, 30000000000ull, &b) == MT_OK, "freed memory is reusable");
    void *rest = NULL; // full: a tiny allocation's refusal shows its size (not "0.00 GiB")
    CHECK(mt_backend_dev_alloc(be, 50000000000ull, &rest) == MT_OK, "the rest of the 80 GB");
    s = mt_backend_dev_alloc(be, 1000, &(void *){0});
    CHECK(s == MT_ERR_MEMORY && strstr(mt_last_error(), "cannot allocate 1000 bytes: 74.51 GiB of 74.51 GiB"),
          "a tiny refused allocation shows its size: %s", mt_last_error());
    // staging buffers from host_alloc are real, writable memory
    void *stage = NULL;
    CHECK(mt_backend_host_alloc(be, 4u << 20, &stage) == MT_OK, "host_alloc 4 MiB");
    if (stage) memset(stage, 0x5a, 4u << 20);
    mt_backend_host_free(be, stage, 4u << 20);
    mt_backend_destroy(be);

    // a 1.5 TB model state "fits" on the 1.5 TB profile without touching memory
    mt_backend *big = NULL;
    s = mt_backend_sim_create("experiments/hardware/h200-1.5t.json", MT_BF16, &big);
    CHECK(s == MT_OK, "h200-1.5t profile: %s", mt_last_error());
    if (big) {
        void *p = NULL;
        size_t tb = 1440000000000ull; // 120B x 12 B/param
        CHECK(mt_backend_host_alloc(big, tb, &p) == MT_OK, "host_alloc 1.44 TB: %s", mt_last_error());
        mt_sim_stats st;
        mt_sim_stats_get(big, &st);
        CHECK(st.host_bytes_in_use == tb, "host bytes in use %zu", st.host_bytes_in_use);
        CHECK(mt_backend_host_alloc(big, 100000000000ull, &(void *){0}) == MT_ERR_MEMORY,
              "past the profile's host memory: refused");
        mt_backend_host_free(big, p, tb);
        mt_backend_destroy(big);
    }

    // profile errors: one line naming the file and the key
    const char *bad = mt_test_write_tmp("no_duplex.json", test_profile_json(1));
    mt_backend *x = NULL;
    s = mt_backend_sim_create(bad, MT_BF16, &x);
    CHECK(s == MT_ERR_FORMAT && strstr(mt_last_error(), "no_duplex.json") && strstr(mt_last_error(), "link.duplex_factor"),
          "missing key: %s", mt_last_error());
    s = mt_backend_sim_create("/nonexistent/profile.json", MT_BF16, &x);
    CHECK(s == MT_ERR_IO && strstr(mt_last_error(), "/nonexistent/profile.json"), "missing file: %s", mt_last_error());
    s = mt_backend_create("sim", MT_BF16, &x);
    CHECK(s != MT_OK && strstr(mt_last_error(), "--hardware PROFILE"), "sim by name: %s", mt_last_error());
    const char *names[8];
    int n = mt_backend_list(names, 8), has_sim = 0;
    for (int i = 0; i < n && i < 8; i++) has_sim |= !strcmp(names[i], "sim");
    CHECK(has_sim, "mt_backend_list lists sim");
}

// ---- (3) through the engine ----

typedef struct {
    double step_ms[8];
    mt_sim_stats before[8], after[8];
    mt_sim_stats total;
    long long h2d_copies, d2h_copies, cmp_h2d, cmp_d2h, att_fwd, att_bwd, mm_fwd, mm_bwd, memsets;
    double real_s;
    mt_status status;
} run_result;

static run_result run_engine(const char *cfg_path, const char *profile, mt_precision p, int B, int T, int G, int K,
                             int steps) {
    run_result r;
    memset(&r, 0, sizeof r);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    mt_config cfg;
    if ((r.status = mt_config_load(cfg_path, &cfg)) != MT_OK) return r;
    mt_backend *be = NULL;
    if ((r.status = mt_backend_sim_create(profile, p == MT_PREC_FP32 ? MT_F32 : MT_BF16, &be)) != MT_OK) return r;
    mt_model m;
    mt_engine *e = NULL;
    int32_t *tok = NULL;
    if ((r.status = mt_model_alloc(&m, &cfg, p, be)) != MT_OK) goto out;
    mt_engine_opts eo = {.B = B, .T = T, .grad_accum = G, .grad_slabs = 4, .sched = {.weight_bufs = 2, .ckpt_interval = K}};
    if ((r.status = mt_schedule_find("megatrain", &eo.schedule)) != MT_OK) goto out_model;
    if ((r.status = mt_engine_create(&m, be, &eo, &e)) != MT_OK) goto out_model;
    tok = calloc((size_t)G * B * T, sizeof *tok);
    mt_optim_hparams hp = {3e-4f, 0.1f, 0.9f, 0.95f, 1e-8f, 1.0f, 0};
    for (int s = 1; s <= steps && s <= 8; s++) {
        mt_step_stats st;
        mt_sim_stats_get(be, &r.before[s - 1]);
        double t = mt_engine_now_ms(e);
        if ((r.status = mt_engine_step(e, tok, tok, &hp, 3e-4f, s, &st)) != MT_OK) goto out_engine;
        if (s == steps) mt_engine_finish(e); // the last update counts in its step (as the CLI does)
        r.step_ms[s - 1] = mt_engine_now_ms(e) - t;
        mt_sim_stats_get(be, &r.after[s - 1]);
    }
    mt_sim_stats_get(be, &r.total);
    r.h2d_copies = mt_sim_count_ops(be, MT_STREAM_H2D, "copy_h2d");
    r.d2h_copies = mt_sim_count_ops(be, MT_STREAM_D2H, "copy_d2h");
    r.cmp_h2d = mt_sim_count_ops(be, MT_STREAM_COMPUTE, "copy_h2d");
    r.cmp_d2h = mt_sim_count_ops(be, MT_STREAM_COMPUTE, "copy_d2h");
    r.att_fwd = mt_sim_count_ops(be, MT_STREAM_COMPUTE, "attention_fwd");
    r.att_bwd = mt_sim_count_ops(be, MT_STREAM_COMPUTE, "attention_bwd");
    r.mm_fwd = mt_sim_count_ops(be, MT_STREAM_COMPUTE, "matmul_fwd");
    r.mm_bwd = mt_sim_count_ops(be, MT_STREAM_COMPUTE, "matmul_bwd");
    r.memsets = mt_sim_count_ops(be, MT_STREAM_COMPUTE, "memset");
out_engine:
    mt_engine_destroy(e);
out_model:
    mt_model_free(&m);
out:
    free(tok);
    mt_backend_destroy(be);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r.real_s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    return r;
}

// What engine/weight_uses.c + step.c issue per step for L layers, checkpoint interval
// K, G micro-batches, 2 weight buffers (derivation):
//   uses per micro-batch: forward 0..L-1; per block [s,e) (last first) rebuild
//   s..e-2, backward e-1..s. A use loads unless it repeats the previous layer:
//   loads/mb = L + sum_b (2 k_b - 1) - [k_last_block == 1]  (L-1 reused when the
//   last block is one layer), and micro-batches after the first reuse layer 0:
//   H2D stream copies/step = G * loads/mb - (G - 1) + 2 (embedding, head).
//   D2H stream copies/step = G * (L + 2)  (every layer, head, embedding grads).
//   attention_fwd/mb = L (forward) + sum_b (k_b - 1) (rebuild) + L - [k_last==1]
//   (each backward recomputes its internals unless they are still there);
//   attention_bwd/mb = L; matmul_bwd/mb = 4 L + head chunks (1 here).
//   compute-stream copies: ids + targets in, losses out per mb; rope tables once.
typedef struct {
    long long loads_mb, att_fwd_mb;
} sched_counts;

static sched_counts expected_counts(int L, int K) {
    sched_counts c = {L, L};
    for (int s = (L - 1) / K * K; s >= 0; s -= K) {
        int kb = (s + K < L ? s + K : L) - s;
        c.loads_mb += 2 * kb - 1;
        c.att_fwd_mb += kb - 1;
    }
    int k_last = L - (L - 1) / K * K;
    c.loads_mb -= k_last == 1;
    c.att_fwd_mb += L - (k_last == 1);
    return c;
}

static const char *tiny_cfg =
    "{\"model_type\":\"qwen2\",\"vocab_size\":256,\"hidden_size\":128,\"intermediate_size\":352,"
    "\"num_hidden_layers\":5,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"max_position_embeddings\":1024,"
    "\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,\"tie_word_embeddings\":false}";

static void test_engine_schedule(const char *cfg) {
    const int L = 5, steps = 2, B = 2, T = 16;
    int variants[][2] = {{1, 1}, {2, 1}, {1, 2}, {2, 3}, {5, 1}}; // {K, G}
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        int K = variants[v][0], G = variants[v][1];
        run_result r = run_engine(cfg, prof_path, MT_PREC_PAPER, B, T, G, K, steps);
        CHECK(r.status == MT_OK, "engine K=%d G=%d: %s", K, G, mt_last_error());
        if (r.status != MT_OK) continue;
        sched_counts c = expected_counts(L, K);
        // Each load crosses in MT_UPDATE_PARTS copies, each after its part of the unit's update.
        long long h2d = steps * (G * c.loads_mb - (G - 1) + 2) * MT_UPDATE_PARTS;
        CHECK(r.h2d_copies == h2d, "K=%d G=%d: %lld H2D-stream loads, expected %lld", K, G, r.h2d_copies, h2d);
        CHECK(r.d2h_copies == (long long)steps * G * (L + 2), "K=%d G=%d: %lld D2H-stream offloads, expected %d", K, G,
              r.d2h_copies, steps * G * (L + 2));
        CHECK(r.att_bwd == (long long)steps * G * L, "K=%d G=%d: attention_bwd %lld", K, G, r.att_bwd);
        CHECK(r.att_fwd == steps * G * c.att_fwd_mb, "K=%d G=%d: attention_fwd %lld, expected %lld", K, G, r.att_fwd,
              steps * G * c.att_fwd_mb);
        CHECK(r.mm_bwd == (long long)steps * G * (4 * L + 1), "K=%d G=%d: matmul_bwd %lld", K, G, r.mm_bwd);
        CHECK(r.cmp_h2d == 2 + 2LL * steps * G && r.cmp_d2h == (long long)steps * G,
              "K=%d G=%d: compute-stream copies %lld in, %lld out", K, G, r.cmp_h2d, r.cmp_d2h);
        CHECK(r.memsets == 4 + (long long)steps * G, "K=%d G=%d: memsets %lld", K, G, r.memsets);
        CHECK(r.step_ms[0] > 0 && r.step_ms[1] > 0, "K=%d G=%d: step times %g %g", K, G, r.step_ms[0], r.step_ms[1]);
        CHECK(r.total.n_host_lanes == 2, "host lanes: drain and optimizer (%d)", r.total.n_host_lanes);
    }
}

static void test_engine_pure(const char *cfg) {
    // the simulated time is a pure function of profile and configuration: repeated runs agree exactly
    run_result a = run_engine(cfg, prof_path, MT_PREC_MIXED, 2, 16, 2, 2, 3);
    for (int rep = 0; rep < 3; rep++) {
        run_result b = run_engine(cfg, prof_path, MT_PREC_MIXED, 2, 16, 2, 2, 3);
        CHECK(a.status == MT_OK && b.status == MT_OK, "runs: %s", mt_last_error());
        int same = 1;
        for (int s = 0; s < 3; s++) same &= a.step_ms[s] == b.step_ms[s];
        CHECK(same, "run %d: step times differ: %.17g %.17g %.17g vs %.17g %.17g %.17g", rep, a.step_ms[0],
              a.step_ms[1], a.step_ms[2], b.step_ms[0], b.step_ms[1], b.step_ms[2]);
        CHECK(a.total.makespan_ms == b.total.makespan_ms && a.total.compute_busy_ms == b.total.compute_busy_ms &&
                  a.total.host_busy_ms[0] + a.total.host_busy_ms[1] == b.total.host_busy_ms[0] + b.total.host_busy_ms[1],
              "run %d: stats differ", rep);
    }
}

static void report(const char *what, const run_result *r, int s, double params, long long tokens) {
    const mt_sim_stats *b = &r->before[s], *a = &r->after[s];
    double ms = r->step_ms[s];
    fprintf(stderr,
            "%s step %d: %.1f ms, %.1f tokens/s, %.1f TFLOP/s (6N), gpu busy %.3f, h2d busy %.1f ms (%.1f GB), d2h busy "
            "%.1f ms, peak gpu %.1f GiB, host %.1f GiB, real %.2f s\n",
            what, s + 1, ms, tokens / (ms / 1e3), 6.0 * params * tokens / (ms / 1e3) / 1e12,
            (a->compute_busy_ms - b->compute_busy_ms) / ms, a->h2d_busy_ms - b->h2d_busy_ms,
            (a->link_bytes[0] - b->link_bytes[0]) / 1e9, a->d2h_busy_ms - b->d2h_busy_ms, a->dev_bytes_peak / 1073741824.0,
            a->host_bytes_peak / 1073741824.0, r->real_s);
}

// A Qwen2-shaped config.json in the scratch directory: C hidden, F intermediate, L layers, NH/NKV heads.
static void qwen2_cfg(char *path, size_t cap, const char *name, int C, int F, int L, int NH, int NKV) {
    char json[512];
    snprintf(json, sizeof json,
             "{\"model_type\":\"qwen2\",\"vocab_size\":152064,\"hidden_size\":%d,\"intermediate_size\":%d,"
             "\"num_hidden_layers\":%d,\"num_attention_heads\":%d,\"num_key_value_heads\":%d,"
             "\"max_position_embeddings\":32768,\"rms_norm_eps\":1e-6,\"rope_theta\":1000000.0,"
             "\"tie_word_embeddings\":false}",
             C, F, L, NH, NKV);
    snprintf(path, cap, "%s", mt_test_write_tmp(name, json));
}

static void test_engine_120b(void) {
    char cfg[1024];
    qwen2_cfg(cfg, sizeof cfg, "dense120b.json", 10240, 28672, 96, 80, 8);
    const int B = 16, T = 1024, steps = 3;
    run_result r = run_engine(cfg, "experiments/hardware/h200-1.5t.json", MT_PREC_PAPER, B, T, 1, 1, steps);
    CHECK(r.status == MT_OK, "120B on h200-1.5t: %s", mt_last_error());
    if (r.status != MT_OK) return;
    CHECK(r.real_s < 20, "120B: %d simulated steps took %.1f s of real time", steps, r.real_s);
    mt_config c;
    mt_config_load(cfg, &c);
    double params = (double)mt_config_params_total(&c), tokens = (double)B * T;
    mt_hw_profile prof;
    mt_hw_profile_load("experiments/hardware/h200-1.5t.json", &prof);
    for (int s = 0; s < steps; s++) report("120B paper h200-1.5t B16xT1024", &r, s, params, (long long)tokens);
    // steady step (2): at least its own compute, at most compute + every transfer + the whole optimizer pass
    const mt_sim_stats *b = &r.before[1], *a = &r.after[1];
    double compute = a->compute_busy_ms - b->compute_busy_ms;
    double xfer = (a->link_busy_ms[0] - b->link_busy_ms[0]) + (a->link_busy_ms[1] - b->link_busy_ms[1]);
    double adamw = params / prof.adamw_params_per_s[MT_ADAMW_PAPER] * 1e3;
    CHECK(r.step_ms[1] >= compute && r.step_ms[1] <= compute + xfer + adamw,
          "120B step %.1f ms outside [compute %.1f, compute + transfers %.1f + AdamW %.1f]", r.step_ms[1], compute, xfer,
          adamw);
    // the compute is what 8N FLOPs/token (forward, recompute, backward) at the large-GEMM rate predicts
    double flops = a->flops - b->flops, bound = 8.0 * params * tokens;
    CHECK(flops > 0.9 * bound && flops < 1.1 * bound, "120B: %.3g FLOPs per step vs 8 N tokens = %.3g", flops, bound);
    double rate = prof.peak_tflops[MT_PEAK_BF16] * 1e9 * prof.gemm_efficiency;
    CHECK(compute > 0.95 * flops / rate && compute < 1.3 * flops / rate, "120B: compute %.1f ms vs FLOPs at peak x eff %.1f ms",
          compute, flops / rate);
    // layer weights cross the link twice per step (forward, backward; the last layer is reused), the
    // embedding and head once; every gradient leaves once (bf16)
    double layer_bytes = (double)mt_config_params_per_layer(&c) * 2, other_bytes = params * 2 - 96 * layer_bytes;
    double in = a->link_bytes[0] - b->link_bytes[0], out = a->link_bytes[1] - b->link_bytes[1];
    CHECK(fabs(in - ((2 * 96 - 1) * layer_bytes + other_bytes)) < 0.001 * in, "120B: %.6g bytes in per step, expected %.6g",
          in, (2 * 96 - 1) * layer_bytes + other_bytes);
    CHECK(fabs(out - params * 2) < 0.001 * out, "120B: %.6g bytes out per step, expected %.6g", out, params * 2);
}

static void test_engine_7b(void) {
    char cfg[1024];
    qwen2_cfg(cfg, sizeof cfg, "qwen25_7b.json", 3584, 18944, 28, 28, 4);
    // batch 150 x 1024 keeps every layer input (K=1) only with 84 GiB: a real OOM on an 80 GB H100
    run_result r = run_engine(cfg, "experiments/hardware/h100-128g.json", MT_PREC_PAPER, 150, 1024, 1, 1, 1);
    CHECK(r.status == MT_ERR_MEMORY && strstr(mt_last_error(), "GiB"), "7B B150 K=1 on 80 GB: %s", mt_last_error());
    r = run_engine(cfg, "experiments/hardware/h100-128g.json", MT_PREC_PAPER, 150, 1024, 1, 2, 3);
    CHECK(r.status == MT_OK, "7B B150 K=2 on h100-128g: %s", mt_last_error());
    if (r.status != MT_OK) return;
    mt_config c;
    mt_config_load(cfg, &c);
    for (int s = 0; s < 3; s++)
        report("Qwen2.5-7B paper h100-128g B150xT1024 K=2", &r, s, (double)mt_config_params_total(&c), 150 * 1024);
    CHECK(r.step_ms[1] > 0, "7B step");
}

int main(void) {
    mt_test_tmpdir_make("mt_test_sim");
    snprintf(prof_path, sizeof prof_path, "%s", mt_test_write_tmp("test-round.json", test_profile_json(0)));
    char tiny[1024];
    snprintf(tiny, sizeof tiny, "%s", mt_test_write_tmp("tiny5.json", tiny_cfg));

    test_pure_compute();
    test_pure_transfer();
    test_duplex();
    test_event_chain();
    test_pipeline();
    test_host_work();
    test_attention_pricing();
    test_memory_and_errors();
    test_engine_schedule(tiny);
    test_engine_pure(tiny);
    test_engine_120b();
    test_engine_7b();

    return mt_test_finish("test_sim");
}
