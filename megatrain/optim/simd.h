// simd.h: which vector paths the host optimizer kernels (AdamW, gradient
// accumulate / sum of squares / scale) may take on this CPU, chosen at run time:
// x86-64 by cpuid (AVX-512 > AVX2 > scalar), aarch64 by getauxval(AT_HWCAP)
// (SVE > NEON). MT_SIMD=<name> picks a lower path that this CPU also runs
// (e.g. MT_SIMD=neon on an SVE machine, to compare them); any other value is an error.
#ifndef MT_SIMD_H
#define MT_SIMD_H

#include "core/status.h"

typedef enum {
    MT_SIMD_SCALAR = 0, // plain C (GCC may still vectorise it; grad ops clone it per x86 ISA)
    MT_SIMD_AVX2 = 1,   // avx2 + fma
    MT_SIMD_AVX512 = 2, // avx512f + avx512bw
    MT_SIMD_NEON = 3,   // Advanced SIMD, 128-bit: every aarch64 CPU
    MT_SIMD_SVE = 4,    // SVE, any vector length (Grace: SVE2, 128-bit)
    MT_SIMD_COUNT = 5
} mt_simd_isa;

// 1 when this build has the path and this CPU runs it (scalar: always).
int mt_simd_supported(mt_simd_isa isa);
// MT_SIMD: the path it names (MT_SIMD_COUNT when unset); an unknown name, or a path this
// build or CPU lacks, is an error.
mt_status mt_simd_from_env(mt_simd_isa *out);
// The path the kernels take: the best supported, or the one MT_SIMD names.
mt_simd_isa mt_simd_best(void);
// "scalar", "avx2", "avx512", "neon", "sve" ("?" out of range).
const char *mt_simd_name(mt_simd_isa isa);

#endif
