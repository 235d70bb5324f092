// cudnn_attention.c: the SDPA graphs, their plan cache and execution.
//
// The graphs are the ones cudnn-frontend's composite SDPA nodes expand into
// (include/cudnn_frontend/node/scaled_dot_product_flash_attention.h), op for op,
// for our case (bf16, causal top-left, GQA, softmax stats, no dropout/bias):
// cuDNN's fused-attention engines match these patterns. Shapes are cuDNN's
// (b, h, s, d) views of our buffers; only the strides encode our packing:
//   Q  (b,hq,s,d)  strides (s*row, d, row, 1), row = (NH+2*NKV)*HD elements per token
//   K^T(b,hk,d,s)  strides (s*row, d, 1, row) at qkv + NH*HD (the backend wants K transposed)
//   V  (b,hk,s,d)  strides (s*row, d, row, 1) at qkv + (NH+NKV)*HD
//   O  (b,hq,s,d)  strides (s*NH*HD, d, NH*HD, 1);  stats (b,hq,s,1) strides (hq*s, s, 1, 1)
//
// forward:  S = Q K^T * scale; causal mask; M = max S; E = exp(S - M); Z = sum E;
//           stats = M + log Z; P = E / Z (bf16); O = P V
// backward: Dsum = rowsum(dO * O); P = exp(mask(Q K^T * scale) - stats);
//           dV = P^T dO (summed over the q heads of a kv head); dS = P (dO V^T - Dsum) * scale;
//           dK = dS^T Q (head-summed); dQ = dS K (f32 accumulator, then bf16)
// Version-dependent pieces, as the frontend does them: the masked value (-inf from
// 9.10, lowest float before); a padding mask with per-batch lengths in the backward
// when s % 128 != 0 on cuDNN <= 9.15 (a backend bug workaround); dQ's f32
// accumulator zeroed by us before 9.6.
#include "backends/cuda/cudnn_attention.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/cudnn_graph.h"
#include "core/env.h"

enum {
    U_Q = 1, U_K, U_V, U_O, U_STATS, U_SCALE, U_NEG_INF, U_ONE, U_DO, U_DQ, U_DK, U_DV,
    U_DSUM,   // rowsum(dO * O), f32, in our workspace
    U_DQ_ACC, // dQ accumulator, f32, in our workspace
    U_SEQ_Q, U_SEQ_KV, // per-batch lengths (int32) of the padding-mask workaround
    U_FIRST_VIRTUAL = 100,
};

typedef struct {
    int bwd, B, T, NH, NKV, HD, det;
} sdpa_key;

// The version-dependent choices for one graph.
typedef struct {
    float neg_inf;      // the masked score
    int red_det_attr;   // reductions carry IS_DETERMINISTIC (9.11+)
    int padding;        // backward padding-mask workaround (s % 128 != 0, cuDNN <= 9.15)
    int padding_again;  // ... re-applied after the stats subtraction (cuDNN < 9.10)
    int zero_dq_acc;    // the f32 dQ accumulator must be zeroed before a run (cuDNN < 9.6)
} sdpa_variant;

static sdpa_variant variant_of(const sdpa_key *k, size_t version) {
    sdpa_variant v;
    v.neg_inf = version >= 91000 ? -INFINITY : -FLT_MAX;
    v.red_det_attr = version >= 91100;
    v.padding = k->bwd && k->T % 128 != 0 && version <= 91500;
    v.padding_again = v.padding && version < 91000;
    v.zero_dq_acc = k->bwd && !k->det && version < 90600;
    return v;
}

static cg_shape shape(int64_t d0, int64_t d1, int64_t d2, int64_t d3, int64_t s0, int64_t s1, int64_t s2, int64_t s3) {
    cg_shape s = {{d0, d1, d2, d3}, {s0, s1, s2, s3}};
    return s;
}

// The operands every graph shares.
typedef struct {
    int64_t b, hq, hk, s, d, row;
    cg_shape q, kt, v, o, stats, scalar, scores, stats_like;
    cudnnBackendDescriptor_t Q, KT, V, O, STATS, SCALE, NEG_INF;
} sdpa_io;

