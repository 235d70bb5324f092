// cpu_attention.c: causal GQA attention, flash style. Queries and keys are cut
// into tiles of ATT_BQ x ATT_BK; the forward keeps a running max and sum per
// query row (online softmax) and saves lse, so no T x T matrix ever exists and
// scratch is a few tiles per thread. The backward recomputes probabilities
// from lse (flash-attention-2) in two passes that each own their outputs:
// pass 1 walks key tiles and sums dK, dV over the query heads of the group and
// all query tiles; pass 2 walks query tiles for dQ. No atomics, fixed order:
// results do not depend on the thread count.
#include <math.h>
#include <omp.h>

#include "backends/cpu/cpu_internal.h"

#define ATT_BQ 64
#define ATT_BK 64 // = ATT_BQ: the row-tile buffers hold either query or key rows

typedef struct {
    int B, T, NH, NKV, HD, G; // G = NH / NKV query heads per kv head
    size_t rs;                // floats per token row of packed qkv
    float scale;              // 1/sqrt(HD)
} att_shape;

static att_shape att_make(int B, int T, int NH, int NKV, int HD) {
    att_shape s = {B, T, NH, NKV, HD, NH / NKV, (size_t)(NH + 2 * NKV) * HD, (float)(1.0 / sqrt((double)HD))};
    return s;
}

// Per-thread scratch in floats, the most any tile function uses: 4 row tiles
// ((BQ or BK),HD), 4 column tiles (HD,BK), 2 score tiles (BQ,BK), 2 row vectors.
static size_t att_tile_floats(int HD) {
    return 4 * (size_t)ATT_BQ * HD + 4 * (size_t)HD * ATT_BK + 2 * (size_t)ATT_BQ * ATT_BK + 2 * ATT_BQ;
}

// dst(n,HD) = mul * src rows (stride rs).
static void load_rows(float *dst, const float *src, size_t rs, int n, int HD, float mul) {
    for (int i = 0; i < n; i++)
        for (int d = 0; d < HD; d++) dst[(size_t)i * HD + d] = src[i * rs + d] * mul;
}

// dst(HD,BK) = transpose of src rows (n,HD) (stride rs): keys along the fast
// axis so that score rows are computed with unit-stride vector loads.
static void load_cols(float *dst, const float *src, size_t rs, int n, int HD) {
    for (int j = 0; j < n; j++)
        for (int d = 0; d < HD; d++) dst[(size_t)d * ATT_BK + j] = src[j * rs + d];
}

// S(nq,BK)[:, :nk] = A(nq,HD) @ Bt(HD,BK)[:, :nk]
static void mm_tile(float *S, const float *A, const float *Bt, int nq, int nk, int HD) {
    for (int i = 0; i < nq; i++) {
        float *s = S + (size_t)i * ATT_BK;
        for (int j = 0; j < nk; j++) s[j] = 0.0f;
        for (int d = 0; d < HD; d++) {
            float a = A[(size_t)i * HD + d];
            const float *bt = Bt + (size_t)d * ATT_BK;
            for (int j = 0; j < nk; j++) s[j] += a * bt[j];
        }
    }
}

// Number of keys k0..k0+nk-1 that query q may see (k <= q), clamped to [0, nk].
static inline int visible(int q, int k0, int nk) {
    int v = q - k0 + 1;
    return v < 0 ? 0 : (v > nk ? nk : v);
}

