// lab_device.h: the CUDA backend's device helpers for the labs, from the backend's
// own dependency-free header ../cuda_device.cuh (mt_bf16, mt_ld, mt_st, mt_warp_sum,
// mt_warp_max, mt_cuda_blocks; cuda_internal.h, which pulls in backend.h and cuBLAS,
// includes the same header), plus lab-only helpers: a device-side fill for benchmark
// buffers too large to fill and upload from the host, exact-match counting, an
// integer hash, and the PASS/FAIL report line.
#pragma once
#include "lab_common.h"

#include <stddef.h>
#include <stdint.h>

#include "../cuda_device.cuh"

// x[i] = lo + (hi - lo) * u, u in [0,1) from a hash of (seed, i). Benchmark data only
// (the values differ from lab_fill's); checks use lab_fill on the host.
template <typename T> __global__ void lab_fill_dev_kernel(T *x, size_t n, unsigned long long seed, float lo, float hi) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned long long h = (i + 1) * 0x9E3779B97F4A7C15ull ^ (seed + 1) * 0xD1B54A32D192ED03ull;
        h ^= h >> 31;
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 27;
        mt_st(x, i, lo + (hi - lo) * (float)((h >> 40) * (1.0 / 16777216.0)));
    }
}
template <typename T> static void lab_fill_dev(T *x, size_t n, unsigned long long seed, float lo, float hi) {
    lab_fill_dev_kernel<T><<<mt_cuda_blocks(n, 256), 256>>>(x, n, seed, lo, hi);
    LAB_CHECK(cudaGetLastError());
}

// Bitwise mismatches between two float arrays (exactness checks).
static inline size_t lab_mismatches(const float *a, const float *b, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return bad;
}

// Small deterministic integer hash for test ids and targets.
static inline unsigned lab_hash(unsigned x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

// One check line; PASS when err <= tol (and err is finite). lab_failures counts the FAILs.
static int lab_failures = 0;
static inline void lab_report(const char *what, double err, double tol) {
    int ok = err <= tol && isfinite(err);
    printf("  %-46s %.3e  (tol %.0e)  %s\n", what, err, tol, ok ? "PASS" : "FAIL");
    if (!ok) lab_failures++;
}
