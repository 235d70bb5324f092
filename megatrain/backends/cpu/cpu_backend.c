// cpu_backend.c: the cpu backend's ops table, memory, events and streams.
// Everything runs synchronously on the calling thread (kernels fan out with
// OpenMP), so copies are memcpy and stream/event waits have nothing to wait for.
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backends/cpu/cpu_internal.h"
#include "core/host_mem.h"
#include "core/sysinfo.h"

struct mt_event {
    double t_ms; // monotonic host time when recorded
    int recorded;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// ---- scratch and weight conversion (shared by the kernel files) ----

mt_status mt_cpu_scratch(mt_backend *be, int slot, size_t bytes, void **out) {
    mt_cpu_ctx *c = be->ctx;
    if (bytes > c->cap[slot]) {
        free(c->buf[slot]);
        c->buf[slot] = NULL;
        c->cap[slot] = 0;
        void *p = NULL;
        if (posix_memalign(&p, 64, bytes) != 0)
            return mt_fail(MT_ERR_MEMORY, "cpu backend: cannot allocate %zu bytes of scratch", bytes);
        c->buf[slot] = p;
        c->cap[slot] = bytes;
    }
    *out = c->buf[slot];
    return MT_OK;
}

void mt_cpu_bf16_to_f32(float *dst, const uint16_t *src, size_t n) {
#pragma omp parallel for schedule(static) if (n > (1u << 16))
    for (size_t i = 0; i < n; i++) dst[i] = mt_bf16_to_f32(src[i]);
}

mt_status mt_cpu_check_wdt(mt_dtype wdt, const char *op) {
    if (wdt != MT_F32 && wdt != MT_BF16) return mt_fail(MT_ERR_ARG, "cpu %s: unknown weight dtype %d", op, (int)wdt);
    return MT_OK;
}

mt_status mt_cpu_weights_f32(mt_backend *be, int slot, const void *w, mt_dtype wdt, size_t n, const float **out) {
    if (wdt == MT_F32) {
        *out = w;
        return MT_OK;
    }
    void *p = NULL;
    MT_TRY(mt_cpu_scratch(be, slot, n * sizeof(float), &p));
    mt_cpu_bf16_to_f32(p, w, n);
    *out = p;
    return MT_OK;
}

// ---- identity and memory ----

static void cpu_destroy(mt_backend *be) {
    if (!be) return;
    mt_cpu_ctx *c = be->ctx;
    if (c)
        for (int i = 0; i < MT_CPU_NSCR; i++) free(c->buf[i]);
    free(c);
    free(be);
}

static mt_status cpu_device_info(mt_backend *be, mt_device_info *out) {
    (void)be;
    memset(out, 0, sizeof *out);
#if defined(__x86_64__)
    const char *arch = "x86-64";
#elif defined(__aarch64__)
    const char *arch = "aarch64";
#else
    const char *arch = "unknown arch";
#endif
    snprintf(out->name, sizeof out->name, "cpu (%s, %d threads)", arch, omp_get_max_threads());
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    out->mem_total_bytes = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : 0;
    out->mem_free_bytes = mt_host_mem_available_bytes();
    out->host_mem_avail_bytes = out->mem_free_bytes;
    out->numa_node = -1;
    return MT_OK;
}

static mt_status cpu_dev_alloc(mt_backend *be, size_t bytes, void **out) {
    (void)be;
    void *p = NULL;
    // 64-byte alignment keeps vector loads aligned; a 0-byte request still gets a unique pointer.
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) {
        *out = NULL;
        return mt_fail(MT_ERR_MEMORY, "cpu dev_alloc: cannot allocate %zu bytes", bytes);
    }
    *out = p;
    return MT_OK;
}

static void cpu_dev_free(mt_backend *be, void *p) {
    (void)be;
    free(p);
}

// Page-aligned, zeroed, faulted in by every thread (core/host_mem.h): the CPU
// backend's "pinned" memory is plain host memory, allocated as fast as the OS allows.
static mt_status cpu_host_alloc(mt_backend *be, size_t bytes, void **out) {
    (void)be;
    return mt_host_mem_alloc(bytes, out);
}

