// rmsnorm.cu: RMSNorm forward lab. v1 = one thread per row (first version);
// v2 = one warp per row (the backend's kernel shape, cuda_norm.cu). CPU check, then
// CUDA-event timing and effective bandwidth. usage: ./rmsnorm [R D]
#include "lab_common.h"

__global__ void rmsnorm_v1(float *out, float *rstd, const float *inp, const float *w, int R, int D, float eps) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= R) return;
    const float *x = inp + (size_t)r * D;
    float ss = 0.f;
    for (int i = 0; i < D; i++) ss += x[i] * x[i];
    float rs = rsqrtf(ss / D + eps);
    for (int i = 0; i < D; i++) out[(size_t)r * D + i] = x[i] * rs * w[i];
    rstd[r] = rs;
}

__global__ void rmsnorm_v2(float *out, float *rstd, const float *inp, const float *w, int R, int D, float eps) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= R) return;
    const float *x = inp + (size_t)r * D;
    float ss = 0.f;
    for (int i = lane; i < D; i += 32) ss += x[i] * x[i];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    float rs = rsqrtf(ss / D + eps);
    for (int i = lane; i < D; i += 32) out[(size_t)r * D + i] = x[i] * rs * w[i];
    if (lane == 0) rstd[r] = rs;
}

int main(int argc, char **argv) {
    int R = argc == 3 ? atoi(argv[1]) : 16384, D = argc == 3 ? atoi(argv[2]) : 4096;
    size_t n = (size_t)R * D;
    float *x = (float *)malloc(n * 4), *w = (float *)malloc(D * 4), *ref = (float *)malloc(n * 4), *got = (float *)malloc(n * 4);
    lab_fill(x, n, 1, -2, 2);
    lab_fill(w, D, 2, 0.5f, 1.5f);
    for (int r = 0; r < R; r++) {
        double ss = 0;
        for (int i = 0; i < D; i++) ss += (double)x[(size_t)r * D + i] * x[(size_t)r * D + i];
        double rs = 1.0 / sqrt(ss / D + 1e-6);
        for (int i = 0; i < D; i++) ref[(size_t)r * D + i] = (float)(x[(size_t)r * D + i] * rs * w[i]);
    }
    float *dx = lab_upload<float>(x, n), *dw = lab_upload<float>(w, D), *dout, *drs;
    LAB_CHECK(cudaMalloc(&dout, n * 4));
    LAB_CHECK(cudaMalloc(&drs, R * 4));
    int fails = 0;
    double gb = 2.0 * n * 4 / 1e9;
    for (int v = 1; v <= 2; v++) {
        auto run = [&] {
            if (v == 1) rmsnorm_v1<<<(R + 127) / 128, 128>>>(dout, drs, dx, dw, R, D, 1e-6f);
            else rmsnorm_v2<<<(R + 7) / 8, 256>>>(dout, drs, dx, dw, R, D, 1e-6f);
        };
        run();
        LAB_CHECK(cudaDeviceSynchronize());
        lab_download(got, dout, n);
        double e = lab_nmse(got, ref, n);
        float ms = lab_time_ms(run);
        printf("v%d  R=%d D=%d  nmse %.2e %s  %.3f ms  %.0f GB/s\n", v, R, D, e, e < 1e-10 ? "ok" : "WRONG", ms,
               gb / ms * 1e3);
        if (!(e < 1e-10)) fails++;
    }
    return fails ? 1 : 0;
}
