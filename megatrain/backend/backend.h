// backend.h: a backend as its callers see it (ggml-backend style): streams, events, caps,
// the ops by id; calls go through backend_call.h, created ones come from the registry
// (backend_registry.h). The table every backend (cpu, cuda, sim) implements is in
// backend_impl.h; what only one backend offers, in its own backends/NAME/ header.
// Shapes and conventions: backend_impl.h.
#ifndef MT_BACKEND_H
#define MT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"
#include "optim/adamw.h"

typedef enum { MT_STREAM_COMPUTE = 0, MT_STREAM_H2D = 1, MT_STREAM_D2H = 2, MT_NUM_STREAMS = 3 } mt_stream_id;
typedef enum { MT_COPY_H2D = 0, MT_COPY_D2H = 1, MT_COPY_D2D = 2 } mt_copy_kind;

typedef struct mt_event mt_event; // opaque, backend-defined
typedef struct mt_backend mt_backend;
typedef struct mt_backend_ops mt_backend_ops;             // backend_impl.h
typedef struct mt_backend_entry mt_backend_entry;         // its registry row (backend_impl.h)
typedef struct mt_device_collective mt_device_collective; // backend/device_collective.h

typedef struct {
    char name[128];          // "cpu (x86-64, 2 threads)", "NVIDIA H100 80GB HBM3"
    size_t mem_total_bytes;  // device memory (host RAM for cpu)
    size_t mem_free_bytes;
    int numa_node;           // nearest NUMA node of the device, -1 unknown
    size_t host_mem_avail_bytes; // host memory the model state may use (MemAvailable; sim: the profile's)
} mt_device_info;

// What a backend can do: the engine and the CLI ask these, never its name.
enum {
    MT_CAP_TENSOR_DATA = 1u << 0,  // kernels compute on real data (a virtual backend only prices them)
    MT_CAP_VIRTUAL_TIME = 1u << 1, // time is virtual: host work is priced (backend_call.h), not done
    MT_CAP_PAGE_LOCKED = 1u << 2,  // host_alloc page-locks memory (it counts against ulimit -l)
    MT_CAP_BF16 = 1u << 3,         // bf16 activations (else f32 only)
    MT_CAP_ASYNC = 1u << 4,        // streams run apart from the host: time work with events, not the host clock
    MT_CAP_DEVICE_MEMORY = 1u << 5, // dev_alloc is a device's own memory, not host RAM: what is free may be spent
};

// Host-side work the engine does between device operations; a virtual-time
// backend (sim) prices it instead of the engine doing it (engine/host_work.h).
typedef enum {
    MT_HOST_GRAD_ACCUMULATE = 0, // n elements of gradients: dst (+)= slab, plus the sum of squares
    MT_HOST_ADAMW = 1,           // n parameters through the fused AdamW pass
    MT_HOST_GRAD_SUMSQ = 3,      // the sum of squares of n gradients already in place (a direct copy)
    MT_HOST_ROWS_GATHER = 4,     // n weights (rows of the embedding) copied back to back into a staging block
} mt_host_work_kind;

// Flags for matmul_bwd. MT_DW_F32: dw (and dbias) are f32 buffers whatever wdt is, so
// a weight gradient computed in token chunks is summed in f32 across the chunks (with
// MT_ACC_DW) and rounded to wdt once, by the caller's cast, instead of once per chunk.
enum { MT_ACC_DINP = 1, MT_ACC_DW = 2, MT_DW_F32 = 4 };

