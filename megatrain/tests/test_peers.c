// test_peers.c: the peers (engine/peer.h) in the planner: each is a descriptor
// from the schedule table with its own fields; its precisions are checked; its
// optimizer rate scales with the host (its measured ratio to our AdamW on the profile's AdamW rate) and comes from the
// measurement file when one has its row; and changing one peer parameter moves
// the closed-form step time the way it should (more hook time, a third weight
// pass, f32 weights on the link, a slower optimizer: each slower, never faster).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_call.h"
#include "backend/backend_registry.h"
#include "engine/engine.h"
#include "engine/model_io.h"
#include "engine/peer.h"
#include "planner/planner.h"
#include "tests/test_util.h"

static mt_config load_config(const char *path) {
    mt_config c;
    if (mt_config_load(path, &c) != MT_OK) {
        fprintf(stderr, "%s\n", mt_last_error());
        exit(1);
    }
    return c;
}

static mt_hw_profile profile(const char *name) {
    mt_hw_profile hw;
    char path[4096];
    if (mt_hw_profile_find(name, path, sizeof path) != MT_OK || mt_hw_profile_load(path, &hw) != MT_OK) {
        fprintf(stderr, "%s\n", mt_last_error());
        exit(1);
    }
    return hw;
}

static const mt_peer *peer(const char *name) {
    const mt_peer *p = NULL;
    CHECK(mt_peer_find(name, &p) == MT_OK, "%s", mt_last_error());
    return p;
}

// The planner's step for descriptor d (a modified copy of a peer's) on hw at batch B.
static double step_ms(const mt_config *c, const mt_schedule_desc *d, mt_precision prec, const mt_hw_profile *hw, int B) {
    mt_plan_input in = {.prec = prec};
    mt_engine_opts_defaults(&in.eng);
    in.eng.schedule = d;
    in.eng.B = B;
    in.eng.T = 1024;
    mt_plan_prediction pr;
    mt_status s = mt_plan_predict(c, &in, hw, &pr);
    CHECK(s == MT_OK, "%s", mt_last_error());
    return pr.step_ms;
}

static void test_table(void) {
    CHECK(mt_peer_count() == 3, "three peers (%d)", mt_peer_count());
    const mt_peer *p;
    CHECK(mt_peer_find("deepspeed", &p) == MT_ERR_ARG && strstr(mt_last_error(), "--peer") &&
              strstr(mt_last_error(), "deepspeed-zero3, fsdp2-offload, official"),
          "unknown name lists the known ones: %s", mt_last_error());
    const mt_schedule_desc *ds = mt_peer_schedule(peer("deepspeed-zero3"));
    const mt_schedule_desc *fs = mt_peer_schedule(peer("fsdp2-offload"));
    const mt_schedule_desc *of = mt_peer_schedule(peer("official"));
    CHECK(ds && fs && of, "descriptors built");
    if (!ds || !fs || !of) return;
    CHECK(ds->submodule_fetch && ds->grad_wire_f32 && !ds->optimizer_overlapped && ds->fetch_overhead_ms > 0,
          "deepspeed: the zero3 schedule plus its hooks");
    CHECK(ds->host_bytes_per_param[MT_PREC_MIXED] >= 16 && ds->host_bytes_per_param[MT_PREC_MIXED] <= 18,
          "deepspeed host bytes/param %d", ds->host_bytes_per_param[MT_PREC_MIXED]);
    CHECK(fs->param_wire_f32 && fs->grad_wire_f32 && !fs->submodule_fetch && !fs->optimizer_overlapped,
          "fsdp2: per-layer fetch of f32 shards, f32 grads, optimizer after backward");
    CHECK(of->weight_passes == 3 && of->ckpt_interval == 4 && of->bind == MT_BIND_COPY && !of->optimizer_overlapped,
          "official: 3 passes, K = 4, copy bind, optimizer after backward");
    // A peer's fields are its own: the options cannot change them.
    mt_config c = load_config("experiments/models/qwen2.5-7b.json");
    mt_schedule_opts o = {.ckpt_interval = 1, .weight_bufs = 3, .bind = MT_BIND_POINTER, .zero3 = mt_zero3_defaults()};
    mt_schedule_desc r;
    mt_schedule_resolve(of, &o, &c, &r);
    CHECK(r.ckpt_interval == 4 && r.bind == MT_BIND_COPY && r.weight_bufs == 2, "official resolves as itself");
    // precisions
    CHECK(mt_peer_check_precision(peer("deepspeed-zero3"), MT_PREC_PAPER) == MT_ERR_ARG &&
              strstr(mt_last_error(), "--precision paper") && strstr(mt_last_error(), "mixed, fp32"),
          "deepspeed refuses paper: %s", mt_last_error());
    CHECK(mt_peer_check_precision(peer("official"), MT_PREC_MIXED) == MT_ERR_ARG, "official refuses mixed");
    CHECK(mt_peer_check_precision(peer("fsdp2-offload"), MT_PREC_FP32) == MT_OK, "fsdp2 runs fp32");
}

