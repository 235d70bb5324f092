// test_checkpoint.c: the checkpoint library called directly (checkpoint/): a save into a
// staged directory switched in as DIR and loaded back bitwise, sharded or not; a failed
// state writer leaves no manifest; DIR's foreign files carried into the next save and a
// second writer refused; an edited, truncated or mixed checkpoint refused naming the file.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend_registry.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/ckpt_dir.h"
#include "engine/model_io.h"
#include "test_util.h"

static const char *STATE = "{\"step\": 0}\n"; // the CLI writes train_state.json; any bytes do here

static mt_status write_state(const char *dir, void *ctx) {
    (void)ctx;
    char path[4200];
    snprintf(path, sizeof path, "%s/train_state.json", dir);
    mt_test_write_text(path, STATE);
    return MT_OK;
}

static mt_status refuse_state(const char *dir, void *ctx) {
    (void)ctx;
    return mt_fail(MT_ERR_IO, "%s/train_state.json: refused by the test", dir);
}

static int exists(const char *dir, const char *name) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

// Overwrites one byte of DIR/NAME at `at` (from the end when negative) with its complement.
static void flip_byte(const char *dir, const char *name, long at) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r+b");
    CHECK(f, "cannot open %s", path);
    if (!f) return;
    fseek(f, at, at < 0 ? SEEK_END : SEEK_SET);
    long pos = ftell(f);
    int c = fgetc(f);
    fseek(f, pos, SEEK_SET);
    fputc(~c & 0xff, f);
    fclose(f);
}

// One save of m after `step` into cd, switched in.
static mt_status save(mt_ckpt_dir *cd, const mt_model *m, int step, size_t shard_bytes) {
    MT_TRY(mt_checkpoint_check_space(cd, m, shard_bytes));
    MT_TRY(mt_ckpt_dir_stage(cd));
    mt_status s = mt_checkpoint_write(cd->staged, m, step, shard_bytes, write_state, NULL);
    if (s != MT_OK) {
        mt_ckpt_dir_discard(cd);
        return s;
    }
    return mt_ckpt_dir_commit(cd, step);
}

// Loads DIR's weights and moments into m (allocated like the saved one).
static mt_status load(const char *dir, mt_model *m) {
    mt_ckpt_manifest man = {0};
    MT_TRY(mt_checkpoint_open(dir, &man));
    mt_status s = mt_checkpoint_load_model(m, dir, NULL);
    if (s == MT_OK) s = mt_model_load_optimizer(m, dir, &man.moments);
    mt_ckpt_manifest_free(&man);
    return s;
}

