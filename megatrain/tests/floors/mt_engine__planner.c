// Wrong way: the engine is below the planner.
#include "planner/planner.h"
