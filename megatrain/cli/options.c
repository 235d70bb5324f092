// options.c: a table-driven parser; each option knows its kind, its field and,
// for a string, its allowed values. One function, mt_options_set, turns a value's
// text into the field and validates it; the command line and train_state.json
// both go through it, so a saved state is checked exactly like typed input.
#include "backend/backend_registry.h"
#include "cli/options.h"
#include "cli/options_spec.h"

#include "backend/backend.h"
#include "engine/device_optimizer.h"
#include "engine/peer.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define F(field) offsetof(mt_options, field)
#define G(field) offsetof(mt_options, given.field)

const opt_spec mt_option_specs[] = {
    {"--model", OPT_STR, F(model), NG, "tep", "DIR",
     "an HF model directory (config.json and safetensors) to start from"},
    {"--config", OPT_STR, F(config), NG, "tp", "FILE",
     "an HF config.json: a model of that shape, weights from --init"},
    {"--init", OPT_STR, F(init), G(init), "t", "random",
     "how a --config model's weights start"},
    {"--seed", OPT_U64, F(seed), G(seed), "t", "N",
     "seed of --init random and of --data synthetic"},
    {"--data", OPT_STR, F(data), G(data), "te", "FILE|synthetic|embedded",
     "tokens: a flat uint32 file, random ids, or the embedded corpus as bytes"},
    {"--batch", OPT_BATCH, F(eng.B), G(batch), "tep", "B|auto",
     "rows per micro-batch, the global batch under --gpus/--hosts; auto: the planner's choice"},
    {"--seq-len", OPT_POS_INT, F(eng.T), G(seq_len), "tep", "T",
     "tokens per row"},
    {"--steps", OPT_POS_INT, F(steps), G(steps), "te", "N",
     "optimizer steps in all, a resume's included"},
    // Data-parallel ranks on one host, one copy of the state (docs/DESIGN.md#several-gpus).
    {"--gpus", OPT_GPUS, F(gpus), G(gpus), "tp", "N|auto",
     "data-parallel ranks, one a device, one host copy of the state; auto: every device"},
    // plan only: hosts of --gpus N each (train's hosts are mpirun's), and "how many for this rate"
    {"--hosts", OPT_POS_INT, F(hosts), G(hosts), "p", "H",
     "hosts of --gpus N each (train takes them from mpirun)"},
    {"--tokens-per-day", OPT_POS_FLOAT, F(tokens_per_day), NG, "p", "X",
     "tokens a day to reach: the fewest GPUs, then hosts, that project it"},
    {"--grad-accum", OPT_POS_INT, F(eng.grad_accum), G(grad_accum), "tp", "G",
     "micro-batches summed per optimizer step"},
    {"--lr", OPT_NONNEG_FLOAT, F(lr), G(lr), "t", "X",
     "peak learning rate"},
    {"--weight-decay", OPT_NONNEG_FLOAT, F(weight_decay), G(weight_decay), "t", "X",
     "AdamW's decoupled weight decay"},
    {"--beta1", OPT_UNIT_FLOAT, F(beta1), G(beta1), "t", "X",
     "AdamW's first-moment decay, in [0, 1)"},
    {"--beta2", OPT_UNIT_FLOAT, F(beta2), G(beta2), "t", "X",
     "AdamW's second-moment decay, in [0, 1)"},
    {"--eps", OPT_POS_FLOAT, F(eps), G(eps), "t", "X",
     "AdamW's epsilon"},
    {"--grad-clip", OPT_NONNEG_FLOAT, F(grad_clip), G(grad_clip), "t", "X",
     "the global gradient norm's clip (0: off)"},
    {"--lr-schedule", OPT_STR, F(lr_schedule), G(lr_schedule), "t", "constant|cosine",
     "after the warmup: constant, or cosine down to lr/10 at the last step"},
    {"--warmup", OPT_NONNEG_INT, F(warmup), G(warmup), "t", "N",
     "steps of linear warmup from 0"},
    {"--precision", OPT_STR, F(precision), G(precision), "tep", "paper|mixed|fp32",
     "weights, gradients and moments (docs/DESIGN.md: precision table)"},
    {"--backend", OPT_STR, F(backend), NG, "tep", "NAME",
     "where the steps run (Backends, below)"},
    {"--attention", OPT_STR, F(attention), NG, "tep", "auto|native|cudnn",
     "the attention kernel"},
    // The schedule and its knobs: train, eval and plan take the same ones (eval runs
    // forward only, so it has no gradient slabs, optimizer or accumulation to set).
    {"--schedule", OPT_SCHEDULE, F(eng.schedule), G(schedule), "tep", "NAME",
     "how layers stream (Schedules, below)"},
    // A peer as it really runs (sim and plan only): a schedule descriptor plus its own costs.
    {"--peer", OPT_STR, F(peer), NG, "tp", "NAME",
     "a peer system as it runs, in place of --schedule (Peers, below; sim and plan)"},
    {"--checkpoint-interval", OPT_POS_INT, F(eng.sched.ckpt_interval), NG, "tep", "K",
     "layers between kept layer inputs for the backward"},
    {"--weight-buffers", OPT_POS_INT, F(eng.sched.weight_bufs), NG, "tep", "N",
     "device buffers the layers' weights stream through"},
    {"--grad-slabs", OPT_POS_INT, F(eng.grad_slabs), NG, "tp", "S",
     "device slabs the gradients drain to the host through"},
    {"--serial-optimizer", OPT_FLAG, F(eng.sched.serial_optimizer), NG, "tp", "",
     "the optimizer after the backward, not under it"},
    {"--shard-optimizer", OPT_STR, F(shard_optimizer), NG, "t", "hosts|off",
     "under mpirun: each host keeps the optimizer state of its slice only (default hosts)"},
    {"--save-layout", OPT_STR, F(save_layout), NG, "t", "hosts|host0",
     "under mpirun, sharded: each host writes its part of a save (default hosts: a shared --save), or host 0 all"},
    {"--speculative-step", OPT_TRISTATE, F(eng.sched.speculative), G(speculative), "tp", "true|false|auto",
     "update each unit under the backward, rolled back on a clip"},
    {"--device-optimizer", OPT_DEVOPT, F(eng.device_optimizer), NG, "tp", "auto|off|N",
     "units whose optimizer state lives and updates on the GPU (auto: what spare memory holds)"},
    {"--embedding-rows-first", OPT_TRISTATE, F(eng.sched.rows_first), NG, "tp", "true|false|auto",
     "update first the embedding rows the next step reads"},
    {"--update-parts", OPT_POS_INT, F(eng.sched.update_parts), NG, "tp", "N",
     "parts a unit's update runs in, each copied in as done (1: whole units)"},
    {"--bind", OPT_BIND, F(eng.sched.bind), NG, "tep", "pointer|copy",
     "how a layer's streamed weights reach its kernels"},
    {"--mlp-chunk", OPT_NONNEG_INT, F(eng.mlp_rows), NG, "tep", "TOKENS",
     "tokens per MLP chunk (0: all at once)"},
    {"--grad-accum-dtype", OPT_GRAD_SUM, F(eng.grad_sum), G(grad_accum_dtype), "tp", "auto|f32|bf16",
     "how chunked weight gradients are summed"},
    {"--offload-checkpoints", OPT_TRISTATE, F(eng.sched.offload_checkpoints), NG, "tep", "true|false|auto",
     "keep the layer checkpoints in host memory"},
    {"--recompute", OPT_RECOMPUTE, F(eng.sched.recompute), G(recompute), "tp", "full|mlp|norms|swiglu|none|auto",
     "what the backward recomputes"}, // eval has no backward
    {"--save", OPT_STR, F(save), NG, "t", "DIR",
     "the checkpoint, written at the end (and every --save-every)"},
    {"--save-every", OPT_POS_INT, F(save_every), G(save_every), "t", "N",
     "steps between saves"},
    {"--shard-size", OPT_BYTES, F(shard_size), G(shard_size), "t", "BYTES",
     "tensor bytes per saved safetensors file (B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)"},
    // Tensors in --model's weights that the config does not use are an error unless this is given.
    {"--allow-unused-tensors", OPT_FLAG, F(allow_unused), NG, "te", "",
     "drop tensors of --model's weights that the model does not use"},
    {"--resume", OPT_STR, F(resume), NG, "t", "DIR",
     "continue from this checkpoint, saving back to it unless --save DIR"},
    {"--log", OPT_STR, F(log), NG, "te", "FILE.jsonl",
     "the JSON lines, also (appended to on --resume)"},
    {"--json", OPT_FLAG, F(json), NG, "tep", "",
     "the JSON lines on stdout even on a terminal"},
    {"--trace", OPT_STR, F(trace), NG, "t", "FILE.json",
     "a Chrome/Perfetto trace of the run"},
    {"--dump-grads", OPT_STR, F(dump_grads), NG, "t", "FILE",
     "step 1's gradients as safetensors"},
    {"--hardware", OPT_STR, F(hardware), NG, "tep", "PROFILE",
     "a profile's name in experiments/hardware, a path, or measured (train: with --backend sim)"},
    {"--zero3-pin-memory", OPT_BOOL, F(eng.sched.zero3.pin_memory), NG, "tep", "true|false",
     "DeepSpeed's offload pin_memory"},
    {"--zero3-overlap-comm", OPT_BOOL, F(eng.sched.zero3.overlap_comm), NG, "tep", "true|false",
     "DeepSpeed's overlap_comm"},
    {"--zero3-prefetch-bucket-size", OPT_COUNT, F(eng.sched.zero3.prefetch_bucket_size), NG, "tep", "N",
     "elements fetched ahead of use (stage3_prefetch_bucket_size)"},
    // plan only: DeepSpeed's GPU-footprint model reads them; the engine's zero3 schedule does not
    // (it keeps norms and biases with their layer's copy and offloads a layer per bucket)
    {"--zero3-param-persistence-threshold", OPT_COUNT, F(eng.sched.zero3.param_persistence_threshold), NG, "p", "N",
     "elements below which a tensor stays on the GPU"},
    {"--zero3-reduce-bucket-size", OPT_COUNT, F(eng.sched.zero3.reduce_bucket_size), NG, "p", "N",
     "elements per gradient reduce bucket"},
    {"--zero3-max-live-parameters", OPT_COUNT, F(eng.sched.zero3.max_live_parameters), NG, "tep", "N",
     "elements resident on the GPU at once"},
    {"--host-mem-gb", OPT_POS_FLOAT, F(host_mem_gb), NG, "p", "X",
     "GB (10^9 bytes) of host memory to assume in place of the profile's"},
    {"--nic-gbps", OPT_POS_FLOAT, F(nic_gbps), NG, "p", "X",
     "GB/s each way of each host's network link to assume (multi.nic_gbps), with --hosts"},
    {"--rollback-rate", OPT_NONNEG_FLOAT, F(rollback_rate), NG, "p", "R",
     "fraction of steps the speculative step rolls back, in [0, 1]"},
    {"--max-context", OPT_FLAG, F(max_context), NG, "p", "",
     "also search the longest --seq-len that fits"},
    // One plan per hardware profile, side by side (a name or a path each, comma-separated).
    {"--compare", OPT_STR, F(compare), NG, "p", "P,P,...",
     "plan on each profile side by side, in place of --hardware"},
};
const size_t mt_option_spec_count = sizeof mt_option_specs / sizeof *mt_option_specs;

