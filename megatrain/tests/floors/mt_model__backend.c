// Wrong way: model, optim and data are below the backend interface.
#include "backend/backend.h"
