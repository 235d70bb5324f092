// test_device_optimizer_plan.c: the split's choice (engine/device_optimizer.h) and its price
// (planner/predict.c), against numbers worked out by hand on a round-number machine: units
// are taken embedding, head, then layers in order, whole, as many as asked or as the spare
// memory holds; the device's units leave the host AdamW, the link and the drain, and their
// device AdamW runs at the HBM rate before the next step's loads.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/device_optimizer.h"
#include "planner/planner.h"
#include "tests/test_util.h"

// 100 TFLOP/s at efficiency 1, links of 10 GB/s both ways, full duplex, HBM 1000 GB/s, AdamW 1e12 params/s.
static const char *PROFILE =
    "{\"schema\": \"megatrain.hardware/1\", \"name\": \"round\", \"description\": \"test\","
    " \"gpu\": {\"name\": \"test gpu\", \"peak_tflops\": {\"bf16\": 100, \"tf32\": 50, \"fp32\": 10},"
    "   \"gemm_efficiency\": 1.0, \"hbm_gbps\": 1000, \"hbm_bytes\": 80000000000},"
    " \"link\": {\"kind\": \"test-link\", \"theory_gbps\": 100, \"h2d_gbps\": {\"pinned\": 10, \"pageable\": 5},"
    "   \"d2h_gbps\": {\"pinned\": 10, \"pageable\": 5}, \"duplex_factor\": 1.0},"
    " \"host\": {\"mem_bytes\": 100000000000, \"mem_gbps\": 100, \"cpu_cores\": 16, \"numa_nodes\": 1,"
    "   \"adamw_bytes_per_param\": {\"fp32\": 28, \"paper\": 22, \"mixed\": 28},"
    "   \"adamw_gbps\": {\"fp32\": 28000, \"paper\": 22000, \"mixed\": 28000},"
    "   \"adamw_params_per_s\": {\"fp32\": 1e12, \"paper\": 1e12, \"mixed\": 1e12}},"
    " \"sources\": {}}";

static int near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b) + 1e-12; }

// Llama-shaped, C = F = 1000, 10 heads of 100, 10 layers, V = 1000, untied: embedding 1e6,
// each layer 7,002,000, head 1,001,000 parameters (72,021,000 in all).
static mt_config round_config(void) {
    mt_config c = {0};
    c.arch = MT_ARCH_LLAMA;
    c.vocab_size = c.hidden_size = c.intermediate_size = 1000;
    c.num_layers = c.num_heads = c.num_kv_heads = 10;
    c.head_dim = 100;
    c.max_position_embeddings = 4096;
    c.rms_norm_eps = 1e-5f;
    c.rope_theta = 10000;
    c.torch_dtype = MT_BF16;
    c.bos_token_id = c.eos_token_id = -1;
    return c;
}

static mt_plan_input round_input(int devopt) {
    mt_plan_input in = {.prec = MT_PREC_PAPER,
                        .eng = {.B = 1, .T = 1000, .grad_accum = 1, .grad_slabs = 4, .device_optimizer = devopt,
                                .sched = {.ckpt_interval = 1, .weight_bufs = 2, .zero3 = mt_zero3_defaults()}}};
    if (mt_schedule_find("megatrain", &in.eng.schedule) != MT_OK) {
        fprintf(stderr, "%s\n", mt_last_error());
        exit(1);
    }
    return in;
}

static void test_choice(void) {
    mt_config c = round_config();
    unsigned char on[12];
    size_t bytes;
    mt_unit_layout le, ll, lh; // numel as laid out (groups padded): 2 + 2 + 4 + 4 B each in paper
    mt_layout_build(&c, &le, &ll, &lh);
    const size_t E = 12 * le.numel, H = 12 * lh.numel, Ly = 12 * ll.numel;
    CHECK(le.numel >= 1000000 && lh.numel >= 1001000 && ll.numel >= 7002000, "the layouts hold the parameters");
    CHECK(mt_devopt_choose(&c, MT_PREC_PAPER, 1, 0, on, &bytes) == 1 && on[0] && !on[11] && bytes == E,
          "one unit: the embedding (%zu bytes)", bytes);
    CHECK(mt_devopt_choose(&c, MT_PREC_PAPER, 2, 0, on, &bytes) == 2 && on[0] && on[11] && !on[1] && bytes == E + H,
          "two: the embedding and the head");
    CHECK(mt_devopt_choose(&c, MT_PREC_PAPER, 4, 0, on, &bytes) == 4 && on[1] && on[2] && !on[3] &&
              bytes == E + H + 2 * Ly,
          "four: then layers 0 and 1");
    CHECK(mt_devopt_choose(&c, MT_PREC_PAPER, 99, 0, on, &bytes) == 12, "more than there are: every unit");
    CHECK(mt_devopt_choose(&c, MT_PREC_PAPER, MT_DEVOPT_AUTO, E + H + Ly, on, &bytes) == 3 && bytes == E + H + Ly,
          "auto: what the spare bytes hold exactly");
    CHECK(mt_devopt_choose(&c, MT_PREC_PAPER, MT_DEVOPT_AUTO, E + H + Ly - 1, on, &bytes) == 2 && !on[1],
          "auto: a unit one byte too big is left on the host");
    CHECK(mt_devopt_choose(&c, MT_PREC_PAPER, MT_DEVOPT_AUTO, E - 1, on, &bytes) == 0 && bytes == 0,
          "auto: nothing fits, nothing chosen");
    CHECK(mt_devopt_choose(&c, MT_PREC_MIXED, 1, 0, on, &bytes) == 1 && bytes == 16 * le.numel,
          "mixed: the master's 4 bytes too");
    int n = 7;
    CHECK(mt_devopt_parse("auto", &n) == MT_OK && n == MT_DEVOPT_AUTO, "auto parses");
    CHECK(mt_devopt_parse("off", &n) == MT_OK && n == MT_DEVOPT_OFF, "off parses");
    CHECK(mt_devopt_parse("3", &n) == MT_OK && n == 3, "a count parses");
    CHECK(mt_devopt_parse("-1", &n) == MT_ERR_ARG && mt_devopt_parse("2x", &n) == MT_ERR_ARG &&
              mt_devopt_parse("", &n) == MT_ERR_ARG,
          "bad values refused");
}

