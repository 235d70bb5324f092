// test_grad_check.c: each cpu backward kernel against central finite
// differences of a double-precision forward of the same op written here. The
// loss is a random projection L = sum(out * r), so r is fed as dout and the
// kernel's input gradients must equal dL/dinput. This checks the backward
// math itself, independently of the forward kernels' own reference test.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_call.h"
#include "test_util.h"
#include "backends/cpu/cpu.h"

static mt_backend *be;
static unsigned long long seed_ctr = 1000;

#define OK(expr)                                                                                          \
    do {                                                                                                  \
        mt_status ok_s_ = (expr);                                                                         \
        CHECK(ok_s_ == MT_OK, "%s returned %s: %s", #expr, mt_status_name(ok_s_), mt_last_error());       \
    } while (0)

#define FD_H 1e-6
#define GRAD_TOL 1e-4 // max |kernel - fd| / max |fd|; the kernels are f32

// Shapes and fixed (non-differentiated) inputs of the op under test.
typedef struct {
    int N, IC, OC;            // matmul; N also rows / tokens
    int D;                    // rmsnorm width
    int B, T, NH, NKV, HD;    // rope, qk_norm, attention
    int F, V, C;              // swiglu, xent / embedding
    double eps, dscale;
    const float *r;           // projection of the output
    const float *cs, *sn;     // rope tables
    const int32_t *ids;       // embedding ids / xent targets
} op_ctx;

typedef double (*loss_fn)(const double *x, const op_ctx *c);

static float *rnd(size_t n, float lo, float hi) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    mt_test_fill_uniform(x, n, seed_ctr++, lo, hi);
    return x;
}

// Central differences of f at x (n entries) into g.
static void fd_grad(loss_fn f, const op_ctx *c, double *x, size_t n, double *g) {
    for (size_t i = 0; i < n; i++) {
        double xi = x[i];
        x[i] = xi + FD_H;
        double lp = f(x, c);
        x[i] = xi - FD_H;
        double lm = f(x, c);
        x[i] = xi;
        g[i] = (lp - lm) / (2 * FD_H);
    }
}

// Packs f32 arrays into one double vector.
static double *pack(size_t *n, const float *a, size_t na, const float *b, size_t nb, const float *c, size_t nc) {
    *n = na + nb + nc;
    double *x = malloc(*n * sizeof *x), *p = x;
    for (size_t i = 0; i < na; i++) *p++ = a[i];
    for (size_t i = 0; i < nb; i++) *p++ = b[i];
    for (size_t i = 0; i < nc; i++) *p++ = c[i];
    return x;
}

static void compare(const char *what, const float *kernel, const double *fd, size_t n) {
    double worst = 0, scale = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(fd[i]));
    for (size_t i = 0; i < n; i++) {
        double e = fabs(kernel[i] - fd[i]);
        worst = isnan(e) ? INFINITY : fmax(worst, e);
    }
    double rel = scale > 0 ? worst / scale : worst;
    CHECK(scale > 0 || worst == 0, "%s: finite-difference gradient is all zero", what);
    CHECK(rel < GRAD_TOL, "%s: max |kernel - fd| / max |fd| = %.3g (tol %.0e)\nHINT: the backward kernel does not match "
          "the derivative of the forward", what, rel, GRAD_TOL);
}

// ---------------------------------------------------------------- matmul

// x = [inp(N,IC) | w(OC,IC) | bias(OC)]
static double matmul_loss(const double *x, const op_ctx *c) {
    const double *inp = x, *w = x + c->N * c->IC, *b = w + c->OC * c->IC;
    double L = 0;
    for (int n = 0; n < c->N; n++)
        for (int o = 0; o < c->OC; o++) {
            double s = b[o];
            for (int i = 0; i < c->IC; i++) s += inp[n * c->IC + i] * w[o * c->IC + i];
            L += s * c->r[n * c->OC + o];
        }
    return L;
}

static void check_matmul(void) {
    op_ctx c = {.N = 3, .IC = 5, .OC = 4};
    float *inp = rnd(15, -1, 1), *w = rnd(20, -1, 1), *b = rnd(4, -1, 1), *r = rnd(12, -1, 1);
    c.r = r;
    size_t n;
    double *x = pack(&n, inp, 15, w, 20, b, 4), *g = malloc(n * sizeof *g);
    fd_grad(matmul_loss, &c, x, n, g);
    float k[39];
    OK(mt_backend_matmul_bwd(be, k, k + 15, k + 35, r, inp, w, MT_F32, 3, 5, 4, 0));
    compare("matmul dinp", k, g, 15);
    compare("matmul dw", k + 15, g + 15, 20);
    compare("matmul dbias", k + 35, g + 35, 4);
    free(inp); free(w); free(b); free(r); free(x); free(g);
}

