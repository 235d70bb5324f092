// layer.h: the stateless transformer-layer template. A layer is this code
// plus a view: mt_layer_bind fills a struct of pointers into whichever device
// buffer holds the layer's weights (no copy, no per-layer graph or metadata).
#ifndef MT_LAYER_H
#define MT_LAYER_H

#include "backend/backend_call.h"
#include "model/layout.h"

typedef struct {
    int B, T, N;            // N = B*T tokens
    int C, F, NH, NKV, HD;  // QKV = NH + 2*NKV heads in the packed qkv rows
    int QKV;
    float eps;
    int qk_norm, bias;
    int mlp_rows;           // tokens per MLP chunk (0 = all N at once)
    int keep_mlp;           // MLP internals saved for every token (mt_schedule_desc.keep_mlp): 0 none,
                            // 1 the gate/up output, 2 and SwiGLU's product; else backward recomputes them per chunk
    int recompute_norms;    // the RMSNorm outputs ln1, ln2 are not saved: backward recomputes them from
                            // x_in and x_mid (the same kernel and inputs as the forward: the same values)
    mt_dtype wdt;           // weights and weight-gradients
    const float *rope_cos, *rope_sin; // device (T, HD/2)
} mt_dims;

// Pointers into a device buffer laid out as mt_unit_layout (weights or grads).
typedef struct {
    void *ln1, *qkv_w, *qkv_b, *q_norm, *k_norm, *o_w, *ln2, *gu_w, *down_w;
} mt_layer_ptrs;

// A layer's saved internals for one forward pass of N tokens (device).
typedef struct {
    void *ln1, *qkv_pre, *qkv_n, *qkv, *att, *x_mid, *ln2;
    void *gu, *h; // (N, 2F) gate/up output and (N, F) SwiGLU product, kept per keep_mlp (else NULL)
    float *rstd1, *rstd_qk, *lse, *rstd2;
} mt_layer_acts;

// Scratch (device), shared by all layers: the backward's gradients of N tokens,
// and the MLP's internals of one chunk (mlp_rows tokens). With recompute_norms a
// norm output not saved lives in dtmp (and in forward, ln2 in dln).
typedef struct {
    void *dtmp, *dln, *dqkv, *dqkv_pre, *datt; // dqkv_pre only with qk_norm
    void *gu, *h, *dgu, *dh;                   // one MLP chunk
    float *grad_sum; // (3F*C) f32: the MLP's weight gradients summed over chunks, rounded once
                     // (NULL: summed in wdt; set by the engine, not carved)
} mt_layer_scratch;

// Tokens per MLP chunk actually used (mlp_rows clamped to 1..N).
int mt_layer_mlp_rows(const mt_dims *d);

// Binds the template to a buffer holding one layer's weights (or grads).
void mt_layer_bind(const mt_unit_layout *lay, void *base, mt_dtype wdt, mt_layer_ptrs *out);

// Bytes of one mt_layer_acts / mt_layer_scratch set; carve them from one allocation.
size_t mt_layer_acts_bytes(const mt_dims *d, mt_dtype act);
size_t mt_layer_scratch_bytes(const mt_dims *d, mt_dtype act);
void mt_layer_acts_carve(const mt_dims *d, mt_dtype act, void *mem, mt_layer_acts *a);
void mt_layer_scratch_carve(const mt_dims *d, mt_dtype act, void *mem, mt_layer_scratch *s);

// x_out(N,C) = layer(x_in); internals saved in a. x_out NULL: stop after the internals
// backward needs (recompute skips the down projection).
mt_status mt_layer_forward(mt_backend *be, const mt_dims *d, const mt_layer_ptrs *w, mt_layer_acts *a,
                           mt_layer_scratch *s, const void *x_in, void *x_out);
// dx(N,C): in = dL/dx_out, out = dL/dx_in (in place); g receives the weight grads (overwritten).
mt_status mt_layer_backward(mt_backend *be, const mt_dims *d, const mt_layer_ptrs *w, const mt_layer_ptrs *g,
                            const mt_layer_acts *a, mt_layer_scratch *s, const void *x_in, void *dx);

#endif