static void io_init(cg_graph *g, const sdpa_key *k, sdpa_io *io) {
    int64_t b = k->B, hq = k->NH, hk = k->NKV, s = k->T, d = k->HD, row = (hq + 2 * hk) * d;
    io->b = b, io->hq = hq, io->hk = hk, io->s = s, io->d = d, io->row = row;
    io->q = shape(b, hq, s, d, s * row, d, row, 1);
    io->kt = shape(b, hk, d, s, s * row, d, 1, row);
    io->v = shape(b, hk, s, d, s * row, d, row, 1);
    io->o = shape(b, hq, s, d, s * hq * d, d, hq * d, 1);
    io->stats = shape(b, hq, s, 1, hq * s, s, 1, 1);
    io->scalar = shape(1, 1, 1, 1, 1, 1, 1, 1);
    io->scores = shape(b, hq, s, s, hq * s * s, s * s, s, 1);
    io->Q = cg_tensor(g, "Q", U_Q, CUDNN_DATA_BFLOAT16, io->q, 0);
    io->KT = cg_tensor(g, "K^T", U_K, CUDNN_DATA_BFLOAT16, io->kt, 0);
    io->O = cg_tensor(g, "O", U_O, CUDNN_DATA_BFLOAT16, io->o, 0);
    io->STATS = cg_tensor(g, "stats", U_STATS, CUDNN_DATA_FLOAT, io->stats, 0);
    io->SCALE = cg_tensor(g, "attn_scale", U_SCALE, CUDNN_DATA_FLOAT, io->scalar, CG_BY_VALUE);
    io->NEG_INF = cg_tensor(g, "mask value", U_NEG_INF, CUDNN_DATA_FLOAT, io->scalar, CG_BY_VALUE);
}