static void test_price(void) {
    mt_config c = round_config();
    mt_hw_profile hw;
    CHECK(mt_hw_profile_load(mt_test_write_tmp("round.json", PROFILE), &hw) == MT_OK, "%s", mt_last_error());
    const double a = 2e9 / 3.5e13 * 1e3, cf = 1.4204 + 10 * a, cb = 4.2412 + 35 * a;
    mt_plan_prediction off, p;
    mt_plan_input in = round_input(MT_DEVOPT_OFF);
    CHECK(mt_plan_predict(&c, &in, &hw, &off) == MT_OK, "%s", mt_last_error());
    // The transfer-bound step of test_planner (10 GB/s), unchanged with the split off.
    const double off_ms = 1.6004 + 0.008002 + 1.6004 + 14.2042 + 14.4042;
    CHECK(near(off.step_ms, off_ms, 1e-9) && off.devopt_units == 0 && near(off.step_ms_split_off, off_ms, 1e-9),
          "off: %.9g ms", off.step_ms);
    CHECK(off.devopt_auto_units == 0, "off without the GPU's free memory: auto chooses nothing");

    // Every unit on the device: nothing crosses, no host AdamW; compute plus the device AdamW,
    // 72,021,000 x (22 B + 8 B for the gradients' add and square) at 1000 GB/s x 0.8.
    in = round_input(12);
    CHECK(mt_plan_predict(&c, &in, &hw, &p) == MT_OK, "%s", mt_last_error());
    const double dev_all = 72021000.0 * 30 / 8e11 * 1e3;
    CHECK(p.devopt_units == 12 && near(p.devopt_params, 72021000, 1e-12) && near(p.devopt_adamw_ms, dev_all, 1e-9),
          "all units: %d, %.9g params, adamw %.9g ms", p.devopt_units, p.devopt_params, p.devopt_adamw_ms);
    CHECK(p.h2d_bytes == 0 && p.d2h_bytes == 0 && p.optimizer_ms == 0, "all units: nothing on the link or the host");
    CHECK(near(p.step_ms, dev_all + cf + cb, 1e-9), "all units: step %.9g = adamw + compute %.9g", p.step_ms,
          dev_all + cf + cb);
    CHECK(near(p.step_ms_split_off, off_ms, 1e-9), "all units: the step without the split %.9g", p.step_ms_split_off);

    // Embedding and head: the fill, opt_0 and drain are layer 0's alone, the link carries the
    // layers, the device AdamW takes 2,001,000 parameters.
    in = round_input(2);
    CHECK(mt_plan_predict(&c, &in, &hw, &p) == MT_OK, "%s", mt_last_error());
    const double dev2 = 2001000.0 * 30 / 8e11 * 1e3;
    CHECK(near(p.step_ms, 1.4004 + 0.007002 + 1.4004 + dev2 + 14.004 + 14.004, 1e-9), "embedding and head: %.9g",
          p.step_ms);
    CHECK(near(p.h2d_bytes, 2 * 140.04e6, 1e-12) && near(p.d2h_bytes, 140.04e6, 1e-12), "their link bytes gone");

    // Off, with the GPU's free memory known: what auto would choose (every unit fits) and give.
    in = round_input(MT_DEVOPT_OFF);
    in.gpu_free_bytes = 79000000000ull;
    CHECK(mt_plan_predict(&c, &in, &hw, &p) == MT_OK, "%s", mt_last_error());
    CHECK(p.devopt_units == 0 && p.devopt_auto_units == 12 && near(p.devopt_auto_step_ms, dev_all + cf + cb, 1e-9),
          "off: auto would take %d units for %.9g ms", p.devopt_auto_units, p.devopt_auto_step_ms);
    mt_plan_memory m;
    in.eng.device_optimizer = MT_DEVOPT_AUTO;
    mt_unit_layout le, ll, lh;
    mt_layout_build(&c, &le, &ll, &lh);
    CHECK(mt_plan_memory_compute(&c, &in, &m) == MT_OK && m.devopt_gpu_bytes == 12 * (le.numel + 10 * ll.numel + lh.numel) &&
              m.gpu_bytes == m.engine.device_bytes + m.devopt_gpu_bytes,
          "auto: the split's %zu bytes counted in the plan's GPU bytes", m.devopt_gpu_bytes);
}

int main(void) {
    mt_test_tmpdir_make("devopt_plan");
    test_choice();
    test_price();
    return mt_test_finish("test_device_optimizer_plan");
}
