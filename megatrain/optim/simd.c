// simd.c: run-time choice of the optimizer's vector path. See simd.h.
#include "optim/simd.h"

#include "core/env.h"

#include <stdlib.h>
#include <string.h>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1ul << 1) // <asm/hwcap.h>; older libc headers lack the names
#endif
#ifndef HWCAP_SVE
#define HWCAP_SVE (1ul << 22)
#endif
#endif

static const char *const NAMES[MT_SIMD_COUNT] = {"scalar", "avx2", "avx512", "neon", "sve"};

const char *mt_simd_name(mt_simd_isa isa) { return (unsigned)isa < MT_SIMD_COUNT ? NAMES[isa] : "?"; }

int mt_simd_supported(mt_simd_isa isa) {
    switch (isa) {
    case MT_SIMD_SCALAR: return 1;
#if defined(__x86_64__) && defined(__GNUC__)
    case MT_SIMD_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case MT_SIMD_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#endif
#if defined(__aarch64__) && defined(__linux__)
    case MT_SIMD_NEON: return (getauxval(AT_HWCAP) & HWCAP_ASIMD) != 0;
    case MT_SIMD_SVE: return (getauxval(AT_HWCAP) & HWCAP_SVE) != 0;
#endif
    default: return 0;
    }
}

mt_status mt_simd_from_env(mt_simd_isa *out) {
    int i;
    MT_TRY(mt_env_choice("MT_SIMD", NAMES, MT_SIMD_COUNT, -1, &i));
    *out = MT_SIMD_COUNT;
    if (i < 0) return MT_OK;
    if (!mt_simd_supported((mt_simd_isa)i))
        return mt_fail(MT_ERR_ARG, "MT_SIMD=%s: this build or CPU has no %s path. HINT: unset it for the best one here",
                       NAMES[i], NAMES[i]);
    *out = (mt_simd_isa)i;
    return MT_OK;
}

mt_simd_isa mt_simd_best(void) {
    mt_simd_isa want;
    if (mt_simd_from_env(&want) == MT_OK && want != MT_SIMD_COUNT) return want; // a bad value: refused by the CLI
    static const mt_simd_isa ORDER[] = {MT_SIMD_AVX512, MT_SIMD_AVX2, MT_SIMD_SVE, MT_SIMD_NEON};
    for (size_t i = 0; i < sizeof ORDER / sizeof ORDER[0]; i++)
        if (mt_simd_supported(ORDER[i])) return ORDER[i];
    return MT_SIMD_SCALAR;
}
