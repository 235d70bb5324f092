// host_mem.h: large host blocks at memory speed. The model state is tens to
// hundreds of GB; a single thread faulting it in 4 KiB at a time took most of a
// minute on the H200 host. Blocks are mapped anonymously (zero by the kernel),
// marked for transparent huge pages where the OS gives them, and first touched
// by every OpenMP thread in parallel, so the pages exist (and sit on the NUMA
// node of the threads that touched them) before training starts.
#ifndef MT_HOST_MEM_H
#define MT_HOST_MEM_H

#include <stddef.h>

#include "core/status.h"

// A zeroed, page-aligned block of `bytes` (0 allowed: one page), its pages
// faulted in by all threads. One-line error on failure (*out = NULL).
mt_status mt_host_mem_alloc(size_t bytes, void **out);
// The same block mapped only: no page exists until it is first written, so a host that keeps
// one slice of a block (several hosts, engine/host_shard.h) holds that slice's pages alone.
mt_status mt_host_mem_map(size_t bytes, void **out);
// Frees a block from mt_host_mem_alloc or mt_host_mem_map (NULL: nothing); `bytes` as allocated.
void mt_host_mem_free(void *p, size_t bytes);
// The bytes mt_host_mem_alloc maps for a request (whole pages).
size_t mt_host_mem_rounded(size_t bytes);
// Whether the kernel was asked for huge pages on the last block (1), or says
// it never gives them (0: /sys/kernel/mm/transparent_hugepage/enabled = never).
int mt_host_mem_hugepages(void);

#endif
