// cudnn_api.c: loads libcudnn.so.9 with dlopen on first use and resolves the
// graph-API entry points megatrain calls (why at run time: cudnn_api.h).
#define _GNU_SOURCE
#include "backends/cuda/cudnn_api.h"
#include "core/env.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mt_cudnn_api g_api;
static const mt_cudnn_api *g_loaded;
static char g_why[1024];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int resolve(void *lib, const char *name, void **slot) {
    *slot = dlsym(lib, name);
    if (*slot) return 1;
    snprintf(g_why, sizeof g_why, "%.480s has no symbol %s (not cuDNN 9?)", g_api.path, name);
    return 0;
}

static void load_once(void) {
    const char *env = NULL;
    mt_env_text("MT_CUDNN_LIBRARY", &env); // a bad value: refused by the CLI
    const char *name = env ? env : "libcudnn.so.9";
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(g_why, sizeof g_why, "%s%s: cannot load: %s", env && *env ? "MT_CUDNN_LIBRARY=" : "", name,
                 e ? e : "unknown error");
        return;
    }
    snprintf(g_api.path, sizeof g_api.path, "%s", name);
    Dl_info info; // the resolved file, for the log line
    void *probe = dlsym(lib, "cudnnGetVersion");
    if (probe && dladdr(probe, &info) && info.dli_fname) snprintf(g_api.path, sizeof g_api.path, "%s", info.dli_fname);
    int ok = resolve(lib, "cudnnGetVersion", (void **)&g_api.GetVersion) &&
             resolve(lib, "cudnnGetErrorString", (void **)&g_api.GetErrorString) &&
             resolve(lib, "cudnnGetLastErrorString", (void **)&g_api.GetLastErrorString) &&
             resolve(lib, "cudnnCreate", (void **)&g_api.Create) &&
             resolve(lib, "cudnnDestroy", (void **)&g_api.Destroy) &&
             resolve(lib, "cudnnSetStream", (void **)&g_api.SetStream) &&
             resolve(lib, "cudnnBackendCreateDescriptor", (void **)&g_api.BackendCreateDescriptor) &&
             resolve(lib, "cudnnBackendDestroyDescriptor", (void **)&g_api.BackendDestroyDescriptor) &&
             resolve(lib, "cudnnBackendSetAttribute", (void **)&g_api.BackendSetAttribute) &&
             resolve(lib, "cudnnBackendGetAttribute", (void **)&g_api.BackendGetAttribute) &&
             resolve(lib, "cudnnBackendFinalize", (void **)&g_api.BackendFinalize) &&
             resolve(lib, "cudnnBackendExecute", (void **)&g_api.BackendExecute);
    if (!ok) {
        dlclose(lib);
        return;
    }
    g_api.version = g_api.GetVersion();
    if (g_api.version < 90000) { // the graph patterns below are cuDNN 9's (and the 9.x ABI)
        snprintf(g_why, sizeof g_why, "%.480s is cuDNN %zu.%zu; megatrain needs cuDNN 9", g_api.path, g_api.version / 10000,
                 g_api.version / 100 % 100);
        dlclose(lib);
        return;
    }
    g_loaded = &g_api; // the library stays loaded for the life of the process
}

const mt_cudnn_api *mt_cudnn_api_load(void) {
    pthread_once(&g_once, load_once);
    if (!g_loaded)
        mt_fail(MT_ERR_UNSUPPORTED, "cuDNN: %s. HINT: add the directory of libcudnn.so.9 (the toolkit's, or PyTorch's "
                                    "nvidia/cudnn/lib) to LD_LIBRARY_PATH, or set MT_CUDNN_LIBRARY",
                g_why);
    return g_loaded;
}

mt_status mt_cudnn_fail(const mt_cudnn_api *api, cudnnStatus_t st, const char *what, const char *file, int line) {
    char last[384] = "";
    if (api && api->GetLastErrorString) api->GetLastErrorString(last, sizeof last);
    const char *name = api && api->GetErrorString ? api->GetErrorString(st) : "?";
    int cat = CUDNN_STATUS_CATEGORY((int)st); // cuDNN 9 codes: category (x000) + detail
    mt_status s = st == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
                          st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
                      ? MT_ERR_MEMORY
                  : cat == CUDNN_STATUS_NOT_SUPPORTED ? MT_ERR_UNSUPPORTED
                                                      : MT_ERR_BACKEND;
    return mt_fail(s, "%s:%d: %s: %s (%d)%s%s. HINT: %s", file, line, what, name, (int)st, last[0] ? ": " : "", last,
                   cat == CUDNN_STATUS_NOT_SUPPORTED ? "this cuDNN has no engine for the shape; use --attention native"
                                                     : "rerun with CUDNN_LOGERR_DBG=1 CUDNN_LOGDEST_DBG=stderr for cuDNN's log");
}
