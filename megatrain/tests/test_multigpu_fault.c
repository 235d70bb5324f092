// test_multigpu_fault.c: a rank that fails mid-step (--gpus N) ends the step with an error
// naming the rank and the cause, not a hang: the other ranks' landings waiting for its
// gradients are released (engine/collective.h: abort), their walks finish, and the engine
// is destroyed cleanly. Rank 1's backend fails its SwiGLU on step 2 (G = 2, so rank 0's
// second micro-batch waits in the host's order for what rank 1 never sends).
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend_registry.h"
#include "engine/engine.h"
#include "engine/model_io.h"
#include "test_util.h"

static mt_backend_ops failing_ops;
static const mt_backend_ops *real_ops;
static int armed;

static mt_status failing_swiglu(mt_backend *be, void *h, const void *gu, int N, int F) {
    if (armed) return mt_fail(MT_ERR_BACKEND, "injected: swiglu_fwd failed");
    return real_ops->swiglu_fwd(be, h, gu, N, F);
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_multigpu_fault: FAIL: the failed step hung (60 s)\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(1);
}

int main(void) {
    signal(SIGALRM, on_alarm);
    alarm(60);
    mt_config c;
    CHECK(mt_config_load("megatrain/tests/data/tiny5_llama.json", &c) == MT_OK, "%s", mt_last_error());
    mt_backend *be[2];
    for (int i = 0; i < 2; i++) CHECK(mt_backend_create("cpu", MT_F32, &be[i]) == MT_OK, "%s", mt_last_error());
    real_ops = be[1]->ops;
    failing_ops = *real_ops;
    failing_ops.swiglu_fwd = failing_swiglu;
    be[1]->ops = &failing_ops;
    mt_model m;
    CHECK(mt_model_alloc(&m, &c, MT_PREC_PAPER, be[0]) == MT_OK, "%s", mt_last_error());
    mt_model_init_random(&m, 5);
    mt_engine_opts o;
    mt_engine_opts_defaults(&o);
    o.B = 4, o.T = 16, o.grad_accum = 2;
    mt_engine *e = NULL;
    CHECK(mt_engine_create_ranks(&m, be, 2, &o, &e) == MT_OK, "%s", mt_last_error());
    int32_t in[2 * 4 * 16], tg[2 * 4 * 16];
    for (int i = 0; i < 2 * 4 * 16; i++) in[i] = (i * 7) % c.vocab_size, tg[i] = (i * 11 + 1) % c.vocab_size;
    mt_optim_hparams hp = {1e-3f, 0.1f, 0.9f, 0.95f, 1e-8f, 1.0f, 0};
    mt_step_stats st;
    CHECK(mt_engine_step(e, in, tg, &hp, hp.lr, 1, &st) == MT_OK, "step 1: %s", mt_last_error());
    CHECK(mt_engine_finish(e) == MT_OK, "finish");
    armed = 1;
    mt_status s = mt_engine_step(e, in, tg, &hp, hp.lr, 2, &st);
    CHECK(s == MT_ERR_BACKEND, "step 2 with rank 1 failing: status %d", (int)s);
    CHECK(strstr(mt_last_error(), "rank 1") && strstr(mt_last_error(), "injected"), "the error names the rank and why: %s",
          mt_last_error());
    mt_engine_destroy(e); // no hang: every drain has finished
    mt_model_free(&m);
    for (int i = 0; i < 2; i++) mt_backend_destroy(be[i]);
    return mt_test_finish("test_multigpu_fault");
}
