// Wrong way: core is the ground floor.
#include "model/config.h"