// ---------------------------------------------------------------- rmsnorm

static double rms_row_loss(const double *x, const double *w, const float *r, int D, double eps) {
    double ss = 0, L = 0;
    for (int i = 0; i < D; i++) ss += x[i] * x[i];
    double rs = 1.0 / sqrt(ss / D + eps);
    for (int i = 0; i < D; i++) L += x[i] * rs * w[i] * r[i];
    return L;
}

// x = [inp(N,D) | w(D)]
static double rmsnorm_loss(const double *x, const op_ctx *c) {
    double L = 0;
    for (int n = 0; n < c->N; n++) L += rms_row_loss(x + n * c->D, x + c->N * c->D, c->r + n * c->D, c->D, c->eps);
    return L;
}

static void check_rmsnorm(void) {
    op_ctx c = {.N = 3, .D = 8, .eps = 1e-5};
    float *inp = rnd(24, -2, 2), *w = rnd(8, 0.5f, 1.5f), *r = rnd(24, -1, 1), y[24], rstd[3], k[32];
    c.r = r;
    size_t n;
    double *x = pack(&n, inp, 24, w, 8, NULL, 0), *g = malloc(n * sizeof *g);
    fd_grad(rmsnorm_loss, &c, x, n, g);
    OK(mt_backend_rmsnorm_fwd(be, y, rstd, inp, w, MT_F32, 3, 8, 1e-5f));
    OK(mt_backend_rmsnorm_bwd(be, k, k + 24, r, inp, w, rstd, MT_F32, 3, 8));
    compare("rmsnorm dinp", k, g, 24);
    compare("rmsnorm dw", k + 24, g + 24, 8);
    free(inp); free(w); free(r); free(x); free(g);
}

// ---------------------------------------------------------------- qk_norm

// x = [inp(N, QKV*HD) | qw(HD) | kw(HD)]; v heads pass through.
static double qk_norm_loss(const double *x, const op_ctx *c) {
    int QKV = c->NH + 2 * c->NKV, HD = c->HD;
    const double *qw = x + (size_t)c->N * QKV * HD, *kw = qw + HD;
    double L = 0;
    for (int t = 0; t < c->N; t++)
        for (int h = 0; h < QKV; h++) {
            size_t o = ((size_t)t * QKV + h) * HD;
            if (h < c->NH + c->NKV) {
                L += rms_row_loss(x + o, h < c->NH ? qw : kw, c->r + o, HD, c->eps);
            } else {
                for (int d = 0; d < HD; d++) L += x[o + d] * c->r[o + d];
            }
        }
    return L;
}

static void check_qk_norm(void) {
    op_ctx c = {.N = 3, .NH = 2, .NKV = 1, .HD = 4, .eps = 1e-6};
    size_t m = 3 * 4 * 4; // N * QKV * HD
    float *inp = rnd(m, -2, 2), *qw = rnd(4, 0.5f, 1.5f), *kw = rnd(4, 0.5f, 1.5f), *r = rnd(m, -1, 1);
    float y[48], rstd[9], k[56];
    c.r = r;
    size_t n;
    double *x = pack(&n, inp, m, qw, 4, kw, 4), *g = malloc(n * sizeof *g);
    fd_grad(qk_norm_loss, &c, x, n, g);
    OK(mt_backend_qk_norm_fwd(be, y, rstd, inp, qw, kw, MT_F32, 3, 2, 1, 4, 1e-6f));
    OK(mt_backend_qk_norm_bwd(be, k, k + m, k + m + 4, r, inp, qw, kw, rstd, MT_F32, 3, 2, 1, 4));
    compare("qk_norm dinp", k, g, m);
    compare("qk_norm dqw", k + m, g + m, 4);
    compare("qk_norm dkw", k + m + 4, g + m + 4, 4);
    free(inp); free(qw); free(kw); free(r); free(x); free(g);
}

// ---------------------------------------------------------------- rope

static double rope_loss(const double *x, const op_ctx *c) {
    int QKV = c->NH + 2 * c->NKV, HD = c->HD, half = HD / 2;
    double L = 0;
    for (int b = 0; b < c->B; b++)
        for (int t = 0; t < c->T; t++)
            for (int h = 0; h < QKV; h++) {
                size_t o = (((size_t)b * c->T + t) * QKV + h) * HD;
                for (int j = 0; j < half; j++) {
                    double y1 = x[o + j], y2 = x[o + j + half];
                    if (h < c->NH + c->NKV) {
                        double cs = c->cs[t * half + j], sn = c->sn[t * half + j];
                        y1 = x[o + j] * cs - x[o + j + half] * sn;
                        y2 = x[o + j + half] * cs + x[o + j] * sn;
                    }
                    L += y1 * c->r[o + j] + y2 * c->r[o + j + half];
                }
            }
    return L;
}