// The entries of the ops table (backend_impl.h), by id (mt_op_name, backend_call.h, names each).
typedef enum {
    MT_OP_DEV_ALLOC, MT_OP_HOST_ALLOC, MT_OP_EVENT_CREATE, MT_OP_EVENT_RECORD, MT_OP_STREAM_WAIT, MT_OP_EVENT_SYNC,
    MT_OP_STREAM_SYNC, MT_OP_EVENT_ELAPSED_MS, MT_OP_COPY, MT_OP_MEMSET_ZERO,
    MT_OP_EMBEDDING_FWD, MT_OP_EMBEDDING_BWD, MT_OP_MATMUL_FWD, MT_OP_MATMUL_BWD, MT_OP_RMSNORM_FWD, MT_OP_RMSNORM_BWD,
    MT_OP_QK_NORM_FWD, MT_OP_QK_NORM_BWD, MT_OP_ROPE_FWD, MT_OP_ROPE_BWD, MT_OP_ATTENTION_FWD, MT_OP_ATTENTION_BWD,
    MT_OP_SWIGLU_FWD, MT_OP_SWIGLU_BWD, MT_OP_ADD, MT_OP_XENT_FWD_BWD, MT_OP_CAST, MT_OP_ADD_RMSNORM_FWD,
    MT_OP_RMSNORM_BWD_ADD,
    MT_OP_HOST_WORK_MS, MT_OP_TRACE_WRITE, MT_OP_SET_ATTENTION,
    MT_OP_ADAMW, MT_OP_GRAD_SUMSQ, MT_OP_GRAD_ADD,
    MT_OP_COUNT
} mt_op;

// One call of an op, as supports() is asked about it: its dtypes and dims in the
// letters of the op's own comment below (those it does not take stay 0).
typedef struct {
    mt_dtype act, wdt;     // activations (the backend's act_dtype); weights (cast: the source type)
    int N, C, OC, V;       // rows (N, R, n), width (C, IC, D, F), out width (OC), vocab (V)
    int B, T, NH, NKV, HD; // rope / attention / qk_norm (N rows of NH+2*NKV heads)
    unsigned flags;        // MT_SHAPE_*
} mt_op_shape;
enum {
    MT_SHAPE_IN_PLACE = 1u << 0, // the output is one of the inputs (rope, add, rmsnorm: out == inp)
    MT_SHAPE_BITWISE = 1u << 1,  // asked to give the same bits as another path to the same values:
                                 // bf16 weights as f32 weights rounded to bf16; fused as unfused
};

struct mt_backend {
    const mt_backend_ops *ops;
    mt_dtype act_dtype; // activation type the kernels use
    void *ctx;          // backend-private state
    unsigned long long copied_bytes[3]; // by mt_copy_kind, counted by mt_backend_copy (backend_call.h)
};

int mt_backend_has(const mt_backend *be, unsigned cap); // 1 when it has every MT_CAP_* in cap
void mt_backend_destroy(mt_backend *be);

// Attention implementations (--attention). The cuda backend has two: "native", its own
// kernels (backends/cuda/attention_kernels.cuh), and "cudnn", cuDNN's fused flash
// attention (backends/cuda/cudnn_attention.c), compiled where the cuDNN headers are and
// used where libcudnn.so.9 loads at run time. AUTO: cudnn when it loads, else native; the
// cuda backend says which on stderr at its first attention call. cpu has one
// implementation and accepts auto and native; sim accepts all three and prices the one
// chosen at its profile's measured rate (mt_hw_attention_tflops).
typedef enum { MT_ATTN_AUTO = 0, MT_ATTN_NATIVE = 1, MT_ATTN_CUDNN = 2 } mt_attn_impl;
// Parses "auto", "native" or "cudnn" (the --attention values).
mt_status mt_attn_impl_parse(const char *name, mt_attn_impl *out);
// Picks the attention implementation of a created backend (an explicit cudnn that cannot
// load fails here, naming why; AUTO falls back to native).
mt_status mt_backend_set_attention(mt_backend *be, mt_attn_impl impl);
// The name a hardware profile measures `impl` under (gpu.attention_tflops.<name>):
// "native" or "cudnn"; AUTO is what the cuda backend picks on a machine with cuDNN:
// cudnn for bf16 activations, native for f32 (cuDNN's fused attention takes bf16).
const char *mt_attn_kernel_name(mt_attn_impl impl, int bf16);

#endif
