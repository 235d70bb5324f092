// sim_backend.c: the sim backend's ops table: virtual streams, events, a modelled link, fake memory,
// no tensor data. Each op costs the issuing host thread MT_SIM_LAUNCH_MS (core/vclock.h) and starts at
// max(stream clock, host clock); events and waits move clocks as CUDA's would (an event on an idle
// stream completes when recorded).
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backends/sim/sim_internal.h"
#include "core/bytes_text.h"
#include "core/vclock.h"

#define DEV_BASE ((uintptr_t)0x0100000000000000ull) // outside any user address space: never dereferenced
#define DEV_ALIGN 256u
#define PROT_NONE_MIN_BYTES (64u << 20) // below this a host block must be real memory (staging buffers)

static unsigned long next_instance_id = 1;
static pthread_mutex_t instance_mu = PTHREAD_MUTEX_INITIALIZER;

static double max2(double a, double b) { return a > b ? a : b; }

static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need) n *= 2;
    void *p = realloc(*arr, n * elem);
    if (!p) return 0;
    *arr = p;
    *cap = n;
    return 1;
}

// ---- timeline ----

void mt_sim_record_locked(mt_sim_ctx *c, int lane, const char *name, double start, double end, double amount,
                          int unit) {
    double dur = end - start;
    if (lane < MT_NUM_STREAMS) {
        c->st.stream_busy_ms[lane] += dur;
        c->st.n_ops++;
        if (unit == MT_SIM_FLOPS) c->st.flops += amount;
    } else {
        c->st.host_busy_ms[lane - MT_SIM_HOST_LANE0] += dur;
    }
    if (end > c->st.makespan_ms) c->st.makespan_ms = end;
    if (c->n_rec >= MT_SIM_TRACE_CAP || !grow((void **)&c->rec, &c->cap_rec, c->n_rec + 1, sizeof *c->rec)) {
        c->st.n_trace_dropped++;
        return;
    }
    c->rec[c->n_rec++] = (mt_sim_rec){start, end, amount, name, lane, unit};
}

double mt_sim_enqueue_locked(mt_sim_ctx *c, int s, const char *name, double ms, double amount, int unit) {
    mt_vclock_advance(MT_SIM_LAUNCH_MS);
    double start = max2(c->clock[s], mt_vclock_now());
    double end = start + max2(ms, MT_SIM_KERNEL_MIN_MS);
    c->clock[s] = end;
    mt_sim_record_locked(c, s, name, start, end, amount, unit);
    return end;
}

static _Thread_local unsigned long tl_owner; // instance id the lane below belongs to
static _Thread_local int tl_lane;

int mt_sim_host_lane_locked(mt_sim_ctx *c, const char *kind) {
    if (tl_owner == c->id) return tl_lane;
    int i = c->st.n_host_lanes;
    if (i == MT_SIM_MAX_LANES) { // more threads than lanes: share the last one
        i = MT_SIM_MAX_LANES - 1;
    } else {
        c->st.n_host_lanes++;
        const char *base = pthread_equal(pthread_self(), c->creator) ? "host" : kind;
        int dup = 0;
        for (int j = 0; j < i; j++)
            if (!strncmp(c->st.host_lane_name[j], base, strlen(base))) dup++;
        if (dup) snprintf(c->st.host_lane_name[i], sizeof c->st.host_lane_name[i], "%s-%d", base, dup + 1);
        else snprintf(c->st.host_lane_name[i], sizeof c->st.host_lane_name[i], "%s", base);
    }
    tl_owner = c->id;
    tl_lane = MT_SIM_HOST_LANE0 + i;
    return tl_lane;
}

// ---- identity and memory ----

