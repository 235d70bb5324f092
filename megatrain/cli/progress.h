// progress.h: what a person watching a run reads. Piped (stdout is the JSON
// lines' reader): stderr lines with an ETA, at most one a second. On a
// terminal: one short line a step on stdout, as llm.c prints, and a summary.
#ifndef MT_PROGRESS_H
#define MT_PROGRESS_H

typedef struct {
    int first_step, last_step;
    int human; // stdout is a terminal: a line a step there (the JSON lines go to --log, or --json)
    double t_start_ms, t_last_print_ms;
    double tokens, step_ms_sum, tflops_sum, first_loss, last_loss;
    int steps_done;
} mt_progress;

void mt_progress_start(mt_progress *p, int first_step, int last_step, int human);
void mt_progress_update(mt_progress *p, int step, double loss, double step_ms, double tokens, double tflops);
// json_dest: where the JSON lines went ("--log FILE", "stdout"), or NULL: nowhere (said in the summary).
void mt_progress_end(mt_progress *p, const char *json_dest);

#endif