static void test_rate(void) {
    setenv("MT_CPU_OPTIMIZERS", "/nonexistent/none.jsonl", 1);
    mt_hw_profile hw = profile("h100-128g"), fast = hw;
    fast.host_mem_gbps *= 2;
    const mt_peer *ds = peer("deepspeed-zero3");
    mt_peer_rate a, b;
    CHECK(mt_peer_rate_of(ds, MT_PREC_MIXED, &hw, &a) == MT_ERR_IO, "a named file that is missing is an error");
    unsetenv("MT_CPU_OPTIMIZERS");
    // Without a measurement: the code-reading default, labelled so.
    const char *none = mt_test_write_tmp("none.jsonl", "{\"impl\": \"torch_adamw_fused\", \"params_per_s\": 1e9, "
                                                       "\"triad_gb_s\": 10}\n");
    setenv("MT_CPU_OPTIMIZERS", none, 1);
    CHECK(mt_peer_rate_of(ds, MT_PREC_MIXED, &hw, &a) == MT_OK, "%s", mt_last_error());
    CHECK(strstr(a.source, "assumed") != NULL, "no row: assumed (%s)", a.source);
    CHECK(fabs(a.update_params_per_s - 0.6 / 28 * hw.host_mem_gbps * 1e9) < 1, "0.6 x triad / 28 B: %g",
          a.update_params_per_s);
    CHECK(mt_peer_rate_of(ds, MT_PREC_MIXED, &fast, &b) == MT_OK && fabs(b.params_per_s / a.params_per_s - 2) < 1e-9,
          "twice the triad, twice the rate (%g vs %g)", b.params_per_s, a.params_per_s);
    CHECK(a.params_per_s < a.update_params_per_s, "the host passes cost time");
    // A measured row beside our AdamW's: the ratio, on the profile's AdamW rate (shared with our engine).
    const char *half = mt_test_write_tmp("half.jsonl", "{\"impl\": \"deepspeed_cpu_adam\", \"params_per_s\": 5e8, "
                                                       "\"triad_gb_s\": 20}\n{\"impl\": \"megatrain_adamw\", "
                                                       "\"params_per_s\": 1e9, \"triad_gb_s\": 20, \"env\": {}}\n");
    setenv("MT_CPU_OPTIMIZERS", half, 1);
    CHECK(mt_peer_rate_of(ds, MT_PREC_MIXED, &hw, &b) == MT_OK, "%s", mt_last_error());
    double want = 0.5 * ds->opt.measured_bytes_per_param / ds->opt.bytes_per_param * hw.adamw_params_per_s[MT_ADAMW_FP32];
    CHECK(strstr(b.source, "measured") && fabs(b.update_params_per_s - want) < 1,
          "measured at half our AdamW -> %g params/s, want %g (%s)", b.update_params_per_s, want, b.source);
    // The peer's row alone (nothing to compare it with): the assumed default, labelled so.
    const char *meas = mt_test_write_tmp("meas.jsonl", "{\"impl\": \"deepspeed_cpu_adam\", \"params_per_s\": 5e8, "
                                                       "\"triad_gb_s\": 20, \"env\": {}}\n");
    setenv("MT_CPU_OPTIMIZERS", meas, 1);
    CHECK(mt_peer_rate_of(ds, MT_PREC_MIXED, &hw, &b) == MT_OK && strstr(b.source, "assumed") &&
              fabs(b.update_params_per_s - a.update_params_per_s) < 1,
          "a peer row without megatrain_adamw's: assumed (%s)", b.source);
    const char *bad = mt_test_write_tmp("bad.jsonl", "{\"impl\": \"deepspeed_cpu_adam\", \"params_per_s\": -1, "
                                                     "\"triad_gb_s\": 20}\n");
    setenv("MT_CPU_OPTIMIZERS", bad, 1);
    CHECK(mt_peer_rate_of(ds, MT_PREC_MIXED, &hw, &b) == MT_ERR_FORMAT && strstr(mt_last_error(), "bad.jsonl:1"),
          "a bad row names the file and line: %s", mt_last_error());
    setenv("MT_CPU_OPTIMIZERS", none, 1);
    // A profile naming its own host's rows (host.cpu_optimizers) is priced from them, before
    // MT_CPU_OPTIMIZERS: DeepSpeedCPUAdam beside our paper pass there, on the profile's paper rate.
    mt_hw_profile h200;
    CHECK(mt_hw_profile_load("experiments/hardware/h200-128g.json", &h200) == MT_OK, "%s", mt_last_error());
    CHECK(h200.cpu_optimizers[0], "h200-128g names the H200 host's CPU optimizer rows");
    CHECK(mt_peer_rate_of(ds, MT_PREC_MIXED, &h200, &b) == MT_OK, "%s", mt_last_error());
    CHECK(strstr(b.source, h200.cpu_optimizers) && strstr(b.source, "megatrain_adamw_paper"),
          "the host's own rows are the source: %s", b.source);
    // 4.357e9 DeepSpeedCPUAdam beside 6.511e9 ours in that file; the profile's paper rate is 6.51e9 (rounded)
    CHECK(fabs(b.update_params_per_s / 4.357e9 - 1) < 1e-3, "the H200 host's DeepSpeedCPUAdam: %g params/s",
          b.update_params_per_s);
    // A peer whose optimizer that host did not measure falls back to MT_CPU_OPTIMIZERS's rows.
    const mt_peer *fsdp;
    CHECK(mt_peer_find("fsdp2-offload", &fsdp) == MT_OK, "%s", mt_last_error());
    CHECK(mt_peer_rate_of(fsdp, MT_PREC_MIXED, &h200, &b) == MT_OK && !strstr(b.source, h200.cpu_optimizers),
          "fsdp2's optimizer is not in the host's rows: %s", b.source);
}

