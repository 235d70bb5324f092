// sysinfo.h: facts about the host machine that several modules need.
#ifndef MT_SYSINFO_H
#define MT_SYSINFO_H

#include <stddef.h>

// MemAvailable from /proc/meminfo (what can be allocated without swapping);
// free pages where /proc is missing; 0 if unknown.
size_t mt_host_mem_available_bytes(void);

#endif