static void cpu_host_free(mt_backend *be, void *p, size_t bytes) {
    (void)be;
    mt_host_mem_free(p, bytes);
}

// ---- streams and events: all work is already complete when a call returns ----

static mt_status cpu_event_create(mt_backend *be, mt_event **out) {
    (void)be;
    mt_event *ev = calloc(1, sizeof *ev);
    if (!ev) return mt_fail(MT_ERR_MEMORY, "cpu event_create: cannot allocate %zu bytes", sizeof *ev);
    *out = ev;
    return MT_OK;
}

static void cpu_event_destroy(mt_backend *be, mt_event *ev) {
    (void)be;
    free(ev);
}

static mt_status cpu_event_record(mt_backend *be, mt_event *ev, mt_stream_id s) {
    (void)be;
    (void)s;
    ev->t_ms = now_ms();
    ev->recorded = 1;
    return MT_OK;
}

static mt_status cpu_stream_wait(mt_backend *be, mt_stream_id s, mt_event *ev) {
    (void)be;
    (void)s;
    (void)ev;
    return MT_OK;
}

static mt_status cpu_event_sync(mt_backend *be, mt_event *ev) {
    (void)be;
    (void)ev;
    return MT_OK;
}

static mt_status cpu_stream_sync(mt_backend *be, mt_stream_id s) {
    (void)be;
    (void)s;
    return MT_OK;
}

static mt_status cpu_event_elapsed_ms(mt_backend *be, mt_event *start, mt_event *end, float *ms) {
    (void)be;
    if (!start->recorded || !end->recorded)
        return mt_fail(MT_ERR_ARG, "cpu event_elapsed_ms: event was never recorded");
    *ms = (float)(end->t_ms - start->t_ms);
    return MT_OK;
}

static mt_status cpu_copy(mt_backend *be, void *dst, const void *src, size_t bytes, mt_copy_kind kind, mt_stream_id s) {
    (void)be;
    (void)kind;
    (void)s;
    if (bytes) memmove(dst, src, bytes); // D2D copies may overlap
    return MT_OK;
}

static mt_status cpu_memset_zero(mt_backend *be, void *dst, size_t bytes, mt_stream_id s) {
    (void)be;
    (void)s;
    if (bytes) memset(dst, 0, bytes);
    return MT_OK;
}

static int weights_ok(mt_dtype t) { return t == MT_F32 || t == MT_BF16; }

// f32 activations; f32 or bf16 weights (read as f32 exactly); every in-place use the
// interface allows; bitwise: bf16 weights give the bits of their f32 values, and the fused
// residual norms those of the unfused pair where nothing contracts a*b+c into an FMA (x86-64).
static int cpu_supports(const mt_backend *be, mt_op op, const mt_op_shape *s) {
    (void)be;
    if (op == MT_OP_CAST) return weights_ok(s->act) && weights_ok(s->wdt) && !(s->flags & MT_SHAPE_IN_PLACE);
    if (s->act != MT_F32) return 0;
    switch (op) {
    case MT_OP_ADD_RMSNORM_FWD:
    case MT_OP_RMSNORM_BWD_ADD:
#if !defined(__x86_64__)
        if (s->flags & MT_SHAPE_BITWISE) return 0;
#endif
        return weights_ok(s->wdt);
    case MT_OP_EMBEDDING_FWD: case MT_OP_EMBEDDING_BWD: case MT_OP_MATMUL_FWD: case MT_OP_MATMUL_BWD:
    case MT_OP_RMSNORM_FWD: case MT_OP_RMSNORM_BWD: case MT_OP_QK_NORM_FWD: case MT_OP_QK_NORM_BWD:
        return weights_ok(s->wdt);
    case MT_OP_ATTENTION_FWD: case MT_OP_ATTENTION_BWD:
        return s->NKV > 0 && s->NH % s->NKV == 0;
    case MT_OP_ROPE_FWD: case MT_OP_ROPE_BWD:
        return s->HD % 2 == 0;
    default:
        return 1;
    }
}

