// model_io.h: moving the host model state to and from files: HF weights
// (safetensors, HF names), random initialisation, checkpoints (weights +
// optimizer moments; train_state.json and checkpoint.json are the CLI's), and
// gradient dumps. Every value loaded is checked finite; a checkpoint's tensors
// are also checked against the CRC-32s recorded when they were saved.
#ifndef MT_MODEL_IO_H
#define MT_MODEL_IO_H

#include <stdint.h>

#include "engine/host_state.h"
#include "model/safetensors.h"

// One tensor of a saved file, as checkpoint.json records it.
typedef struct {
    char name[256];
    char file[96];  // the file holding it: model.safetensors, model-00001-of-00003.safetensors, ...
    mt_dtype dtype; // as stored in the file
    int ndim;
    int64_t shape[2];
    uint32_t crc32; // zlib's CRC-32 of its bytes in the file
} mt_tensor_record;

typedef struct {
    mt_tensor_record *t; // sorted by name
    int n;
} mt_tensor_records;

void mt_tensor_records_free(mt_tensor_records *r);
void mt_tensor_records_sort(mt_tensor_records *r);
const mt_tensor_record *mt_tensor_records_find(const mt_tensor_records *r, const char *name);

// What a load found beyond what the model uses: a tensor the config has no place
// for (Qwen2's q/k/v biases under model_type llama, an lm_head.weight beside
// tie_word_embeddings: true, anything else) is an error, unless allow_unused.
typedef struct {
    int allow_unused;  // in: drop such tensors (and report them here) instead of failing
    int n_unused;      // out: how many were dropped
    char unused[1200]; // out: "PATH: N tensors the model does not use: a, b, ... (why)"
} mt_load_report;

// Loads every tensor the config needs from an HF directory (or file), checking
// names and shapes and that every value is finite; converts to the precision's
// types. A tensor in the file that the model does not use fails the load naming
// it (rep NULL, or rep->allow_unused 0). With `expect` (a checkpoint's records of
// that file), the file must hold exactly those tensors, with those dtypes, shapes
// and CRC-32s.
mt_status mt_model_load_weights(mt_model *m, const char *path, const mt_tensor_records *expect, mt_load_report *rep);
// N(0, 0.02) for matrices, ones for norms, zeros for biases; deterministic in seed.
void mt_model_init_random(mt_model *m, unsigned long long seed);
// Writes DIR/config.json (the source config written back, torch_dtype set: fp32 and
// mixed write F32, paper BF16), the weights under HF names and the optimizer moments
// (exp_avg, exp_avg_sq) each as DIR/STEM.safetensors, or, past shard_bytes of tensor
// data, as HF shards STEM-0000i-of-0000N.safetensors with STEM.safetensors.index.json
// (STEM: model, optimizer); `weights` and `moments` (may be NULL) receive what was written.
mt_status mt_model_save(const mt_model *m, const char *dir, size_t shard_bytes, mt_tensor_records *weights,
                        mt_tensor_records *moments);
// What mt_model_save writes with this shard size: exact file sizes and counts (index included).
typedef struct {
    size_t weights_bytes, optimizer_bytes;
    int weight_files, optimizer_files;
} mt_save_bytes;
mt_status mt_model_save_bytes(const mt_model *m, size_t shard_bytes, mt_save_bytes *out);
// Reads DIR/optimizer.safetensors (or its shards), or the slices several hosts saved
// (engine/host_shard_save.h: the ranges this host needs only): finite moments, exp_avg_sq >= 0; `expect` as above.
mt_status mt_model_load_optimizer(mt_model *m, const char *dir, const mt_tensor_records *expect);
// Fails naming the first tensor (HF name, and which of weights / exp_avg /
// exp_avg_sq) that holds a NaN or an infinity, and the element.
mt_status mt_model_check_finite(const mt_model *m);
// The host gradients as F32 safetensors with HF names.
mt_status mt_model_save_grads(const mt_model *m, const char *path);
// For engine/host_shard_save.c: the weights' entries as mt_model_save writes them (the caller
// frees both), and a tensor read with the checks of a checkpoint's (`expect` as above).
mt_status mt_model_weight_entries(const mt_model *m, mt_st_entry **entries, char (**names)[256], int *n);
mt_status mt_model_read_recorded(const mt_safetensors *st, const mt_st_tensor *ti, void *dst, mt_dtype dt,
                                 const mt_tensor_records *expect);
// mkdir -p; error names the option.
mt_status mt_make_dir(const char *dir, const char *option);

#endif