// The string options with a fixed set of values ("a|b|c"), checked as they are set.
static const struct {
    const char *name, *values;
} choices[] = {
    {"--init", "random"},
    {"--lr-schedule", "constant|cosine"},
    {"--precision", "paper|mixed|fp32"},
    {"--bind", "pointer|copy"}, // (--schedule: the schedule table's names; --backend: the registry's)
};

static const char *choices_of(const char *name) {
    for (size_t i = 0; i < sizeof choices / sizeof *choices; i++)
        if (!strcmp(choices[i].name, name)) return choices[i].values;
    return NULL;
}

// Why an option is refused by a command, where the bare "does not apply" would puzzle.
static const struct {
    const char *name, *why;
} refused_why[] = {
    {"--zero3-param-persistence-threshold", "the engine's zero3 schedule does not model it (baselines/ZERO3.md); "
                                            "`megatrain plan` reads it"},
    {"--zero3-reduce-bucket-size", "the engine's zero3 schedule does not model it (baselines/ZERO3.md); "
                                   "`megatrain plan` reads it"},
};

static const char *why_refused(const char *name) {
    for (size_t k = 0; k < sizeof refused_why / sizeof *refused_why; k++)
        if (!strcmp(name, refused_why[k].name)) return refused_why[k].why;
    return NULL;
}

