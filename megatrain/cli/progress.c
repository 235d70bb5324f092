// progress.c: stderr progress lines with an ETA from the mean step time so far.
#include "cli/progress.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void mt_progress_start(mt_progress *p, int first_step, int last_step) {
    p->first_step = first_step;
    p->last_step = last_step;
    p->t_start_ms = now_ms();
    p->t_last_print_ms = 0;
}

void mt_progress_update(mt_progress *p, int step, double loss, double tokens_per_s) {
    double t = now_ms();
    if (step != p->last_step && step != p->first_step && t - p->t_last_print_ms < 1000) return;
    p->t_last_print_ms = t;
    int done = step - p->first_step + 1, left = p->last_step - step;
    double eta_s = done > 0 ? (t - p->t_start_ms) / done * left / 1e3 : 0;
    char loss_text[32] = "-"; // the sim backend has no data, hence no loss
    if (!isnan(loss)) snprintf(loss_text, sizeof loss_text, "%.4f", loss);
    fprintf(stderr, "step %d/%d | loss %s | %.0f tok/s | ETA %02d:%02d\n", step, p->last_step, loss_text, tokens_per_s,
            (int)(eta_s / 60), (int)eta_s % 60);
}

void mt_progress_end(mt_progress *p) {
    fprintf(stderr, "done in %.1f s\n", (now_ms() - p->t_start_ms) / 1e3);
}