static void check_rope(void) {
    op_ctx c = {.B = 2, .T = 3, .NH = 2, .NKV = 1, .HD = 4};
    size_t m = 2 * 3 * 4 * 4;
    float cs[6], sn[6];
    for (int t = 0; t < 3; t++)
        for (int j = 0; j < 2; j++) {
            cs[t * 2 + j] = (float)cos(t * pow(10000.0, -j / 2.0));
            sn[t * 2 + j] = (float)sin(t * pow(10000.0, -j / 2.0));
        }
    float *inp = rnd(m, -1, 1), *r = rnd(m, -1, 1), k[96];
    c.r = r, c.cs = cs, c.sn = sn;
    size_t n;
    double *x = pack(&n, inp, m, NULL, 0, NULL, 0), *g = malloc(n * sizeof *g);
    fd_grad(rope_loss, &c, x, n, g);
    OK(mt_backend_rope_bwd(be, k, r, cs, sn, 2, 3, 2, 1, 4));
    compare("rope dinp", k, g, m);
    free(inp); free(r); free(x); free(g);
}

// ---------------------------------------------------------------- attention

static double attention_loss(const double *x, const op_ctx *c) {
    int B = c->B, T = c->T, NH = c->NH, NKV = c->NKV, HD = c->HD, QKV = NH + 2 * NKV;
    double scale = 1.0 / sqrt((double)HD), L = 0;
    double *p = malloc(sizeof(double) * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            int kvh = h / (NH / NKV);
            for (int i = 0; i < T; i++) {
                const double *q = x + (((size_t)b * T + i) * QKV + h) * HD;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) {
                    const double *k = x + (((size_t)b * T + j) * QKV + NH + kvh) * HD;
                    double s = 0;
                    for (int d = 0; d < HD; d++) s += q[d] * k[d];
                    p[j] = s * scale;
                    mx = fmax(mx, p[j]);
                }
                for (int j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
                const float *r = c->r + (((size_t)b * T + i) * NH + h) * HD;
                for (int j = 0; j <= i; j++) {
                    const double *v = x + (((size_t)b * T + j) * QKV + NH + NKV + kvh) * HD;
                    for (int d = 0; d < HD; d++) L += p[j] / sum * v[d] * r[d];
                }
            }
        }
    free(p);
    return L;
}

static void check_attention(int B, int T, int NH, int NKV, int HD) {
    op_ctx c = {.B = B, .T = T, .NH = NH, .NKV = NKV, .HD = HD};
    size_t m = (size_t)B * T * (NH + 2 * NKV) * HD, no = (size_t)B * T * NH * HD;
    float *qkv = rnd(m, -2, 2), *r = rnd(no, -1, 1), *out = malloc(sizeof(float) * no);
    float *lse = malloc(sizeof(float) * B * NH * T), *k = malloc(sizeof(float) * m);
    c.r = r;
    size_t n;
    double *x = pack(&n, qkv, m, NULL, 0, NULL, 0), *g = malloc(n * sizeof *g);
    fd_grad(attention_loss, &c, x, n, g);
    OK(mt_backend_attention_fwd(be, out, lse, qkv, B, T, NH, NKV, HD));
    OK(mt_backend_attention_bwd(be, k, r, qkv, out, lse, B, T, NH, NKV, HD));
    char what[96];
    snprintf(what, sizeof what, "attention dqkv B=%d T=%d NH=%d NKV=%d HD=%d", B, T, NH, NKV, HD);
    compare(what, k, g, m);
    free(qkv); free(r); free(out); free(lse); free(k); free(x); free(g);
}

// ---------------------------------------------------------------- swiglu, add

static double swiglu_loss(const double *x, const op_ctx *c) {
    double L = 0;
    for (int n = 0; n < c->N; n++)
        for (int i = 0; i < c->F; i++) {
            double g = x[n * 2 * c->F + i], u = x[n * 2 * c->F + c->F + i];
            L += g / (1 + exp(-g)) * u * c->r[n * c->F + i];
        }
    return L;
}