// One query tile [q0, q0+nq) of head h in batch row b: out rows and lse.
static void fwd_tile(float *out, float *lse, const float *qkv, const att_shape *sh, int b, int h, int q0, float *scr) {
    int T = sh->T, HD = sh->HD, nq = T - q0 < ATT_BQ ? T - q0 : ATT_BQ, kvh = h / sh->G;
    size_t rs = sh->rs;
    const float *base = qkv + (size_t)b * T * rs;
    const float *kp = base + (size_t)(sh->NH + kvh) * HD, *vp = base + (size_t)(sh->NH + sh->NKV + kvh) * HD;
    float *Qs = scr, *acc = Qs + ATT_BQ * HD, *Vs = acc + ATT_BQ * HD;
    float *Kt = Vs + ATT_BK * HD, *S = Kt + HD * ATT_BK, *m = S + ATT_BQ * ATT_BK, *l = m + ATT_BQ;

    load_rows(Qs, base + (size_t)q0 * rs + (size_t)h * HD, rs, nq, HD, sh->scale);
    for (int i = 0; i < nq; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    for (int i = 0; i < nq * HD; i++) acc[i] = 0.0f;

    int kend = q0 + nq; // causal: no key beyond the tile's last query
    for (int k0 = 0; k0 < kend; k0 += ATT_BK) {
        int nk = kend - k0 < ATT_BK ? kend - k0 : ATT_BK;
        load_cols(Kt, kp + (size_t)k0 * rs, rs, nk, HD);
        load_rows(Vs, vp + (size_t)k0 * rs, rs, nk, HD, 1.0f);
        mm_tile(S, Qs, Kt, nq, nk, HD);
        for (int i = 0; i < nq; i++) {
            int jv = visible(q0 + i, k0, nk);
            if (jv == 0) continue;
            float *s = S + (size_t)i * ATT_BK;
            float mx = m[i];
#pragma omp simd reduction(max : mx)
            for (int j = 0; j < jv; j++) mx = s[j] > mx ? s[j] : mx;
            float corr = m[i] == -INFINITY ? 0.0f : mt_cpu_expf(m[i] - mx);
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (int j = 0; j < jv; j++) {
                float p = mt_cpu_expf(s[j] - mx);
                s[j] = p;
                sum += p;
            }
            l[i] = l[i] * corr + sum;
            m[i] = mx;
            float *a = acc + (size_t)i * HD;
            for (int d = 0; d < HD; d++) a[d] *= corr;
            for (int j = 0; j < jv; j++) {
                float p = s[j];
                const float *v = Vs + (size_t)j * HD;
                for (int d = 0; d < HD; d++) a[d] += p * v[d];
            }
        }
    }
    for (int i = 0; i < nq; i++) {
        float inv = 1.0f / l[i], *o = out + ((size_t)(b * T + q0 + i) * sh->NH + h) * HD;
        for (int d = 0; d < HD; d++) o[d] = acc[(size_t)i * HD + d] * inv;
        lse[((size_t)b * sh->NH + h) * T + q0 + i] = m[i] + logf(l[i]);
    }
}

// out(B,T,NH*HD), lse(B,NH,T) from qkv(B,T,(NH+2NKV)*HD); tile is per-thread scratch.
static void attention_fwd(float *out, float *lse, const float *qkv, const att_shape *sh, float *tile, int nthreads) {
    int nqt = (sh->T + ATT_BQ - 1) / ATT_BQ, nbh = sh->B * sh->NH;
    long long ntasks = (long long)nqt * nbh;
    size_t tf = att_tile_floats(sh->HD);
#pragma omp parallel num_threads(nthreads)
    {
        float *scr = tile + (size_t)omp_get_thread_num() * tf;
        // Largest (latest) query tiles first: causal work grows with the tile index.
#pragma omp for schedule(dynamic, 1)
        for (long long t = 0; t < ntasks; t++) {
            int qt = nqt - 1 - (int)(t / nbh), bh = (int)(t % nbh);
            fwd_tile(out, lse, qkv, sh, bh / sh->NH, bh % sh->NH, qt * ATT_BQ, scr);
        }
    }
}

// Probabilities and score gradients of one (query tile, key tile) pair:
// P = exp(S - lse) and dS = P * (dP - D) on visible entries, 0 elsewhere.
// On entry P holds S and dS holds dP.
static void probs_tile(float *P, float *dS, const float *lse, const float *Dr, int q0, int nq, int k0, int nk) {
    for (int i = 0; i < nq; i++) {
        int jv = visible(q0 + i, k0, nk);
        float *p = P + (size_t)i * ATT_BK, *ds = dS + (size_t)i * ATT_BK, li = lse[i], di = Dr[i];
#pragma omp simd
        for (int j = 0; j < jv; j++) {
            float e = mt_cpu_expf(p[j] - li);
            p[j] = e;
            ds[j] = e * (ds[j] - di);
        }
        for (int j = jv; j < nk; j++) p[j] = ds[j] = 0.0f;
    }
}

// Pass 1: key tile [k0, k0+nk) of kv head kvh in batch row b -> dk, dv rows of dqkv.
static void bwd_kv_tile(float *dqkv, const float *dout, const float *qkv, const float *lse, const float *D,
                        const att_shape *sh, int b, int kvh, int k0, float *scr) {
    int T = sh->T, HD = sh->HD, NH = sh->NH, nk = T - k0 < ATT_BK ? T - k0 : ATT_BK;
    size_t rs = sh->rs;
    const float *base = qkv + (size_t)b * T * rs;
    size_t koff = (size_t)(NH + kvh) * HD, voff = (size_t)(NH + sh->NKV + kvh) * HD;
    float *Qs = scr, *dOs = Qs + ATT_BQ * HD;
    float *Kt = dOs + ATT_BQ * HD, *Vt = Kt + HD * ATT_BK, *dKt = Vt + HD * ATT_BK, *dVt = dKt + HD * ATT_BK;
    float *P = dVt + HD * ATT_BK, *dS = P + ATT_BQ * ATT_BK;

    load_cols(Kt, base + (size_t)k0 * rs + koff, rs, nk, HD);
    load_cols(Vt, base + (size_t)k0 * rs + voff, rs, nk, HD);
    for (int i = 0; i < HD * ATT_BK; i++) dKt[i] = dVt[i] = 0.0f;

    for (int g = 0; g < sh->G; g++) {
        int h = kvh * sh->G + g;
        const float *lrow = lse + ((size_t)b * NH + h) * T, *Drow = D + ((size_t)b * NH + h) * T;
        for (int q0 = k0 / ATT_BQ * ATT_BQ; q0 < T; q0 += ATT_BQ) {
            int nq = T - q0 < ATT_BQ ? T - q0 : ATT_BQ;
            load_rows(Qs, base + (size_t)q0 * rs + (size_t)h * HD, rs, nq, HD, sh->scale);
            load_rows(dOs, dout + ((size_t)(b * T + q0) * NH + h) * HD, (size_t)NH * HD, nq, HD, 1.0f);
            mm_tile(P, Qs, Kt, nq, nk, HD);
            mm_tile(dS, dOs, Vt, nq, nk, HD);
            probs_tile(P, dS, lrow + q0, Drow + q0, q0, nq, k0, nk);
            // dV_j += sum_i P_ij dO_i;  dK_j += sum_i dS_ij (scale q_i)   (transposed tiles)
            for (int i = 0; i < nq; i++) {
                const float *p = P + (size_t)i * ATT_BK, *ds = dS + (size_t)i * ATT_BK;
                for (int d = 0; d < HD; d++) {
                    float o = dOs[(size_t)i * HD + d], q = Qs[(size_t)i * HD + d];
                    float *dv = dVt + (size_t)d * ATT_BK, *dk = dKt + (size_t)d * ATT_BK;
                    for (int j = 0; j < nk; j++) {
                        dv[j] += o * p[j];
                        dk[j] += q * ds[j];
                    }
                }
            }
        }
    }
    for (int j = 0; j < nk; j++) {
        float *row = dqkv + ((size_t)b * T + k0 + j) * rs;
        for (int d = 0; d < HD; d++) {
            row[koff + d] = dKt[(size_t)d * ATT_BK + j];
            row[voff + d] = dVt[(size_t)d * ATT_BK + j];
        }
    }
}

// Pass 2: query tile [q0, q0+nq) of head h in batch row b -> dq rows of dqkv.
static void bwd_q_tile(float *dqkv, const float *dout, const float *qkv, const float *lse, const float *D,
                       const att_shape *sh, int b, int h, int q0, float *scr) {
    int T = sh->T, HD = sh->HD, NH = sh->NH, kvh = h / sh->G, nq = T - q0 < ATT_BQ ? T - q0 : ATT_BQ;
    size_t rs = sh->rs;
    const float *base = qkv + (size_t)b * T * rs;
    const float *kp = base + (size_t)(NH + kvh) * HD, *vp = base + (size_t)(NH + sh->NKV + kvh) * HD;
    float *Qs = scr, *dOs = Qs + ATT_BQ * HD, *dQ = dOs + ATT_BQ * HD, *Ks = dQ + ATT_BQ * HD;
    float *Kt = Ks + ATT_BK * HD, *Vt = Kt + HD * ATT_BK, *P = Vt + HD * ATT_BK, *dS = P + ATT_BQ * ATT_BK;
    const float *lrow = lse + ((size_t)b * NH + h) * T + q0, *Drow = D + ((size_t)b * NH + h) * T + q0;

    load_rows(Qs, base + (size_t)q0 * rs + (size_t)h * HD, rs, nq, HD, sh->scale);
    load_rows(dOs, dout + ((size_t)(b * T + q0) * NH + h) * HD, (size_t)NH * HD, nq, HD, 1.0f);
    for (int i = 0; i < nq * HD; i++) dQ[i] = 0.0f;
    int kend = q0 + nq;
    for (int k0 = 0; k0 < kend; k0 += ATT_BK) {
        int nk = kend - k0 < ATT_BK ? kend - k0 : ATT_BK;
        load_cols(Kt, kp + (size_t)k0 * rs, rs, nk, HD);
        load_cols(Vt, vp + (size_t)k0 * rs, rs, nk, HD);
        load_rows(Ks, kp + (size_t)k0 * rs, rs, nk, HD, 1.0f);
        mm_tile(P, Qs, Kt, nq, nk, HD);
        mm_tile(dS, dOs, Vt, nq, nk, HD);
        probs_tile(P, dS, lrow, Drow, q0, nq, k0, nk);
        // dQ_i += sum_j dS_ij k_j   (times scale at the end)
        for (int i = 0; i < nq; i++) {
            const float *ds = dS + (size_t)i * ATT_BK;
            float *dq = dQ + (size_t)i * HD;
            int jv = visible(q0 + i, k0, nk);
            for (int j = 0; j < jv; j++) {
                float c = ds[j];
                const float *k = Ks + (size_t)j * HD;
                for (int d = 0; d < HD; d++) dq[d] += c * k[d];
            }
        }
    }
    for (int i = 0; i < nq; i++) {
        float *row = dqkv + ((size_t)b * T + q0 + i) * rs + (size_t)h * HD;
        for (int d = 0; d < HD; d++) row[d] = dQ[(size_t)i * HD + d] * sh->scale;
    }
}

// dqkv(B,T,QKV*HD) from dout, out (B,T,NH*HD), qkv, lse (B,NH,T); Dbuf (B,NH,T)
// scratch for D_i = rowsum(dout_i * out_i).
static void attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                          float *Dbuf, const att_shape *sh, float *tile, int nthreads) {
    int B = sh->B, T = sh->T, NH = sh->NH, HD = sh->HD;
    int nqt = (T + ATT_BQ - 1) / ATT_BQ, nkt = (T + ATT_BK - 1) / ATT_BK;
    int nbh = B * NH, nbk = B * sh->NKV;
    size_t tf = att_tile_floats(HD);
#pragma omp parallel num_threads(nthreads)
    {
        float *scr = tile + (size_t)omp_get_thread_num() * tf;
#pragma omp for schedule(static)
        for (long long bt = 0; bt < (long long)B * T; bt++) {
            int b = (int)(bt / T), t = (int)(bt % T);
            for (int h = 0; h < NH; h++) {
                const float *o = out + ((size_t)bt * NH + h) * HD, *g = dout + ((size_t)bt * NH + h) * HD;
                float s = 0.0f;
                for (int d = 0; d < HD; d++) s += o[d] * g[d];
                Dbuf[((size_t)b * NH + h) * T + t] = s;
            }
        }
        // (implicit barrier: D is complete)
        // Pass 1: early key tiles see the most queries, so they go first.
#pragma omp for schedule(dynamic, 1) nowait
        for (long long t = 0; t < (long long)nkt * nbk; t++) {
            int kt = (int)(t / nbk), bk = (int)(t % nbk);
            bwd_kv_tile(dqkv, dout, qkv, lse, Dbuf, sh, bk / sh->NKV, bk % sh->NKV, kt * ATT_BK, scr);
        }
        // Pass 2 writes only the q part of dqkv, so it needs no barrier after pass 1.
#pragma omp for schedule(dynamic, 1)
        for (long long t = 0; t < (long long)nqt * nbh; t++) {
            int qt = nqt - 1 - (int)(t / nbh), bh = (int)(t % nbh);
            bwd_q_tile(dqkv, dout, qkv, lse, Dbuf, sh, bh / NH, bh % NH, qt * ATT_BQ, scr);
        }
    }
}

