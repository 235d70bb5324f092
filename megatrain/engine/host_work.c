// host_work.c: the one place that chooses between real and priced host work.
#include "engine/host_work.h"

mt_host_work mt_host_work_for(mt_backend *be) {
    return mt_backend_has(be, MT_CAP_VIRTUAL_TIME) ? mt_host_work_priced(be) : mt_host_work_real(be);
}
