// vclock.c: one thread-local double.
#include "core/vclock.h"

static _Thread_local double vclock_ms;

double mt_vclock_now(void) { return vclock_ms; }
void mt_vclock_set(double t_ms) { vclock_ms = t_ms; }
void mt_vclock_join(double t_ms) {
    if (t_ms > vclock_ms) vclock_ms = t_ms;
}
void mt_vclock_advance(double ms) { vclock_ms += ms; }
