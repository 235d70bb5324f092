// host_state.c: allocation of the per-unit host blocks and the budget check.
#include "engine/host_state.h"

#include "core/bytes_text.h"
#include "core/host_mem.h"
#include "engine/host_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define PAGE 4096

static size_t page_up(size_t x) { return (x + PAGE - 1) / PAGE * PAGE; }

mt_status mt_precision_parse(const char *s, mt_precision *out) {
    if (!strcmp(s, "paper")) *out = MT_PREC_PAPER;
    else if (!strcmp(s, "mixed")) *out = MT_PREC_MIXED;
    else if (!strcmp(s, "fp32")) *out = MT_PREC_FP32;
    else return mt_fail(MT_ERR_ARG, "--precision: unknown value '%s' (expected paper, mixed or fp32)", s);
    return MT_OK;
}

const char *mt_precision_name(mt_precision p) {
    return p == MT_PREC_PAPER ? "paper" : p == MT_PREC_MIXED ? "mixed" : "fp32";
}

mt_dtype mt_precision_wdt(mt_precision p) { return p == MT_PREC_FP32 ? MT_F32 : MT_BF16; }

size_t mt_precision_bytes_per_param(mt_precision p) { return p == MT_PREC_PAPER ? 12 : 16; }

size_t mt_unit_weights_bytes(const mt_unit_layout *lay, mt_precision p) {
    return page_up(lay->numel * mt_dtype_size(mt_precision_wdt(p)));
}

size_t mt_unit_param_bytes(const mt_unit_layout *lay, mt_precision p) { return 2 * mt_unit_weights_bytes(lay, p); }

size_t mt_unit_optim_bytes(const mt_unit_layout *lay, mt_precision p) {
    return (p == MT_PREC_MIXED ? 3 : 2) * page_up(lay->numel * 4);
}

static int sliced(const mt_state_slice *sl) { return sl && sl->H > 1; }

// One array of n elements of es bytes as a host keeps it: whole, or host 0's slice (the longest)
// and one page more for a slice that starts inside a page.
static size_t slice_bytes(size_t n, size_t es, const mt_state_slice *sl) {
    if (!sliced(sl)) return page_up(n * es);
    size_t off, cnt;
    mt_host_shard_range(n, sl->H, 0, &off, &cnt);
    return page_up(cnt * es) + PAGE;
}

// A unit's blocks as this host keeps them (sl NULL: whole): the pinned ones alone, or all.
static size_t unit_bytes(const mt_unit_layout *lay, mt_precision p, const mt_state_slice *sl, int pinned_only) {
    size_t ws = mt_dtype_size(mt_precision_wdt(p)), n = lay->numel;
    int grads_sliced = sliced(sl) && sl->grads; // then pageable
    size_t params = page_up(n * ws), grads = slice_bytes(n, ws, grads_sliced ? sl : NULL);
    if (pinned_only) return params + (grads_sliced ? 0 : grads);
    return params + grads + (p == MT_PREC_MIXED ? 3 : 2) * slice_bytes(n, 4, sl);
}

static size_t model_bytes(const mt_config *c, mt_precision p, const mt_state_slice *sl, int pinned_only) {
    mt_unit_layout e, l, h;
    mt_layout_build(c, &e, &l, &h);
    return unit_bytes(&e, p, sl, pinned_only) + (size_t)c->num_layers * unit_bytes(&l, p, sl, pinned_only) +
           unit_bytes(&h, p, sl, pinned_only);
}

size_t mt_model_pinned_bytes(const mt_config *c, mt_precision p) { return model_bytes(c, p, NULL, 1); }
size_t mt_model_host_bytes(const mt_config *c, mt_precision p) { return model_bytes(c, p, NULL, 0); }

size_t mt_model_host_bytes_sliced(const mt_config *c, mt_precision p, const mt_state_slice *sl) {
    return model_bytes(c, p, sl, 0);
}

size_t mt_model_pinned_bytes_sliced(const mt_config *c, mt_precision p, const mt_state_slice *sl) {
    return model_bytes(c, p, sl, 1);
}

mt_status mt_host_budget_check(size_t need, size_t avail, int pinned, const char *what) {
    if (avail && need > avail)
        return mt_fail(
            MT_ERR_MEMORY,
            "host memory: %s needs %s but only %s is available (MemAvailable, or the simulated machine's); "
            "try --precision paper, a smaller model, or `megatrain plan`",
            what, mt_bytes_format(need).s, mt_bytes_format(avail).s);
    struct rlimit rl;
    if (pinned && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && need > rl.rlim_cur &&
        geteuid() != 0) // root has CAP_IPC_LOCK and is not bound by the limit
        return mt_fail(MT_ERR_MEMORY,
                       "host memory: %s needs %s pinned but the locked-memory limit (ulimit -l) is %s; "
                       "raise it with `ulimit -l unlimited`",
                       what, mt_bytes_format(need).s, mt_bytes_format((size_t)rl.rlim_cur).s);
    return MT_OK;
}

