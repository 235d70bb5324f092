// attention_choice.c: --attention, the implementation a created backend runs (backend.h:
// mt_attn_impl). Below the registry: a backend (sim) names the kernel it prices with these.
#include <string.h>

#include "backend/backend_impl.h"

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
