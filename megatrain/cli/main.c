// main.c: the megatrain CLI entry: subcommand dispatch, --version, --help,
// and the no-argument default run (tiny model, embedded corpus).
#define _GNU_SOURCE // gettid, on_exit
#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/backend_registry.h"
#include "cli/commands.h"
#include "core/file_io.h"
#include "cli/blas_fit.h"
#include "cli/env_check.h"
#include "engine/engine.h"
#include "engine/peer.h"

static const char *usage =
    "usage: megatrain                      train the embedded tiny model on the embedded corpus\n"
    "       megatrain train --model DIR | --config FILE [--init random --seed N] | --resume DIR\n"
    "                 [--data FILE|synthetic|embedded] [--batch B|auto] [--seq-len T] [--steps N] [--grad-accum G]\n"
    "                 [--lr X] [--weight-decay X] [--beta1 X] [--beta2 X] [--eps X] [--grad-clip X|0]\n"
    "                 [--lr-schedule constant|cosine] [--warmup N] [--precision paper|mixed|fp32]\n"
    "                 [--backend auto|cpu|cuda|sim] [--attention auto|native|cudnn] [--schedule S]\n"
    "                 [--checkpoint-interval K] [--weight-buffers 1|2|3] [--grad-slabs S] [--serial-optimizer]\n"
    "                 [--mlp-chunk TOKENS] [--grad-accum-dtype auto|f32|bf16] [--recompute full|mlp|norms|swiglu|none|auto]\n"
    "                 [--speculative-step true|false|auto] [--embedding-rows-first true|false|auto] [--update-parts N] [--offload-checkpoints true|false|auto] [--bind pointer|copy] [--hardware PROFILE] [--trace FILE.json] [--zero3-* (baselines/ZERO3.md)]\n"
    "                 [--gpus N|auto]  (data-parallel ranks, one per device, one host copy of the state;\n"
    "                 --batch is the global batch; under `mpirun -np H` one process per host, --batch split H ways)\n"
    "                 [--save DIR] [--save-every N] [--shard-size BYTES|5GB] [--log FILE.jsonl] [--dump-grads FILE]\n"
    "                 [--peer P]  (with --backend sim: a peer as it runs, in its own precision)\n"
    "                 [--allow-unused-tensors]  (with --model: drop tensors the model does not use)\n"
    "       megatrain eval --model DIR --data FILE [--batch B] [--seq-len T] [--steps N] [--allow-unused-tensors]\n"
    "                 [--schedule S] and the schedule's knobs train takes (forward only)\n"
    "       megatrain plan --model DIR | --config FILE [--batch B|auto] [--seq-len T] [--precision P] [--grad-accum G]\n"
    "                 [--hardware NAME|FILE.json|measured] [--schedule S] and its knobs\n"
    "                 [--host-mem-gb X] [--max-context] [--rollback-rate R]   (one JSON object: memory, fits, predicted speed)\n"
    "                 [--peer P]  (in place of --schedule)\n"
    "       megatrain plan ... --hardware PROFILE --gpus N [--hosts H]   (N GPUs on each of H hosts, --batch the\n"
    "                 global batch: the closed form per rank, the shared host memory and links; \"ranks\")\n"
    "       megatrain plan ... --hardware PROFILE --tokens-per-day X   (the fewest GPUs, then hosts, whose projected\n"
    "                 tokens/s x 86400 reaches X, --batch rows per GPU; the candidates in \"tokens_per_day\")\n"
    "       megatrain plan ... --compare PROFILE,PROFILE,...   (in place of --hardware: one JSON line per profile,\n"
    "                 each that profile's plan plus \"compare\" (the sim's step, the error band); a table on stderr)\n"
    "       megatrain --version\n"
    "--save writes HF's layout: model.safetensors, or past --shard-size of tensor data (default 5GB: transformers\n"
    "4.x's default, within the Hub's file limits, one shard in memory at a time for tools that load whole files)\n"
    "shards model-00001-of-0000N.safetensors with model.safetensors.index.json; the optimizer state likewise.\n"
    "--model and --resume read both layouts, and F32, BF16 and F16 tensors. A tensor in --model's weights that\n"
    "the model does not use (Qwen2's q/k/v biases under model_type llama, an lm_head.weight beside\n"
    "tie_word_embeddings: true, ...) is an error naming it; --allow-unused-tensors drops them (a --save leaves them out).\n"
    "Each option is given once; eval --steps is at most the --data file's batch windows (the default reads them all).\n"
    "--grad-accum-dtype: a weight gradient computed in token chunks (MLP, LM head) is summed in f32 and rounded to\n"
    "bf16 once (f32), or rounded once per chunk as the official code does (bf16); auto (default): f32 where the\n"
    "device memory plan fits its buffer (`megatrain plan` states which). Paper and mixed precision only.\n"
    "--recompute (megatrain, naive): what the backward recomputes. full (default): every K-th layer input is kept\n"
    "and each layer's forward re-runs; the others keep every layer's input and attention internals and re-run,\n"
    "cheapest first: swiglu: SwiGLU's product; norms: and the RMSNorm outputs (no GEMM either way); mlp: and the\n"
    "MLP's gate/up GEMM; none: nothing. auto: the least recompute whose device plan fits. Same parameters, bitwise.\n"
    "--batch auto (train, plan): the batch, --recompute (unless given), K (1, 2, 4) and --weight-buffers (2, 3)\n"
    "with the most tokens/s within host and device memory (the closed form's best 2 a policy checked in the sim\n"
    "where the profile is a file); plan lists the candidates, train says its choice on stderr (plan needs\n"
    "--hardware; train plans for --hardware under sim, else `measured`).\n"
    "Stdout carries JSON lines when it is a pipe or a file, or with --json; on a terminal, short human lines\n"
    "(the JSON lines to --log FILE only). Progress and errors go to stderr.\n"
    "`megatrain train --help` (eval, plan): that command's options, each with its default and unit; the\n"
    "options in [] have defaults.\n";

