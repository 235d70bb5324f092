// run_setup.c: config sources, backend choice, JSON-lines sink.
#include "cli/run_setup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/sim/sim.h"
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
    // bf16 activations unless the precision is fp32 or the backend computes in f32 only
    mt_dtype act = p != MT_PREC_FP32 && (mt_backend_caps_of(name) & MT_CAP_BF16) ? MT_BF16 : MT_F32;
    if (!strcmp(name, "sim")) { // the simulator is made with the machine it prices
        if (!hardware) return mt_fail(MT_ERR_ARG, "--backend sim: needs --hardware PROFILE (see experiments/hardware/)");
        char path[4096]; // a path, or a profile name looked up in experiments/hardware/
        MT_TRY(mt_hw_profile_find(hardware, path, sizeof path));
        return mt_backend_sim_create(path, act, out);
    }
    return mt_backend_create(name, act, out);
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

mt_status mt_sink_open(mt_sink *s, const char *log_path, int append) {
    s->log = NULL;
    if (!log_path) return MT_OK;
    s->log = fopen(log_path, append ? "a" : "w");
    if (!s->log) return mt_fail(MT_ERR_IO, "--log %s: cannot open for writing: %s", log_path, strerror(errno));
    return MT_OK;
}

void mt_sink_line(mt_sink *s, const char *json) {
    fprintf(stdout, "%s\n", json);
    fflush(stdout);
    if (s->log) {
        fprintf(s->log, "%s\n", json);
        fflush(s->log);
    }
}

void mt_sink_close(mt_sink *s) {
    if (s->log) fclose(s->log);
    s->log = NULL;
}

void mt_run_release(const mt_run_parts *p) {
    free(p->inputs);
    free(p->targets);
    if (p->sink) mt_sink_close(p->sink);
    if (p->eng) mt_engine_destroy(p->eng);
    if (p->model) mt_model_free(p->model);
    if (p->be) mt_backend_destroy(p->be);
    if (p->data) mt_data_free(p->data);
}
