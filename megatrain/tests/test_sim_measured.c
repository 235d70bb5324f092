// test_sim_measured.c: the profile's optional measured rates in the sim's prices
// (backends/sim/sim.h): gpu.gemm_bwd_efficiency for a layer's backward GEMMs,
// gpu.kernel_gbps.<kernel> for the memory-bound kernels, gpu.attention_work_tflops.<kernel>
// for attention at its launch's B*NH*T^2, host.grad_sumsq_gbps for the drain's sum of squares. Checks that a profile without them prices as
// before (the formulas with gemm_efficiency and MT_SIM_HBM_EFF), that each key moves only
// its own ops and only at bf16 (what was measured), that a peer's eager scale divides them
// too, and that bad keys are refused in one line naming the key.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend_call.h"
#include "backends/sim/sim.h"
#include "core/vclock.h"
#include "engine/peer.h"
#include "test_util.h"

#define P_BF16 1000.0 // TFLOP/s
#define P_FP32 100.0
#define P_EFF 0.5
#define P_HBM 1000.0 // GB/s
#define L_MS MT_SIM_LAUNCH_MS

// A round-number profile; `gpu_extra` is spliced into "gpu", `sources` is the sources object.
static const char *profile(const char *gpu_extra, const char *sources) {
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"schema\":\"megatrain.hardware/1\",\"name\":\"test-measured\",\"gpu\":{\"name\":\"Round GPU\","
             "\"peak_tflops\":{\"bf16\":%g,\"tf32\":500,\"fp32\":%g},\"gemm_efficiency\":%g,\"hbm_gbps\":%g,"
             "\"hbm_bytes\":80000000000%s%s},\"link\":{\"kind\":\"pcie-gen5-x16\",\"theory_gbps\":63,"
             "\"h2d_gbps\":{\"pinned\":50,\"pageable\":25},\"d2h_gbps\":{\"pinned\":40,\"pageable\":20},"
             "\"duplex_factor\":0.5},\"host\":{\"mem_bytes\":1000000000000,\"mem_gbps\":100,\"cpu_cores\":16,"
             "\"numa_nodes\":1,\"adamw_params_per_s\":{\"fp32\":1e9,\"paper\":2e9,\"mixed\":1e9}},\"sources\":%s}",
             P_BF16, P_FP32, P_EFF, P_HBM, gpu_extra[0] ? "," : "", gpu_extra, sources);
    return buf;
}

// Measured: backward GEMMs at 0.25 of peak, rmsnorm_fwd at 100 GB/s, rope_bwd at 50 GB/s,
// cudnn attention 100 TFLOP/s at B*NH*T^2 = 32*4096^2 and 300 at 32*16384^2 (its table by T,
// 10 everywhere, then unused); native by T alone.
static const char *MEASURED =
    "\"gemm_bwd_efficiency\":0.25,\"kernel_gbps\":{\"rmsnorm_fwd\":100,\"rope_bwd\":50},"
    "\"attention_work_tflops\":{\"cudnn\":[[536870912,100],[8589934592,300]]},"
    "\"attention_tflops\":{\"cudnn\":[[1024,10],[4096,10]],\"native\":[[1024,40]]}";
static const char *MEASURED_SRC =
    "{\"gpu.gemm_bwd_efficiency\":\"test: gemm_bwd\",\"gpu.kernel_gbps\":\"test: kernels\","
    "\"gpu.attention_work_tflops.cudnn\":\"test: cudnn by work\",\"gpu.attention_tflops.cudnn\":\"test\","
    "\"gpu.attention_tflops.native\":\"test\"}";

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) + 1.0); }

static mt_backend *sim_on(const char *path, mt_dtype act) {
    mt_backend *be = NULL;
    CHECK(mt_backend_sim_create(path, act, &be) == MT_OK, "sim on %s: %s", path, mt_last_error());
    return be;
}

// The virtual time of the one op enqueued since tic() (its launch cost taken off).
static double t_start;
static void tic(void) { t_start = mt_vclock_now(); }
static double toc(mt_backend *be) {
    mt_backend_stream_sync(be, MT_STREAM_COMPUTE);
    return mt_vclock_now() - t_start - L_MS;
}

// The sim's GEMM formula (sim.h) at base efficiency `base`.
static double gemm_ms(double peak, double base, double M, double N, double K) {
    double W = M * N * K;
    double eff = base * W / (W + MT_SIM_GEMM_HALF_MACS) * fmin(1.0, fmin(M, fmin(N, K)) / MT_SIM_GEMM_FULL_DIM);
    return 2 * W / (peak * 1e9 * eff);
}