mt_status mt_model_alloc(mt_model *m, const mt_config *c, mt_precision p, mt_backend *be) {
    return mt_model_alloc_ex(m, c, p, be, 1);
}

mt_status mt_model_alloc_ex(mt_model *m, const mt_config *c, mt_precision p, mt_backend *be, int pinned) {
    return mt_model_alloc_sliced(m, c, p, be, pinned, NULL);
}

// A block of the sliced state: mapped, its pages made by the first write of this host's slice.
static mt_status alloc_sliced(mt_model *m, size_t bytes, int pinned, int lazy, void **out) {
    return lazy ? mt_host_mem_map(bytes, out) : m->host.alloc(&m->host, bytes, pinned, out);
}

mt_status mt_model_alloc_sliced(mt_model *m, const mt_config *c, mt_precision p, mt_backend *be, int pinned,
                                const mt_state_slice *sl) {
    memset(m, 0, sizeof *m);
    m->slice = sliced(sl) ? *sl : (mt_state_slice){.H = 1};
    const int lazy = m->slice.H > 1;
    m->pinned = pinned;
    m->cfg = *c;
    m->prec = p;
    m->wdt = mt_precision_wdt(p);
    m->be = be;
    m->host = mt_host_work_for(be);
    mt_layout_build(c, &m->lay_embed, &m->lay_layer, &m->lay_head);
    char what[160];
    snprintf(what, sizeof what, "the model state (%lld params x %zu B/param, %s precision)",
             mt_config_params_total(c), mt_precision_bytes_per_param(p), mt_precision_name(p));
    mt_device_info info;
    MT_TRY(mt_backend_device_info(be, &info));
    MT_TRY(mt_host_budget_check(mt_model_host_bytes_sliced(c, p, sl), info.host_mem_avail_bytes, 0, what));
    if (m->pinned && mt_backend_has(be, MT_CAP_PAGE_LOCKED))
        MT_TRY(mt_host_budget_check(mt_model_pinned_bytes_sliced(c, p, sl), info.host_mem_avail_bytes, 1,
                                    "the pinned parameters and gradients"));

    m->n_units = c->num_layers + 2;
    m->units = calloc((size_t)m->n_units, sizeof *m->units);
    if (!m->units) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the unit table");
    for (int i = 0; i < m->n_units; i++) {
        mt_unit *u = &m->units[i];
        u->lay = i == 0 ? &m->lay_embed : i == m->n_units - 1 ? &m->lay_head : &m->lay_layer;
        u->layer = (i == 0 || i == m->n_units - 1) ? -1 : i - 1;
        u->param_bytes = mt_unit_weights_bytes(u->lay, p);
        u->optim_bytes = mt_unit_optim_bytes(u->lay, p);
        mt_status s = m->host.alloc(&m->host, u->param_bytes, m->pinned, &u->param_block);
        if (s == MT_OK) s = alloc_sliced(m, u->param_bytes, m->pinned, lazy && m->slice.grads, &u->grad_block);
        if (s == MT_OK) s = alloc_sliced(m, u->optim_bytes, 0, lazy, &u->optim_block);
        if (s != MT_OK) {
            mt_model_free(m);
            return s;
        }
        u->grad = u->grad_block;
        mt_unit_bind(u, p);
    }
    return MT_OK;
}

mt_adamw_state mt_unit_state_in(const mt_unit_layout *lay, mt_precision p, void *param_block, void *optim_block) {
    size_t n = lay->numel;
    char *b = optim_block;
    return (mt_adamw_state){.p = param_block, .m = (float *)b, .v = (float *)(b + page_up(n * 4)),
                            .master = p == MT_PREC_MIXED ? (float *)(b + 2 * page_up(n * 4)) : NULL};
}

void mt_unit_bind(mt_unit *u, mt_precision p) {
    mt_adamw_state s = mt_unit_state_in(u->lay, p, u->param_block, u->optim_block);
    u->param = s.p, u->m = s.m, u->v = s.v, u->master = s.master;
}

void mt_model_free(mt_model *m) {
    if (m->units) {
        for (int i = 0; i < m->n_units; i++) {
            mt_unit *u = &m->units[i];
            m->host.free(&m->host, u->param_block, u->param_bytes, m->pinned);
            m->host.free(&m->host, u->grad_block, u->param_bytes, m->pinned && !m->slice.grads); // sliced: mapped
            m->host.free(&m->host, u->optim_block, u->optim_bytes, 0);
        }
        free(m->units);
    }
    m->units = NULL;
    m->n_units = 0;
}

int mt_unit_tensors(const mt_model *m, const mt_unit *u, mt_tensor_id *ids, int cap) {
    (void)m;
    int n = 0;
    for (int t = 0; t < MT_T_COUNT && n < cap; t++)
        if (u->lay->t[t].present) ids[n++] = (mt_tensor_id)t;
    return n;
}
