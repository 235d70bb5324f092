// plan_request.h: `megatrain plan`'s options as the planner's request (planner/plan_build.h):
// the plan of o, computed and as its JSON object, what `megatrain plan` prints and what
// `plan --compare` builds once per profile, so a comparison's column is that profile's plan.
#ifndef MT_PLAN_REQUEST_H
#define MT_PLAN_REQUEST_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "cli/options.h"
#include "planner/plan_build.h"

// Loads o's model and plans it (o->hardware: the profile, or none: this machine). *out is the
// caller's to cJSON_Delete, *built mt_plan_built_free's (also after an error). Errors: one line.
mt_status mt_plan_of_options(const mt_options *o, cJSON **out, mt_plan_built *built);

// plan_summary.c: the plan's object as a few lines for a person (plan on a terminal).
void mt_plan_print_summary(FILE *f, const cJSON *j);

// `plan --compare A,B,...` (plan_compare.c): the exit status.
int mt_cmd_plan_compare(mt_options *o);

#endif
