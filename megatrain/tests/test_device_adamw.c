// test_device_adamw.c: the device's share of the optimizer (backend.h adamw, grad_sumsq)
// on every backend here that computes (cpu in CI; cuda on a GPU machine): three steps of
// AdamW on state in the backend's memory leave p, m, v and the master BITWISE what the
// host's reference (mt_adamw_update_ref) leaves, in every precision mode, with a clip
// factor, decay on and off and both lerp branches; the sum of squares is bitwise
// mt_grad_sumsq's over several blocks, the gradient add mt_grad_accumulate's; a dtype neither path takes is refused.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_call.h"
#include "backend/backend_impl.h"
#include "backend/backend_registry.h"
#include "optim/adamw.h"
#include "optim/grad_ops.h"
#include "test_util.h"

typedef struct {
    mt_dtype pdt, gdt;
    int master;
    const char *name;
} mode;

static const mode MODES[] = {
    {MT_F32, MT_F32, 0, "fp32"}, {MT_BF16, MT_BF16, 0, "paper"}, {MT_BF16, MT_BF16, 1, "mixed"},
    {MT_BF16, MT_F32, 0, "p bf16 / g f32"}, {MT_BF16, MT_F32, 1, "master / g f32"},
};

// Values with the extremes the optimizer meets: zeros, squares that overflow f32 or are denormal.
static void fill(void *x, mt_dtype t, size_t n, unsigned long long seed, float scale) {
    float *f = malloc((n ? n : 1) * sizeof *f);
    mt_test_fill_uniform(f, n, seed, -scale, scale);
    for (size_t i = 0; i < n; i += 97) f[i] = 0.0f;
    for (size_t i = 13; i < n; i += 211) f[i] = 3e20f;
    for (size_t i = 29; i < n; i += 223) f[i] = -1e-25f;
    mt_convert(x, t, f, MT_F32, n);
    free(f);
}

static void *to_dev(mt_backend *be, const void *h, size_t bytes) {
    void *d = NULL;
    if (mt_backend_dev_alloc(be, bytes ? bytes : 4, &d) != MT_OK) return NULL;
    if (bytes) (void)mt_backend_copy(be, d, h, bytes, MT_COPY_H2D, MT_STREAM_D2H);
    return d;
}

static int same_as_dev(mt_backend *be, const void *h, const void *d, size_t bytes) {
    void *back = malloc(bytes ? bytes : 1);
    int ok = mt_backend_copy(be, back, d, bytes, MT_COPY_D2H, MT_STREAM_D2H) == MT_OK &&
             mt_backend_stream_sync(be, MT_STREAM_D2H) == MT_OK && !memcmp(back, h, bytes);
    free(back);
    return ok;
}

static void check_adamw(mt_backend *be, const mode *md, size_t n, float beta1) {
    size_t ps = mt_dtype_size(md->pdt), gs = mt_dtype_size(md->gdt), cnt = n ? n : 1;
    float *master = md->master ? malloc(cnt * 4) : NULL, *m = calloc(cnt, 4), *v = calloc(cnt, 4);
    void *p = malloc(cnt * ps), *g = malloc(cnt * gs);
    float *f = malloc(cnt * 4);
    mt_test_fill_uniform(f, n, 11 + n, -2.0f, 2.0f);
    if (master) memcpy(master, f, n * 4);
    mt_convert(p, md->pdt, f, MT_F32, n);
    mt_adamw_state d = {.p = to_dev(be, p, n * ps), .m = to_dev(be, m, n * 4), .v = to_dev(be, v, n * 4),
                        .master = master ? to_dev(be, master, n * 4) : NULL};
    void *dg = NULL;
    CHECK(mt_backend_dev_alloc(be, cnt * gs, &dg) == MT_OK, "%s: device memory for the gradient", be->ops->name);
    int ok = d.p && d.m && d.v && (!master || d.master) && dg;
    for (int step = 1; step <= 3 && ok; step++) {
        mt_adamw_hparams h = {.lr = 1e-2f, .beta1 = beta1, .beta2 = 0.95f, .eps = 1e-8f,
                              .grad_scale = step == 2 ? 0.37f : 1.0f, .step = step};
        float wd = step == 3 ? 0.0f : 0.1f;
        fill(g, md->gdt, n, 7 * step + n, 1.0f);
        ok = mt_backend_copy(be, dg, g, n * gs, MT_COPY_H2D, MT_STREAM_D2H) == MT_OK &&
             mt_backend_adamw(be, &d, md->pdt, dg, md->gdt, n, &h, wd, MT_STREAM_D2H) == MT_OK;
        CHECK(ok, "%s adamw %s n=%zu: %s", be->ops->name, md->name, n, mt_last_error());
        mt_adamw_update_ref(master, p, md->pdt, g, md->gdt, m, v, n, &h, wd);
    }
    if (ok) {
        CHECK(same_as_dev(be, p, d.p, n * ps), "%s adamw %s n=%zu beta1=%g: p differs from the host's",
              be->ops->name, md->name, n, (double)beta1);
        CHECK(same_as_dev(be, m, d.m, n * 4), "%s adamw %s n=%zu: m differs", be->ops->name, md->name, n);
        CHECK(same_as_dev(be, v, d.v, n * 4), "%s adamw %s n=%zu: v differs", be->ops->name, md->name, n);
        if (master)
            CHECK(same_as_dev(be, master, d.master, n * 4), "%s adamw %s n=%zu: master differs", be->ops->name,
                  md->name, n);
    }
    mt_backend_dev_free(be, d.p), mt_backend_dev_free(be, d.m), mt_backend_dev_free(be, d.v);
    if (d.master) mt_backend_dev_free(be, d.master);
    mt_backend_dev_free(be, dg);
    free(master), free(m), free(v), free(p), free(g), free(f);
}

