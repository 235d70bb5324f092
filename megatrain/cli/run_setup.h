// run_setup.h: what train and eval share: reading the model config from
// whichever source the options name, creating the backend with the right
// activation type, and emitting JSON lines on stdout (and the --log file).
#ifndef MT_RUN_SETUP_H
#define MT_RUN_SETUP_H

#include <stdio.h>

#include "backend/backend.h"
#include "cli/options.h"
#include "data/dataloader.h"
#include "engine/engine.h"
#include "engine/host_state.h"
#include "engine/model_io.h"
#include "engine/peer.h"

// The embedded default model: a tiny byte-level Llama.
void mt_default_config(mt_config *c);
// Config from --model DIR, --config FILE or --resume DIR (exactly one set, or `fallback`).
mt_status mt_setup_config(const mt_options *o, mt_config *c, int allow_default);
// Backend by name; activations bf16 where the backend has them (MT_CAP_BF16) unless precision is fp32.
// `hardware` names the profile the sim backend prices ops with.
mt_status mt_setup_backend(const char *name, const char *hardware, mt_precision p, mt_backend **out);
// The same on the backend's device `device` (--gpus N: rank r's).
mt_status mt_setup_backend_on(const char *name, const char *hardware, mt_precision p, int device, mt_backend **out);
// --peer NAME on a sim backend: it prices with the peer's profile (its optimizer's
// rate, engine/peer.h); rate (may be NULL) says what that rate is and where it came from.
mt_status mt_setup_peer(const char *peer, mt_precision p, mt_backend *be, mt_peer_rate *rate);
// --attention auto|native|cudnn on the created backend (backend.h mt_backend_set_attention).
mt_status mt_setup_attention(mt_backend *be, const char *attention);

// With --allow-unused-tensors: one stderr note naming the tensors the load dropped.
void mt_note_unused(const mt_load_report *rep);

// JSON-lines sink: stdout (unless a person reads it: mt_json_on_stdout) plus an
// optional log file. Every write is checked: a
// line that did not reach stdout or the log is an error naming which and why,
// and a destination that failed once is written no more (its errno is kept:
// EPIPE on stdout means its reader went away).
typedef struct {
    FILE *log;
    const char *log_path;
    int stdout_errno, log_errno; // 0 while the destination takes every line
    int to_stdout;               // the JSON lines go to stdout too
} mt_sink;
// Whether stdout takes the JSON lines: it is not a terminal (a pipe, a file: a
// program reads it), or --json, or the run is under mpirun. On a terminal a person reads it: train and eval
// print short human lines there and the JSON lines go to --log only.
int mt_json_on_stdout(const mt_options *o);
// The log: opened in place (truncated, or appended to on a resume), a symlink
// followed, a device or FIFO written through (core/out_file.h).
mt_status mt_sink_open(mt_sink *s, const char *log_path, int append, int to_stdout);
mt_status mt_sink_line(mt_sink *s, const char *json);
// Flushes, syncs and closes the log, checking each.
mt_status mt_sink_close(mt_sink *s);

// Everything a train or eval run holds, released in reverse order of creation
// (NULL / zeroed members are skipped).
typedef struct {
    mt_backend *be;
    mt_model *model;
    mt_engine *eng;
    mt_data *data;
    mt_sink *sink;
    void *inputs, *targets;
    mt_backend **more_be; // --gpus N: ranks 1..N-1's backends (n_more_be of them; entries may be NULL)
    int n_more_be;
} mt_run_parts;
void mt_run_release(const mt_run_parts *p);

#endif
