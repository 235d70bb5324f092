// Wrong way: the planner is beside the checkpoint library, not below it.
#include "planner/planner.h"