// The schedule table's, the backend registry's and the peers' names and summaries (a new
// schedule or backend shows up here by itself).
static void print_tables(void) {
    mt_engine_opts d;
    mt_engine_opts_defaults(&d);
    for (int i = 0; i < mt_schedule_count(); i++) {
        const mt_schedule_desc *s = mt_schedule_at(i);
        if (s->peer) continue; // listed under --peer
        fprintf(stderr, "  %-10s %s%s\n", s->name, s->summary, s == d.schedule ? " (default)" : "");
    }
    fputs("Backends (--backend NAME, auto: the first with a device of its own here, else cpu):\n", stderr);
    for (int i = 0; i < mt_backend_count(); i++) { // the registry's rows (backend/backend.h)
        const mt_backend_entry *b = mt_backend_at(i);
        fprintf(stderr, "  %-10s %s%s\n", b->name, b->summary, b == mt_backend_find("auto") ? " (auto here)" : "");
    }
    fputs("Peers (--peer P; train --backend sim and plan; baselines/PEERS.md):\n", stderr);
    for (int i = 0; i < mt_peer_count(); i++) {
        const mt_peer *p = mt_peer_at(i);
        fprintf(stderr, "  %-16s %s (runs %s by default)\n", p->name, p->summary, mt_precision_name(p->precision));
    }
}

static void print_usage(void) {
    fputs(usage, stderr);
    fputs("Schedules (--schedule S):\n", stderr);
    print_tables();
}

// `megatrain CMD --help`: CMD's own options with their defaults, from the option table.
static const struct {
    const char *cmd, *synopsis, *more;
} cmd_help[] = {
    {"train", "megatrain train --model DIR | --config FILE | --resume DIR [options]\n"
              "Trains a model, streaming its layers from host memory; a JSON line a step (see Output, below).",
     "With --resume, an option left out takes the checkpoint's value (train_state.json), not the default above.\n"},
    {"eval", "megatrain eval --model DIR --data FILE [options]\n"
             "The mean loss of a model over a token file, forward only.", ""},
    {"plan", "megatrain plan --model DIR | --config FILE [options]\n"
             "The memory a configuration needs, whether it fits, and with --hardware its predicted speed.", ""},
};

static void print_cmd_help(const char *cmd) {
    for (size_t i = 0; i < sizeof cmd_help / sizeof *cmd_help; i++) {
        if (strcmp(cmd_help[i].cmd, cmd)) continue;
        fprintf(stderr, "usage: %s\n\nOptions (`--opt value` or `--opt=value`):\n", cmd_help[i].synopsis);
        mt_options_help(stderr, cmd);
        fputs(cmd_help[i].more, stderr);
        fputs("Output: on a terminal, short human lines on stdout and the JSON lines to --log only; piped or with\n"
              "--json, stdout carries the JSON lines. Progress and errors go to stderr.\n",
              stderr);
        fputs("Schedules (--schedule S):\n", stderr);
        print_tables();
    }
}

