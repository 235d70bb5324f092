// Wrong way: the planner finds the sim through the registry, not its header.
#include "backends/sim/sim.h"
