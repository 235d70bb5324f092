// vclock.h: per-thread virtual time, for the sim backend. Under simulation no
// work is done; each host thread carries a clock (ms) that advances by the cost
// of the work it would have done and joins the clocks of whatever it waits for
// (a device event, a slab freed by the drain thread, an optimizer update).
// Under real backends the clocks are kept too but nobody reads them.
#ifndef MT_VCLOCK_H
#define MT_VCLOCK_H

double mt_vclock_now(void);          // this thread's virtual time
void mt_vclock_set(double t_ms);
void mt_vclock_join(double t_ms);    // now = max(now, t)
void mt_vclock_advance(double ms);

#endif
