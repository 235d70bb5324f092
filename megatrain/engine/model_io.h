// model_io.h: moving the host model state to and from files: HF weights
// (safetensors, HF names), random initialisation, checkpoints (weights +
// optimizer moments; train_state.json is the CLI's), and gradient dumps.
#ifndef MT_MODEL_IO_H
#define MT_MODEL_IO_H

#include "engine/host_state.h"

// Loads every tensor the config needs from an HF directory (or file), checking
// names and shapes; converts to the precision's types.
mt_status mt_model_load_weights(mt_model *m, const char *path);
// N(0, 0.02) for matrices, ones for norms, zeros for biases; deterministic in seed.
void mt_model_init_random(mt_model *m, unsigned long long seed);
// Writes DIR/config.json and DIR/model.safetensors (HF layout; fp32 and mixed
// write F32, paper writes BF16) and DIR/optimizer.safetensors (exp_avg, exp_avg_sq).
mt_status mt_model_save(const mt_model *m, const char *dir);
mt_status mt_model_load_optimizer(mt_model *m, const char *dir);
// The host gradients as F32 safetensors with HF names.
mt_status mt_model_save_grads(const mt_model *m, const char *path);
// mkdir -p; error names the option.
mt_status mt_make_dir(const char *dir, const char *option);

#endif