// y = x where row >= col, else the mask value (the frontend's diagonal band mask, right bound 0).
static cudnnBackendDescriptor_t causal_mask(cg_graph *g, const sdpa_io *io, cudnnBackendDescriptor_t x) {
    cudnnBackendDescriptor_t row = cg_virtual(g, "causal row index", CUDNN_DATA_INT32, io->scores);
    cg_pointwise(g, "causal row index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, 2, x, NULL, NULL, row);
    cudnnBackendDescriptor_t col = cg_virtual(g, "causal col index", CUDNN_DATA_INT32, io->scores);
    cg_pointwise(g, "causal col index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_FLOAT, 3, x, NULL, NULL, col);
    cudnnBackendDescriptor_t keep = cg_virtual(g, "causal row>=col", CUDNN_DATA_BOOLEAN, io->scores);
    cg_pointwise(g, "causal row>=col", CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, -1, row, col, NULL, keep);
    cudnnBackendDescriptor_t y = cg_virtual(g, "causal select", CUDNN_DATA_FLOAT, io->scores);
    cg_pointwise(g, "causal select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, x, io->NEG_INF, keep, y);
    return y;
}

// y = x where row < seq_q and col < seq_kv, else the mask value (the frontend's padding mask).
static cudnnBackendDescriptor_t padding_mask(cg_graph *g, const sdpa_io *io, cudnnBackendDescriptor_t x,
                                             cudnnBackendDescriptor_t seq_q, cudnnBackendDescriptor_t seq_kv) {
    cudnnBackendDescriptor_t row = cg_virtual(g, "padding row index", CUDNN_DATA_INT32, io->scores);
    cg_pointwise(g, "padding row index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, 2, x, NULL, NULL, row);
    cudnnBackendDescriptor_t col = cg_virtual(g, "padding col index", CUDNN_DATA_INT32, io->scores);
    cg_pointwise(g, "padding col index", CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, 3, x, NULL, NULL, col);
    cudnnBackendDescriptor_t rin = cg_virtual(g, "padding row<seq_q", CUDNN_DATA_BOOLEAN, io->scores);
    cg_pointwise(g, "padding row<seq_q", CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, -1, row, seq_q, NULL, rin);
    cudnnBackendDescriptor_t cin = cg_virtual(g, "padding col<seq_kv", CUDNN_DATA_BOOLEAN, io->scores);
    cg_pointwise(g, "padding col<seq_kv", CUDNN_POINTWISE_CMP_LT, CUDNN_DATA_BOOLEAN, -1, col, seq_kv, NULL, cin);
    cudnnBackendDescriptor_t keep = cg_virtual(g, "padding and", CUDNN_DATA_BOOLEAN, io->scores);
    cg_pointwise(g, "padding and", CUDNN_POINTWISE_LOGICAL_AND, CUDNN_DATA_BOOLEAN, -1, rin, cin, NULL, keep);
    cudnnBackendDescriptor_t y = cg_virtual(g, "padding select", CUDNN_DATA_FLOAT, io->scores);
    cg_pointwise(g, "padding select", CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, -1, x, io->NEG_INF, keep, y);
    return y;
}

static void build_fwd(cg_graph *g, const sdpa_key *k, const sdpa_variant *var) {
    sdpa_io io;
    io_init(g, k, &io);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t V = cg_tensor(g, "V", U_V, CUDNN_DATA_BFLOAT16, io.v, 0);
    cudnnBackendDescriptor_t S = cg_virtual(g, "S", f32, io.scores);
    cg_matmul(g, "bmm1 Q@K^T", io.Q, io.KT, S, NULL, NULL, NULL);
    cudnnBackendDescriptor_t S1 = cg_virtual(g, "S*scale", f32, io.scores);
    cg_pointwise(g, "attn_scale", CUDNN_POINTWISE_MUL, f32, -1, S, io.SCALE, NULL, S1);
    cudnnBackendDescriptor_t S2 = causal_mask(g, &io, S1);
    // softmax with stats (the frontend's composite softmax node)
    cudnnBackendDescriptor_t M = cg_virtual(g, "max", f32, io.stats);
    cg_reduction(g, "softmax max", CUDNN_REDUCE_TENSOR_MAX, var->red_det_attr, S2, M);
    cudnnBackendDescriptor_t S3 = cg_virtual(g, "S-max", f32, io.scores);
    cg_pointwise(g, "softmax sub", CUDNN_POINTWISE_SUB, f32, -1, S2, M, NULL, S3);
    cudnnBackendDescriptor_t E = cg_virtual(g, "exp", f32, io.scores);
    cg_pointwise(g, "softmax exp", CUDNN_POINTWISE_EXP, f32, -1, S3, NULL, NULL, E);
    cudnnBackendDescriptor_t Z = cg_virtual(g, "sum", f32, io.stats);
    cg_reduction(g, "softmax sum", CUDNN_REDUCE_TENSOR_ADD, var->red_det_attr, E, Z);
    cudnnBackendDescriptor_t LZ = cg_virtual(g, "log sum", f32, io.stats);
    cg_pointwise(g, "softmax log", CUDNN_POINTWISE_LOG, f32, -1, Z, NULL, NULL, LZ);
    cg_pointwise(g, "softmax stats", CUDNN_POINTWISE_ADD, f32, -1, M, LZ, NULL, io.STATS);
    cudnnBackendDescriptor_t P = cg_virtual(g, "P", CUDNN_DATA_BFLOAT16, io.scores); // bmm2 takes P in the io type
    cg_pointwise(g, "softmax div", CUDNN_POINTWISE_DIV, f32, -1, E, Z, NULL, P);
    cg_matmul(g, "bmm2 P@V", P, V, io.O, NULL, NULL, NULL);
}

static void build_bwd(cg_graph *g, const sdpa_key *k, const sdpa_variant *var) {
    sdpa_io io;
    io_init(g, k, &io);
    const int64_t b = io.b, hq = io.hq, hk = io.hk, s = io.s, d = io.d, row = io.row;
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT, bf16 = CUDNN_DATA_BFLOAT16;
    const cg_shape vt = shape(b, hk, d, s, s * row, d, 1, row), kv = io.v; // dK, dV like K, V
    const cg_shape scores_t = shape(b, hq, s, s, hq * s * s, s * s, 1, s);  // the transposed view
    const cg_shape full = shape(b, hq, s, d, hq * s * d, s * d, d, 1);      // per-q-head dK/dV, dQ accumulator
    cudnnBackendDescriptor_t VT = cg_tensor(g, "V^T", U_V, bf16, vt, 0);
    cudnnBackendDescriptor_t dO = cg_tensor(g, "dO", U_DO, bf16, io.o, 0);
    cudnnBackendDescriptor_t dQ = cg_tensor(g, "dQ", U_DQ, bf16, io.q, 0);
    cudnnBackendDescriptor_t dK = cg_tensor(g, "dK", U_DK, bf16, kv, 0);
    cudnnBackendDescriptor_t dV = cg_tensor(g, "dV", U_DV, bf16, kv, 0);
    cudnnBackendDescriptor_t ONE = cg_tensor(g, "one", U_ONE, f32, io.scalar, CG_BY_VALUE);
    cudnnBackendDescriptor_t DSUM = cg_tensor(g, "rowsum(dO*O)", U_DSUM, f32, io.stats, 0);
    cudnnBackendDescriptor_t SQ = NULL, SKV = NULL;
    if (var->padding) {
        cg_shape lens = shape(b, 1, 1, 1, 1, 1, 1, 1);
        SQ = cg_tensor(g, "seq_len_q", U_SEQ_Q, CUDNN_DATA_INT32, lens, 0);
        SKV = cg_tensor(g, "seq_len_kv", U_SEQ_KV, CUDNN_DATA_INT32, lens, 0);
    }
    // Dsum = rowsum(dO * O) (times the dropout-scale inverse, 1 here: the frontend keeps the op)
    cudnnBackendDescriptor_t t1 = cg_virtual(g, "dO*O", f32, shape(b, hq, s, d, hq * s * d, s * d, hq * d, 1));
    cg_pointwise(g, "mul dO O", CUDNN_POINTWISE_MUL, f32, -1, dO, io.O, NULL, t1);
    cudnnBackendDescriptor_t t2 = cg_virtual(g, "rowsum", f32, io.stats);
    cg_reduction(g, "reduce dO O", CUDNN_REDUCE_TENSOR_ADD, var->red_det_attr, t1, t2);
    cg_pointwise(g, "scale dropout inv", CUDNN_POINTWISE_MUL, f32, -1, t2, ONE, NULL, DSUM);
    // P = exp(mask(Q K^T * scale) - stats)
    cudnnBackendDescriptor_t S = cg_virtual(g, "S", f32, io.scores);
    cg_matmul(g, "matmul Q K^T", io.Q, io.KT, S, SQ, SKV, NULL);
    cudnnBackendDescriptor_t x = cg_virtual(g, "S*scale", f32, io.scores);
    cg_pointwise(g, "mul S attn_scale", CUDNN_POINTWISE_MUL, f32, -1, S, io.SCALE, NULL, x);
    if (var->padding) x = padding_mask(g, &io, x, SQ, SKV);
    cudnnBackendDescriptor_t xs = cg_virtual(g, "S-stats", f32, io.scores);
    cg_pointwise(g, "sub S stats", CUDNN_POINTWISE_SUB, f32, -1, x, io.STATS, NULL, xs);
    x = xs;
    if (var->padding_again) x = padding_mask(g, &io, x, SQ, SKV);
    x = causal_mask(g, &io, x);
    cudnnBackendDescriptor_t P = cg_virtual(g, "P", f32, io.scores);
    cg_pointwise(g, "exp S", CUDNN_POINTWISE_EXP, f32, -1, x, NULL, NULL, P);
    // dV = P^T dO, summed over the q heads of each kv head
    cudnnBackendDescriptor_t PT = cg_virtual(g, "P^T", bf16, scores_t);
    cg_reshape(g, "reshape P", P, PT);
    if (hq == hk) {
        cg_matmul(g, "matmul P^T dO", PT, dO, dV, SKV, NULL, SQ);
    } else {
        cudnnBackendDescriptor_t dVf = cg_virtual(g, "dV per q head", bf16, full);
        cg_matmul(g, "matmul P^T dO", PT, dO, dVf, SKV, NULL, SQ);
        cg_reduction(g, "reduce dV heads", CUDNN_REDUCE_TENSOR_ADD, var->red_det_attr, dVf, dV);
    }
    // dS = P * (dO V^T - Dsum) * scale
    cudnnBackendDescriptor_t dP = cg_virtual(g, "dP", f32, io.scores);
    cg_matmul(g, "matmul dO V^T", dO, VT, dP, SQ, SKV, NULL);
    cudnnBackendDescriptor_t dP1 = cg_virtual(g, "dP*mask", f32, io.scores);
    cg_pointwise(g, "dP dropout mask", CUDNN_POINTWISE_MUL, f32, -1, dP, ONE, NULL, dP1);
    cudnnBackendDescriptor_t dP2 = cg_virtual(g, "dP-Dsum", f32, io.scores);
    cg_pointwise(g, "sub dP Dsum", CUDNN_POINTWISE_SUB, f32, -1, dP1, DSUM, NULL, dP2);
    cudnnBackendDescriptor_t dS = cg_virtual(g, "dS", f32, io.scores);
    cg_pointwise(g, "mul dP P", CUDNN_POINTWISE_MUL, f32, -1, dP2, P, NULL, dS);
    cudnnBackendDescriptor_t dS1 = cg_virtual(g, "dS*scale", f32, io.scores);
    cg_pointwise(g, "mul dS attn_scale", CUDNN_POINTWISE_MUL, f32, -1, dS, io.SCALE, NULL, dS1);
    // dK = dS^T Q, summed over the q heads of each kv head
    cudnnBackendDescriptor_t dST = cg_virtual(g, "dS^T", bf16, scores_t);
    cg_reshape(g, "reshape dS", dS1, dST);
    if (hq == hk) {
        cg_matmul(g, "matmul dS^T Q", dST, io.Q, dK, SKV, NULL, SQ);
    } else {
        cudnnBackendDescriptor_t dKf = cg_virtual(g, "dK per q head", bf16, full);
        cg_matmul(g, "matmul dS^T Q", dST, io.Q, dKf, SKV, NULL, SQ);
        cg_reduction(g, "reduce dK heads", CUDNN_REDUCE_TENSOR_ADD, var->red_det_attr, dKf, dK);
    }
    // dQ = dS K (K as the reshape of K^T back to (b,hk,s,d); the frontend leaves it f32-typed)
    cudnnBackendDescriptor_t K = cg_virtual(g, "K", f32, io.v);
    cg_reshape(g, "reshape K", io.KT, K);
    if (k->det) { // no f32 accumulator: cuDNN runs its deterministic dQ
        cg_matmul(g, "matmul dS K", dS1, K, dQ, SQ, NULL, SKV);
    } else {
        cudnnBackendDescriptor_t ACC = cg_tensor(g, "dQ accumulator", U_DQ_ACC, f32, full, 0);
        cg_matmul(g, "matmul dS K", dS1, K, ACC, SQ, NULL, SKV);
        cg_pointwise(g, "identity dQ", CUDNN_POINTWISE_IDENTITY, f32, -1, ACC, NULL, NULL, dQ);
    }
}

static void build(cg_graph *g, const sdpa_key *k, const sdpa_variant *v) {
    if (k->bwd) build_bwd(g, k, v);
    else build_fwd(g, k, v);
}

// ---- plans, workspace, execution ----

#define SDPA_CACHE 16

typedef struct {
    sdpa_key key;
    int used, failed; // failed: cuDNN refused the shape once (not retried)
    unsigned long long last_use;
    cg_graph g;
    cudnnBackendDescriptor_t plan;
    sdpa_variant var;
    size_t dsum_off, acc_off, acc_bytes, need; // our workspace: [cuDNN's | Dsum | dQ accumulator]
    int32_t *seq_lens; // device, B copies of T (padding workaround)
} sdpa_plan;

struct mt_cudnn_attn {
    const mt_cudnn_api *api;
    cudnnHandle_t h;
    cudaStream_t stream;
    int det; // MT_CUDNN_DETERMINISTIC=1
    sdpa_plan cache[SDPA_CACHE];
    unsigned long long clock;
    void *ws;
    size_t ws_bytes;
    char desc[640];
};

static size_t align256(size_t x) { return (x + 255) / 256 * 256; }

static mt_status cuda_fail(cudaError_t e, const char *what) {
    cudaGetLastError(); // clear a non-sticky error
    return mt_fail(e == cudaErrorMemoryAllocation ? MT_ERR_MEMORY : MT_ERR_BACKEND, "cuDNN attention: %s: %s (%s)",
                   what, cudaGetErrorString(e), cudaGetErrorName(e));
}

static void plan_release(sdpa_plan *p) {
    cg_free(&p->g);
    if (p->seq_lens) cudaFree(p->seq_lens);
    memset(p, 0, sizeof *p);
}

mt_status mt_cudnn_attn_create(cudaStream_t stream, mt_cudnn_attn **out) {
    *out = NULL;
    const mt_cudnn_api *api = mt_cudnn_api_load();
    if (!api) return MT_ERR_UNSUPPORTED; // mt_last_error() says why
    mt_cudnn_attn *a = (mt_cudnn_attn *)calloc(1, sizeof *a);
    if (!a) return mt_fail(MT_ERR_MEMORY, "cuDNN attention: out of host memory");
    a->api = api;
    a->stream = stream;
    mt_status ds = mt_env_bool("MT_CUDNN_DETERMINISTIC", 0, &a->det);
    if (ds != MT_OK) {
        mt_cudnn_attn_destroy(a);
        return ds;
    }
    cudnnStatus_t st = api->Create(&a->h);
    if (st == CUDNN_STATUS_SUCCESS) st = api->SetStream(a->h, stream);
    if (st != CUDNN_STATUS_SUCCESS) {
        mt_status s = mt_cudnn_fail(api, st, "cudnnCreate/cudnnSetStream", __FILE__, __LINE__);
        mt_cudnn_attn_destroy(a);
        return s;
    }
    snprintf(a->desc, sizeof a->desc, "cuDNN %zu.%zu.%zu (%s)%s", api->version / 10000, api->version / 100 % 100,
             api->version % 100, api->path, a->det ? ", deterministic backward" : "");
    *out = a;
    return MT_OK;
}

void mt_cudnn_attn_destroy(mt_cudnn_attn *a) {
    if (!a) return;
    if (a->stream) cudaStreamSynchronize(a->stream); // plans and workspace may still be in use
    for (int i = 0; i < SDPA_CACHE; i++)
        if (a->cache[i].used) plan_release(&a->cache[i]);
    if (a->ws) cudaFree(a->ws);
    if (a->h) a->api->Destroy(a->h);
    free(a);
}

const char *mt_cudnn_attn_describe(const mt_cudnn_attn *a) { return a ? a->desc : "cuDNN not loaded"; }

const char *mt_cudnn_attn_unsupported(int act_is_bf16, int HD, const void *const *ptrs, int n_ptrs) {
    if (!act_is_bf16) return "needs bf16 activations (cuDNN's fused attention has no f32 kernels)";
    if (HD % 8 != 0 || HD > 128) return "needs a head dim that is a multiple of 8 and at most 128";
    for (int i = 0; i < n_ptrs; i++)
        if (((uintptr_t)ptrs[i] & 15u) != 0) return "needs 16-byte aligned buffers";
    return NULL;
}

// The cached plan for k, built (and the workspace grown) on first use.
static mt_status plan_get(mt_cudnn_attn *a, const sdpa_key *k, sdpa_plan **out) {
    a->clock++;
    sdpa_plan *victim = NULL;
    for (int i = 0; i < SDPA_CACHE; i++) {
        sdpa_plan *p = &a->cache[i];
        if (p->used && !memcmp(&p->key, k, sizeof *k)) {
            p->last_use = a->clock;
            if (p->failed)
                return mt_fail(MT_ERR_UNSUPPORTED, "cuDNN attention: no plan for %s B=%d T=%d NH=%d NKV=%d HD=%d (cuDNN "
                                                   "refused it when first asked)",
                               k->bwd ? "backward" : "forward", k->B, k->T, k->NH, k->NKV, k->HD);
            *out = p;
            return MT_OK;
        }
        if (!victim || (victim->used && (!p->used || p->last_use < victim->last_use))) victim = p;
    }
    if (victim->used) {
        cudaError_t e = cudaStreamSynchronize(a->stream); // its seq_lens may still be read
        if (e != cudaSuccess) return cuda_fail(e, "cudaStreamSynchronize before evicting a plan");
        plan_release(victim);
    }
    sdpa_plan *p = victim;
    p->key = *k;
    p->used = 1;
    p->last_use = a->clock;
    p->var = variant_of(k, a->api->version);
    cg_init(&p->g, a->api, U_FIRST_VIRTUAL);
    build(&p->g, k, &p->var);
    int64_t plan_ws = 0;
    mt_status s = cg_build_plan(&p->g, a->h, &p->plan, &plan_ws);
    if (s != MT_OK) {
        cg_free(&p->g);
        p->failed = 1;
        return s;
    }
    size_t off = align256((size_t)plan_ws);
    if (k->bwd) {
        p->dsum_off = off;
        off += align256((size_t)k->B * k->NH * k->T * sizeof(float));
        if (!k->det) {
            p->acc_off = off;
            p->acc_bytes = (size_t)k->B * k->NH * k->T * k->HD * sizeof(float);
            off += align256(p->acc_bytes);
        }
    }
    p->need = off;
    cudaError_t e;
    if (p->var.padding) { // every sequence has the full length T: the mask removes nothing
        int32_t *h = (int32_t *)malloc((size_t)k->B * sizeof(int32_t));
        if (!h) return mt_fail(MT_ERR_MEMORY, "cuDNN attention: out of host memory");
        for (int i = 0; i < k->B; i++) h[i] = k->T;
        e = cudaMalloc((void **)&p->seq_lens, (size_t)k->B * sizeof(int32_t));
        if (e == cudaSuccess) e = cudaMemcpy(p->seq_lens, h, (size_t)k->B * sizeof(int32_t), cudaMemcpyHostToDevice);
        free(h);
        if (e != cudaSuccess) {
            plan_release(p);
            return cuda_fail(e, "sequence lengths of the padding mask");
        }
    }
    if (p->need > a->ws_bytes) { // grows to the largest plan seen, then stays
        if ((e = cudaStreamSynchronize(a->stream)) != cudaSuccess) return cuda_fail(e, "cudaStreamSynchronize");
        if (a->ws) cudaFree(a->ws);
        a->ws = NULL;
        a->ws_bytes = 0;
        if ((e = cudaMalloc(&a->ws, p->need)) != cudaSuccess) {
            plan_release(p);
            char what[96];
            snprintf(what, sizeof what, "cudaMalloc of the %zu-byte workspace", p->need);
            return cuda_fail(e, what);
        }
        a->ws_bytes = p->need;
    }
    *out = p;
    return MT_OK;
}

static mt_status execute(mt_cudnn_attn *a, sdpa_plan *p, const int64_t *uids, void **ptrs, int n) {
    const mt_cudnn_api *api = a->api;
    cudnnBackendDescriptor_t vp = NULL;
    MT_CUDNN_CHECK(api, api->BackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    cudnnStatus_t st = api->BackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    if (st == CUDNN_STATUS_SUCCESS)
        st = api->BackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (st == CUDNN_STATUS_SUCCESS)
        st = api->BackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &a->ws);
    if (st == CUDNN_STATUS_SUCCESS) st = api->BackendFinalize(vp);
    if (st == CUDNN_STATUS_SUCCESS) st = api->BackendExecute(a->h, p->plan, vp);
    api->BackendDestroyDescriptor(vp);
    if (st != CUDNN_STATUS_SUCCESS) return mt_cudnn_fail(api, st, "variant pack / cudnnBackendExecute", __FILE__, __LINE__);
    return MT_OK;
}

static mt_status check_shape(const char *op, int B, int T, int NH, int NKV, int HD) {
    if (B <= 0 || T <= 0 || NH <= 0 || NKV <= 0 || HD <= 0 || NH % NKV)
        return mt_fail(MT_ERR_SHAPE, "cuDNN %s: bad shape B=%d T=%d NH=%d NKV=%d HD=%d (NH must be a multiple of NKV)",
                       op, B, T, NH, NKV, HD);
    return MT_OK;
}

mt_status mt_cudnn_attn_fwd(mt_cudnn_attn *a, void *out, float *lse, const void *qkv, int B, int T, int NH, int NKV,
                            int HD) {
    MT_TRY(check_shape("attention_fwd", B, T, NH, NKV, HD));
    sdpa_key k = {0, B, T, NH, NKV, HD, 0};
    sdpa_plan *p;
    MT_TRY(plan_get(a, &k, &p));
    float scale = 1.0f / sqrtf((float)HD), neg_inf = p->var.neg_inf;
    char *q = (char *)qkv;
    const size_t es = 2; // bf16
    int64_t uids[] = {U_Q, U_K, U_V, U_O, U_STATS, U_SCALE, U_NEG_INF};
    void *ptrs[] = {q, q + (size_t)NH * HD * es, q + (size_t)(NH + NKV) * HD * es, out, lse, &scale, &neg_inf};
    return execute(a, p, uids, ptrs, 7);
}

mt_status mt_cudnn_attn_bwd(mt_cudnn_attn *a, void *dqkv, const void *dout, const void *qkv, const void *out,
                            const float *lse, int B, int T, int NH, int NKV, int HD) {
    MT_TRY(check_shape("attention_bwd", B, T, NH, NKV, HD));
    sdpa_key k = {1, B, T, NH, NKV, HD, a->det};
    sdpa_plan *p;
    MT_TRY(plan_get(a, &k, &p));
    char *ws = (char *)a->ws;
    if (p->var.zero_dq_acc) {
        cudaError_t e = cudaMemsetAsync(ws + p->acc_off, 0, p->acc_bytes, a->stream);
        if (e != cudaSuccess) return cuda_fail(e, "cudaMemsetAsync of the dQ accumulator");
    }
    float scale = 1.0f / sqrtf((float)HD), one = 1.0f, neg_inf = p->var.neg_inf;
    const size_t es = 2, ko = (size_t)NH * HD * es, vo = (size_t)(NH + NKV) * HD * es;
    char *q = (char *)qkv, *dq = (char *)dqkv;
    int64_t uids[16] = {U_Q, U_K, U_V, U_O, U_DO, U_STATS, U_SCALE, U_ONE, U_NEG_INF, U_DQ, U_DK, U_DV, U_DSUM};
    void *ptrs[16] = {q,  q + ko,      q + vo,       (void *)out, (void *)dout, (void *)lse, &scale, &one, &neg_inf,
                      dq, dq + ko,     dq + vo,      ws + p->dsum_off};
    int n = 13;
    if (!k.det) uids[n] = U_DQ_ACC, ptrs[n++] = ws + p->acc_off;
    if (p->var.padding) {
        uids[n] = U_SEQ_Q, ptrs[n++] = p->seq_lens;
        uids[n] = U_SEQ_KV, ptrs[n++] = p->seq_lens;
    }
    return execute(a, p, uids, ptrs, n);
}

mt_status mt_cudnn_attn_graph_check(int bwd, int B, int T, int NH, int NKV, int HD, int deterministic, size_t version,
                                    int *n_ops) {
    *n_ops = 0;
    MT_TRY(check_shape(bwd ? "attention_bwd" : "attention_fwd", B, T, NH, NKV, HD));
    const mt_cudnn_api *api = mt_cudnn_api_load();
    if (!api) return MT_ERR_UNSUPPORTED;
    sdpa_key k = {bwd, B, T, NH, NKV, HD, bwd && deterministic};
    sdpa_variant v = variant_of(&k, version);
    cg_graph g;
    cg_init(&g, api, U_FIRST_VIRTUAL);
    build(&g, &k, &v);
    mt_status s = g.st;
    *n_ops = g.n_ops;
    cg_free(&g);
    return s;
}