static void sim_destroy(mt_backend *be) {
    if (!be) return;
    mt_sim_ctx *c = be->ctx;
    if (c) {
        for (size_t i = 0; i < c->n_host; i++) munmap((void *)c->host[i].base, c->host[i].bytes);
        free(c->host);
        free(c->dev);
        free(c->rec);
        free(c->iv[0]);
        free(c->iv[1]);
        free(c->load);
        pthread_mutex_destroy(&c->mu);
        free(c);
    }
    free(be);
}

static mt_status sim_device_info(mt_backend *be, mt_device_info *out) {
    mt_sim_ctx *c = be->ctx;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "sim: %.58s (%.58s)", c->prof.name, c->prof.gpu_name);
    pthread_mutex_lock(&c->mu);
    out->mem_total_bytes = (size_t)c->prof.hbm_bytes;
    out->mem_free_bytes = out->mem_total_bytes - c->st.dev_bytes_in_use;
    pthread_mutex_unlock(&c->mu);
    out->numa_node = -1;
    out->host_mem_avail_bytes = (size_t)c->prof.host_mem_bytes;
    return MT_OK;
}

static mt_status sim_dev_alloc(mt_backend *be, size_t bytes, void **out) {
    mt_sim_ctx *c = be->ctx;
    *out = NULL;
    pthread_mutex_lock(&c->mu);
    size_t total = (size_t)c->prof.hbm_bytes, used = c->st.dev_bytes_in_use;
    if (bytes > total - used) {
        pthread_mutex_unlock(&c->mu);
        return mt_fail(MT_ERR_MEMORY,
                       "sim (%s): device memory: cannot allocate %s: %s of %s are in use", c->prof.name,
                       mt_bytes_format(bytes).s, mt_bytes_format(used).s, mt_bytes_format(total).s);
    }
    if (!grow((void **)&c->dev, &c->cap_dev, c->n_dev + 1, sizeof *c->dev)) {
        pthread_mutex_unlock(&c->mu);
        return mt_fail(MT_ERR_MEMORY, "sim: cannot grow the device allocation table");
    }
    uintptr_t p = c->dev_next;
    c->dev_next += (bytes + DEV_ALIGN - 1) / DEV_ALIGN * DEV_ALIGN + DEV_ALIGN; // a gap keeps blocks distinct
    c->dev[c->n_dev++] = (mt_sim_block){p, bytes};
    c->st.dev_bytes_in_use += bytes;
    if (c->st.dev_bytes_in_use > c->st.dev_bytes_peak) c->st.dev_bytes_peak = c->st.dev_bytes_in_use;
    pthread_mutex_unlock(&c->mu);
    *out = (void *)p;
    return MT_OK;
}

static void sim_dev_free(mt_backend *be, void *p) {
    mt_sim_ctx *c = be->ctx;
    if (!p) return;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_dev; i++)
        if (c->dev[i].base == (uintptr_t)p) {
            c->st.dev_bytes_in_use -= c->dev[i].bytes;
            c->dev[i] = c->dev[--c->n_dev];
            break;
        }
    pthread_mutex_unlock(&c->mu);
}

// Host blocks are anonymous NORESERVE mappings: untouched pages cost nothing,
// so a 1.5 TB model state "fits" on a small machine. The engine writes only its
// small staging buffers under sim; where the kernel refuses a writable mapping
// that large (strict overcommit), a big block falls back to an inaccessible
// reservation, so a stray write faults instead of corrupting anything.
static mt_status sim_host_alloc(mt_backend *be, size_t bytes, void **out) {
    mt_sim_ctx *c = be->ctx;
    *out = NULL;
    if (bytes == 0) bytes = 1;
    pthread_mutex_lock(&c->mu);
    size_t total = (size_t)c->prof.host_mem_bytes, used = c->st.host_bytes_in_use;
    pthread_mutex_unlock(&c->mu);
    if (bytes > total - used)
        return mt_fail(MT_ERR_MEMORY,
                       "sim (%s): host memory: cannot allocate %s: %s of %s are in use", c->prof.name,
                       mt_bytes_format(bytes).s, mt_bytes_format(used).s, mt_bytes_format(total).s);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED && bytes >= PROT_NONE_MIN_BYTES)
        p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return mt_fail(MT_ERR_MEMORY, "sim (%s): host memory: cannot reserve %s of address space", c->prof.name,
                       mt_bytes_format(bytes).s);
    pthread_mutex_lock(&c->mu);
    if (!grow((void **)&c->host, &c->cap_host, c->n_host + 1, sizeof *c->host)) {
        pthread_mutex_unlock(&c->mu);
        munmap(p, bytes);
        return mt_fail(MT_ERR_MEMORY, "sim: cannot grow the host allocation table");
    }
    c->host[c->n_host++] = (mt_sim_block){(uintptr_t)p, bytes};
    c->st.host_bytes_in_use += bytes;
    if (c->st.host_bytes_in_use > c->st.host_bytes_peak) c->st.host_bytes_peak = c->st.host_bytes_in_use;
    pthread_mutex_unlock(&c->mu);
    *out = p;
    return MT_OK;
}

