// Wrong way: a backend is below the engine (its collective lands nothing on the host).
#include "engine/collective.h"