// One parameter at a time, the way it should move the step.
static void test_directions(void) {
    mt_config c7 = load_config("experiments/models/qwen2.5-7b.json");
    mt_hw_profile hw = profile("h100-128g");
    for (int i = 0; i < mt_peer_count(); i++) {
        const mt_peer *p = mt_peer_at(i);
        mt_hw_profile ph;
        CHECK(mt_peer_profile(p, p->precision, &hw, &ph, NULL) == MT_OK, "%s", mt_last_error());
        const mt_schedule_desc *base = mt_peer_schedule(p);
        for (int B = 1; B <= 64; B *= 8) {
            double t0 = step_ms(&c7, base, p->precision, &ph, B);
            mt_schedule_desc d = *base;
            d.fetch_overhead_ms = t0; // a whole step per fetch: past any transfer or compute it could hide under
            double hooks = step_ms(&c7, &d, p->precision, &ph, B);
            CHECK(hooks > t0, "%s b%d: more hook time is slower (%g vs %g)", p->name, B, hooks, t0);
            mt_hw_profile slow = ph;
            for (int q = 0; q < 3; q++) slow.adamw_params_per_s[q] /= 2;
            double opt = step_ms(&c7, base, p->precision, &slow, B);
            CHECK(opt > t0, "%s b%d: a slower optimizer is slower (%g vs %g)", p->name, B, opt, t0);
            if (!base->submodule_fetch) {
                d = *base;
                d.weight_passes = d.weight_passes == 3 ? 0 : 3;
                double other = step_ms(&c7, &d, p->precision, &ph, B);
                CHECK(base->weight_passes == 3 ? other < t0 : other > t0, "%s b%d: a third weight pass costs (%g, %g)",
                      p->name, B, other, t0);
            }
            if (base->param_wire_f32) {
                d = *base;
                d.param_wire_f32 = 0;
                double narrow = step_ms(&c7, &d, p->precision, &ph, B);
                CHECK(narrow <= t0, "%s b%d: bf16 weights on the link are no slower (%g vs %g)", p->name, B, narrow, t0);
            }
        }
    }
    // DeepSpeed's knobs still act on its peer: overlap_comm off puts the gradients on the compute stream.
    const mt_peer *ds = peer("deepspeed-zero3");
    mt_hw_profile ph;
    CHECK(mt_peer_profile(ds, MT_PREC_MIXED, &hw, &ph, NULL) == MT_OK, "%s", mt_last_error());
    mt_plan_input in = {.prec = MT_PREC_MIXED};
    mt_engine_opts_defaults(&in.eng);
    in.eng.schedule = mt_peer_schedule(ds);
    in.eng.B = 8;
    in.eng.T = 1024;
    mt_plan_prediction on, off;
    CHECK(mt_plan_predict(&c7, &in, &ph, &on) == MT_OK, "%s", mt_last_error());
    in.eng.sched.zero3.overlap_comm = 0;
    CHECK(mt_plan_predict(&c7, &in, &ph, &off) == MT_OK, "%s", mt_last_error());
    CHECK(off.step_ms > on.step_ms, "overlap_comm off is slower (%g vs %g)", off.step_ms, on.step_ms);
}

