// Wrong way: one backend does not reach into another.
#include "backends/cpu/cpu_internal.h"