static void sim_host_free(mt_backend *be, void *p, size_t bytes) {
    mt_sim_ctx *c = be->ctx;
    (void)bytes; // the recorded size is authoritative
    if (!p) return;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_host; i++)
        if (c->host[i].base == (uintptr_t)p) {
            munmap(p, c->host[i].bytes);
            c->st.host_bytes_in_use -= c->host[i].bytes;
            c->host[i] = c->host[--c->n_host];
            break;
        }
    pthread_mutex_unlock(&c->mu);
}

// Host memory from host_alloc counts as pinned; anything else (malloc) is pageable.
static int is_pinned_locked(const mt_sim_ctx *c, const void *p) {
    uintptr_t a = (uintptr_t)p;
    for (size_t i = 0; i < c->n_host; i++)
        if (a >= c->host[i].base && a < c->host[i].base + c->host[i].bytes) return 1;
    return 0;
}

// ---- streams and events ----

static mt_status sim_event_create(mt_backend *be, mt_event **out) {
    (void)be;
    *out = calloc(1, sizeof **out);
    return *out ? MT_OK : mt_fail(MT_ERR_MEMORY, "sim: cannot allocate an event");
}

static void sim_event_destroy(mt_backend *be, mt_event *ev) {
    (void)be;
    free(ev);
}

static mt_status check_stream(mt_stream_id s) {
    if ((int)s < 0 || s >= MT_NUM_STREAMS) return mt_fail(MT_ERR_ARG, "sim: unknown stream %d", (int)s);
    return MT_OK;
}

static mt_status sim_event_record(mt_backend *be, mt_event *ev, mt_stream_id s) {
    MT_TRY(check_stream(s));
    mt_sim_ctx *c = be->ctx;
    pthread_mutex_lock(&c->mu);
    ev->t_ms = max2(c->clock[s], mt_vclock_now());
    ev->recorded = 1;
    pthread_mutex_unlock(&c->mu);
    return MT_OK;
}

static mt_status sim_stream_wait(mt_backend *be, mt_stream_id s, mt_event *ev) {
    MT_TRY(check_stream(s));
    mt_sim_ctx *c = be->ctx;
    pthread_mutex_lock(&c->mu);
    if (ev->recorded) c->clock[s] = max2(c->clock[s], ev->t_ms); // an unrecorded event is complete (CUDA)
    pthread_mutex_unlock(&c->mu);
    return MT_OK;
}

static mt_status sim_event_sync(mt_backend *be, mt_event *ev) {
    mt_sim_ctx *c = be->ctx;
    pthread_mutex_lock(&c->mu);
    double t = ev->recorded ? ev->t_ms : 0;
    pthread_mutex_unlock(&c->mu);
    mt_vclock_join(t);
    return MT_OK;
}