static void test_memory(void) {
    mt_config c = load_config("experiments/models/qwen2.5-14b.json");
    long long N = mt_config_params_total(&c);
    struct {
        const char *peer;
        mt_precision prec;
        double bpp;
    } want[] = {{"deepspeed-zero3", MT_PREC_MIXED, 18}, {"deepspeed-zero3", MT_PREC_FP32, 16},
                {"fsdp2-offload", MT_PREC_MIXED, 16}, {"official", MT_PREC_PAPER, 14}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        mt_plan_input in = {.prec = want[i].prec};
        mt_engine_opts_defaults(&in.eng);
        in.eng.schedule = mt_peer_schedule(peer(want[i].peer));
        in.eng.B = 4;
        in.eng.T = 1024;
        mt_plan_memory m;
        CHECK(mt_plan_memory_compute(&c, &in, &m) == MT_OK, "%s", mt_last_error());
        CHECK(m.host_bytes_per_param == want[i].bpp && m.host_state_bytes == (size_t)(want[i].bpp * (double)N),
              "%s %s: %g B/param (want %g)", want[i].peer, mt_precision_name(want[i].prec), m.host_bytes_per_param,
              want[i].bpp);
        CHECK(m.host_bytes > m.host_state_bytes, "%s: staging on top", want[i].peer);
    }
}

// Two steps of `d` on the cpu backend: the parameters after them (each unit's param bytes, concatenated).
static unsigned char *train_cpu(const mt_config *c, mt_precision prec, const mt_schedule_desc *d, int K, size_t *n) {
    mt_backend *be = NULL;
    mt_model m;
    mt_engine *e = NULL;
    unsigned char *out = NULL;
    mt_engine_opts o;
    mt_engine_opts_defaults(&o);
    o.schedule = d;
    o.B = 2;
    o.T = 16;
    o.sched.ckpt_interval = K;
    if (mt_backend_create("cpu", MT_F32, &be) != MT_OK || mt_model_alloc(&m, c, prec, be) != MT_OK) {
        CHECK(0, "cpu: %s", mt_last_error());
        return NULL;
    }
    mt_model_init_random(&m, 7);
    int32_t tok[2 * 16], tgt[2 * 16];
    for (int i = 0; i < 32; i++) tok[i] = (i * 37 + 11) % c->vocab_size, tgt[i] = (i * 53 + 5) % c->vocab_size;
    mt_optim_hparams hp = {1e-2f, 0.1f, 0.9f, 0.95f, 1e-8f, 1.0f, 0};
    mt_status s = mt_engine_create(&m, be, &o, &e);
    for (int step = 1; step <= 2 && s == MT_OK; step++) {
        mt_step_stats st;
        s = mt_engine_step(e, tok, tgt, &hp, 1e-2f, step, &st);
    }
    if (s == MT_OK) s = mt_engine_finish(e);
    CHECK(s == MT_OK, "%s: %s", d->name, mt_last_error());
    *n = 0;
    for (int u = 0; u < m.n_units; u++) *n += m.units[u].lay->numel * mt_dtype_size(m.wdt);
    out = malloc(*n);
    size_t at = 0;
    for (int u = 0; u < m.n_units && out; u++) {
        size_t b = m.units[u].lay->numel * mt_dtype_size(m.wdt);
        memcpy(out + at, m.units[u].param, b);
        at += b;
    }
    mt_engine_destroy(e);
    mt_model_free(&m);
    mt_backend_destroy(be);
    return out;
}

// A peer's descriptor prices a different schedule but computes the same numbers: on the cpu backend
// (where every op runs) two steps give our schedule's parameters bit for bit (the official code's
// three passes and re-run forwards, FSDP2's f32 wire cast on the device, DeepSpeed's hooks).
static void test_same_numbers(void) {
    mt_config c = load_config("megatrain/tests/data/tiny5_llama.json");
    const mt_schedule_desc *ours = NULL, *zero3 = NULL;
    CHECK(mt_schedule_find("megatrain", &ours) == MT_OK && mt_schedule_find("zero3", &zero3) == MT_OK, "table");
    struct {
        const char *peer;
        const mt_schedule_desc *base;
        mt_precision prec;
        int K;
    } cases[] = {{"official", ours, MT_PREC_PAPER, 4}, {"fsdp2-offload", ours, MT_PREC_MIXED, 1},
                 {"deepspeed-zero3", zero3, MT_PREC_MIXED, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t na = 0, nb = 0;
        unsigned char *a = train_cpu(&c, cases[i].prec, cases[i].base, cases[i].K, &na);
        unsigned char *b = train_cpu(&c, cases[i].prec, mt_peer_schedule(peer(cases[i].peer)), cases[i].K, &nb);
        CHECK(a && b && na == nb && !memcmp(a, b, na), "%s: the same parameters as %s after two steps", cases[i].peer,
              cases[i].base->name);
        free(a);
        free(b);
    }
}

int main(void) {
    test_table();
    test_rate();
    test_directions();
    test_memory();
    test_same_numbers();
    return mt_test_finish("test_peers");
}
