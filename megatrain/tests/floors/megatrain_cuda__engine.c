// Wrong way: the cuda backend is below the engine.
#include "engine/host_state.h"
