// options.h: command-line options of `megatrain train|eval|plan`, parsed and
// validated up front: every bad value is one line naming the option.
#ifndef MT_OPTIONS_H
#define MT_OPTIONS_H

#include <stdio.h>

#include "core/status.h"
#include "engine/engine.h"

// Saves are sharded at 5 GB (10^9 bytes) of tensor data per file by default:
// transformers 4.x's save_pretrained default (5.x moved to 50GB), so every loader
// of the last years has read shards this size; the Hugging Face Hub caps a file at
// 50 GB and recommends far less; and a tool that reads a shard whole into memory
// needs 5 GB, not the whole model (a 120B-class checkpoint is ~220 GB of bf16
// weights and ~880 GB of f32 moments). The count stays small: 44 + 176 files there.
#define MT_DEFAULT_SHARD_SIZE 5000000000ULL

typedef struct {
    const char *model, *config, *init, *data, *save, *resume, *log, *trace, *dump_grads;
    const char *precision, *backend, *lr_schedule, *hardware;
    const char *attention; // --attention auto|native|cudnn (backend.h mt_attn_impl)
    const char *peer;      // --peer NAME (engine/peer.h): its descriptor replaces --schedule, its precision the default
    const char *shard_optimizer; // --shard-optimizer hosts|off (NULL: auto, hosts under mpirun; engine/host_shard.h)
    const char *save_layout;     // --save-layout hosts|host0 (NULL: hosts; engine/host_shard_save.h)
    const char *compare;   // plan --compare A,B,...: one plan per hardware profile, side by side (cli/plan_compare.c)
    unsigned long long seed;
    int steps, warmup, save_every;
    int gpus; // --gpus N: data-parallel ranks, one per device (default 1; 0: auto, every device the backend has)
    int hosts;             // plan --hosts H: hosts of --gpus N each (train takes them from mpirun; default 1)
    float tokens_per_day;  // plan --tokens-per-day X: the fewest GPUs and hosts whose projected rate reaches X
    // What the engine and the planner take, parsed straight into their own struct
    // (one set of defaults and one validation, engine.h): --schedule (the parser
    // maps the name to its descriptor), --batch, --seq-len, --grad-accum,
    // --checkpoint-interval, --weight-buffers, --grad-slabs, --serial-optimizer,
    // --mlp-chunk, --grad-accum-dtype, --offload-checkpoints, --bind and the --zero3-* knobs.
    mt_engine_opts eng;
    unsigned long long shard_size; // --shard-size: bytes of tensor data per saved safetensors shard
    float host_mem_gb; // plan: host memory to assume instead of the profile's (0 = the profile's)
    float nic_gbps;    // plan --hosts: each host's network link to assume instead of the profile's (0 = the profile's)
    float rollback_rate; // plan: fraction of steps the speculative step rolls back (0..1)
    int max_context;   // plan: also search the longest --seq-len that fits
    int batch_auto;    // --batch auto: the planner picks the batch, --recompute, K and weight buffers
    int help;          // --help among the arguments: print the usage and exit 0
    int json;          // --json: the JSON lines on stdout even when it is a terminal
    int allow_unused;  // --allow-unused-tensors: --model's file may hold tensors the model does not use (dropped, named on stderr)
    float lr, weight_decay, beta1, beta2, eps, grad_clip;
    // which options were given explicitly (resume fills the others from train_state.json)
    struct {
        int steps, batch, seq_len, grad_accum, lr, weight_decay, beta1, beta2, eps, grad_clip, lr_schedule, warmup,
            precision, data, seed, schedule, speculative, grad_accum_dtype, init, save_every, shard_size,
            recompute, gpus, hosts;
    } given;
} mt_options;

// Defaults per docs/DESIGN.md#batching-loss-and-optimizer-semantics: lr 3e-4, wd 0.1, betas 0.9/0.95, eps 1e-8, clip 1.0.
// --shard-size 5GB: see MT_DEFAULT_SHARD_SIZE.
void mt_options_defaults(mt_options *o);
// Parses argv[first..argc) for `cmd` ("train", "eval", "plan"), then mt_options_check.
// Stops at --help (o->help = 1).
mt_status mt_options_parse(mt_options *o, const char *cmd, int argc, char **argv, int first);
// Sets option `name` ("--lr") from its text exactly as the command line would,
// with the same validation (the given-flag is left alone). `value` must outlive o.
mt_status mt_options_set(mt_options *o, const char *name, const char *value);
// What no single option shows: a missing --model, contradicting options (--init with
// --model, --save-every or --shard-size without --save, ...). An option given twice
// is refused by mt_options_parse.
mt_status mt_options_check(const mt_options *o, const char *cmd);
// `megatrain CMD --help`'s option list: each option CMD takes, its value, its help
// and its default (from mt_options_defaults) or "required".
void mt_options_help(FILE *out, const char *cmd);
// The option CMD takes nearest to a mistyped `arg` (edit distance), or NULL when none is close.
const char *mt_option_nearest(const char *arg, const char *cmd);

#endif
