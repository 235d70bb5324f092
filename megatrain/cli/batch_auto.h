// batch_auto.h: `train --batch auto`: the planner's choice of batch and knobs for this run.
#ifndef MT_BATCH_AUTO_H
#define MT_BATCH_AUTO_H

#include "cli/options.h"
#include "model/config.h"

// Sets o->eng.B, --recompute, K and the weight buffers to the choice of
// mt_plan_batch_search on the run's machine (the sim's profile under --hardware,
// else `measured`) and says it on stderr. A backend without device memory (cpu)
// is refused: no profile prices it.
mt_status mt_setup_batch_auto(mt_options *o, const mt_config *c, mt_precision p);

#endif
