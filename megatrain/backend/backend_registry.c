// backend_registry.c: backend lookup by name ("cpu", "cuda", "sim", "auto").
// "cuda" exists only when the binary was built with nvcc (MT_HAVE_CUDA);
// "auto" takes cuda when a device opens, else cpu. "sim" is always compiled in
// but is created with its hardware profile (mt_backend_sim_create).
#include <string.h>

#include "backend/backend.h"

mt_status mt_backend_create(const char *name, mt_dtype act_dtype, mt_backend **out) {
    *out = NULL;
    if (!name) name = "auto";
    if (strcmp(name, "cpu") == 0) return mt_backend_cpu_create(act_dtype, out);
    if (strcmp(name, "cuda") == 0) {
#ifdef MT_HAVE_CUDA
        return mt_backend_cuda_create(act_dtype, out);
#else
        return mt_fail(MT_ERR_UNSUPPORTED,
                       "--backend cuda: this binary was built without CUDA (nvcc was not found at configure time)");
#endif
    }
    if (strcmp(name, "auto") == 0) {
#ifdef MT_HAVE_CUDA
        if (mt_backend_cuda_available() == 1) return mt_backend_cuda_create(act_dtype, out);
#endif
        return mt_backend_cpu_create(act_dtype, out);
    }
    if (strcmp(name, "sim") == 0) // the simulator needs a machine to price with: mt_backend_sim_create(profile, ...)
        return mt_fail(MT_ERR_UNSUPPORTED, "--backend sim: needs --hardware PROFILE (a name in experiments/hardware/ or a "
                                   "path to a megatrain.hardware/1 JSON file)");
    return mt_fail(MT_ERR_ARG, "--backend %s: unknown backend (expected auto, cpu, cuda or sim)", name);
}

void mt_backend_destroy(mt_backend *be) {
    if (be && be->ops && be->ops->destroy) be->ops->destroy(be);
}

unsigned mt_backend_caps_of(const char *name) {
    if (!name || !strcmp(name, "auto")) {
#ifdef MT_HAVE_CUDA
        if (mt_backend_cuda_available() == 1) return mt_backend_cuda_caps();
#endif
        return mt_backend_cpu_caps();
    }
    if (!strcmp(name, "cpu")) return mt_backend_cpu_caps();
#ifdef MT_HAVE_CUDA
    if (!strcmp(name, "cuda")) return mt_backend_cuda_caps();
#endif
    if (!strcmp(name, "sim")) return mt_backend_sim_caps();
    return 0;
}

int mt_backend_list(const char **names, int max) {
    static const char *const compiled[] = {
        "cpu",
#ifdef MT_HAVE_CUDA
        "cuda",
#endif
        "sim",
    };
    int n = (int)(sizeof compiled / sizeof compiled[0]);
    for (int i = 0; i < n && i < max; i++) names[i] = compiled[i];
    return n;
}

mt_status mt_attn_impl_parse(const char *name, mt_attn_impl *out) {
    if (!name || !strcmp(name, "auto")) *out = MT_ATTN_AUTO;
    else if (!strcmp(name, "native")) *out = MT_ATTN_NATIVE;
    else if (!strcmp(name, "cudnn")) *out = MT_ATTN_CUDNN;
    else return mt_fail(MT_ERR_ARG, "--attention %s: unknown implementation (expected auto, native or cudnn)", name);
    return MT_OK;
}

mt_status mt_backend_set_attention(mt_backend *be, mt_attn_impl impl) {
    if (be->ops->set_attention) return be->ops->set_attention(be, (int)impl);
    // One implementation: its own. A virtual-time backend prices any (from its profile).
    if (impl == MT_ATTN_CUDNN && !mt_backend_has(be, MT_CAP_VIRTUAL_TIME))
        return mt_fail(MT_ERR_ARG, "--attention cudnn: needs --backend cuda (the %s backend has one attention "
                                   "implementation, its own)",
                       be->ops->name);
    return MT_OK;
}

const char *mt_attn_kernel_name(mt_attn_impl impl, int bf16) {
    if (impl == MT_ATTN_AUTO) impl = bf16 ? MT_ATTN_CUDNN : MT_ATTN_NATIVE;
    return impl == MT_ATTN_CUDNN ? "cudnn" : "native";
}

int mt_attention_list(const char **names, int max) {
    static const char *const compiled[] = {
        "native",
#ifdef MT_HAVE_CUDNN
        "cudnn",
#endif
    };
    int n = (int)(sizeof compiled / sizeof compiled[0]);
    for (int i = 0; i < n && i < max; i++) names[i] = compiled[i];
    return n;
}
