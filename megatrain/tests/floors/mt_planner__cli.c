// Wrong way: the CLI is above the planner.
#include "cli/options.h"
