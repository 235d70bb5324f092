// env.h: the `env` block every results row carries (docs/DESIGN.md#results):
// exactly the keys git_sha, git_dirty, gpu_name, gpu_mem_bytes, driver, cuda,
// host_mem_bytes, cpu_model, cpu_cores, numa_nodes, gpu_numa_node, pcie_gbps,
// hardware_profile, utc — null where unknown, never a guess.
//
// Where each value comes from:
//   git_sha    MT_GIT_SHA env var, else .git/HEAD read as a file (12 hex digits, as
//              `megatrain --version`), else the sha compiled in; null if none.
//   git_dirty  MT_GIT_DIRTY env var (0/1), else `git --no-optional-locks status
//              --porcelain -uno` (skipped when MT_ENV_NO_GIT is set); null if unknown.
//   gpu_*, driver   nvidia-smi --query-gpu (MT_NVIDIA_SMI names another binary; GPU
//              index = first entry of CUDA_VISIBLE_DEVICES when numeric, else 0).
//   cuda       the CUDA toolkit version the build was compiled with (MT_CUDA_VERSION), or null.
//   host/cpu/numa   mt_topology_detect (hwloc or sysfs).
//   gpu_numa_node   the topology's GPU with nvidia-smi's bus id (the only GPU when there is one).
//   pcie_gbps  per-direction GB/s of the GPU link after encoding: nvidia-smi's
//              pcie.link.gen.max x pcie.link.width.max (the most this GPU and slot
//              train to), else the topology's link_gbps; null if unknown.
//   hardware_profile  the argument (projections), else null.
//   utc        now, "YYYY-MM-DDTHH:MM:SSZ".
#ifndef MT_ENV_H
#define MT_ENV_H

#include <cjson/cJSON.h>

#include "core/status.h"

// Builds the env object into *out (caller deletes). hardware_profile may be NULL.
mt_status mt_env_collect(const char *hardware_profile, cJSON **out);

// The same object printed on one line (caller frees); NULL on failure.
char *mt_env_json_string(const char *hardware_profile);

#endif
