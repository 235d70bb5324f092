// Wrong way: the checkpoint library is beside the planner, not below it.
#include "checkpoint/ckpt_dir.h"