static void test_round_trip(const mt_config *c, mt_backend *be, size_t shard_bytes) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/ck_%zu", mt_test_tmpdir(), shard_bytes);
    mt_model a, b;
    CHECK(mt_model_alloc_ex(&a, c, MT_PREC_MIXED, be, 0) == MT_OK, "%s", mt_last_error());
    CHECK(mt_model_alloc_ex(&b, c, MT_PREC_MIXED, be, 0) == MT_OK, "%s", mt_last_error());
    mt_model_init_random(&a, 7);
    mt_model_init_random(&b, 8);
    mt_ckpt_dir cd;
    CHECK(mt_ckpt_dir_open(&cd, dir, "--save") == MT_OK, "open %s: %s", dir, mt_last_error());
    CHECK(!mt_checkpoint_present(dir), "nothing saved yet: no checkpoint in %s", dir);
    CHECK(save(&cd, &a, 3, shard_bytes) == MT_OK, "save: %s", mt_last_error());
    CHECK(cd.committed_step == 3, "committed step %d", cd.committed_step);
    CHECK(mt_checkpoint_present(dir), "a checkpoint in %s after the save", dir);
    mt_ckpt_manifest man = {0};
    CHECK(mt_checkpoint_open(dir, &man) == MT_OK, "%s", mt_last_error());
    CHECK(man.step == 3, "manifest step %d, want 3", man.step);
    CHECK(man.weights.n > 0 && man.moments.n == 2 * man.weights.n, "%d weights, %d moments", man.weights.n,
          man.moments.n);
    mt_ckpt_manifest_free(&man);
    if (shard_bytes < 100000)
        CHECK(exists(dir, "model.safetensors.index.json") && !exists(dir, "model.safetensors"),
              "shards of %zu bytes: an index and no single file", shard_bytes);
    else CHECK(exists(dir, "model.safetensors"), "one weights file");
    CHECK(load(dir, &b) == MT_OK, "load: %s", mt_last_error());
    size_t na, nb;
    unsigned char *sa = mt_test_state_snapshot(&a, &na), *sb = mt_test_state_snapshot(&b, &nb);
    CHECK(na == nb && !memcmp(sa, sb, na), "the loaded state is bitwise the saved one (%zu / %zu bytes)", na, nb);
    free(sa);
    free(sb);

    // A state writer that fails: the save fails with its error and no manifest is written.
    CHECK(mt_ckpt_dir_stage(&cd) == MT_OK, "%s", mt_last_error());
    CHECK(mt_checkpoint_write(cd.staged, &a, 4, shard_bytes, refuse_state, NULL) == MT_ERR_IO &&
              strstr(mt_last_error(), "refused by the test"),
          "the writer's error comes back: %s", mt_last_error());
    CHECK(!exists(cd.staged, "checkpoint.json"), "no checkpoint.json after a failed write");
    mt_ckpt_dir_discard(&cd);
    CHECK(cd.staged[0] == 0, "discarded: nothing staged");
    mt_ckpt_dir_close(&cd);
    mt_model_free(&a);
    mt_model_free(&b);
}

static void test_switch(const mt_config *c, mt_backend *be) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/switch", mt_test_tmpdir());
    mt_model m;
    CHECK(mt_model_alloc_ex(&m, c, MT_PREC_PAPER, be, 0) == MT_OK, "%s", mt_last_error());
    mt_model_init_random(&m, 1);
    mt_ckpt_dir cd, second;
    CHECK(mt_ckpt_dir_open(&cd, dir, "--save") == MT_OK, "%s", mt_last_error());
    CHECK(mt_ckpt_dir_open(&second, dir, "--save") != MT_OK && strstr(mt_last_error(), "pid"),
          "a second writer of %s is refused naming the holder: %s", dir, mt_last_error());
    CHECK(save(&cd, &m, 1, (size_t)1 << 40) == MT_OK, "%s", mt_last_error());
    char notes[4400];
    snprintf(notes, sizeof notes, "%s/notes.txt", dir);
    mt_test_write_text(notes, "kept\n");
    CHECK(save(&cd, &m, 2, (size_t)1 << 40) == MT_OK, "%s", mt_last_error());
    mt_ckpt_manifest man = {0};
    CHECK(mt_checkpoint_open(dir, &man) == MT_OK && man.step == 2, "step 2 switched in (%d): %s", man.step,
          mt_last_error());
    mt_ckpt_manifest_free(&man);
    char *text = mt_test_read_text(notes);
    CHECK(text && !strcmp(text, "kept\n"), "a foreign file is carried into the new checkpoint");
    free(text);
    mt_ckpt_dir_close(&cd);
    // No staging or moved-aside directory is left beside DIR.
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -q '^\\.switch\\.\\(tmp\\|old\\)'", mt_test_tmpdir());
    CHECK(system(cmd) != 0, "no .switch.tmp-* or .switch.old-* left in %s", mt_test_tmpdir());
    CHECK(mt_ckpt_file_of("model-00002-of-00003.safetensors") == MT_CKPT_WEIGHTS &&
              mt_ckpt_file_of("optimizer.safetensors") == MT_CKPT_MOMENTS &&
              mt_ckpt_file_of("train_state.json") == MT_CKPT_SMALL &&
              mt_ckpt_file_of("checkpoint.json") == MT_CKPT_MANIFEST && mt_ckpt_file_of("notes.txt") == MT_CKPT_FOREIGN,
          "file kinds by name");
    mt_model_free(&m);
}

