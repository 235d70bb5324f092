// test_torch_parity.c: the megatrain CLI against PyTorch/HF ground truth.
// For tiny Llama (tied, llama3 rope), Qwen2 (q/k/v bias) and Qwen3 (head_dim != C/NH,
// q_norm/k_norm) it trains 8 steps with --precision fp32 on the cpu backend, G = 1 and 2,
// and compares with tests/fixtures/tiny_*/ (written by make_torch_fixtures.py):
//   loss per step      |a-b| <= 1e-4 |b|
//   grad_norm per step |a-b| <= 1e-3 |b|
//   step-1 gradients   |a-b| <= 1e-4 max|b| + 1e-7   per element, max over its tensor
//   final weights      |a-b| <= 2e-4 max|b| + 2e-5   per element (2e-5 = lr/50), and over
//                      the whole model ||a-b|| <= 1e-3 ||b - w0|| (the update's direction)
// float32 torch vs float64 torch uses at most 1% of the gradient and 45% of the weight
// tolerance (fixtures/README.md); the weight one is loose because Adam turns rounding
// noise in near-zero gradients (e.g. Qwen2's k bias) into O(lr) steps. Every AdamW bug
// tried (decay groups, eps placement, clipping, bias correction) fails it.
// Then --precision paper, G = 1: each step's loss within 3% of the fp32 torch loss.
// Needs $MT_BIN/megatrain (CTest sets MT_BIN); runs from the repo root.
#define _XOPEN_SOURCE 700 // popen, access under -std=c11

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "tests/test_util.h"

#define FIXTURES "megatrain/tests/fixtures"
#define MAX_STEPS 64

static const double LOSS_RTOL = 1e-4, NORM_RTOL = 1e-3;
static const double GRAD_RTOL = 1e-4, GRAD_ATOL = 1e-7;
static const double W_RTOL = 2e-4, W_ATOL = 2e-5, W_UPDATE_RTOL = 1e-3;
static const double PAPER_LOSS_RTOL = 0.03;

typedef struct {
    int batch, seq_len, grad_accum, nsteps;
    double lr, weight_decay, beta1, beta2, eps, grad_clip;
    double loss[MAX_STEPS + 1], grad_norm[MAX_STEPS + 1], step_lr[MAX_STEPS + 1];
    int seen[MAX_STEPS + 1];
} trajectory;

static int json_num(const cJSON *o, const char *key, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) return 0;
    *out = v->valuedouble;
    return 1;
}

// Reads expected_gG.json: hyper-parameters and the per-step loss / grad_norm.
static int load_expected(const char *path, trajectory *t) {
    memset(t, 0, sizeof *t);
    char *text = mt_test_read_text(path);
    CHECK(text != NULL, "%s: cannot read. HINT: python3 %s/make_torch_fixtures.py", path, FIXTURES);
    if (!text) return 0;
    cJSON *j = cJSON_Parse(text);
    free(text);
    CHECK(j != NULL, "%s: malformed JSON", path);
    if (!j) return 0;
    double b = 0, s = 0, g = 0;
    int ok = json_num(j, "batch", &b) && json_num(j, "seq_len", &s) && json_num(j, "grad_accum", &g) &&
             json_num(j, "lr", &t->lr) && json_num(j, "weight_decay", &t->weight_decay) &&
             json_num(j, "beta1", &t->beta1) && json_num(j, "beta2", &t->beta2) && json_num(j, "eps", &t->eps) &&
             json_num(j, "grad_clip", &t->grad_clip);
    t->batch = (int)b, t->seq_len = (int)s, t->grad_accum = (int)g;
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(j, "steps"), *st;
    ok = ok && cJSON_IsArray(steps);
    if (ok) {
        cJSON_ArrayForEach(st, steps) {
            double k;
            if (!json_num(st, "step", &k) || k < 1 || k > MAX_STEPS) { ok = 0; break; }
            int i = (int)k;
            ok = ok && json_num(st, "loss", &t->loss[i]) && json_num(st, "grad_norm", &t->grad_norm[i]);
            if (i > t->nsteps) t->nsteps = i;
        }
    }
    cJSON_Delete(j);
    CHECK(ok && t->nsteps > 0, "%s: missing keys (batch, seq_len, grad_accum, lr, ..., steps[{step,loss,grad_norm}])",
          path);
    return ok && t->nsteps > 0;
}

