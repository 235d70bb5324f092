// run_signals.c: one flag for every signal that stops a run, so none of them
// kills it mid-step (which loses the step and the save).
#define _POSIX_C_SOURCE 200809L
#include "cli/run_signals.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t caught = 0;

static void on_signal(int sig) {
    if (!caught) caught = sig;
}

void mt_run_signals_catch(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; // a read or wait in flight goes on; the step loop looks at the flag
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    for (int i = 0; i < 4; i++) sigaction(sigs[i], &sa, NULL);
}

int mt_run_signal_caught(void) { return caught; }

const char *mt_run_signal_name(int sig) {
    switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    default: return "a signal";
    }
}
