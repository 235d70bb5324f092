// test_head_chunk.c: the loss head's token chunk. The cpu backend keeps the fixed
// rule (<= 256 MiB of logits: results do not depend on free RAM); a device backend
// (the sim here, pricing what cuda runs) grows the chunk into the device memory left
// after the engine's allocations, so a roomy GPU runs the whole micro-batch in one
// chunk (one weight-gradient pass instead of N / floor).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_registry.h"
#include "backends/sim/sim.h"
#include "engine/engine.h"
#include "engine/engine_internal.h"
#include "model/config.h"
#include "test_util.h"

// A vocabulary big enough that the 256 MiB floor is below N: 2048 rows of 32768 f32 logits.
static const char *cfg_json =
    "{\"model_type\":\"llama\",\"vocab_size\":32768,\"hidden_size\":64,\"intermediate_size\":128,"
    "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"max_position_embeddings\":4096,"
    "\"rms_norm_eps\":1e-6,\"rope_theta\":10000.0,\"tie_word_embeddings\":false}";

// The engine's chunk for batch B x T on backend be (-1 when the engine cannot be made).
static int engine_chunk(mt_backend *be, const mt_config *cfg, int B, int T) {
    mt_model m;
    mt_engine *e = NULL;
    int rows = -1;
    if (mt_model_alloc(&m, cfg, MT_PREC_FP32, be) != MT_OK) {
        fprintf(stderr, "test_head_chunk: model: %s\n", mt_last_error());
        return -1;
    }
    mt_engine_opts eo = {.B = B, .T = T, .grad_accum = 1, .grad_slabs = 2,
                         .sched = {.weight_bufs = 2, .ckpt_interval = 1}};
    if (mt_schedule_find("megatrain", &eo.schedule) == MT_OK && mt_engine_create(&m, be, &eo, &e) == MT_OK)
        rows = e->acts->chunk_rows;
    else fprintf(stderr, "test_head_chunk: engine: %s\n", mt_last_error());
    mt_engine_destroy(e);
    mt_model_free(&m);
    return rows;
}

int main(void) {
    // the rule itself
    CHECK(mt_head_chunk_rows(1000, 100, 4, 0, 10) == 10, "no budget: the floor");
    CHECK(mt_head_chunk_rows(1000, 100, 4, 400 * 123, 10) == 123, "budget / row bytes");
    CHECK(mt_head_chunk_rows(1000, 100, 4, (size_t)1 << 40, 10) == 1000, "never more than N");
    CHECK(mt_head_chunk_rows(5, 100, 4, 0, 10) == 5, "a floor above N is N");
    CHECK(mt_head_chunk_rows(1000, 100, 2, 200 * 7 + 199, 1) == 7, "whole rows only");

    mt_config cfg;
    const char *path = mt_test_write_tmp("head_chunk.json", cfg_json);
    if (mt_config_load(path, &cfg) != MT_OK) {
        fprintf(stderr, "test_head_chunk: %s\n", mt_last_error());
        return 1;
    }
    const int B = 2, T = 2048, N = B * T, floor_rows = (256 << 20) / (32768 * 4);
    mt_backend *cpu = NULL, *sim = NULL;
    if (mt_backend_create("cpu", MT_F32, &cpu) == MT_OK) {
        int rows = engine_chunk(cpu, &cfg, B, T);
        CHECK(rows == floor_rows, "cpu keeps the fixed 256 MiB chunk: %d rows, expected %d", rows, floor_rows);
        mt_backend_destroy(cpu);
    } else {
        CHECK(0, "cpu backend: %s", mt_last_error());
    }
    if (mt_backend_sim_create(MT_SOURCE_DIR "/experiments/hardware/h100-128g.json", MT_F32, &sim) == MT_OK) {
        int rows = engine_chunk(sim, &cfg, B, T);
        CHECK(rows == N, "the sim (80 GB device) takes all %d rows in one chunk: got %d", N, rows);
        mt_backend_destroy(sim);
    } else {
        CHECK(0, "sim backend: %s", mt_last_error());
    }
    return mt_test_finish("test_head_chunk");
}
