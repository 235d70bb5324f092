// A backend: the interface, core, and (sim) the hardware profiles it prices with.
#include "backend/backend.h"
#include "backends/sim/sim.h"
#include "core/status.h"
#include "model/hardware_profile.h"