static mt_status sim_stream_sync(mt_backend *be, mt_stream_id s) {
    MT_TRY(check_stream(s));
    mt_sim_ctx *c = be->ctx;
    pthread_mutex_lock(&c->mu);
    double t = c->clock[s];
    pthread_mutex_unlock(&c->mu);
    mt_vclock_join(t);
    return MT_OK;
}

static mt_status sim_event_elapsed_ms(mt_backend *be, mt_event *start, mt_event *end, float *ms) {
    (void)be;
    if (!start->recorded || !end->recorded)
        return mt_fail(MT_ERR_ARG, "sim: event_elapsed_ms on an event that was never recorded");
    *ms = (float)(end->t_ms - start->t_ms);
    return MT_OK;
}

// ---- copies ----

// The host passes' demand (GB/s) at t, and the next time it changes (lowers *next).
static double load_at_locked(const mt_sim_ctx *c, double t, double *next) {
    double a = 0;
    for (size_t i = 0; i < c->n_load; i++) {
        const mt_sim_load *l = &c->load[i];
        if (l->start <= t && t < l->end) {
            a += l->gbps;
            if (l->end < *next) *next = l->end;
        } else if (l->start > t && l->start < *next) {
            *next = l->start;
        }
    }
    return a;
}

// End of a copy of `bytes` in direction `dir` that starts at `t` at solo rate
// `rate` (bytes/ms): where it overlaps copies already placed in the other
// direction it runs at duplex_factor x rate (sim.h, "Duplex"), and where host
// passes overlap it, at its share of the host memory (sim.h, "host memory").
static double copy_end_locked(const mt_sim_ctx *c, int dir, double t, double bytes, double rate) {
    const mt_sim_iv *iv = c->iv[1 - dir];
    size_t n = c->n_iv[1 - dir], i = 0, hi = n;
    while (i < hi) { // first interval ending after t
        size_t mid = (i + hi) / 2;
        if (iv[mid].end <= t) i = mid + 1;
        else hi = mid;
    }
    double left = bytes;
    for (;;) {
        while (i < n && iv[i].end <= t) i++;
        double next = INFINITY, r = rate;
        if (i < n && iv[i].start <= t) r = c->prof.duplex_factor * rate, next = iv[i].end;
        else if (i < n) next = iv[i].start;
        double a = load_at_locked(c, t, &next);
        if (a > 0) r *= mt_sim_copy_share(&c->prof, r / 1e6, a);
        if (next == INFINITY || left <= (next - t) * r) return t + left / r;
        left -= (next - t) * r;
        t = next;
    }
}

// Drops the passes that end before both links are free: no later copy can meet them.
static void prune_loads_locked(mt_sim_ctx *c) {
    double before = c->link_free[0] < c->link_free[1] ? c->link_free[0] : c->link_free[1];
    size_t k = 0;
    for (size_t i = 0; i < c->n_load; i++)
        if (c->load[i].end > before) c->load[k++] = c->load[i];
    c->n_load = k;
}