// A copy of a saved checkpoint with one change; open (and load) must refuse it naming `file`.
static void test_refused(const mt_config *c, mt_backend *be) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/bad", mt_test_tmpdir());
    mt_model m;
    CHECK(mt_model_alloc_ex(&m, c, MT_PREC_PAPER, be, 0) == MT_OK, "%s", mt_last_error());
    mt_model_init_random(&m, 2);
    mt_ckpt_dir cd;
    CHECK(mt_ckpt_dir_open(&cd, dir, "--save") == MT_OK, "%s", mt_last_error());
    CHECK(save(&cd, &m, 5, (size_t)1 << 40) == MT_OK, "%s", mt_last_error());
    mt_ckpt_dir_close(&cd);
    mt_ckpt_manifest man = {0};

    flip_byte(dir, "train_state.json", 2); // same size, other bytes
    CHECK(mt_checkpoint_open(dir, &man) != MT_OK && strstr(mt_last_error(), "train_state.json") &&
              strstr(mt_last_error(), "CRC-32"),
          "an edited train_state.json is refused by its CRC-32: %s", mt_last_error());
    mt_ckpt_manifest_free(&man);
    flip_byte(dir, "train_state.json", 2); // back

    CHECK(mt_checkpoint_open(dir, &man) == MT_OK, "restored: opens again: %s", mt_last_error());
    mt_ckpt_manifest_free(&man);
    flip_byte(dir, "model.safetensors", -3); // a tensor's byte: only the load's CRC-32 sees it
    CHECK(mt_checkpoint_open(dir, &man) == MT_OK, "sizes unchanged: the manifest opens: %s", mt_last_error());
    CHECK(mt_model_load_weights(&m, dir, &man.weights, NULL) != MT_OK && strstr(mt_last_error(), "model.safetensors"),
          "a changed tensor is refused on load naming its file: %s", mt_last_error());
    mt_ckpt_manifest_free(&man);

    char path[4400];
    snprintf(path, sizeof path, "%s/optimizer.safetensors", dir);
    CHECK(truncate(path, 100) == 0, "truncate %s", path);
    CHECK(mt_checkpoint_open(dir, &man) != MT_OK && strstr(mt_last_error(), "optimizer.safetensors") &&
              strstr(mt_last_error(), "bytes"),
          "a truncated optimizer file is refused by its size: %s", mt_last_error());
    mt_ckpt_manifest_free(&man);
    CHECK(unlink(path) == 0, "rm %s", path);
    CHECK(mt_checkpoint_open(dir, &man) != MT_OK && strstr(mt_last_error(), "missing"),
          "a missing file is a partial checkpoint: %s", mt_last_error());
    mt_ckpt_manifest_free(&man);

    snprintf(path, sizeof path, "%s/checkpoint.json", dir);
    mt_test_write_text(path, "{\"format\": \"something else\"}\n");
    CHECK(mt_checkpoint_open(dir, &man) != MT_OK && strstr(mt_last_error(), "checkpoint.json"),
          "a foreign manifest is refused naming it: %s", mt_last_error());
    mt_ckpt_manifest_free(&man);
    mt_model_free(&m);
}

int main(void) {
    mt_test_tmpdir_make("ckpt");
    mt_config c = {.arch = MT_ARCH_LLAMA, .vocab_size = 64, .hidden_size = 32, .intermediate_size = 48,
                   .num_layers = 2, .num_heads = 4, .num_kv_heads = 2, .head_dim = 8,
                   .max_position_embeddings = 32, .rms_norm_eps = 1e-5f, .rope_theta = 1e4, .torch_dtype = MT_F32};
    mt_backend *be = NULL;
    CHECK(mt_backend_create("cpu", MT_F32, &be) == MT_OK, "%s", mt_last_error());
    if (be) {
        test_round_trip(&c, be, (size_t)1 << 40);
        test_round_trip(&c, be, 20000); // shards with their indexes
        test_switch(&c, be);
        test_refused(&c, be);
        mt_backend_destroy(be);
    }
    return mt_test_finish("test_checkpoint");
}
