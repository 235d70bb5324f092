// Wrong way: the engine knows backends through the interface only.
#include "backends/cpu/cpu_internal.h"