typedef struct {
    double fwd, bwd, rms_fwd, rms_bwd, rope_bwd, attn_cudnn_b1, attn_cudnn_b4, attn_native;
} prices;

static prices price_all(const char *path, mt_dtype act) {
    prices r;
    mt_backend *be = sim_on(path, act);
    const int N = 4096, IC = 4096, OC = 4096;
    tic();
    mt_backend_matmul_fwd(be, NULL, NULL, NULL, NULL, act, N, IC, OC);
    r.fwd = toc(be);
    tic();
    mt_backend_matmul_bwd(be, (void *)1, (void *)1, NULL, NULL, NULL, NULL, act, N, IC, OC, 0);
    r.bwd = toc(be);
    tic();
    mt_backend_rmsnorm_fwd(be, NULL, NULL, NULL, NULL, act, 16384, 4096, 1e-6f);
    r.rms_fwd = toc(be);
    tic();
    mt_backend_rmsnorm_bwd(be, NULL, NULL, NULL, NULL, NULL, NULL, act, 16384, 4096);
    r.rms_bwd = toc(be);
    tic();
    mt_backend_rope_bwd(be, NULL, NULL, NULL, NULL, 4, 1024, 32, 8, 128);
    r.rope_bwd = toc(be);
    tic();
    mt_backend_attention_fwd(be, NULL, NULL, NULL, 1, 4096, 32, 8, 128);
    r.attn_cudnn_b1 = toc(be);
    tic();
    mt_backend_attention_fwd(be, NULL, NULL, NULL, 4, 4096, 32, 8, 128);
    r.attn_cudnn_b4 = toc(be);
    CHECK(mt_backend_set_attention(be, MT_ATTN_NATIVE) == MT_OK, "--attention native");
    tic();
    mt_backend_attention_fwd(be, NULL, NULL, NULL, 4, 4096, 32, 8, 128);
    r.attn_native = toc(be);
    mt_backend_destroy(be);
    return r;
}

