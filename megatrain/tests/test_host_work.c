// test_host_work.c: the host-work seam. Backends are told apart by their
// capabilities; a computing backend gets the real host work (gradients
// accumulated with their sum of squares, losses averaged, blocks zeroed, the
// wall clock), a virtual-time backend the priced one (the calling thread's
// virtual clock advances by exactly what the backend's cost model says, no
// data is touched, the loss is NaN, waits join the clock).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_registry.h"
#include "backends/cpu/cpu.h"
#include "backends/sim/sim.h"
#include "core/vclock.h"
#include "engine/host_state.h"
#include "model/hardware_profile.h"
#include "test_util.h"

static void test_caps(void) {
    CHECK(mt_backend_cpu_caps() == MT_CAP_TENSOR_DATA, "cpu caps %#x", mt_backend_cpu_caps());
    unsigned sim = mt_backend_sim_caps();
    CHECK((sim & MT_CAP_VIRTUAL_TIME) && !(sim & MT_CAP_TENSOR_DATA) && (sim & MT_CAP_BF16), "sim caps %#x", sim);
    CHECK(mt_backend_caps_of("cpu") == mt_backend_cpu_caps() && mt_backend_caps_of("sim") == sim,
          "caps by name agree with the backends");
    CHECK(mt_backend_caps_of("no-such-backend") == 0, "unknown backend: no caps");
}

static void test_real(void) {
    mt_backend *be = NULL;
    CHECK(mt_backend_create("cpu", MT_F32, &be) == MT_OK, "%s", mt_last_error());
    if (!be) return;
    mt_host_work h = mt_host_work_for(be);
    CHECK(!strcmp(h.name, "real"), "cpu gets %s host work", h.name);
    float grad[4], slab[4] = {1, -2, 3, 0.5f};
    CHECK(h.accumulate(&h, grad, MT_F32, slab, MT_F32, 4, 1, 0) == 0, "first micro-batch, not last: no norm");
    CHECK(grad[0] == 1 && grad[1] == -2 && grad[2] == 3 && grad[3] == 0.5f, "first micro-batch copies");
    double sq = h.accumulate(&h, grad, MT_F32, slab, MT_F32, 4, 0, 1);
    CHECK(grad[0] == 2 && grad[1] == -4 && grad[3] == 1, "later micro-batches add");
    CHECK(sq == 4.0 + 16.0 + 36.0 + 1.0, "last micro-batch: sum of squares %g", sq);
    // In place (the link copied straight into grad): nothing changes, the norm is taken.
    float before[4] = {grad[0], grad[1], grad[2], grad[3]};
    CHECK(h.accumulate(&h, grad, MT_F32, grad, MT_F32, 4, 1, 0) == 0, "in place, not last: no norm");
    sq = h.accumulate(&h, grad, MT_F32, grad, MT_F32, 4, 1, 1);
    CHECK(!memcmp(before, grad, sizeof grad), "in place: the gradients are left as they are");
    CHECK(sq == 4.0 + 16.0 + 36.0 + 1.0, "in place, last: sum of squares %g", sq);
    // An f32 wire into bf16 gradients: converted exactly (the values were bf16).
    float wire[2] = {1.5f, -0.25f};
    uint16_t g16[2];
    h.accumulate(&h, g16, MT_BF16, wire, MT_F32, 2, 1, 1);
    CHECK(mt_bf16_to_f32(g16[0]) == 1.5f && mt_bf16_to_f32(g16[1]) == -0.25f, "f32 wire to bf16 exactly");
    float losses[4] = {1, 2, 3, 6};
    CHECK(h.mean_loss(&h, losses, 4) == 3.0, "mean loss");
    void *p = NULL;
    CHECK(h.alloc(&h, 1 << 16, 0, &p) == MT_OK && p, "pageable block");
    int zero = 1;
    for (size_t i = 0; p && i < 1 << 16; i++) zero &= ((unsigned char *)p)[i] == 0;
    CHECK(zero, "blocks start zeroed");
    h.free(&h, p, 1 << 16, 0);
    double t0 = h.now_ms(&h);
    h.waited_until(&h, t0 + 1e6); // a real wait already happened: the clock is the wall's
    CHECK(h.now_ms(&h) - t0 < 1e5, "real clock does not jump on a wait");
    mt_backend_destroy(be);
}