static mt_status sim_copy(mt_backend *be, void *dst, const void *src, size_t bytes, mt_copy_kind kind, mt_stream_id s) {
    MT_TRY(check_stream(s));
    if (kind != MT_COPY_H2D && kind != MT_COPY_D2H && kind != MT_COPY_D2D)
        return mt_fail(MT_ERR_ARG, "sim: unknown copy kind %d", (int)kind);
    mt_sim_ctx *c = be->ctx;
    pthread_mutex_lock(&c->mu);
    if (kind == MT_COPY_D2D) {
        mt_sim_enqueue_locked(c, s, "copy_d2d", mt_sim_hbm_ms(&c->prof, 2.0 * (double)bytes), (double)bytes,
                              MT_SIM_BYTES);
        pthread_mutex_unlock(&c->mu);
        return MT_OK;
    }
    int dir = kind == MT_COPY_H2D ? 0 : 1;
    int pinned = is_pinned_locked(c, kind == MT_COPY_H2D ? src : dst);
    mt_vclock_advance(MT_SIM_LAUNCH_MS);
    double solo_ms = mt_sim_link_ms(&c->prof, kind, pinned, (double)bytes), start, end = -INFINITY;
    for (;;) { // until the host lanes have priced all their work before the copy's end (vclock.h)
        // one copy at a time per direction, in enqueue order, whichever stream issues it
        start = max2(max2(c->clock[s], mt_vclock_now()), c->link_free[dir]);
        double e = bytes ? copy_end_locked(c, dir, start, (double)bytes, (double)bytes / solo_ms) : start;
        e = max2(e, start + MT_SIM_KERNEL_MIN_MS);
        if (e <= end) break;
        end = e;
        pthread_mutex_unlock(&c->mu);
        mt_vlane_wait_past(be, end);
        pthread_mutex_lock(&c->mu);
    }
    if (!grow((void **)&c->iv[dir], &c->cap_iv[dir], c->n_iv[dir] + 1, sizeof(mt_sim_iv))) {
        pthread_mutex_unlock(&c->mu);
        return mt_fail(MT_ERR_MEMORY, "sim: cannot grow the copy interval table");
    }
    c->iv[dir][c->n_iv[dir]++] = (mt_sim_iv){start, end};
    c->link_free[dir] = end;
    c->clock[s] = end;
    c->st.link_busy_ms[dir] += end - start;
    c->st.link_bytes[dir] += (double)bytes;
    mt_sim_record_locked(c, s, dir == 0 ? "copy_h2d" : "copy_d2h", start, end, (double)bytes, MT_SIM_BYTES);
    prune_loads_locked(c);
    pthread_mutex_unlock(&c->mu);
    return MT_OK;
}

static mt_status sim_memset_zero(mt_backend *be, void *dst, size_t bytes, mt_stream_id s) {
    (void)dst;
    MT_TRY(check_stream(s));
    mt_sim_ctx *c = be->ctx;
    pthread_mutex_lock(&c->mu);
    mt_sim_enqueue_locked(c, s, "memset", mt_sim_hbm_ms(&c->prof, (double)bytes), (double)bytes, MT_SIM_BYTES);
    pthread_mutex_unlock(&c->mu);
    return MT_OK;
}

// ---- host work ----

// Priced on the calling thread's lane from its current clock; the caller then
// advances its clock by the returned time (engine/grad_drain.c, optimizer_worker.c).
static double sim_host_work_ms(mt_backend *be, mt_host_work_kind kind, size_t n, mt_dtype wdt, int master) {
    mt_sim_ctx *c = be->ctx;
    double ms = mt_sim_host_work_ms(&c->prof, kind, n, wdt, master);
    int acc = kind == MT_HOST_GRAD_ACCUMULATE || kind == MT_HOST_GRAD_SUMSQ;
    pthread_mutex_lock(&c->mu);
    int lane = mt_sim_host_lane_locked(c, acc ? "grad-drain" : "optimizer");
    double t = mt_vclock_now();
    const char *what = kind == MT_HOST_GRAD_SUMSQ  ? "grad_sumsq"
                       : acc                       ? "grad_accumulate"
                       : kind == MT_HOST_ROWS_GATHER ? "gather_rows"
                                                   : "adamw";
    mt_sim_record_locked(c, lane, what, t, t + ms, (double)n, MT_SIM_ELEMENTS);
    // A lane's passes (or the creating thread's, in its own order) load the shared host memory.
    int vl = mt_vlane_self();
    double gbps = ms > 0 ? mt_sim_host_work_bytes(&c->prof, kind, n, wdt, master) / (ms * 1e6) : 0;
    if (gbps > 0 && (vl >= 0 || pthread_equal(pthread_self(), c->creator)) &&
        grow((void **)&c->load, &c->cap_load, c->n_load + 1, sizeof *c->load))
        c->load[c->n_load++] = (mt_sim_load){t, t + ms, gbps};
    pthread_mutex_unlock(&c->mu);
    mt_vlane_at(vl, t + ms);
    return ms;
}

