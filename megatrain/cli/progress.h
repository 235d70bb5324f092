// progress.h: human progress on stderr (step, loss, tokens/s, ETA), at most
// a few lines a second so that long runs are readable and short ones quiet.
#ifndef MT_PROGRESS_H
#define MT_PROGRESS_H

typedef struct {
    int first_step, last_step;
    double t_start_ms, t_last_print_ms;
} mt_progress;

void mt_progress_start(mt_progress *p, int first_step, int last_step);
void mt_progress_update(mt_progress *p, int step, double loss, double tokens_per_s);
void mt_progress_end(mt_progress *p);

#endif