static void test_priced(void) {
    char path[4096];
    mt_backend *be = NULL;
    CHECK(mt_hw_profile_find("h100-128g", path, sizeof path) == MT_OK, "%s", mt_last_error());
    CHECK(mt_backend_sim_create(path, MT_BF16, &be) == MT_OK, "%s", mt_last_error());
    if (!be) return;
    mt_host_work h = mt_host_work_for(be);
    CHECK(!strcmp(h.name, "priced"), "sim gets %s host work", h.name);
    const mt_hw_profile *prof = mt_sim_profile_of(be);
    double t0 = h.now_ms(&h);
    char grad_at, slab_at; // priced work never touches them: distinct addresses say "a slab"
    CHECK(h.accumulate(&h, &grad_at, MT_BF16, &slab_at, MT_F32, 1000000, 1, 1) == 0, "priced: no data, no norm");
    double want = mt_sim_host_work_ms(prof, MT_HOST_GRAD_ACCUMULATE, 1000000, MT_F32, 0);
    CHECK(fabs(h.now_ms(&h) - t0 - want) < 1e-12, "accumulate costs %g ms of virtual time (want %g)",
          h.now_ms(&h) - t0, want);
    // In place (a direct copy): the sum of squares alone, and only on the last micro-batch.
    t0 = h.now_ms(&h);
    h.accumulate(&h, &grad_at, MT_BF16, &grad_at, MT_BF16, 1000000, 1, 0);
    CHECK(h.now_ms(&h) == t0, "in place, not last: free (%g ms)", h.now_ms(&h) - t0);
    h.accumulate(&h, &grad_at, MT_BF16, &grad_at, MT_BF16, 1000000, 1, 1);
    want = mt_sim_host_work_ms(prof, MT_HOST_GRAD_SUMSQ, 1000000, MT_BF16, 0);
    CHECK(want > 0 && want < mt_sim_host_work_ms(prof, MT_HOST_GRAD_ACCUMULATE, 1000000, MT_BF16, 0) / 3.9,
          "a sum of squares reads once: a quarter of an accumulate's bytes (%g ms)", want);
    CHECK(fabs(h.now_ms(&h) - t0 - want) < 1e-12, "in place, last: the sum of squares (%g ms, want %g)",
          h.now_ms(&h) - t0, want);
    // AdamW over a unit: the sum of its present tensors, at the precision's rate.
    mt_config c = {.arch = MT_ARCH_LLAMA, .vocab_size = 256, .hidden_size = 64, .intermediate_size = 96,
                   .num_layers = 2, .num_heads = 4, .num_kv_heads = 2, .head_dim = 16,
                   .max_position_embeddings = 64, .rms_norm_eps = 1e-5f, .rope_theta = 1e4, .torch_dtype = MT_F32};
    mt_model m;
    CHECK(mt_model_alloc(&m, &c, MT_PREC_PAPER, be) == MT_OK, "%s", mt_last_error());
    size_t n = 0;
    for (int t = 0; t < MT_T_COUNT; t++) n += m.lay_layer.t[t].present ? m.lay_layer.t[t].numel : 0;
    t0 = h.now_ms(&h);
    mt_adamw_hparams hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 1, .step = 1};
    h.adamw(&h, &m, mt_model_layer(&m, 0), NULL, &hp, 0.1f);
    want = mt_sim_host_work_ms(prof, MT_HOST_ADAMW, n, MT_BF16, 0);
    CHECK(fabs(h.now_ms(&h) - t0 - want) < 1e-12, "adamw over %zu params costs %g ms (want %g)", n, h.now_ms(&h) - t0,
          want);
    mt_model_free(&m);
    CHECK(isnan(h.mean_loss(&h, (float[]){1, 2}, 2)), "priced: the loss is NaN");
    t0 = h.now_ms(&h);
    h.waited_until(&h, t0 + 5);
    CHECK(h.now_ms(&h) == t0 + 5, "a wait joins the virtual clock");
    h.waited_until(&h, t0);
    CHECK(h.now_ms(&h) == t0 + 5, "an earlier event does not move it back");
    mt_sim_stats st;
    mt_sim_stats_get(be, &st);
    CHECK(st.host_bytes_in_use == 0, "priced blocks given back (%zu bytes in use)", st.host_bytes_in_use);
    mt_backend_destroy(be);
}

int main(void) {
    test_caps();
    test_real();
    test_priced();
    return mt_test_finish("test_host_work");
}
