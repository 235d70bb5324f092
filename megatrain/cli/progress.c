// progress.c: stderr progress lines with an ETA from the mean step time so far,
// or, on a terminal, a short line a step on stdout and a summary at the end.
#include "cli/progress.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

#include "core/metrics.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void mt_progress_start(mt_progress *p, int first_step, int last_step, int human) {
    *p = (mt_progress){.first_step = first_step, .last_step = last_step, .human = human, .t_start_ms = now_ms(),
                       .first_loss = NAN, .last_loss = NAN};
}

static void loss_text(double loss, char *buf, size_t cap) {
    if (isnan(loss)) snprintf(buf, cap, "-"); // the sim backend has no data, hence no loss
    else snprintf(buf, cap, "%.4f", loss);
}

// h:mm:ss past an hour, else mm:ss.
static void eta_text(double s, char *buf, size_t cap) {
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%02ld:%02ld", t / 60, t % 60);
}

void mt_progress_update(mt_progress *p, int step, double loss, double step_ms, double tokens, double tflops) {
    double t = now_ms();
    if (isnan(p->first_loss)) p->first_loss = loss;
    p->last_loss = loss;
    p->tokens += tokens;
    p->step_ms_sum += step_ms;
    p->tflops_sum += tflops;
    p->steps_done++;
    int done = step - p->first_step + 1, left = p->last_step - step;
    double eta_s = done > 0 ? (t - p->t_start_ms) / done * left / 1e3 : 0;
    char lt[32], et[32];
    loss_text(loss, lt, sizeof lt);
    eta_text(eta_s, et, sizeof et);
    if (p->human) {
        int w = snprintf(NULL, 0, "%d", p->last_step);
        printf("step %*d/%d | loss %s | %.1f ms | %.0f tok/s | %.3g TFLOPS | ETA %s\n", w, step, p->last_step, lt,
               step_ms, mt_metric_tokens_per_s(tokens, step_ms), tflops, et);
        fflush(stdout);
        return;
    }
    if (step != p->last_step && step != p->first_step && t - p->t_last_print_ms < 1000) return;
    p->t_last_print_ms = t;
    fprintf(stderr, "step %d/%d | loss %s | %.0f tok/s | ETA %s\n", step, p->last_step, lt,
            mt_metric_tokens_per_s(tokens, step_ms), et);
}

void mt_progress_end(mt_progress *p, const char *json_dest) {
    double wall_s = (now_ms() - p->t_start_ms) / 1e3;
    if (!p->human) {
        fprintf(stderr, "done in %.1f s\n", wall_s);
        return;
    }
    char a[32], b[32];
    loss_text(p->first_loss, a, sizeof a);
    loss_text(p->last_loss, b, sizeof b);
    int n = p->steps_done ? p->steps_done : 1;
    printf("done: steps %d-%d in %.1f s | loss %s -> %s | %.1f ms/step | %.0f tok/s | %.3g TFLOPS\n", p->first_step,
           p->first_step + n - 1, wall_s, a, b, p->step_ms_sum / n, mt_metric_tokens_per_s(p->tokens, p->step_ms_sum),
           p->tflops_sum / n);
    if (json_dest) printf("JSON lines: %s\n", json_dest);
    else printf("JSON lines: not kept (--log FILE.jsonl keeps them; --json prints them here)\n");
    fflush(stdout);
}
