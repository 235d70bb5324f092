// Compiled as a source of the engine would be: what the engine may include, from its floor down.
#include "backend/backend_call.h"
#include "core/status.h"
#include "data/dataloader.h"
#include "engine/engine.h"
#include "model/config.h"
#include "optim/adamw.h"
