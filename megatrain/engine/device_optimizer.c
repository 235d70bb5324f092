// device_optimizer.c: the split's choice, the chosen units' device state and its step.
#include "engine/device_optimizer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_call.h"

mt_status mt_devopt_parse(const char *s, int *out) {
    if (!strcmp(s, "auto")) return *out = MT_DEVOPT_AUTO, MT_OK;
    if (!strcmp(s, "off")) return *out = MT_DEVOPT_OFF, MT_OK;
    char *end;
    errno = 0;
    long n = strtol(s, &end, 10);
    if (!*s || *end || errno || n < 0 || n > 1000000)
        return mt_fail(MT_ERR_ARG, "--device-optimizer %s: give auto, off, or a number of units (0 = off)", s);
    *out = (int)n;
    return MT_OK;
}

size_t mt_devopt_unit_bytes(const mt_unit_layout *lay, mt_precision p) {
    size_t ws = mt_dtype_size(mt_precision_wdt(p));
    return lay->numel * (2 * ws + 8 + (p == MT_PREC_MIXED ? 4 : 0));
}

void mt_devopt_order(int L, int *order) {
    int k = 0;
    order[k++] = 0;     // the embedding
    order[k++] = L + 1; // the head
    for (int i = 0; i < L; i++) order[k++] = 1 + i;
}

int mt_devopt_choose(const mt_config *c, mt_precision p, int want, size_t spare_bytes, unsigned char *on,
                     size_t *bytes) {
    mt_unit_layout le, ll, lh;
    mt_layout_build(c, &le, &ll, &lh);
    int L = c->num_layers, n = L + 2, chosen = 0;
    int order[n];
    mt_devopt_order(L, order);
    memset(on, 0, (size_t)n);
    size_t used = 0;
    for (int k = 0; k < n && (want == MT_DEVOPT_AUTO || chosen < want); k++) {
        int u = order[k];
        const mt_unit_layout *lay = u == 0 ? &le : u == n - 1 ? &lh : &ll;
        size_t b = mt_devopt_unit_bytes(lay, p);
        if (want == MT_DEVOPT_AUTO && used + b > spare_bytes) break;
        on[u] = 1;
        used += b;
        chosen++;
    }
    if (bytes) *bytes = used;
    return chosen;
}

// One unit's device state: weights, gradient sum, m, v, master (mixed), numel each.
typedef struct {
    void *p, *g;
    float *m, *v, *master;
} dev_unit;

struct mt_devopt {
    mt_model *m;
    mt_backend *be;
    unsigned char *on;
    int count;
    size_t bytes;
    dev_unit *u;
};

static mt_status dev_alloc(mt_backend *be, size_t bytes, void **out) { return mt_backend_dev_alloc(be, bytes ? bytes : 4, out); }

mt_status mt_devopt_create(mt_model *m, mt_backend *be, const unsigned char *on, mt_devopt **out) {
    *out = NULL;
    int n = m->n_units, count = 0;
    for (int u = 0; u < n; u++) count += on[u] != 0;
    if (!count) return MT_OK;
    if (!mt_backend_supports(be, MT_OP_ADAMW))
        return mt_fail(MT_ERR_UNSUPPORTED, "--device-optimizer: the %s backend has no device AdamW; use off",
                       be->ops->name);
    mt_devopt *d = calloc(1, sizeof *d);
    if (!d) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the device optimizer");
    *out = d;
    d->m = m, d->be = be, d->count = count;
    d->on = malloc((size_t)n);
    d->u = calloc((size_t)n, sizeof *d->u);
    if (!d->on || !d->u) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the device optimizer");
    memcpy(d->on, on, (size_t)n);
    size_t ws = mt_dtype_size(m->wdt);
    for (int i = 0; i < n; i++) {
        if (!on[i]) continue;
        mt_unit *x = &m->units[i];
        dev_unit *y = &d->u[i];
        size_t k = x->lay->numel;
        d->bytes += mt_devopt_unit_bytes(x->lay, m->prec);
        MT_TRY(dev_alloc(be, k * ws, &y->p));
        MT_TRY(dev_alloc(be, k * ws, &y->g));
        MT_TRY(dev_alloc(be, k * 4, (void **)&y->m));
        MT_TRY(dev_alloc(be, k * 4, (void **)&y->v));
        if (x->master) MT_TRY(dev_alloc(be, k * 4, (void **)&y->master));
        // The host state is the loaded (or initial, or resumed) one: the device starts from it.
        MT_TRY(mt_backend_copy(be, y->p, x->param, k * ws, MT_COPY_H2D, MT_STREAM_H2D));
        MT_TRY(mt_backend_copy(be, y->m, x->m, k * 4, MT_COPY_H2D, MT_STREAM_H2D));
        MT_TRY(mt_backend_copy(be, y->v, x->v, k * 4, MT_COPY_H2D, MT_STREAM_H2D));
        if (x->master) MT_TRY(mt_backend_copy(be, y->master, x->master, k * 4, MT_COPY_H2D, MT_STREAM_H2D));
    }
    return mt_backend_stream_sync(be, MT_STREAM_H2D);
}