static void check_sumsq(mt_backend *be, mt_dtype t, size_t n) {
    size_t es = mt_dtype_size(t);
    void *x = malloc((n ? n : 1) * es);
    fill(x, t, n, 3 + n, 4.0f);
    void *dx = to_dev(be, x, n * es), *dout = NULL;
    double host = mt_grad_sumsq(x, t, n), dev = -1;
    int ok = dx && mt_backend_dev_alloc(be, sizeof(double), &dout) == MT_OK &&
             mt_backend_grad_sumsq(be, dout, dx, t, n, MT_STREAM_D2H) == MT_OK &&
             mt_backend_copy(be, &dev, dout, sizeof dev, MT_COPY_D2H, MT_STREAM_D2H) == MT_OK &&
             mt_backend_stream_sync(be, MT_STREAM_D2H) == MT_OK;
    CHECK(ok, "%s grad_sumsq %s n=%zu: %s", be->ops->name, mt_dtype_name(t), n, mt_last_error());
    CHECK(!ok || !memcmp(&host, &dev, sizeof host), "%s grad_sumsq %s n=%zu: %.17g, the host's %.17g",
          be->ops->name, mt_dtype_name(t), n, dev, host);
    mt_backend_dev_free(be, dx);
    if (dout) mt_backend_dev_free(be, dout);
    free(x);
}

// dst + src rounded to t, as the drain adds a micro-batch's gradients on the host.
static void check_grad_add(mt_backend *be, mt_dtype t, size_t n) {
    size_t es = mt_dtype_size(t);
    void *a = malloc(n * es), *b = malloc(n * es), *back = malloc(n * es);
    fill(a, t, n, 5 + n, 3.0f);
    fill(b, t, n, 9 + n, 3.0f);
    void *da = to_dev(be, a, n * es), *db = to_dev(be, b, n * es);
    mt_grad_accumulate(a, b, t, n, 0);
    int ok = da && db && mt_backend_grad_add(be, da, db, t, n, MT_STREAM_D2H) == MT_OK;
    CHECK(ok, "%s grad_add %s n=%zu: %s", be->ops->name, mt_dtype_name(t), n, mt_last_error());
    CHECK(!ok || same_as_dev(be, a, da, n * es), "%s grad_add %s n=%zu differs from the host's add", be->ops->name,
          mt_dtype_name(t), n);
    mt_backend_dev_free(be, da), mt_backend_dev_free(be, db);
    free(a), free(b), free(back);
}

static void check_backend(mt_backend *be) {
    static const size_t NS[] = {1, 17, 1000, 100003};
    for (size_t i = 0; i < sizeof MODES / sizeof MODES[0]; i++)
        for (size_t k = 0; k < sizeof NS / sizeof NS[0]; k++) check_adamw(be, &MODES[i], NS[k], 0.9f);
    check_adamw(be, &MODES[1], 1000, 0.3f); // torch's other lerp branch
    check_adamw(be, &MODES[2], 1000, 0.3f);
    static const size_t SQ[] = {0, 5, ((size_t)1 << 16) * 3 + 11};
    for (size_t k = 0; k < sizeof SQ / sizeof SQ[0]; k++) check_sumsq(be, MT_F32, SQ[k]), check_sumsq(be, MT_BF16, SQ[k]);
    check_grad_add(be, MT_F32, 100003), check_grad_add(be, MT_BF16, 100003);
    // f16 weights are no precision mode: refused with a message, not computed.
    mt_adamw_hparams h = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 1.0f, .step = 1};
    float one = 0;
    mt_adamw_state s = {.p = &one, .m = &one, .v = &one};
    CHECK(mt_backend_adamw(be, &s, MT_F16, &one, MT_F32, 0, &h, 0, MT_STREAM_D2H) != MT_OK,
          "%s adamw refuses f16 weights", be->ops->name);
}

int main(void) {
    int ran = 0;
    for (int i = 0; i < mt_backend_count(); i++) {
        const mt_backend_entry *e = mt_backend_at(i);
        if (!(e->caps & MT_CAP_TENSOR_DATA) || (e->available && !e->available())) continue;
        mt_backend *be = NULL;
        if (mt_backend_create(e->name, MT_F32, &be) != MT_OK) {
            CHECK(0, "creating the %s backend: %s", e->name, mt_last_error());
            continue;
        }
        CHECK(mt_backend_supports(be, MT_OP_ADAMW) && mt_backend_supports(be, MT_OP_GRAD_SUMSQ) &&
                  mt_backend_supports(be, MT_OP_GRAD_ADD),
              "%s computes on data, so it has the device optimizer's entries", e->name);
        if (mt_backend_supports(be, MT_OP_ADAMW)) check_backend(be), ran++;
        fprintf(stderr, "test_device_adamw: %s checked\n", e->name);
        mt_backend_destroy(be);
    }
    CHECK(ran >= 1, "at least the cpu backend ran");
    return mt_test_finish("test_device_adamw");
}