void mt_options_defaults(mt_options *o) {
    memset(o, 0, sizeof *o);
    mt_engine_opts_defaults(&o->eng); // the schedule and its knobs: the engine's one set of defaults
    o->init = "random";
    o->data = "synthetic";
    o->steps = 10;
    o->gpus = 1;
    o->hosts = 1;
    o->lr = 3e-4f;
    o->weight_decay = 0.1f;
    o->beta1 = 0.9f;
    o->beta2 = 0.95f;
    o->eps = 1e-8f;
    o->grad_clip = 1.0f;
    o->lr_schedule = "constant";
    o->precision = "fp32";
    o->backend = "auto";
    o->attention = "auto";
    o->shard_size = MT_DEFAULT_SHARD_SIZE;
}

// "a|b|c" contains v as a whole alternative.
static int one_of(const char *choices, const char *v) {
    size_t n = strlen(v);
    for (const char *p = choices; p; p = strchr(p, '|') ? strchr(p, '|') + 1 : NULL)
        if (!strncmp(p, v, n) && (p[n] == '|' || p[n] == 0)) return 1;
    return 0;
}

// A float option: parsed as a double, then checked as the float the engine will
// use, so a value that overflows, underflows or rounds onto a bound is refused.
static mt_status parse_float(const opt_spec *s, const char *v, float *out) {
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || isnan(x) || isinf(x))
        return mt_fail(MT_ERR_ARG, "%s: expected a finite number, got '%s'", s->name, v);
    if (x < 0 || (s->kind == OPT_POS_FLOAT && !(x > 0)))
        return mt_fail(MT_ERR_ARG, "%s: must be %s, got %s", s->name, s->kind == OPT_POS_FLOAT ? "positive" : ">= 0", v);
    float f = (float)x;
    if (isinf(f)) return mt_fail(MT_ERR_ARG, "%s: %s overflows single precision (largest %g)", s->name, v, (double)FLT_MAX);
    if (x != 0 && f == 0)
        return mt_fail(MT_ERR_ARG, "%s: %s rounds to 0 in single precision (smallest positive %g)", s->name, v,
                       (double)FLT_TRUE_MIN);
    if (s->kind == OPT_UNIT_FLOAT && !(f < 1))
        return mt_fail(MT_ERR_ARG, "%s: must be in [0, 1), got %s%s", s->name, v,
                       x < 1 ? " (it rounds to 1 in single precision)" : "");
    *out = f;
    return MT_OK;
}

