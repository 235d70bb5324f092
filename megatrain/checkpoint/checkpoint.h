// checkpoint.h: what a checkpoint holds and how it is verified. Beside the HF
// files (config.json, model.safetensors or its shards and index) and ours
// (optimizer.safetensors or its shards and index, train_state.json) a save writes
// checkpoint.json, last: the format, the step, every file's size, the small
// files' CRC-32 and, per tensor, its file, dtype, shape and CRC-32. A reader trusts nothing the manifest does not vouch for, so a
// mixed, partial, edited or foreign checkpoint is refused naming the file.
#ifndef MT_CHECKPOINT_H
#define MT_CHECKPOINT_H

#include <stdint.h>

#include "checkpoint/ckpt_dir.h"
#include "engine/model_io.h"

typedef struct {
    int step;
    mt_tensor_records weights, moments; // model*.safetensors, optimizer*.safetensors (each record names its file)
} mt_ckpt_manifest;

// Writes train_state.json into `dir` (the run's state is the caller's: the CLI's options).
typedef mt_status (*mt_ckpt_state_writer)(const char *dir, void *ctx);
// Writes the whole checkpoint after `step` into `dir` (a staging directory): the weights and
// the optimizer state in shards of shard_size_bytes of tensor data, then write_state's
// train_state.json, checkpoint.json last.
mt_status mt_checkpoint_write(const char *dir, const mt_model *m, int step, size_t shard_size_bytes,
                              mt_ckpt_state_writer write_state, void *ctx);
// Refuses a save the filesystem of cd's directory cannot hold (statvfs), naming the
// bytes needed (weights, optimizer state, small files) and the bytes free.
mt_status mt_checkpoint_check_space(const mt_ckpt_dir *cd, const mt_model *m, size_t shard_size_bytes);
// Reads DIR/checkpoint.json and checks config.json and train_state.json (sizes,
// CRC-32) and the tensor files' sizes against it; the tensor records it returns
// check every tensor as it is loaded (mt_model_load_weights / _optimizer).
mt_status mt_checkpoint_open(const char *dir, mt_ckpt_manifest *man);
// 1 when DIR holds a checkpoint.json (a --model directory saved by megatrain).
int mt_checkpoint_present(const char *dir);
void mt_ckpt_manifest_free(mt_ckpt_manifest *man);
// --model PATH's weights; a directory megatrain saved is checked against its checkpoint.json.
// rep as mt_model_load_weights (NULL: a tensor the model does not use is an error).
mt_status mt_checkpoint_load_model(mt_model *m, const char *path, mt_load_report *rep);

#endif