int mt_cmd_version(void) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "version", MT_VERSION);
    cJSON_AddStringToObject(j, "git_sha", MT_GIT_SHA);
    const char *names[8];
    int n = mt_backend_list(names, 8);
    cJSON *arr = cJSON_AddArrayToObject(j, "backends");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateString(names[i]));
    n = mt_attention_list(names, 8);
    arr = cJSON_AddArrayToObject(j, "attention");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateString(names[i]));
#ifdef MT_HAVE_MPI
    cJSON_AddBoolToObject(j, "mpi", 1); // several hosts under mpirun (engine/hosts.h)
#else
    cJSON_AddBoolToObject(j, "mpi", 0);
#endif
    char *s = cJSON_PrintUnformatted(j);
    printf("%s\n", s);
    free(s);
    cJSON_Delete(j);
    return 0;
}

// A command's result that did not reach stdout (a full disk, a closed pipe) is
// lost: exit 1 saying so rather than 0.
static int stdout_checked(int rc) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
    if (rc == 0)
        fprintf(stderr, "megatrain: error: stdout: write failed: %s\n", mt_write_strerror(errno ? errno : EIO));
    return rc ? rc : 1;
}

static int run(int argc, char **argv) {
    mt_options o;
    mt_options_defaults(&o);
    int asks_about = argc > 1 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "--help") ||
                                  !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"));
    if (!asks_about && mt_env_check_all() != MT_OK) { // the environment is input too: read as strictly as options
        fprintf(stderr, "megatrain: error: %s\n", mt_last_error());
        return 2;
    }
    if (argc == 1) {
        o.data = "embedded";
        o.eng.B = 8;
        o.eng.T = 128;
        o.steps = 150;
        o.lr = 2e-3f;
        o.lr_schedule = "cosine";
        o.warmup = 10;
        return mt_cmd_train(&o, 1);
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--version")) return mt_cmd_version();
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        print_usage();
        return 0;
    }
    if (strcmp(cmd, "train") && strcmp(cmd, "eval") && strcmp(cmd, "plan")) {
        fprintf(stderr, "megatrain: error: unknown command '%s' (expected train, eval, plan or --version)\n", cmd);
        return 2;
    }
    if (mt_options_parse(&o, cmd, argc, argv, 2) != MT_OK) {
        fprintf(stderr, "megatrain: error: %s\n", mt_last_error());
        return 2;
    }
    if (o.help) {
        print_cmd_help(cmd);
        return 0;
    }
    if (!strcmp(cmd, "plan")) return mt_cmd_plan(&o);
    return !strcmp(cmd, "train") ? mt_cmd_train(&o, 0) : mt_cmd_eval(&o);
}

// exit() from a thread other than main's (libgomp's fatal error when it cannot start a
// thread, a library's abort path) would run OpenBLAS's destructor, which joins its workers
// and waits forever: such an exit ends the process at once, its message out first.
static pid_t main_tid;
static void exit_from_any_thread(int status, void *arg) {
    (void)arg;
    if (gettid() == main_tid) return;
    fflush(NULL);
    _exit(status);
}

int main(int argc, char **argv) {
    main_tid = gettid();
    on_exit(exit_from_any_thread, NULL);
    // A closed stdout gives EPIPE, which every write checks, instead of killing
    // the process mid-save (train catches SIGPIPE itself: run_signals.h).
    signal(SIGPIPE, SIG_IGN);
    // Past `ulimit -f` a write fails with EFBIG, which every writer reports naming
    // its file and the limit, instead of SIGXFSZ killing the process mid-save.
    signal(SIGXFSZ, SIG_IGN);
    int rc = 2;
    if (mt_blas_fit_limits(argv) != MT_OK) // before anything else: OpenBLAS may already be spinning
        fprintf(stderr, "megatrain: error: %s\n", mt_last_error());
    else
        rc = stdout_checked(run(argc, argv));
    mt_blas_fit_note(rc);
    if (mt_blas_vm_limited()) { // a worker the user's OPENBLAS_NUM_THREADS left spinning would hold exit's join forever
        fflush(NULL);
        _exit(rc);
    }
    return rc;
}