// A byte count as transformers' convert_file_size_to_int reads one: a number, then
// optionally a unit, decimal (kB, MB, GB, TB: 10^3..10^12) or binary (KiB, MiB,
// GiB, TiB: 2^10..2^40); "B" or nothing is bytes. The result is whole and positive.
static mt_status parse_bytes(const opt_spec *s, const char *v, unsigned long long *out) {
    static const struct {
        const char *unit;
        double scale;
    } units[] = {{"", 1}, {"B", 1}, {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
                 {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || !(x > 0) || isinf(x))
        return mt_fail(MT_ERR_ARG, "%s: expected a positive size such as 5GB, 500MB, 2GiB or 1000000000, got '%s'",
                       s->name, v);
    for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
        if (strcmp(end, units[i].unit)) continue;
        double bytes = x * units[i].scale;
        if (bytes < 1 || bytes > 9.2e18 || bytes != floor(bytes))
            return mt_fail(MT_ERR_ARG, "%s: %s is not a whole number of bytes in [1, 9.2e18]", s->name, v);
        *out = (unsigned long long)bytes;
        return MT_OK;
    }
    return mt_fail(MT_ERR_ARG, "%s: unknown unit '%s' in '%s' (B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)", s->name, end, v);
}

static mt_status parse_value(const opt_spec *s, const char *v, mt_options *o) {
    char *end = NULL;
    void *field = (char *)o + s->offset;
    errno = 0;
    switch (s->kind) {
    case OPT_STR:
        if (!*v) return mt_fail(MT_ERR_ARG, "%s: empty value", s->name);
        if (choices_of(s->name) && !one_of(choices_of(s->name), v)) {
            char list[128];
            snprintf(list, sizeof list, "%s", choices_of(s->name));
            for (char *p = list; *p; p++)
                if (*p == '|') *p = ',';
            return mt_fail(MT_ERR_ARG, "%s: unknown value '%s' (expected one of %s)", s->name, v, list);
        }
        *(const char **)field = v;
        return MT_OK;
    case OPT_RECOMPUTE:
        return mt_recompute_parse(v, (mt_recompute *)field);
    case OPT_GPUS:
        if (!strcmp(v, "auto")) {
            *(int *)field = 0;
            return MT_OK;
        }
        /* fall through */
    case OPT_BATCH:
        if (s->kind == OPT_BATCH) {
            o->batch_auto = !strcmp(v, "auto");
            if (o->batch_auto) return MT_OK; // the engine's default stands until the planner picks
        }
        /* fall through */
    case OPT_POS_INT:
    case OPT_NONNEG_INT: {
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end || x > INT_MAX || x < 0 || (s->kind != OPT_NONNEG_INT && x == 0))
            return mt_fail(MT_ERR_ARG, "%s: expected a %s integer (at most %d), got '%s'%s", s->name,
                           s->kind == OPT_NONNEG_INT ? "non-negative" : "positive", INT_MAX, v,
                           s->kind == OPT_BATCH || s->kind == OPT_GPUS ? " (or auto)" : "");
        *(int *)field = (int)x;
        return MT_OK;
    }
    case OPT_U64: {
        if (*v == '-') return mt_fail(MT_ERR_ARG, "%s: expected a non-negative integer, got '%s'", s->name, v);
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || end == v || *end) return mt_fail(MT_ERR_ARG, "%s: expected a non-negative integer, got '%s'", s->name, v);
        *(unsigned long long *)field = x;
        return MT_OK;
    }
    case OPT_NONNEG_FLOAT:
    case OPT_POS_FLOAT:
    case OPT_UNIT_FLOAT:
        return parse_float(s, v, (float *)field);
    case OPT_FLAG:
        *(int *)field = 1;
        return MT_OK;
    case OPT_BOOL:
        if (!strcmp(v, "1") || !strcmp(v, "true")) *(int *)field = 1;
        else if (!strcmp(v, "0") || !strcmp(v, "false")) *(int *)field = 0;
        else return mt_fail(MT_ERR_ARG, "%s: expected true or false, got '%s'", s->name, v);
        return MT_OK;
    case OPT_TRISTATE:
        if (!strcmp(v, "1") || !strcmp(v, "true")) *(int *)field = 1;
        else if (!strcmp(v, "0") || !strcmp(v, "false")) *(int *)field = 0;
        else if (!strcmp(v, "auto")) *(int *)field = -1;
        else return mt_fail(MT_ERR_ARG, "%s: expected true, false or auto, got '%s'", s->name, v);
        return MT_OK;
    case OPT_SCHEDULE: {
        const mt_schedule_desc *d;
        MT_TRY(mt_schedule_find(v, &d));
        *(const mt_schedule_desc **)field = d;
        return MT_OK;
    }
    case OPT_BIND:
        if (!one_of(choices_of(s->name), v))
            return mt_fail(MT_ERR_ARG, "%s: unknown value '%s' (expected one of pointer,copy)", s->name, v);
        *(mt_bind_mode *)field = !strcmp(v, "copy") ? MT_BIND_COPY : MT_BIND_POINTER;
        return MT_OK;
    case OPT_GRAD_SUM:
        return mt_grad_sum_parse(v, (mt_grad_sum *)field);
    case OPT_DEVOPT:
        return mt_devopt_parse(v, (int *)field);
    case OPT_BYTES:
        return parse_bytes(s, v, (unsigned long long *)field);
    case OPT_COUNT: {
        double x = strtod(v, &end);
        if (errno || end == v || *end || !(x >= 0) || x > 9e18 || x != (double)(long long)x)
            return mt_fail(MT_ERR_ARG, "%s: expected a non-negative whole number (e.g. 5e7), got '%s'", s->name, v);
        *(long long *)field = (long long)x;
        return MT_OK;
    }
    }
    return MT_OK;
}