static void test_prices(void) {
    char base[1024], meas[1024];
    snprintf(base, sizeof base, "%s", mt_test_write_tmp("base.json", profile("", "{}")));
    snprintf(meas, sizeof meas, "%s", mt_test_write_tmp("measured.json", profile(MEASURED, MEASURED_SRC)));
    const double n = 4096, rms_bytes = 2.0 * 16384 * 4096 * 2 + 4096 * 2 + 4.0 * 16384;
    const double rope_bytes = 2.0 * 4 * 1024 * (32 + 2 * 8) * 128 * 2 + 2.0 * 1024 * 64 * 4;
    const double attn_b1 = 2.0 * 32 * 4096.0 * 4096 * 128, attn_b4 = 4 * attn_b1; // forward FLOPs
    const double hbm = P_HBM * MT_SIM_HBM_EFF * 1e6;                                // bytes per ms

    // no measured key: every price is the formula it was before the keys existed
    prices b = price_all(base, MT_BF16);
    CHECK(near(b.fwd, gemm_ms(P_BF16, P_EFF, n, n, n)), "base: forward GEMM at gemm_efficiency (%g)", b.fwd);
    CHECK(near(b.bwd, 2 * gemm_ms(P_BF16, P_EFF, n, n, n)), "base: backward GEMMs at gemm_efficiency (%g)", b.bwd);
    CHECK(near(b.rms_fwd, rms_bytes / hbm) && near(b.rope_bwd, rope_bytes / hbm),
          "base: memory-bound kernels at MT_SIM_HBM_EFF x hbm_gbps (%g, %g)", b.rms_fwd, b.rope_bwd);
    CHECK(near(b.attn_cudnn_b4, attn_b4 / (MT_ATTN_ASSUMED_EFF * P_BF16 * 1e9)), "base: attention assumed (%g)",
          b.attn_cudnn_b4);

    // measured: each key moves its own ops, nothing else
    prices m = price_all(meas, MT_BF16);
    CHECK(near(m.fwd, b.fwd), "measured: forward GEMM unchanged (%g vs %g)", m.fwd, b.fwd);
    CHECK(near(m.bwd, 2 * gemm_ms(P_BF16, 0.25, n, n, n)) && near(m.bwd, 2 * b.bwd),
          "measured: backward GEMMs at gemm_bwd_efficiency 0.25, twice the time at 0.5 (%g)", m.bwd);
    CHECK(near(m.rms_fwd, rms_bytes / 100e6), "measured: rmsnorm_fwd at its 100 GB/s (%g)", m.rms_fwd);
    CHECK(near(m.rope_bwd, rope_bytes / 50e6), "measured: rope_bwd at its 50 GB/s (%g)", m.rope_bwd);
    CHECK(near(m.rms_bwd, b.rms_bwd), "measured: rmsnorm_bwd (no key) still at the HBM assumption");
    // cudnn by work: B 1 at 32*4096^2 (100), B 4 at 4*32*4096^2 = 32*8192^2 (log midpoint: 200); its
    // table by T (10 TFLOP/s) is not used; native has no work table: its T table (40) at any batch
    CHECK(near(m.attn_cudnn_b1, attn_b1 / 100e9), "cudnn B 1 x NH 32 x T 4096 at 100 (%g)", m.attn_cudnn_b1);
    CHECK(near(m.attn_cudnn_b4, attn_b4 / 200e9), "cudnn B 4: four times the work, at 200 (%g)", m.attn_cudnn_b4);
    CHECK(near(m.attn_native, attn_b4 / 40e9), "native (no work table) at its T table (%g)", m.attn_native);

    // f32 activations: bf16 was measured, nothing measured applies
    prices bf = price_all(base, MT_F32), mf = price_all(meas, MT_F32);
    CHECK(near(mf.bwd, bf.bwd) && near(mf.rms_fwd, bf.rms_fwd) && near(mf.rope_bwd, bf.rope_bwd) &&
              near(mf.attn_cudnn_b4, bf.attn_cudnn_b4),
          "f32: the measured bf16 rates do not apply");
    CHECK(near(bf.bwd, 2 * gemm_ms(P_FP32, P_EFF, n, n, n)), "f32: backward at gemm_efficiency of the fp32 peak");

    // the lookup names its source
    mt_hw_profile p;
    CHECK(mt_hw_profile_load(meas, &p) == MT_OK, "load: %s", mt_last_error());
    const char *src = NULL;
    CHECK(near(mt_hw_attention_tflops(&p, "cudnn", 1, 4, 32, 4096, &src), 200) && !strcmp(src, "test: cudnn by work"),
          "attention lookup: the work table's rate and source");
    CHECK(near(mt_hw_attention_tflops(&p, "cudnn", 1, 1, 32, 1 << 20, NULL), 300), "beyond the work table: flat");
    CHECK(p.kernel_gbps[MT_HW_K_RMSNORM_FWD] == 100 && p.kernel_gbps[MT_HW_K_SWIGLU_FWD] == 0 &&
              p.gemm_bwd_efficiency == 0.25,
          "loaded: measured keys, 0 where absent");

    // a peer's eager scale divides the measured kernel rates as it divides ours
    const mt_peer *peer = NULL;
    mt_hw_profile q;
    CHECK(mt_peer_find("deepspeed-zero3", &peer) == MT_OK, "%s", mt_last_error());
    if (peer && mt_peer_profile(peer, MT_PREC_MIXED, &p, &q, NULL) == MT_OK) {
        double es = mt_peer_schedule(peer)->eager_scale;
        CHECK(es > 1 && near(q.gemm_bwd_efficiency, 0.25 / es) && near(q.kernel_gbps[MT_HW_K_RMSNORM_FWD], 100 / es) &&
                  near(q.gemm_efficiency, P_EFF / es),
              "peer: measured rates / eager_scale %g", es);
    } else {
        CHECK(0, "peer profile: %s", mt_last_error());
    }
}

static void test_refused(void) {
    struct {
        const char *gpu, *srcs, *says;
    } bad[] = {
        {"\"gemm_bwd_efficiency\":1.5", "{\"gpu.gemm_bwd_efficiency\":\"x\"}", "gpu.gemm_bwd_efficiency: 1.5 is outside"},
        {"\"gemm_bwd_efficiency\":0.7", "{}", "sources.\"gpu.gemm_bwd_efficiency\": every measured figure needs its source"},
        {"\"kernel_gbps\":{\"rmsnorm\":100}", "{\"gpu.kernel_gbps\":\"x\"}",
         "gpu.kernel_gbps.rmsnorm: not a kernel the sim prices by bytes (embedding_fwd, "},
        {"\"kernel_gbps\":{\"add\":\"fast\"}", "{\"gpu.kernel_gbps\":\"x\"}", "gpu.kernel_gbps.add: expected GB/s"},
        {"\"kernel_gbps\":{\"add\":3000}", "{}", "sources.\"gpu.kernel_gbps.add\": every measured figure"},
        {"\"kernel_gbps\":[3000]", "{}", "gpu.kernel_gbps: expected an object"},
        {"\"attention_work_tflops\":{\"cudnn\":[[1e9,100],[1e8,90]]}", "{\"gpu.attention_work_tflops\":\"x\"}",
         "gpu.attention_work_tflops.cudnn[1]: B*NH*T^2 must be whole and ascending"},
        {"\"attention_work_tflops\":{\"cudnn\":[[1e9,100]]}", "{}", "every attention table needs its source"},
    };
    mt_hw_profile p;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *path = mt_test_write_tmp("bad.json", profile(bad[i].gpu, bad[i].srcs));
        mt_status s = mt_hw_profile_load(path, &p);
        const char *e = mt_last_error();
        CHECK(s == MT_ERR_FORMAT && strstr(e, bad[i].says) && !strchr(e, '\n'), "bad key %zu refused in one line: %s",
              i, e);
    }
}