// --attention: the implementation whose measured rate prices attention (the profile's
// gpu.attention_tflops.<name>); the data path is the same for all.
static mt_status sim_set_attention(mt_backend *be, int impl) {
    return mt_sim_set_attention_kernel(be, mt_attn_kernel_name((mt_attn_impl)impl, be->act_dtype == MT_BF16));
}

extern const mt_backend_entry mt_backend_sim_entry;

static const mt_backend_ops sim_ops = {
    .name = "sim",
    .entry = &mt_backend_sim_entry,
    .caps = MT_CAP_VIRTUAL_TIME | MT_CAP_BF16 | MT_CAP_ASYNC | MT_CAP_DEVICE_MEMORY, // no tensor data; host unbacked
    .destroy = sim_destroy,
    .device_info = sim_device_info,
    .dev_alloc = sim_dev_alloc,
    .dev_free = sim_dev_free,
    .host_alloc = sim_host_alloc,
    .host_free = sim_host_free,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .stream_wait = sim_stream_wait,
    .event_sync = sim_event_sync,
    .stream_sync = sim_stream_sync,
    .event_elapsed_ms = sim_event_elapsed_ms,
    .copy = sim_copy,
    .memset_zero = sim_memset_zero,
    .embedding_fwd = mt_sim_op_embedding_fwd,
    .embedding_bwd = mt_sim_op_embedding_bwd,
    .matmul_fwd = mt_sim_op_matmul_fwd,
    .matmul_bwd = mt_sim_op_matmul_bwd,
    .rmsnorm_fwd = mt_sim_op_rmsnorm_fwd,
    .rmsnorm_bwd = mt_sim_op_rmsnorm_bwd,
    .qk_norm_fwd = mt_sim_op_qk_norm_fwd,
    .qk_norm_bwd = mt_sim_op_qk_norm_bwd,
    .rope_fwd = mt_sim_op_rope_fwd,
    .rope_bwd = mt_sim_op_rope_bwd,
    .attention_fwd = mt_sim_op_attention_fwd,
    .attention_bwd = mt_sim_op_attention_bwd,
    .swiglu_fwd = mt_sim_op_swiglu_fwd,
    .swiglu_bwd = mt_sim_op_swiglu_bwd,
    .add = mt_sim_op_add,
    .add_rmsnorm_fwd = mt_sim_op_add_rmsnorm_fwd,
    .rmsnorm_bwd_add = mt_sim_op_rmsnorm_bwd_add,
    .xent_fwd_bwd = mt_sim_op_xent_fwd_bwd,
    .cast = mt_sim_op_cast,
    .host_work_ms = sim_host_work_ms,
    .trace_write = mt_sim_trace_write,
    .set_attention = sim_set_attention,
    .adamw = mt_sim_op_adamw,
    .grad_sumsq = mt_sim_op_grad_sumsq,
    .grad_add = mt_sim_op_grad_add,
};

unsigned mt_backend_sim_caps(void) { return sim_ops.caps; }

static mt_status sim_create(const mt_backend_args *a, mt_backend **out) {
    return mt_backend_sim_create(a->profile_path, a->act_dtype, out);
}

// No supports(): the sim prices every shape of every op (it touches no data).
const mt_backend_entry mt_backend_sim_entry = {
    .name = "sim",
    .summary = "a simulated GPU priced by a hardware profile (--hardware); virtual time, no data",
    .caps = MT_CAP_VIRTUAL_TIME | MT_CAP_BF16 | MT_CAP_ASYNC | MT_CAP_DEVICE_MEMORY,
    .create = sim_create,
    .collective = mt_sim_collective_create,
};