static mt_status att_check(const char *op, int B, int T, int NH, int NKV, int HD) {
    if (B < 0 || T < 0 || NH <= 0 || NKV <= 0 || HD <= 0 || NH % NKV)
        return mt_fail(MT_ERR_SHAPE, "cpu %s: bad shape B=%d T=%d NH=%d NKV=%d HD=%d (NH must be a multiple of NKV)",
                       op, B, T, NH, NKV, HD);
    return MT_OK;
}

mt_status mt_cpu_op_attention_fwd(mt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int NH, int NKV,
                                  int HD) {
    MT_TRY(att_check("attention_fwd", B, T, NH, NKV, HD));
    if ((long long)B * T == 0) return MT_OK;
    att_shape sh = att_make(B, T, NH, NKV, HD);
    int nthreads = omp_get_max_threads();
    void *tile;
    MT_TRY(mt_cpu_scratch(be, MT_CPU_SCR_TILE, (size_t)nthreads * att_tile_floats(HD) * sizeof(float), &tile));
    attention_fwd(out, lse, qkv, &sh, tile, nthreads);
    return MT_OK;
}

mt_status mt_cpu_op_attention_bwd(mt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out,
                                  const float *lse, int B, int T, int NH, int NKV, int HD) {
    MT_TRY(att_check("attention_bwd", B, T, NH, NKV, HD));
    if ((long long)B * T == 0) return MT_OK;
    att_shape sh = att_make(B, T, NH, NKV, HD);
    int nthreads = omp_get_max_threads();
    void *tile, *Dbuf;
    MT_TRY(mt_cpu_scratch(be, MT_CPU_SCR_TILE, (size_t)nthreads * att_tile_floats(HD) * sizeof(float), &tile));
    MT_TRY(mt_cpu_scratch(be, MT_CPU_SCR_ROWS, (size_t)B * NH * T * sizeof(float), &Dbuf));
    attention_bwd(dqkv, dout, qkv, out, lse, Dbuf, &sh, tile, nthreads);
    return MT_OK;
}