// The profile with host.grad_sumsq_gbps (GB/s, or a raw JSON value) and `sources`.
static const char *with_sumsq(const char *value, const char *sources) {
    static char buf[4096];
    char host[128];
    snprintf(host, sizeof host, "\"mem_gbps\":100,\"grad_sumsq_gbps\":%s,", value);
    const char *base = profile("", sources), *at = strstr(base, "\"mem_gbps\":100,");
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - base), base, host, at + strlen("\"mem_gbps\":100,"));
    return buf;
}

// host.grad_sumsq_gbps: the drain's sum of squares (one read of the gradients) at the measured
// rate, and the sum-of-squares part of an accumulation; absent, both at host.mem_gbps (100).
static void test_grad_sumsq(void) {
    const double n = 1e8, one_read = 2.0 * n; // bf16 gradients
    mt_hw_profile p, q;
    CHECK(mt_hw_profile_load(mt_test_write_tmp("plain.json", profile("", "{}")), &p) == MT_OK, "%s", mt_last_error());
    CHECK(p.grad_sumsq_gbps == 0, "absent: 0");
    CHECK(near(mt_sim_host_work_ms(&p, MT_HOST_GRAD_SUMSQ, (size_t)n, MT_BF16, 0), one_read / 100e6) &&
              near(mt_sim_host_work_ms(&p, MT_HOST_GRAD_ACCUMULATE, (size_t)n, MT_BF16, 0), 4 * one_read / 100e6),
          "without the key: one read, and four for an accumulation, at host.mem_gbps");
    const char *path = mt_test_write_tmp("sumsq.json", with_sumsq("25", "{\"host.grad_sumsq_gbps\":\"test: sumsq\"}"));
    CHECK(mt_hw_profile_load(path, &q) == MT_OK && q.grad_sumsq_gbps == 25, "load: %s", mt_last_error());
    CHECK(near(mt_sim_host_work_ms(&q, MT_HOST_GRAD_SUMSQ, (size_t)n, MT_BF16, 0), one_read / 25e6) &&
              near(mt_sim_host_work_ms(&q, MT_HOST_GRAD_ACCUMULATE, (size_t)n, MT_BF16, 0),
                   3 * one_read / 100e6 + one_read / 25e6) &&
              near(mt_sim_host_work_ms(&q, MT_HOST_ADAMW, (size_t)n, MT_BF16, 0),
                   mt_sim_host_work_ms(&p, MT_HOST_ADAMW, (size_t)n, MT_BF16, 0)),
          "with it: the sum of squares at 25 GB/s, the accumulation's other passes and AdamW as before");
    struct {
        const char *value, *srcs, *says;
    } bad[] = {
        {"-1", "{\"host.grad_sumsq_gbps\":\"x\"}", "host.grad_sumsq_gbps: expected GB/s"},
        {"\"fast\"", "{\"host.grad_sumsq_gbps\":\"x\"}", "host.grad_sumsq_gbps: expected GB/s"},
        {"25", "{}", "sources.\"host.grad_sumsq_gbps\": every measured figure needs its source"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        mt_status s = mt_hw_profile_load(mt_test_write_tmp("bad_sumsq.json", with_sumsq(bad[i].value, bad[i].srcs)), &q);
        const char *e = mt_last_error();
        CHECK(s == MT_ERR_FORMAT && strstr(e, bad[i].says) && !strchr(e, '\n'), "bad sumsq %zu refused: %s", i, e);
    }
}

int main(void) {
    mt_test_tmpdir_make("mt_test_sim_measured");
    test_prices();
    test_refused();
    test_grad_sumsq();
    return mt_test_finish("test_sim_measured");
}
