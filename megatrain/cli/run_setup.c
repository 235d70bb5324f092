// run_setup.c: config sources, backend choice, JSON-lines sink.
#include "backend/backend_registry.h"
#include "cli/run_setup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/sim/sim.h"
#include "core/file_io.h"
#include "engine/hosts.h"
#include "core/out_file.h"
#include "model/hardware_profile.h"

void mt_default_config(mt_config *c) {
    memset(c, 0, sizeof *c);
    c->arch = MT_ARCH_LLAMA;
    c->vocab_size = 256;
    c->hidden_size = 128;
    c->intermediate_size = 352;
    c->num_layers = 4;
    c->num_heads = 4;
    c->num_kv_heads = 2;
    c->head_dim = 32;
    c->max_position_embeddings = 1024;
    c->rms_norm_eps = 1e-5f;
    c->rope_theta = 10000.0;
    c->tie_word_embeddings = 1;
    c->torch_dtype = MT_F32;
    c->bos_token_id = c->eos_token_id = -1;
}

mt_status mt_setup_config(const mt_options *o, mt_config *c, int allow_default) {
    char path[1100];
    if (o->model) snprintf(path, sizeof path, "%s/config.json", o->model);
    else if (o->resume) snprintf(path, sizeof path, "%s/config.json", o->resume);
    else if (o->config) snprintf(path, sizeof path, "%s", o->config);
    else if (allow_default) {
        mt_default_config(c);
        return MT_OK;
    } else
        return mt_fail(MT_ERR_ARG, "missing --model DIR, --config FILE or --resume DIR");
    return mt_config_load(path, c);
}

mt_status mt_setup_backend(const char *name, const char *hardware, mt_precision p, mt_backend **out) {
    return mt_setup_backend_on(name, hardware, p, 0, out);
}

mt_status mt_setup_backend_on(const char *name, const char *hardware, mt_precision p, int device, mt_backend **out) {
    // bf16 activations unless the precision is fp32 or the backend computes in f32 only
    unsigned caps = mt_backend_caps_of(name);
    mt_backend_args a = {p != MT_PREC_FP32 && (caps & MT_CAP_BF16) ? MT_BF16 : MT_F32, NULL, device};
    char path[4096]; // a path, or a profile name looked up in experiments/hardware/
    if (caps & MT_CAP_VIRTUAL_TIME) { // a simulator is made with the machine it prices
        if (!hardware) return mt_fail(MT_ERR_ARG, "--backend %s: needs --hardware PROFILE (see experiments/hardware/)", name);
        MT_TRY(mt_hw_profile_find(hardware, path, sizeof path));
        a.profile_path = path;
    }
    return mt_backend_create_with(name, &a, out);
}

mt_status mt_setup_peer(const char *peer, mt_precision p, mt_backend *be, mt_peer_rate *rate) {
    if (!peer) return MT_OK;
    const mt_peer *pe;
    MT_TRY(mt_peer_find(peer, &pe));
    const mt_hw_profile *hw = mt_sim_profile_of(be);
    if (!hw) return mt_fail(MT_ERR_ARG, "--peer %s: needs --backend sim (its costs are priced, not run)", peer);
    mt_hw_profile adj;
    MT_TRY(mt_peer_profile(pe, p, hw, &adj, rate));
    MT_TRY(mt_sim_set_attention_kernel(be, mt_peer_schedule(pe)->attention_kernel));
    return mt_sim_set_profile(be, &adj);
}

mt_status mt_setup_attention(mt_backend *be, const char *attention) {
    mt_attn_impl impl;
    MT_TRY(mt_attn_impl_parse(attention, &impl));
    return mt_backend_set_attention(be, impl);
}

void mt_note_unused(const mt_load_report *rep) {
    if (rep->n_unused)
        fprintf(stderr, "megatrain: note: %s; dropped (--allow-unused-tensors): the run and any --save go without them\n",
                rep->unused);
}

// Under mpirun stdout is mpirun's forwarding (a pty of its own, even when piped on): never a person's.
int mt_json_on_stdout(const mt_options *o) { return o->json || !isatty(STDOUT_FILENO) || mt_hosts_launched(); }

mt_status mt_sink_open(mt_sink *s, const char *log_path, int append, int to_stdout) {
    memset(s, 0, sizeof *s);
    s->log_path = log_path;
    s->to_stdout = to_stdout;
    if (!log_path) return MT_OK;
    char dest[MT_OUT_PATH_MAX];
    int in_place;
    MT_TRY(mt_out_resolve("--log", log_path, MT_OUT_STREAM, dest, sizeof dest, &in_place));
    s->log = fopen(dest, append ? "a" : "w");
    if (!s->log) return mt_fail(MT_ERR_IO, "--log %s: cannot open for writing: %s", log_path, strerror(errno));
    return MT_OK;
}

// One line to f, flushed: 0, or the errno of the write that failed.
static int put_line(FILE *f, const char *json) {
    errno = 0;
    if (fputs(json, f) < 0 || fputc('\n', f) == EOF || fflush(f) != 0) return errno ? errno : EIO;
    return 0;
}

mt_status mt_sink_line(mt_sink *s, const char *json) {
    if (s->to_stdout && !s->stdout_errno) s->stdout_errno = put_line(stdout, json);
    if (s->log && !s->log_errno) s->log_errno = put_line(s->log, json);
    if (s->stdout_errno)
        return mt_fail(MT_ERR_IO, "stdout: write failed: %s%s", mt_write_strerror(s->stdout_errno),
                       s->stdout_errno == EPIPE ? " (its reader closed it)" : "");
    if (s->log_errno)
        return mt_fail(MT_ERR_IO, "--log %s: write failed: %s", s->log_path, mt_write_strerror(s->log_errno));
    return MT_OK;
}

mt_status mt_sink_close(mt_sink *s) {
    if (!s->log) return MT_OK;
    errno = 0;
    struct stat sb;
    int err = s->log_errno;
    if (!err && fflush(s->log) != 0) err = errno ? errno : EIO;
    if (!err && fstat(fileno(s->log), &sb) == 0 && S_ISREG(sb.st_mode) && fsync(fileno(s->log)) != 0) err = errno;
    if (fclose(s->log) != 0 && !err) err = errno ? errno : EIO;
    s->log = NULL;
    if (err && !s->log_errno) {
        s->log_errno = err;
        return mt_fail(MT_ERR_IO, "--log %s: write failed: %s", s->log_path, mt_write_strerror(err));
    }
    return MT_OK;
}

void mt_run_release(const mt_run_parts *p) {
    free(p->inputs);
    free(p->targets);
    if (p->sink) (void)mt_sink_close(p->sink); // a run that got here by an error has said why
    if (p->eng) mt_engine_destroy(p->eng);
    if (p->model) mt_model_free(p->model);
    for (int r = 0; r < p->n_more_be; r++) mt_backend_destroy(p->more_be[r]); // after the engine that used them
    if (p->be) mt_backend_destroy(p->be);
    if (p->data) mt_data_free(p->data);
}
