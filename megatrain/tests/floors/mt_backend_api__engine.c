// Wrong way: the backend interface is below the engine.
#include "engine/engine.h"
