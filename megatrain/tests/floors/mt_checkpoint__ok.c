// Compiled as a source of the checkpoint library would be: its own headers, the engine's model I/O, down.
#include "checkpoint/checkpoint.h"
#include "core/file_io.h"
#include "engine/model_io.h"
