// lab_common.h: helpers for the standalone kernel labs (tools, so they may exit).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAB_CHECK(x)                                                                               \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\nHINT: is a GPU present?\n", __FILE__, __LINE__, #x,     \
                    cudaGetErrorString(e_));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static inline void lab_fill(float *x, size_t n, unsigned long long seed, float lo, float hi) {
    unsigned long long s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
}

static inline double lab_nmse(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

// Uploads host f32 as T (float or bf16).
template <typename T> static T *lab_upload(const float *h, size_t n) {
    T *tmp = (T *)malloc(n * sizeof(T));
    for (size_t i = 0; i < n; i++) tmp[i] = (T)h[i];
    T *d;
    LAB_CHECK(cudaMalloc(&d, n * sizeof(T)));
    LAB_CHECK(cudaMemcpy(d, tmp, n * sizeof(T), cudaMemcpyHostToDevice));
    free(tmp);
    return d;
}
template <typename T> static void lab_download(float *h, const T *d, size_t n) {
    T *tmp = (T *)malloc(n * sizeof(T));
    LAB_CHECK(cudaMemcpy(tmp, d, n * sizeof(T), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) h[i] = (float)tmp[i];
    free(tmp);
}
static inline void lab_round_bf16(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
}

// The device's peak DRAM bandwidth in GB/s, from the memory clock and bus width it
// reports (two transfers per clock, as HBM and GDDR count them): H100 SXM 2619 MHz x
// 5120 bit -> 3352 GB/s. 0 when the device does not say.
static inline double lab_peak_gbps(void) {
    int dev = 0, khz = 0, bits = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return 2.0 * khz * 1e3 * (bits / 8.0) / 1e9;
}

// Median milliseconds of `reps` timed runs of f() after 2 warm-ups.
template <typename F> static float lab_time_ms(F f, int reps = 10) {
    cudaEvent_t a, b;
    LAB_CHECK(cudaEventCreate(&a));
    LAB_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 2; i++) f();
    float ms[64];
    if (reps > 64) reps = 64;
    for (int i = 0; i < reps; i++) {
        LAB_CHECK(cudaEventRecord(a));
        f();
        LAB_CHECK(cudaEventRecord(b));
        LAB_CHECK(cudaEventSynchronize(b));
        LAB_CHECK(cudaEventElapsedTime(&ms[i], a, b));
    }
    LAB_CHECK(cudaGetLastError());
    for (int i = 1; i < reps; i++)
        for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
            float t = ms[j];
            ms[j] = ms[j - 1];
            ms[j - 1] = t;
        }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms[reps / 2];
}