// --peer: its descriptor is the schedule, and its precision the default; --schedule
// names another schedule, so both together are refused.
static mt_status apply_peer(mt_options *o) {
    if (!o->peer) return MT_OK;
    const mt_peer *p;
    MT_TRY(mt_peer_find(o->peer, &p));
    if (o->given.schedule)
        return mt_fail(MT_ERR_ARG, "--peer %s: replaces --schedule (a peer is its own schedule); give one of them",
                       o->peer);
    if (o->attention && strcmp(o->attention, "auto"))
        return mt_fail(MT_ERR_ARG, "--peer %s: runs its own attention (%s); drop --attention %s", o->peer,
                       mt_peer_schedule(p)->attention_kernel, o->attention);
    o->eng.schedule = mt_peer_schedule(p);
    if (!o->given.precision) o->precision = mt_precision_name(p->precision);
    mt_precision prec;
    MT_TRY(mt_precision_parse(o->precision, &prec));
    return mt_peer_check_precision(p, prec);
}

static const opt_spec *find_spec(const char *name) {
    for (size_t k = 0; k < mt_option_spec_count; k++)
        if (!strcmp(name, mt_option_specs[k].name)) return &mt_option_specs[k];
    return NULL;
}

mt_status mt_options_set(mt_options *o, const char *name, const char *value) {
    const opt_spec *s = find_spec(name);
    if (!s) return mt_fail(MT_ERR_ARG, "unknown option '%s'", name);
    if (s->kind == OPT_BATCH) { // a saved state holds the batch it ran, never auto
        opt_spec n = *s;
        n.kind = OPT_POS_INT;
        return parse_value(&n, value, o);
    }
    return parse_value(s, value, o);
}

