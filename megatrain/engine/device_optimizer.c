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

// One unit's device state: weights, gradient sum, m, v, master (mixed), numel each; the sum of squares.
typedef struct {
    void *p, *g;
    float *m, *v, *master;
    double *sq;
} dev_unit;

struct mt_devopt {
    mt_model *m;
    mt_backend *be;
    mt_stream_id stream;
    unsigned char *on;
    int count;
    size_t bytes;
    dev_unit *u;
    mt_event *grads_done; // the compute stream has summed and squared the step's gradients
};

static mt_status dev_alloc(mt_backend *be, size_t bytes, void **out) {
    return mt_backend_dev_alloc(be, bytes ? bytes : 4, out);
}

// Copies between a unit's host blocks and its device state, on the update's stream.
static mt_status copy_state(mt_devopt *d, mt_unit *x, dev_unit *y, mt_copy_kind kind) {
    size_t k = x->lay->numel, ws = mt_dtype_size(d->m->wdt);
    void *pairs[4][2] = {{y->p, x->param}, {y->m, x->m}, {y->v, x->v}, {y->master, x->master}};
    size_t bytes[4] = {k * ws, k * 4, k * 4, k * 4};
    for (int i = 0; i < 4; i++) {
        if (!pairs[i][0]) continue;
        void *dst = kind == MT_COPY_H2D ? pairs[i][0] : pairs[i][1],
             *src = kind == MT_COPY_H2D ? pairs[i][1] : pairs[i][0];
        MT_TRY(mt_backend_copy(d->be, dst, src, bytes[i], kind, d->stream));
    }
    return MT_OK;
}

mt_status mt_devopt_create(mt_model *m, mt_backend *be, const unsigned char *on, mt_stream_id stream,
                           mt_devopt **out) {
    *out = NULL;
    int n = m->n_units, count = 0;
    for (int u = 0; u < n; u++) count += on[u] != 0;
    if (!count) return MT_OK;
    if (!mt_backend_supports(be, MT_OP_ADAMW) || !mt_backend_supports(be, MT_OP_GRAD_ADD) ||
        !mt_backend_supports(be, MT_OP_GRAD_SUMSQ))
        return mt_fail(MT_ERR_UNSUPPORTED, "--device-optimizer: the %s backend has no device AdamW; use off",
                       mt_backend_name(be));
    mt_devopt *d = calloc(1, sizeof *d);
    if (!d) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the device optimizer");
    *out = d;
    d->m = m, d->be = be, d->count = count, d->stream = stream;
    d->on = malloc((size_t)n);
    d->u = calloc((size_t)n, sizeof *d->u);
    if (!d->on || !d->u) return mt_fail(MT_ERR_MEMORY, "host memory: cannot allocate the device optimizer");
    memcpy(d->on, on, (size_t)n);
    MT_TRY(mt_backend_event_create(be, &d->grads_done));
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
        MT_TRY(dev_alloc(be, sizeof(double), (void **)&y->sq));
        if (x->master) MT_TRY(dev_alloc(be, k * 4, (void **)&y->master));
        // The host state is the loaded (or initial, or resumed) one: the device starts from it.
        MT_TRY(copy_state(d, x, y, MT_COPY_H2D));
    }
    return mt_backend_stream_sync(be, stream);
}

void mt_devopt_destroy(mt_devopt *d) {
    if (!d) return;
    (void)mt_backend_stream_sync(d->be, d->stream);
    for (int i = 0; d->u && i < d->m->n_units; i++) {
        dev_unit *y = &d->u[i];
        void *bufs[6] = {y->p, y->g, y->m, y->v, y->master, y->sq};
        for (int k = 0; k < 6; k++)
            if (bufs[k]) mt_backend_dev_free(d->be, bufs[k]);
    }
    mt_backend_event_destroy(d->be, d->grads_done);
    free(d->u);
    free(d->on);
    free(d);
}

int mt_devopt_on_device(const mt_devopt *d, int u) { return d && d->on[u]; }
const unsigned char *mt_devopt_mask(const mt_devopt *d) { return d ? d->on : NULL; }
int mt_devopt_count(const mt_devopt *d) { return d ? d->count : 0; }
size_t mt_devopt_bytes(const mt_devopt *d) { return d ? d->bytes : 0; }
const void *mt_devopt_param(const mt_devopt *d, int u) { return mt_devopt_on_device(d, u) ? d->u[u].p : NULL; }
const float *mt_devopt_master(const mt_devopt *d, int u) { return mt_devopt_on_device(d, u) ? d->u[u].master : NULL; }

mt_status mt_devopt_grad_in(mt_devopt *d, int u, const void *dev_grad, int mb, int G) {
    dev_unit *y = &d->u[u];
    size_t k = d->m->units[u].lay->numel;
    mt_dtype t = d->m->wdt;
    if (mb == 0) MT_TRY(mt_backend_copy(d->be, y->g, dev_grad, k * mt_dtype_size(t), MT_COPY_D2D, MT_STREAM_COMPUTE));
    else MT_TRY(mt_backend_grad_add(d->be, y->g, dev_grad, t, k, MT_STREAM_COMPUTE));
    if (mb == G - 1) MT_TRY(mt_backend_grad_sumsq(d->be, y->sq, y->g, t, k, MT_STREAM_COMPUTE));
    return MT_OK;
}

mt_status mt_devopt_sumsq(mt_devopt *d, double *sumsq) {
    if (!d) return MT_OK;
    for (int i = 0; i < d->m->n_units; i++)
        if (d->on[i])
            MT_TRY(mt_backend_copy(d->be, &sumsq[i], d->u[i].sq, sizeof(double), MT_COPY_D2H, MT_STREAM_COMPUTE));
    MT_TRY(mt_backend_event_record(d->be, d->grads_done, MT_STREAM_COMPUTE));
    return mt_backend_event_sync(d->be, d->grads_done);
}

// As the host's real_adamw: tensor by tensor, decay only on tensors of 2 or more dimensions.
mt_status mt_devopt_step(mt_devopt *d, const mt_adamw_hparams *h, float weight_decay, int skip) {
    if (!d || skip) return MT_OK;
    mt_backend *be = d->be;
    size_t ws = mt_dtype_size(d->m->wdt);
    MT_TRY(mt_backend_stream_wait(be, d->stream, d->grads_done));
    for (int i = 0; i < d->m->n_units; i++) { // forward order: the next step loads the embedding first
        if (!d->on[i]) continue;
        const mt_unit_layout *lay = d->m->units[i].lay;
        dev_unit *y = &d->u[i];
        for (int t = 0; t < MT_T_COUNT; t++) {
            const mt_tensor_slot *v = &lay->t[t];
            if (!v->present) continue;
            float wd = v->ndim >= 2 ? weight_decay : 0.0f;
            mt_adamw_state s = {.p = (char *)y->p + v->offset * ws, .m = y->m + v->offset, .v = y->v + v->offset,
                                .master = y->master ? y->master + v->offset : NULL};
            MT_TRY(mt_backend_adamw(be, &s, d->m->wdt, (char *)y->g + v->offset * ws, d->m->wdt, v->numel, h, wd,
                                    d->stream));
        }
    }
    return MT_OK;
}

mt_status mt_devopt_copy_out(mt_devopt *d) {
    if (!d) return MT_OK;
    for (int i = 0; i < d->m->n_units; i++)
        if (d->on[i]) MT_TRY(copy_state(d, &d->m->units[i], &d->u[i], MT_COPY_D2H));
    return mt_backend_stream_sync(d->be, d->stream);
}
