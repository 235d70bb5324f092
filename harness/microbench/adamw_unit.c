// adamw_unit.c: the engine's own AdamW step over one unit of a real model layout
// (m->host.adamw: every tensor of the unit, weight decay on the matrices only), so
// the embedding, a decoder layer and the LM head are timed by the same path the
// optimizer thread runs (issue 31: a unit should update at the same params/s
// whatever it is, once each is well outside the last-level cache).
//   adamw/unit/<embedding|layer|head>/<hidden>   counters params_per_s, bytes_per_second
// The model: Qwen2 shape at hidden C (F = 5.5 C, 128-wide heads, 4 KV heads), vocab
// 151936, untied, one layer, paper precision (22 B/param moved), allocated once on the
// CPU backend and shared by the three (C = 2048: 311M + 311M + 77M params, 8.4 GB).
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "backends/cpu/cpu.h"
#include "engine/host_state.h"
#include "mb.h"

static mt_backend *be;
static mt_model model;
static int model_c; // hidden size of the model held (0: none)

static mt_model *model_for(int C, const char **why) {
    if (model_c == C) return &model;
    if (model_c) mt_model_free(&model), model_c = 0;
    if (!be && mt_backend_cpu_create(MT_F32, &be) != MT_OK) {
        *why = mt_last_error();
        return NULL;
    }
    mt_config c = {.arch = MT_ARCH_QWEN2, .vocab_size = 151936, .hidden_size = C, .intermediate_size = C * 11 / 2,
                   .num_layers = 1, .num_heads = C / 128, .num_kv_heads = 4, .head_dim = 128,
                   .max_position_embeddings = 4096, .rms_norm_eps = 1e-6f, .rope_theta = 1e6,
                   .attention_bias = 1, .torch_dtype = MT_BF16, .bos_token_id = -1, .eos_token_id = -1};
    if (mt_model_alloc(&model, &c, MT_PREC_PAPER, be) != MT_OK) {
        *why = mt_last_error();
        return NULL;
    }
    // Small, varied values (a gradient of zeros would make v's sqrt denormal-free and easy).
    for (int u = 0; u < model.n_units; u++) {
        mt_unit *un = &model.units[u];
        size_t n = un->lay->numel;
#pragma omp parallel for schedule(static)
        for (long i = 0; i < (long)n; i++) {
            float x = ((float)(((uint32_t)i * 2654435761u) >> 8) / 16777216.0f - 0.5f) * 0.02f;
            mt_store_f32(un->param, model.wdt, (size_t)i, x);
            mt_store_f32(un->grad, model.wdt, (size_t)i, x * 0.1f);
        }
    }
    model_c = C;
    return &model;
}

static void bm_unit(mt_mb_state *s, const int64_t *args, const void *user) {
    const char *kind = user, *why = NULL;
    mt_model *m = model_for((int)args[0], &why);
    if (!m) {
        mt_mb_error(s, why ? why : "cannot allocate the model");
        return;
    }
    mt_unit *u = kind[0] == 'e' ? &m->units[0] : kind[0] == 'h' ? &m->units[m->n_units - 1] : &m->units[1];
    size_t n = 0;
    for (int t = 0; t < MT_T_COUNT; t++) n += u->lay->t[t].present ? u->lay->t[t].numel : 0;
    mt_adamw_hparams h = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 1.0f, .step = 0};
    while (mt_mb_keep_running(s)) {
        h.step++;
        m->host.adamw(&m->host, m, u, NULL, &h, 0.1f);
    }
    double iters = (double)mt_mb_iterations(s);
    mt_mb_counter(s, "params_per_s", (double)n * iters, MT_MB_RATE);
    mt_mb_counter(s, "params", (double)n, 0);
    mt_mb_set_bytes_processed(s, 22.0 * (double)n * iters);
    char label[64];
    snprintf(label, sizeof label, "%s, %d threads, %.0fM params", mt_adamw_isa(), omp_get_max_threads(), n / 1e6);
    mt_mb_set_label(s, label);
}

void mt_mb_register_adamw_unit(void) {
    const int64_t C = 2048;
    static const char *kinds[] = {"embedding", "layer", "head"};
    char name[64];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "adamw/unit/%s", kinds[i]);
        mt_mb_register(name, bm_unit, kinds[i], &C, 1, MT_MB_REAL_TIME);
    }
}