// Runs `cmd` (stderr already redirected by the caller), parses stdout JSON lines
// into `got`. Returns 1 when the process exited 0.
static int run_cli(const char *label, const char *cmd, const char *stderr_path, trajectory *got) {
    memset(got, 0, sizeof *got);
    fprintf(stderr, "[%s] %s\n", label, cmd);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL, "[%s] popen failed", label);
    if (!p) return 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, p)) > 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n == 0) continue;
        cJSON *j = cJSON_Parse(line);
        CHECK(j != NULL, "[%s] stdout line is not JSON (stdout carries JSON lines only): %.200s", label, line);
        if (!j) continue;
        double k, loss, norm, lr = NAN;
        if (json_num(j, "step", &k) && json_num(j, "loss", &loss) && json_num(j, "grad_norm", &norm)) {
            json_num(j, "lr", &lr);
            int i = (int)k;
            CHECK(i >= 1 && i <= MAX_STEPS && !got->seen[i], "[%s] step %d out of range or printed twice", label, i);
            if (i >= 1 && i <= MAX_STEPS && !got->seen[i]) {
                got->seen[i] = 1;
                got->loss[i] = loss, got->grad_norm[i] = norm, got->step_lr[i] = lr;
                if (i > got->nsteps) got->nsteps = i;
            }
        }
        cJSON_Delete(j);
    }
    free(line);
    int st = pclose(p);
    int ok = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!ok) {
        char *err = mt_test_read_text(stderr_path);
        size_t len = err ? strlen(err) : 0;
        CHECK(ok, "[%s] megatrain exited with status %d; its stderr (tail):\n%s", label,
              WIFEXITED(st) ? WEXITSTATUS(st) : -1, err ? err + (len > 3000 ? len - 3000 : 0) : "(none)");
        free(err);
    }
    return ok;
}

static void compare_steps(const char *label, const trajectory *got, const trajectory *exp, int check_norm,
                          double loss_rtol) {
    for (int i = 1; i <= exp->nsteps; i++) {
        CHECK(got->seen[i], "[%s] no JSON line with step %d (and loss, grad_norm) on stdout", label, i);
        if (!got->seen[i]) continue;
        double a = got->loss[i], b = exp->loss[i];
        CHECK(fabs(a - b) <= loss_rtol * fabs(b), "[%s] step %d loss %.7f, torch %.7f (rel %.2e > %.0e)", label, i, a,
              b, fabs(a - b) / fabs(b), loss_rtol);
        if (!check_norm) continue;
        a = got->grad_norm[i], b = exp->grad_norm[i];
        CHECK(fabs(a - b) <= NORM_RTOL * fabs(b), "[%s] step %d grad_norm %.6f, torch %.6f (rel %.2e > %.0e)", label,
              i, a, b, fabs(a - b) / fabs(b), NORM_RTOL);
        CHECK(fabs(got->step_lr[i] - exp->lr) <= 1e-6 * exp->lr, "[%s] step %d lr %g, expected constant %g", label, i,
              got->step_lr[i], exp->lr);
    }
    CHECK(got->nsteps == exp->nsteps, "[%s] %d steps reported, expected %d", label, got->nsteps, exp->nsteps);
}

static float *read_f32(const mt_safetensors *st, const mt_st_tensor *t) {
    float *x = malloc(t->numel * sizeof(float) + 1);
    if (x && mt_st_read(st, t, x, MT_F32) != MT_OK) {
        CHECK(0, "reading %s: %s", t->name, mt_last_error());
        free(x);
        return NULL;
    }
    return x;
}

