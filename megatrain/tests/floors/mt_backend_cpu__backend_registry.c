// Wrong way: the registry names every backend; a backend is below it.
#include "backend/backend_registry.h"
