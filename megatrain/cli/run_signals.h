// run_signals.h: the signals that end a training run early, each the same way:
// SIGINT, SIGTERM, SIGHUP (its terminal went away) and SIGPIPE (stdout's reader
// went away, as under `| head -1`). A handler only records the signal; the run
// finishes the step in flight, saves (with --save), says so and exits 130.
#ifndef MT_RUN_SIGNALS_H
#define MT_RUN_SIGNALS_H

void mt_run_signals_catch(void);
// 0, or the first of those signals caught since mt_run_signals_catch.
int mt_run_signal_caught(void);
// "SIGHUP" ...
const char *mt_run_signal_name(int sig);

#endif
