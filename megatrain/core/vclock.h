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

// Host lanes (the gradient drain, the optimizer) price others' work on their own clocks. Before the sim
// prices a copy by the host work overlapping it, it waits until every lane of `group` (the backend) is idle
// or past the copy's end, so the timeline is the same whatever the OS's scheduling (no-ops under real backends).
int mt_vlane_open(const void *group);     // a lane id (-1: the table is full; the lane is then unsynchronised)
void mt_vlane_close(int lane);
void mt_vlane_bind(int lane);             // the calling thread is `lane` (its priced work joins the calendar)
int mt_vlane_self(void);                  // the calling thread's lane, -1 for none
void mt_vlane_give(int lane);             // one item handed to the lane (by its producer, before the wake-up)
void mt_vlane_at(int lane, double t_ms);  // the lane's next priced work starts at t_ms or later
void mt_vlane_done(int lane, double t_ms); // one item finished, the lane's clock at t_ms
// Blocks until every open lane of `group` but the caller's own has nothing in
// hand or a clock at or past t_ms.
void mt_vlane_wait_past(const void *group, double t_ms);

#endif