static int same_shape(const mt_st_tensor *a, const mt_st_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

// Compares every tensor of `exp_path` with the one of the same name in `got_path`, per
// element: |a-b| <= rtol * max|b| + atol. With `init_path`, also the whole-model update
// direction ||a-b|| <= W_UPDATE_RTOL ||b - w0||. `tied_head`: a saved lm_head.weight is
// allowed in addition and must equal the expected embedding.
static void compare_tensors(const char *label, const char *got_path, const char *exp_path, const char *init_path,
                            double rtol, double atol, int tied_head) {
    mt_safetensors *got = NULL, *exp = NULL, *init = NULL;
    CHECK(mt_st_open(got_path, &got) == MT_OK, "[%s] %s", label, mt_last_error());
    CHECK(mt_st_open(exp_path, &exp) == MT_OK, "[%s] %s", label, mt_last_error());
    if (init_path) CHECK(mt_st_open(init_path, &init) == MT_OK, "[%s] %s", label, mt_last_error());
    if (!got || !exp || (init_path && !init)) goto done;

    double worst_frac = 0, diff2 = 0, upd2 = 0;
    const char *worst_name = "";
    for (int i = 0; i < mt_st_count(got); i++) {
        const mt_st_tensor *g = mt_st_get(got, i);
        int known = mt_st_find(exp, g->name) != NULL || (tied_head && strcmp(g->name, "lm_head.weight") == 0);
        CHECK(known, "[%s] %s holds %s, which torch does not have", label, got_path, g->name);
    }
    for (int i = 0; i < mt_st_count(exp); i++) {
        const mt_st_tensor *e = mt_st_get(exp, i);
        const mt_st_tensor *names[2] = {mt_st_find(got, e->name), NULL};
        if (tied_head && strcmp(e->name, "model.embed_tokens.weight") == 0) names[1] = mt_st_find(got, "lm_head.weight");
        CHECK(names[0] != NULL, "[%s] %s lacks %s", label, got_path, e->name);
        float *b = read_f32(exp, e), *w0 = NULL;
        if (init) {
            const mt_st_tensor *t0 = mt_st_find(init, e->name);
            CHECK(t0 && same_shape(t0, e), "[%s] %s: no %s of the same shape", label, init_path, e->name);
            w0 = t0 && same_shape(t0, e) ? read_f32(init, t0) : NULL;
        }
        double bmax = 0;
        // A compare, not fmax(): Debian 12's aarch64 GCC 12.2 crashes (ICE in
        // vect_transform_reduction) vectorising an fmax reduction. Same result: both skip NaN.
        for (size_t k = 0; b && k < e->numel; k++)
            if (fabs(b[k]) > bmax) bmax = fabs(b[k]);
        double tol = rtol * bmax + atol;
        for (int h = 0; h < 2 && b; h++) {
            const mt_st_tensor *g = names[h];
            if (!g) continue;
            CHECK(same_shape(g, e), "[%s] %s: shape differs from torch's", label, g->name);
            CHECK(g->dtype == MT_F32, "[%s] %s is %s; fp32 runs must write F32", label, g->name, mt_dtype_name(g->dtype));
            if (!same_shape(g, e)) continue;
            float *a = read_f32(got, g);
            if (!a) continue;
            double dmax = -1;
            size_t at = 0;
            for (size_t k = 0; k < e->numel; k++) {
                double d = fabs((double)a[k] - b[k]);
                if (!(d <= dmax)) dmax = d, at = k; // NaN wins
                if (h == 0) {
                    diff2 += d * d;
                    if (w0) upd2 += ((double)b[k] - w0[k]) * ((double)b[k] - w0[k]);
                }
            }
            CHECK(dmax <= tol, "[%s] %s: max|a-b| %.3e at [%zu] (megatrain %.8g, torch %.8g) > tol %.3e (%.0e*max|b| + %.0e)",
                  label, g->name, dmax, at, a[at], b[at], tol, rtol, atol);
            if (dmax / tol > worst_frac || isnan(dmax)) worst_frac = dmax / tol, worst_name = e->name;
            free(a);
        }
        free(b);
        free(w0);
    }
    fprintf(stderr, "[%s] %d tensors: worst element uses %.3f of its tolerance (%s)\n", label, mt_st_count(exp),
            worst_frac, worst_name);
    if (init) {
        double r = sqrt(diff2) / sqrt(upd2);
        fprintf(stderr, "[%s] whole model ||a-b|| / ||b-w0|| = %.2e\n", label, r);
        CHECK(r <= W_UPDATE_RTOL, "[%s] whole model ||a-b|| / ||b-w0|| = %.2e > %.0e: the update differs from torch's",
              label, r, W_UPDATE_RTOL);
    }
done:
    mt_st_close(got);
    mt_st_close(exp);
    mt_st_close(init);
}

// The saved config.json names the same architecture and tying as the fixture's.
static void compare_config(const char *label, const char *got_path, const char *exp_path) {
    char *gs = mt_test_read_text(got_path), *es = mt_test_read_text(exp_path);
    cJSON *g = gs ? cJSON_Parse(gs) : NULL, *e = es ? cJSON_Parse(es) : NULL;
    CHECK(g != NULL, "[%s] %s missing or not JSON", label, got_path);
    if (g && e) {
        const char *keys[] = {"model_type", "tie_word_embeddings", "vocab_size", "hidden_size", "num_hidden_layers"};
        for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
            const cJSON *a = cJSON_GetObjectItemCaseSensitive(g, keys[i]);
            const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, keys[i]);
            CHECK(a && cJSON_Compare(a, b, 1), "[%s] %s: %s differs from the input model's", label, got_path, keys[i]);
        }
    }
    cJSON_Delete(g);
    cJSON_Delete(e);
    free(gs);
    free(es);
}

