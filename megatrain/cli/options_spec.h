// options_spec.h: the option table options.c parses with and options_help.c
// prints (each option's kind, field, commands, value and one line of help).
#ifndef MT_OPTIONS_SPEC_H
#define MT_OPTIONS_SPEC_H

#include <stddef.h>

#include "cli/options.h"

typedef enum {
    OPT_STR, OPT_POS_INT, OPT_NONNEG_INT, OPT_U64, OPT_NONNEG_FLOAT, OPT_POS_FLOAT, OPT_UNIT_FLOAT, OPT_FLAG,
    OPT_BOOL,     // 0/1/true/false
    OPT_COUNT,    // non-negative element count, e.g. 5e7 or 50000000
    OPT_TRISTATE, // true/false/auto -> 1/0/-1
    OPT_SCHEDULE, // a schedule's name -> its descriptor (engine/schedule.h)
    OPT_BIND,     // pointer/copy -> mt_bind_mode
    OPT_GRAD_SUM, // auto/f32/bf16 -> mt_grad_sum
    OPT_BYTES,    // a positive byte count: 5000000000, 5GB, 4.5GiB, 500MB (transformers' units)
    OPT_RECOMPUTE,// full/mlp/swiglu/none/auto -> mt_recompute
    OPT_BATCH,    // a positive integer, or auto (the planner's choice: o->batch_auto)
    OPT_GPUS,     // a positive integer, or auto (0: every device of the backend, resolved when it is created)
    OPT_DEVOPT,   // auto/off/N -> -1/0/N units (engine/device_optimizer.h)
} opt_kind;

typedef struct {
    const char *name;
    opt_kind kind;
    size_t offset;
    size_t given_offset; // offset into o->given, or (size_t)-1
    const char *cmds;    // commands accepting it: "t" train, "e" eval, "p" plan
    const char *arg;     // its value in the help ("T", "true|false|auto"); "" for a flag
    const char *help;    // one line, with its unit; the default is printed from mt_options_defaults
} opt_spec;

#define NG ((size_t)-1) // no given-flag

extern const opt_spec mt_option_specs[];
extern const size_t mt_option_spec_count;

#endif