mt_status mt_options_parse(mt_options *o, const char *cmd, int argc, char **argv, int first) {
    char c = cmd[0];
    int seen[sizeof mt_option_specs / sizeof *mt_option_specs] = {0}; // argv index of each option's first use (0: not yet)
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            o->help = 1;
            return MT_OK;
        }
        // --opt=value is --opt value (the value stays in argv, which outlives o).
        char name[64];
        const char *inline_v = NULL, *eq = strncmp(arg, "--", 2) ? NULL : strchr(arg, '=');
        if (eq && (size_t)(eq - arg) < sizeof name) {
            memcpy(name, arg, (size_t)(eq - arg));
            name[eq - arg] = 0;
            inline_v = eq + 1;
            arg = name;
        }
        const opt_spec *s = find_spec(arg);
        if (!s) {
            const char *near = mt_option_nearest(arg, cmd);
            if (near)
                return mt_fail(MT_ERR_ARG, "%s: unknown option '%s'; did you mean %s? (`megatrain %s --help` lists "
                                           "them)", cmd, arg, near, cmd);
            return mt_fail(MT_ERR_ARG, "%s: unknown option '%s' (`megatrain %s --help` lists them)", cmd, arg, cmd);
        }
        if (!strchr(s->cmds, c))
            return mt_fail(MT_ERR_ARG, "%s: option %s does not apply to `megatrain %s`%s%s", cmd, arg, cmd,
                           why_refused(arg) ? ": " : "", why_refused(arg) ? why_refused(arg) : "");
        int at = i;
        const char *v = "";
        if (s->kind == OPT_FLAG && inline_v)
            return mt_fail(MT_ERR_ARG, "%s: takes no value (got '%s')", s->name, argv[i]);
        if (inline_v) v = inline_v;
        else if (s->kind != OPT_FLAG) {
            if (i + 1 >= argc) return mt_fail(MT_ERR_ARG, "%s: missing value", s->name);
            v = argv[++i];
        }
        MT_TRY(parse_value(s, v, o)); // a bad value is named first, wherever it stands
        // Twice is a contradiction (which one counts?) even with the same value: refused.
        if (seen[s - mt_option_specs])
            return mt_fail(MT_ERR_ARG, "%s: %s is given twice (arguments %d and %d); give it once", cmd, arg,
                           seen[s - mt_option_specs] - first + 1, at - first + 1);
        seen[s - mt_option_specs] = at;
        if (s->given_offset != NG) *(int *)((char *)o + s->given_offset) = 1;
    }
    MT_TRY(apply_peer(o));
    return mt_options_check(o, cmd);
}

// Options of `train` that another option makes meaningless: refused rather than ignored.
static mt_status check_train_pairs(const mt_options *o) {
    if (o->given.init && (o->model || o->resume))
        return mt_fail(MT_ERR_ARG, "--init %s: the weights come from %s; drop --init (it applies to --config FILE)",
                       o->init, o->model ? "--model" : "the --resume checkpoint");
    // --resume DIR without --save saves back to DIR (cmd_train.c): a destination either way.
    if (o->given.save_every && !o->save && !o->resume)
        return mt_fail(MT_ERR_ARG, "--save-every %d: needs --save DIR (nothing is saved without it)", o->save_every);
    if (o->given.shard_size && !o->save && !o->resume)
        return mt_fail(MT_ERR_ARG, "--shard-size: applies to what --save DIR writes; there is no --save");
    if (o->save_layout && strcmp(o->save_layout, "hosts") && strcmp(o->save_layout, "host0"))
        return mt_fail(MT_ERR_ARG, "--save-layout %s: expected hosts or host0", o->save_layout);
    if (o->save_layout && !o->save && !o->resume)
        return mt_fail(MT_ERR_ARG, "--save-layout %s: applies to what --save DIR writes; there is no --save",
                       o->save_layout);
    // The step's batch is held in host memory: G x B x T token ids, twice (inputs, targets).
    long long per_step = (long long)o->eng.grad_accum * o->eng.B * o->eng.T;
    if (per_step > 1LL << 31)
        return mt_fail(MT_ERR_ARG, "--grad-accum %d x --batch %d x --seq-len %d: %lld tokens per step is too many "
                                   "(at most 2^31; their ids alone would take %.0f GiB of host memory)",
                       o->eng.grad_accum, o->eng.B, o->eng.T, per_step, (double)per_step * 8 / 1073741824.0);
    return MT_OK;
}