// The timeline starts at 0 on the creating thread (its virtual clock is reset).
mt_status mt_backend_sim_create(const char *profile_path, mt_dtype act_dtype, mt_backend **out) {
    *out = NULL;
    if (act_dtype != MT_F32 && act_dtype != MT_BF16)
        return mt_fail(MT_ERR_ARG, "sim backend: unknown activation dtype %d", (int)act_dtype);
    mt_backend *be = calloc(1, sizeof *be);
    mt_sim_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return mt_fail(MT_ERR_MEMORY, "sim backend: cannot allocate its context");
    }
    mt_status s = mt_hw_profile_load(profile_path, &c->prof);
    if (s != MT_OK) {
        free(be);
        free(c);
        return s;
    }
    pthread_mutex_init(&c->mu, NULL);
    c->act = act_dtype;
    snprintf(c->attn_kernel, sizeof c->attn_kernel, "%s", mt_attn_kernel_name(MT_ATTN_AUTO, act_dtype == MT_BF16));
    c->creator = pthread_self();
    pthread_mutex_lock(&instance_mu);
    c->id = next_instance_id++;
    pthread_mutex_unlock(&instance_mu);
    c->dev_next = DEV_BASE;
    be->ops = &sim_ops;
    be->act_dtype = act_dtype;
    be->ctx = c;
    mt_vclock_set(0);
    *out = be;
    return MT_OK;
}

// ---- inspection (sim.h) ----

static mt_sim_ctx *sim_ctx_checked(mt_backend *be) {
    return be && be->ops == &sim_ops ? be->ctx : NULL;
}

const mt_hw_profile *mt_sim_profile_of(mt_backend *be) {
    mt_sim_ctx *c = sim_ctx_checked(be);
    return c ? &c->prof : NULL;
}

mt_status mt_sim_set_profile(mt_backend *be, const mt_hw_profile *p) {
    mt_sim_ctx *c = sim_ctx_checked(be);
    if (!c)
        return mt_fail(MT_ERR_ARG, "mt_sim_set_profile: the %s backend is not the simulator",
                       be ? be->ops->name : "null");
    pthread_mutex_lock(&c->mu);
    c->prof = *p;
    pthread_mutex_unlock(&c->mu);
    return MT_OK;
}

mt_status mt_sim_set_attention_kernel(mt_backend *be, const char *kernel) {
    mt_sim_ctx *c = sim_ctx_checked(be);
    if (!c) return mt_fail(MT_ERR_ARG, "mt_sim_set_attention_kernel: the %s backend is not the simulator",
                           be ? be->ops->name : "null");
    pthread_mutex_lock(&c->mu);
    snprintf(c->attn_kernel, sizeof c->attn_kernel, "%s", kernel);
    pthread_mutex_unlock(&c->mu);
    return MT_OK;
}

const char *mt_sim_attention_kernel(mt_backend *be) {
    mt_sim_ctx *c = sim_ctx_checked(be);
    return c ? c->attn_kernel : NULL;
}

mt_status mt_sim_stats_get(mt_backend *be, mt_sim_stats *out) {
    mt_sim_ctx *c = sim_ctx_checked(be);
    if (!c)
        return mt_fail(MT_ERR_ARG, "mt_sim_stats_get: the %s backend is not the simulator",
                       be ? be->ops->name : "null");
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
    out->compute_busy_ms = out->stream_busy_ms[MT_STREAM_COMPUTE];
    out->h2d_busy_ms = out->stream_busy_ms[MT_STREAM_H2D];
    out->d2h_busy_ms = out->stream_busy_ms[MT_STREAM_D2H];
    return MT_OK;
}

long long mt_sim_count_ops(mt_backend *be, int s, const char *name) {
    mt_sim_ctx *c = sim_ctx_checked(be);
    if (!c) return -1;
    long long n = 0;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n_rec; i++) {
        const mt_sim_rec *r = &c->rec[i];
        if (r->lane >= MT_NUM_STREAMS || (s >= 0 && r->lane != s)) continue;
        if (!name || !strcmp(r->name, name)) n++;
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}
