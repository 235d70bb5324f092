// Wrong way: the engine calls backends (backend_call.h), it does not implement one.
#include "backend/backend_impl.h"