// --gpus N against the backend and the batch, before anything is created (auto is
// resolved against the created backend, and checked the same way there).
static mt_status check_gpus(const mt_options *o, unsigned caps) {
    if (o->gpus == 1) return MT_OK;
    char n[16];
    snprintf(n, sizeof n, o->gpus ? "%d" : "auto", o->gpus);
    if (caps & MT_CAP_VIRTUAL_TIME)
        return mt_fail(MT_ERR_ARG, "--gpus %s: --backend %s simulates one GPU; several are not simulated yet (drop "
                                   "--gpus, or run --backend cpu|cuda)", n, o->backend);
    if (o->batch_auto)
        return mt_fail(MT_ERR_ARG, "--gpus %s with --batch auto: the planner picks a batch for one GPU; give --batch N",
                       n);
    int have = caps ? mt_backend_device_count(o->backend) : 0;
    if (o->gpus > 1 && caps && o->gpus > have)
        return mt_fail(MT_ERR_ARG, "--gpus %d: --backend %s has %d device%s here", o->gpus, o->backend, have,
                       have == 1 ? "" : "s");
    // A resume's batch comes from its checkpoint, after this: checked again when the ranks are made.
    if (o->gpus > 1 && !(o->resume && !o->given.batch)) return mt_engine_check_ranks(o->eng.B, o->gpus);
    return MT_OK;
}

// plan --gpus N --hosts H | --tokens-per-day X (planner/ranks.c): what the planner can price.
static mt_status check_plan_ranks(const mt_options *o) {
    if (o->given.gpus && o->gpus == 0)
        return mt_fail(MT_ERR_ARG, "plan --gpus auto: the planner has no devices to count; give --gpus N");
    int several = o->gpus > 1 || o->hosts > 1;
    if (o->tokens_per_day > 0) {
        if (o->given.gpus || o->given.hosts)
            return mt_fail(MT_ERR_ARG, "--tokens-per-day: picks --gpus and --hosts itself; drop %s",
                           o->given.gpus ? "--gpus" : "--hosts");
        if (!o->hardware)
            return mt_fail(MT_ERR_ARG, "--tokens-per-day: needs --hardware PROFILE (a machine with several GPUs: its "
                                       "multi.* keys) to price the candidates");
    }
    if ((several || o->tokens_per_day > 0) && o->batch_auto)
        return mt_fail(MT_ERR_ARG, "--batch auto with %s: the planner picks a batch for one GPU; give --batch N",
                       o->tokens_per_day > 0 ? "--tokens-per-day" : "--gpus/--hosts");
    if ((several || o->tokens_per_day > 0) && o->compare)
        return mt_fail(MT_ERR_ARG, "--compare with %s: compare one GPU's plans, or give one --hardware",
                       o->tokens_per_day > 0 ? "--tokens-per-day" : "--gpus/--hosts");
    if (several && !o->hardware)
        return mt_fail(MT_ERR_ARG, "plan --gpus %d --hosts %d: needs --hardware PROFILE (the machine's multi.* keys)",
                       o->gpus, o->hosts);
    return MT_OK;
}

