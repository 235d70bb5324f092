// mb.h: the C side of mt-microbench. Benchmarks are C functions over an opaque
// state wrapping Google Benchmark's; shim.cc registers them and runs main.
//
//   static void bm_x(mt_mb_state *s, const int64_t *args, const void *user) {
//       ... set up ...
//       while (mt_mb_keep_running(s)) { ... one iteration ... }
//       mt_mb_counter(s, "params_per_s", n * (double)mt_mb_iterations(s), MT_MB_RATE);
//   }
//   mt_mb_register("adamw/fp32", bm_x, NULL, (int64_t[]){1 << 24}, 1, MT_MB_REAL_TIME);
//
// Rates (MT_MB_RATE, and bytes_per_second) are divided by the time Google Benchmark
// reports: wall time (MT_MB_REAL_TIME: OpenMP threads do the work, so the main
// thread's CPU time would be wrong) or the time set per iteration (MT_MB_MANUAL_TIME,
// e.g. CUDA-event time).
#ifndef MT_MB_H
#define MT_MB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mt_mb_state mt_mb_state;
typedef void (*mt_mb_fn)(mt_mb_state *s, const int64_t *args, const void *user);

enum {
    MT_MB_REAL_TIME = 1,   // rates over wall time
    MT_MB_MANUAL_TIME = 2, // rates over mt_mb_set_iteration_time
    MT_MB_ONE_ITER = 4,    // exactly one iteration (the function samples and takes the median itself)
};
enum { MT_MB_RATE = 1, MT_MB_AVG = 2 }; // counter flags: divide by seconds / by iterations

// Registers "name/arg0/arg1/..." (nargs <= 4). name is copied.
void mt_mb_register(const char *name, mt_mb_fn fn, const void *user, const int64_t *args, int nargs, int flags);
// Adds a key to the JSON "context" (e.g. why a family was skipped); later values append.
void mt_mb_note(const char *key, const char *value);

int mt_mb_keep_running(mt_mb_state *s);
int64_t mt_mb_iterations(mt_mb_state *s);
void mt_mb_pause(mt_mb_state *s);
void mt_mb_resume(mt_mb_state *s);
void mt_mb_set_iteration_time(mt_mb_state *s, double seconds);
void mt_mb_set_bytes_processed(mt_mb_state *s, double bytes); // -> "bytes_per_second"
void mt_mb_counter(mt_mb_state *s, const char *name, double value, int flags);
void mt_mb_set_label(mt_mb_state *s, const char *label);
// Marks the run failed with msg (JSON: error_occurred, error_message); return after it.
void mt_mb_error(mt_mb_state *s, const char *msg);

// Each benchmark file registers its benchmarks; release frees what they cached.
void mt_mb_register_host(void);   // host_mem.c: memcpy, triad
void mt_mb_register_adamw(void);  // adamw.c
void mt_mb_register_adamw_unit(void); // adamw_unit.c: the engine's AdamW over embedding, layer, head
void mt_mb_register_grad_sumsq(void); // grad_sumsq.c: the gradient drain's sum of squares
void mt_mb_register_gemm(void);   // gemm.c
void mt_mb_register_gemm_bwd(void); // gemm_bwd.c: a linear layer's dinp and dw GEMMs, as the layer calls them
void mt_mb_register_kernels(void);  // kernels.c: the memory-bound layer kernels at a model's shapes
void mt_mb_register_attention(void); // attention.c: causal attention fwd + bwd at a model's batch x heads
void mt_mb_register_copy(void);   // copy.c
void mt_mb_register_layer(void);  // layer.c
void mt_mb_register_launch(void); // launch.c: the host cost of one async call, the shortest GPU op
void mt_mb_register_host_contention(void); // host_contention.c: a pinned H2D copy beside AdamW
void mt_mb_backends_release(void);

// Shared by the backend benchmarks (backends.c): a backend created once per
// (name, act dtype) and kept until release; NULL with *why set when unavailable.
struct mt_backend;
struct mt_backend *mt_mb_backend(const char *name, int act_dtype, const char **why);

// Times each iteration on a backend's compute stream: where the backend's streams are
// asynchronous (a GPU), by events recorded around it and set as the iteration's time
// (register with MT_MB_MANUAL_TIME); elsewhere Google Benchmark's own clock does.
// init, start and stop return the backend's error message, or NULL.
struct mt_event;
typedef struct {
    struct mt_backend *be;
    struct mt_event *e0, *e1;
    int manual;
} mt_mb_timer;
const char *mt_mb_timer_init(mt_mb_timer *t, struct mt_backend *be);
const char *mt_mb_timer_start(mt_mb_timer *t);
const char *mt_mb_timer_stop(mt_mb_timer *t, mt_mb_state *s);
void mt_mb_timer_free(mt_mb_timer *t);

// Elements of the host-memory benchmarks (triad, adamw): $MT_MB_HOST_N, else the larger
// of 2^24 and 4x the last-level cache (sysfs) over AdamW's 12 B/param in paper precision
// (the H200 host's 300 MB L3: 104857600). Exits 2 when malformed.
int64_t mt_mb_host_n(void);
// Median of n samples (sorts v in place).
double mt_mb_median(double *v, int n);
// 64-byte aligned, touched (first-touch by the calling threads) host memory; NULL on failure.
void *mt_mb_alloc(size_t bytes);

#ifdef __cplusplus
}
#endif
#endif
