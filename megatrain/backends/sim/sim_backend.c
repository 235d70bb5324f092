// sim_backend.c: placeholder until the simulator lands.
#include "backend/backend.h"

mt_status mt_backend_sim_create(const char *profile_path, mt_dtype act_dtype, mt_backend **out) {
    (void)act_dtype;
    *out = 0;
    return mt_fail(MT_ERR_UNSUPPORTED, "%s: the sim backend is not implemented yet", profile_path);
}