extern const mt_backend_entry mt_backend_cpu_entry;

static const mt_backend_ops cpu_ops = {
    .name = "cpu",
    .entry = &mt_backend_cpu_entry,
    .caps = MT_CAP_TENSOR_DATA, // synchronous, f32, host_alloc is plain page-aligned memory
    .destroy = cpu_destroy,
    .device_info = cpu_device_info,
    .dev_alloc = cpu_dev_alloc,
    .dev_free = cpu_dev_free,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait = cpu_stream_wait,
    .event_sync = cpu_event_sync,
    .stream_sync = cpu_stream_sync,
    .event_elapsed_ms = cpu_event_elapsed_ms,
    .copy = cpu_copy,
    .memset_zero = cpu_memset_zero,
    .embedding_fwd = mt_cpu_op_embedding_fwd,
    .embedding_bwd = mt_cpu_op_embedding_bwd,
    .matmul_fwd = mt_cpu_op_matmul_fwd,
    .matmul_bwd = mt_cpu_op_matmul_bwd,
    .rmsnorm_fwd = mt_cpu_op_rmsnorm_fwd,
    .rmsnorm_bwd = mt_cpu_op_rmsnorm_bwd,
    .qk_norm_fwd = mt_cpu_op_qk_norm_fwd,
    .qk_norm_bwd = mt_cpu_op_qk_norm_bwd,
    .rope_fwd = mt_cpu_op_rope_fwd,
    .rope_bwd = mt_cpu_op_rope_bwd,
    .attention_fwd = mt_cpu_op_attention_fwd,
    .attention_bwd = mt_cpu_op_attention_bwd,
    .swiglu_fwd = mt_cpu_op_swiglu_fwd,
    .swiglu_bwd = mt_cpu_op_swiglu_bwd,
    .add = mt_cpu_op_add,
    .add_rmsnorm_fwd = mt_cpu_op_add_rmsnorm_fwd,
    .rmsnorm_bwd_add = mt_cpu_op_rmsnorm_bwd_add,
    .xent_fwd_bwd = mt_cpu_op_xent_fwd_bwd,
    .cast = mt_cpu_op_cast,
    .supports = cpu_supports,
    .adamw = mt_cpu_op_adamw,
    .grad_sumsq = mt_cpu_op_grad_sumsq,
    .grad_add = mt_cpu_op_grad_add,
};

unsigned mt_backend_cpu_caps(void) { return cpu_ops.caps; }

static mt_status cpu_create(const mt_backend_args *a, mt_backend **out) {
    return mt_backend_cpu_create(a->act_dtype, out);
}

// --gpus N on the cpu backend: N instances in one process, each its own buffers and thread,
// sharing the cores (the multi-device path tested without a GPU). A cap, not the core count,
// so the equality tests run the same on any machine.
#define MT_CPU_DEVICES 8
static int cpu_device_count(void) { return MT_CPU_DEVICES; }

const mt_backend_entry mt_backend_cpu_entry = {
    .name = "cpu",
    .device_count = cpu_device_count,
    .summary = "the host's cores (OpenMP, OpenBLAS); f32 activations; the reference",
    .caps = MT_CAP_TENSOR_DATA,
    .create = cpu_create,
    .supports = cpu_supports,
};

mt_status mt_backend_cpu_create(mt_dtype act_dtype, mt_backend **out) {
    *out = NULL;
    if (act_dtype != MT_F32)
        return mt_fail(MT_ERR_UNSUPPORTED, "cpu backend: activations must be F32 (got %s); use --precision fp32 or "
                       "the cuda backend for bf16 compute", mt_dtype_name(act_dtype));
    MT_TRY(mt_cpu_blas_reserve());
    mt_backend *be = calloc(1, sizeof *be);
    mt_cpu_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return mt_fail(MT_ERR_MEMORY, "cpu backend: cannot allocate %zu bytes of context", sizeof *be + sizeof *c);
    }
    be->ops = &cpu_ops;
    be->act_dtype = MT_F32;
    be->ctx = c;
    *out = be;
    return MT_OK;
}
