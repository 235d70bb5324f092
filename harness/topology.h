// topology.h: what the machine looks like to the engine: NUMA nodes with memory,
// cores, and the NVIDIA GPUs on PCI (bus id, link speed/width, nearest NUMA node).
// Grace Hopper (GH200) is recognised by the GPU's PCI device id: its GPU hangs off
// NVLink-C2C, not PCIe, and the OS onlines its HBM as a NUMA node without CPUs,
// which is GPU memory and not counted as host memory.
// Detected with hwloc when built with it (MT_HAVE_HWLOC) and it works at run time,
// else read from sysfs (/sys/devices/system/node, /sys/bus/pci/devices), which is
// all the GPU machine has. Also binds host threads near a GPU.
#ifndef MT_TOPOLOGY_H
#define MT_TOPOLOGY_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "core/status.h"
#include "core/sysinfo.h"

#define MT_TOPO_MAX_NODES 64
#define MT_TOPO_MAX_GPUS 32

typedef struct {
    int os_index;          // NUMA node number as the OS numbers it
    size_t mem_bytes;      // memory local to the node (0 = memoryless node)
    int cpus;              // logical CPUs (PUs) in the node
    char cpulist[256];     // "0-15,32-47", the kernel's list format
    int gpu_memory;        // 1: a GPU's memory onlined as a node (Grace Hopper HBM), not host memory
} mt_topo_node;

typedef struct {
    char bus_id[20];       // "0000:1b:00.0" (lower case, as sysfs spells it)
    unsigned vendor_id;    // 0x10de
    unsigned device_id;
    unsigned class_id;     // 0x0300 VGA or 0x0302 3D controller
    int numa_node;         // nearest NUMA node, -1 unknown
    double link_gts;       // current link speed in GT/s per lane, 0 unknown (GPUs downclock when idle)
    int link_width;        // current lanes, 0 unknown
    double max_link_gts;   // maximum link speed, 0 unknown
    int max_link_width;    // maximum lanes, 0 unknown
    double link_gbps;      // per-direction GB/s (decimal) after line encoding at the max speed x width
                           // (what the link trains to under load; current when max is unknown; hwloc's
                           // figure when sysfs has neither); 0 unknown. 32 GT/s x16 -> 63.0
                           // NVLink-C2C: 450, NVIDIA's GH200 figure (900 GB/s both directions)
    char link[16];         // "pcie" or "nvlink-c2c" (Grace Hopper)
    int memory_node;       // NUMA node holding this GPU's memory (Grace Hopper), -1 none
} mt_topo_gpu;

typedef struct {
    char source[8];        // "hwloc" or "sysfs": where the numbers came from
    char cpu_model[128];   // "" unknown; Arm: from /proc/cpuinfo's implementer and part ("ARM Neoverse-V2")
    int cores;             // physical cores (PUs when cores are unknown)
    int pus;               // logical CPUs online
    size_t host_mem_bytes; // total host memory (MemTotal less GPU-memory nodes)
    int n_nodes;           // NUMA nodes with memory or CPUs (1 on a non-NUMA machine)
    mt_topo_node nodes[MT_TOPO_MAX_NODES];
    int n_gpus;
    mt_topo_gpu gpus[MT_TOPO_MAX_GPUS];
} mt_topology;

// Fills *t. Tries hwloc first (when compiled in and MT_TOPOLOGY_SOURCE is not
// "sysfs"), then sysfs. Fails only when neither yields even one node.
// MT_SYSFS_ROOT=DIR reads a fake sysfs/proc tree under DIR instead (tests).
mt_status mt_topology_detect(mt_topology *t);
// The same, from sysfs only; root is "/" normally (tests point it at a fake tree).
mt_status mt_topology_detect_sysfs(mt_topology *t, const char *root);

// What mt_topology_bind_to_node did: mt_numa_binding (core/sysinfo.h).

// Binds the calling thread (and the threads it creates later, which inherit both) to
// NUMA node `node`: its CPUs (hwloc_set_cpubind, or sched_setaffinity over the node's
// sysfs cpulist), and its memory: future allocations prefer the node (MPOL_PREFERRED:
// hwloc_set_membind(BIND) without STRICT, or set_mempolicy on the sysfs path; preferred,
// not strict, so a state larger than one node still allocates). Both paths check the
// call's result and read the policy back with get_mempolicy. A CPU-binding failure is an
// error; a memory-policy failure is not (containers often forbid it): out->memory is 0
// and out->mem_how says why. `out` may be NULL.
mt_status mt_topology_bind_to_node(int node, mt_numa_binding *out);

// The GPU whose bus id matches (case-insensitive, domain optional: "1B:00.0" or
// "00000000:1B:00.0" as nvidia-smi prints it); NULL when none.
const mt_topo_gpu *mt_topology_find_gpu(const mt_topology *t, const char *bus_id);

// The topology as a JSON object (caller deletes): source, cpu_model, cores, pus,
// host_mem_bytes, numa_nodes[{node, mem_bytes, cpus, cpulist, gpu_memory}], gpus[{bus_id,
// vendor_id, device_id, numa_node, link, link_gts, link_width, max_link_gts, max_link_width,
// link_gbps, memory_node}]; unknown values are null.
cJSON *mt_topology_to_json(const mt_topology *t);

// Per-direction GB/s of a PCIe link: GT/s x lanes x encoding / 8 (8b/10b below 8 GT/s,
// 128b/130b from Gen3 on). 0 when either is unknown.
double mt_pcie_link_gbps(double gts, int width);

// 1 when an NVIDIA PCI device id is a Grace Hopper GPU (attached over NVLink-C2C).
int mt_topo_is_c2c_gpu(unsigned device_id);

// Parses a kernel cpulist ("0-3,8,10-11") into a count of CPUs; -1 on bad syntax.
int mt_cpulist_count(const char *list);

#endif
