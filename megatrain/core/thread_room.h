// thread_room.h: the threads a run will start, proved possible before it starts any.
// A thread libgomp cannot create ends the process from inside a parallel region (and
// exit then waits forever on OpenBLAS's workers); ours fail mid-setup. Under `ulimit -u`
// (RLIMIT_NPROC, which counts every thread of the user) that is a one-line error first.
#ifndef MT_THREAD_ROOM_H
#define MT_THREAD_ROOM_H

#include "core/status.h"

// Starts engine_threads plus `teams` OpenMP teams (omp_get_max_threads() - 1 each: every
// thread that opens a parallel region gets its own) at once and ends them; an error names
// the limit and the count.
mt_status mt_thread_room_check(int engine_threads, int teams);

#endif