void mt_devopt_destroy(mt_devopt *d) {
    if (!d) return;
    if (d->u) {
        (void)mt_backend_stream_sync(d->be, MT_STREAM_H2D);
        for (int i = 0; i < d->m->n_units; i++) {
            dev_unit *y = &d->u[i];
            void *bufs[5] = {y->p, y->g, y->m, y->v, y->master};
            for (int k = 0; k < 5; k++)
                if (bufs[k]) mt_backend_dev_free(d->be, bufs[k]);
        }
    }
    free(d->u);
    free(d->on);
    free(d);
}

int mt_devopt_on_device(const mt_devopt *d, int u) { return d && d->on[u]; }
const unsigned char *mt_devopt_mask(const mt_devopt *d) { return d ? d->on : NULL; }
int mt_devopt_count(const mt_devopt *d) { return d ? d->count : 0; }
size_t mt_devopt_bytes(const mt_devopt *d) { return d ? d->bytes : 0; }

// As the host's real_adamw: tensor by tensor, decay only on tensors of 2 or more dimensions.
mt_status mt_devopt_step(mt_devopt *d, const mt_adamw_hparams *h, float weight_decay, int skip) {
    if (!d || skip) return MT_OK;
    mt_backend *be = d->be;
    size_t ws = mt_dtype_size(d->m->wdt);
    for (int i = 0; i < d->m->n_units; i++) {
        if (!d->on[i]) continue;
        mt_unit *x = &d->m->units[i];
        dev_unit *y = &d->u[i];
        size_t k = x->lay->numel;
        MT_TRY(mt_backend_copy(be, y->g, x->grad, k * ws, MT_COPY_H2D, MT_STREAM_H2D));
        for (int t = 0; t < MT_T_COUNT; t++) {
            const mt_tensor_slot *v = &x->lay->t[t];
            if (!v->present) continue;
            float wd = v->ndim >= 2 ? weight_decay : 0.0f;
            mt_adamw_state s = {.p = (char *)y->p + v->offset * ws, .m = y->m + v->offset, .v = y->v + v->offset,
                                .master = y->master ? y->master + v->offset : NULL};
            MT_TRY(mt_backend_adamw(be, &s, d->m->wdt, (char *)y->g + v->offset * ws, d->m->wdt, v->numel, h, wd,
                                    MT_STREAM_H2D));
        }
        // The next step's loads of this unit are on this stream: they follow the copy back.
        MT_TRY(mt_backend_copy(be, x->param, y->p, k * ws, MT_COPY_D2H, MT_STREAM_H2D));
    }
    return MT_OK;
}

mt_status mt_devopt_copy_out(mt_devopt *d) {
    if (!d) return MT_OK;
    mt_backend *be = d->be;
    for (int i = 0; i < d->m->n_units; i++) {
        if (!d->on[i]) continue;
        mt_unit *x = &d->m->units[i];
        dev_unit *y = &d->u[i];
        size_t k = x->lay->numel;
        MT_TRY(mt_backend_copy(be, x->m, y->m, k * 4, MT_COPY_D2H, MT_STREAM_H2D));
        MT_TRY(mt_backend_copy(be, x->v, y->v, k * 4, MT_COPY_D2H, MT_STREAM_H2D));
        if (y->master) MT_TRY(mt_backend_copy(be, x->master, y->master, k * 4, MT_COPY_D2H, MT_STREAM_H2D));
    }
    return mt_backend_stream_sync(be, MT_STREAM_H2D);
}