static int tied(const char *model_dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", model_dir);
    char *s = mt_test_read_text(path);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    int t = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "tie_word_embeddings"));
    cJSON_Delete(j);
    free(s);
    return t;
}

// One fp32 (and, for G = 1, one paper) run of one model against its fixture.
static void check_model(const char *bin, const char *model, int G) {
    char dir[256], path[512], exp_w[512], tmp[256], label[64], cmd[2048];
    snprintf(dir, sizeof dir, "%s/%s", FIXTURES, model);
    snprintf(label, sizeof label, "%s fp32 G=%d", model, G);
    snprintf(path, sizeof path, "%s/expected_g%d.json", dir, G);
    trajectory exp, got;
    if (!load_expected(path, &exp)) return;
    CHECK(exp.grad_accum == G, "%s: grad_accum %d, expected %d", path, exp.grad_accum, G);
    if (!mt_test_mkdtemp(tmp, sizeof tmp, "mt_parity")) {
        CHECK(0, "mkdtemp %s failed", tmp);
        return;
    }
    int failures_before = mt_test_failures;
    const char *common = "'%s/megatrain' train --model %s --data " FIXTURES "/tokens.bin --batch %d --seq-len %d "
                         "--steps %d --grad-accum %d --lr %.17g --weight-decay %.17g --beta1 %.17g --beta2 %.17g "
                         "--eps %.17g --grad-clip %.17g --backend %s --schedule megatrain";
    // MT_PARITY_BACKEND=cuda runs the same checks on the GPU (ci/gpu_campaign.sh, part A); CI uses the CPU.
    const char *backend = getenv("MT_PARITY_BACKEND") ? getenv("MT_PARITY_BACKEND") : "cpu";
    int n = snprintf(cmd, sizeof cmd, common, bin, dir, exp.batch, exp.seq_len, exp.nsteps, G, exp.lr,
                     exp.weight_decay, exp.beta1, exp.beta2, exp.eps, exp.grad_clip, backend);
    n += snprintf(cmd + n, sizeof cmd - n, " --precision fp32 --save %s/out", tmp);
    if (G == 1) n += snprintf(cmd + n, sizeof cmd - n, " --dump-grads %s/grads.safetensors", tmp);
    snprintf(cmd + n, sizeof cmd - n, " 2>%s/stderr.txt", tmp);
    snprintf(path, sizeof path, "%s/stderr.txt", tmp);

    if (run_cli(label, cmd, path, &got)) {
        compare_steps(label, &got, &exp, 1, LOSS_RTOL);
        if (G == 1) {
            char gp[512], ep[512], lb[96];
            snprintf(gp, sizeof gp, "%s/grads.safetensors", tmp);
            snprintf(ep, sizeof ep, "%s/grads_step1_g1.safetensors", dir);
            snprintf(lb, sizeof lb, "%s step-1 grads", label);
            if (access(gp, R_OK) == 0) compare_tensors(lb, gp, ep, NULL, GRAD_RTOL, GRAD_ATOL, 0);
            else CHECK(0, "[%s] --dump-grads wrote no %s", label, gp);
        }
        char out[512], lb[96], cfg_got[600], cfg_exp[600];
        snprintf(out, sizeof out, "%s/out", tmp);
        snprintf(exp_w, sizeof exp_w, "%s/final_g%d.safetensors", dir, G);
        snprintf(lb, sizeof lb, "%s final weights", label);
        compare_tensors(lb, out, exp_w, dir, W_RTOL, W_ATOL, tied(dir));
        snprintf(cfg_got, sizeof cfg_got, "%s/config.json", out);
        snprintf(cfg_exp, sizeof cfg_exp, "%s/config.json", dir);
        compare_config(label, cfg_got, cfg_exp);
    }

    if (G == 1) { // bf16 storage and compute: the fp32 torch losses within 3%
        snprintf(label, sizeof label, "%s paper G=1", model);
        n = snprintf(cmd, sizeof cmd, common, bin, dir, exp.batch, exp.seq_len, exp.nsteps, G, exp.lr,
                     exp.weight_decay, exp.beta1, exp.beta2, exp.eps, exp.grad_clip, backend);
        snprintf(cmd + n, sizeof cmd - n, " --precision paper 2>%s/stderr.txt", tmp);
        if (run_cli(label, cmd, path, &got)) compare_steps(label, &got, &exp, 0, PAPER_LOSS_RTOL);
    }

    if (mt_test_failures == failures_before) mt_test_rmtree(tmp);
    else fprintf(stderr, "[%s] kept %s for inspection\n", model, tmp);
}

int main(void) {
    const char *bin = getenv("MT_BIN");
    if (!bin || !*bin) bin = "build/bin";
    char exe[1024];
    snprintf(exe, sizeof exe, "%s/megatrain", bin);
    if (access(exe, X_OK) != 0) {
        CHECK(0, "%s: no megatrain executable. HINT: build it (cmake -B build && cmake --build build) "
                 "or set MT_BIN to the directory holding it", exe);
        return mt_test_finish("test_torch_parity");
    }
    if (access(FIXTURES "/tokens.bin", R_OK) != 0) {
        CHECK(0, FIXTURES "/tokens.bin missing. HINT: run from the repo root (CTest does); "
                          "python3 " FIXTURES "/make_torch_fixtures.py regenerates the fixtures");
        return mt_test_finish("test_torch_parity");
    }
    const char *models[] = {"tiny_llama", "tiny_qwen2", "tiny_qwen3"};
    for (int m = 0; m < 3; m++)
        for (int G = 1; G <= 2; G++) check_model(bin, models[m], G);
    return mt_test_finish("test_torch_parity");
}