mt_status mt_options_check(const mt_options *o, const char *cmd) {
    int train = !strcmp(cmd, "train"), eval = !strcmp(cmd, "eval");
    // What the chosen backend can do, from its capabilities (0: not in this binary; its own error later).
    unsigned caps = mt_backend_caps_of(o->backend);
    mt_status named = mt_backend_check_name(o->backend); // the registry's names (backend/backend.h)
    if (named == MT_ERR_ARG) return named;
    int no_data = caps && !(caps & MT_CAP_TENSOR_DATA), virtual_time = (caps & MT_CAP_VIRTUAL_TIME) != 0;
    mt_attn_impl attn;
    MT_TRY(mt_attn_impl_parse(o->attention, &attn));
    if (o->model && o->config) return mt_fail(MT_ERR_ARG, "--model and --config: give one, not both");
    if (o->resume && (o->model || o->config))
        return mt_fail(MT_ERR_ARG, "--resume: takes the model from the checkpoint; drop --model/--config");
    if (train && !o->model && !o->config && !o->resume)
        return mt_fail(MT_ERR_ARG, "train: missing --model DIR, --config FILE or --resume DIR");
    if (!eval) MT_TRY(mt_engine_opts_check_speculative(&o->eng)); // options that contradict: exit 2
    if (!eval) MT_TRY(mt_engine_opts_check_rows_first(&o->eng));
    if (!eval) MT_TRY(mt_engine_opts_check_update_parts(&o->eng));
    if (o->eng.device_optimizer != MT_DEVOPT_OFF && (o->dump_grads || o->gpus > 1 || o->hosts > 1))
        return mt_fail(MT_ERR_ARG, "--device-optimizer with %s: the device's units keep their gradients on one device; "
                                   "give --device-optimizer off",
                       o->dump_grads ? "--dump-grads" : o->gpus > 1 ? "--gpus" : "--hosts");
    if (o->allow_unused && !o->model)
        return mt_fail(MT_ERR_ARG, "--allow-unused-tensors: applies to the weights --model DIR reads; %s",
                       o->resume ? "a --resume checkpoint must hold exactly what it recorded" : "there is no --model");
    MT_TRY(mt_engine_opts_check_recompute(&o->eng));
    if (o->batch_auto && eval) return mt_fail(MT_ERR_ARG, "eval: --batch auto applies to train and plan; give a number");
    if (o->batch_auto && o->resume)
        return mt_fail(MT_ERR_ARG, "--batch auto with --resume: the checkpoint fixes the batch; drop --batch");
    if (o->batch_auto && train && caps && !(caps & MT_CAP_DEVICE_MEMORY)) // nothing prices a CPU run
        return mt_fail(MT_ERR_ARG, "--batch auto: picks a batch for a GPU's memory and speed; --backend %s runs on "
                                   "the CPU here (give --batch N, or --backend sim --hardware PROFILE for a GPU's choice)",
                       o->backend);
    if (eval && !o->model) return mt_fail(MT_ERR_ARG, "eval: --model DIR is required");
    if (eval && !o->given.data) return mt_fail(MT_ERR_ARG, "eval: --data FILE is required");
    // docs/DESIGN.md, CLI: train reads FILE|synthetic|embedded, eval a token file only.
    if (eval && (!strcmp(o->data, "synthetic") || !strcmp(o->data, "embedded")))
        return mt_fail(MT_ERR_ARG, "eval --data %s: eval reads a token file only (flat uint32 ids; %s is a source "
                                   "for train); a file of that name: --data ./%s",
                       o->data, o->data, o->data);
    if (eval && no_data)
        return mt_fail(MT_ERR_ARG, "eval --backend %s: the %s backend times operations without data, so it has "
                                   "no loss to report; use cpu or cuda",
                       o->backend, o->backend);
    // The engine's limit, checked before any size is derived from it.
    if ((train || eval) && (long long)o->eng.B * o->eng.T > 1LL << 30)
        return mt_fail(MT_ERR_ARG, "--batch x --seq-len: %lld tokens per micro-batch is too many (at most 2^30)",
                       (long long)o->eng.B * o->eng.T);
    if (train && no_data && (o->save || o->resume || o->dump_grads))
        return mt_fail(MT_ERR_ARG, "--backend %s: simulates timing only; --save, --resume and --dump-grads need data",
                       o->backend);
    if (train && o->peer && !virtual_time)
        return mt_fail(MT_ERR_ARG, "--peer %s: peers run only in the simulator or the planner (their costs are "
                                   "modelled, not their code); add --backend sim --hardware PROFILE, or use `plan`",
                       o->peer);
    if ((train || eval) && o->hardware && !virtual_time)
        return mt_fail(MT_ERR_ARG, "--hardware %s: only --backend sim uses a hardware profile (--backend %s runs on "
                                   "this machine); drop --hardware or add --backend sim",
                       o->hardware, o->backend);
    if (train) MT_TRY(check_train_pairs(o)); // after the micro-batch limit: its product is checked first
    if (train) MT_TRY(check_gpus(o, caps));
    if (!strcmp(cmd, "plan")) MT_TRY(check_plan_ranks(o));
    // --compare names the profiles; an option that fixes one machine contradicts it.
    if (o->compare && o->hardware)
        return mt_fail(MT_ERR_ARG, "--compare and --hardware %s: --compare names every profile; add %s to its list "
                                   "and drop --hardware",
                       o->hardware, o->hardware);
    if (o->compare && o->host_mem_gb > 0)
        return mt_fail(MT_ERR_ARG, "--compare and --host-mem-gb: --host-mem-gb replaces one profile's host memory, "
                                   "--compare sets the profiles' hosts side by side; give a profile per host instead");
    return MT_OK;
}