static void check_swiglu(void) {
    op_ctx c = {.N = 3, .F = 5};
    float *gu = rnd(30, -4, 4), *r = rnd(15, -1, 1), k[30];
    c.r = r;
    size_t n;
    double *x = pack(&n, gu, 30, NULL, 0, NULL, 0), *g = malloc(n * sizeof *g);
    fd_grad(swiglu_loss, &c, x, n, g);
    OK(mt_backend_swiglu_bwd(be, k, r, gu, 3, 5));
    compare("swiglu dgu", k, g, 30);
    free(gu); free(r); free(x); free(g);
}

// x = [a(N) | b(N)]; the engine passes dout straight through an add, so the
// gradient must be [r | r]; also checks the forward kernel against the sum.
static double add_loss(const double *x, const op_ctx *c) {
    double L = 0;
    for (int i = 0; i < c->N; i++) L += (x[i] + x[c->N + i]) * c->r[i];
    return L;
}

static void check_add(void) {
    op_ctx c = {.N = 7};
    float *a = rnd(7, -1, 1), *b = rnd(7, -1, 1), *r = rnd(7, -1, 1), out[7], rr[14];
    c.r = r;
    size_t n;
    double *x = pack(&n, a, 7, b, 7, NULL, 0), *g = malloc(n * sizeof *g);
    fd_grad(add_loss, &c, x, n, g);
    memcpy(rr, r, sizeof(float) * 7);
    memcpy(rr + 7, r, sizeof(float) * 7);
    compare("add (identity backward)", rr, g, 14);
    OK(mt_backend_add(be, out, a, b, 7));
    int same = 1;
    for (int i = 0; i < 7; i++) same &= out[i] == a[i] + b[i];
    CHECK(same, "add forward differs from a + b");
    free(a); free(b); free(r); free(x); free(g);
}

// ---------------------------------------------------------------- embedding, xent

static double embedding_loss(const double *x, const op_ctx *c) {
    double L = 0;
    for (int n = 0; n < c->N; n++)
        for (int i = 0; i < c->C; i++) L += x[(size_t)c->ids[n] * c->C + i] * c->r[n * c->C + i];
    return L;
}

static void check_embedding(void) {
    int32_t ids[6] = {3, 0, 3, 4, 1, 3};
    op_ctx c = {.N = 6, .V = 5, .C = 3, .ids = ids};
    float *wte = rnd(15, -1, 1), *r = rnd(18, -1, 1), k[15] = {0};
    c.r = r;
    size_t n;
    double *x = pack(&n, wte, 15, NULL, 0, NULL, 0), *g = malloc(n * sizeof *g);
    fd_grad(embedding_loss, &c, x, n, g);
    OK(mt_backend_embedding_bwd(be, k, MT_F32, ids, r, 6, 3));
    compare("embedding dwte", k, g, 15);
    free(wte); free(r); free(x); free(g);
}

// L = dscale * sum_i (logsumexp(x_i) - x_i[target_i])
static double xent_loss(const double *x, const op_ctx *c) {
    double L = 0;
    for (int i = 0; i < c->N; i++) {
        const double *row = x + (size_t)i * c->V;
        double mx = -INFINITY, s = 0;
        for (int j = 0; j < c->V; j++) mx = fmax(mx, row[j]);
        for (int j = 0; j < c->V; j++) s += exp(row[j] - mx);
        L += c->dscale * (mx + log(s) - row[c->ids[i]]);
    }
    return L;
}

static void check_xent(void) {
    int32_t tg[3] = {2, 6, 0};
    op_ctx c = {.N = 3, .V = 7, .ids = tg, .dscale = 1.0 / 3.0};
    float *logits = rnd(21, -3, 3), losses[3];
    size_t n;
    double *x = pack(&n, logits, 21, NULL, 0, NULL, 0), *g = malloc(n * sizeof *g);
    fd_grad(xent_loss, &c, x, n, g);
    OK(mt_backend_xent_fwd_bwd(be, logits, losses, tg, 3, 7, 1.0f / 3.0f)); // in place -> d logits
    compare("xent dlogits", logits, g, 21);
    free(logits); free(x); free(g);
}

int main(void) {
    OK(mt_backend_cpu_create(MT_F32, &be));
    if (!be) return mt_test_finish("test_grad_check");
    check_matmul();
    check_rmsnorm();
    check_qk_norm();
    check_rope();
    check_attention(1, 5, 4, 2, 4);  // GQA
    check_attention(2, 3, 2, 2, 2);  // MHA, B=2
    check_attention(1, 70, 2, 1, 2); // crosses the 64-key tile boundary
    check_swiglu();
    check_add();
    check_embedding();
    check_xent();
    mt_backend_destroy(be);
    return mt_test_finish("test_grad_check");
}
