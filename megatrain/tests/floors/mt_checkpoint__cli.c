// Wrong way: the CLI is above the checkpoint library (its options stay there).
#include "cli/options.h"
