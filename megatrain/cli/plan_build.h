// plan_build.h: one plan as a JSON object (schema megatrain.plan/1), built from
// the options: what `megatrain plan` prints, and what `plan --compare` builds
// once per profile, so a comparison's column is that profile's plan, byte for byte.
#ifndef MT_PLAN_BUILD_H
#define MT_PLAN_BUILD_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "cli/options.h"
#include "planner/planner.h"

// What the plan was made of, for a caller that prices it further (--compare runs
// the sim on it): the model, the inputs after --batch auto's choice, the profile.
typedef struct {
    mt_config cfg;
    mt_plan_input in;
    mt_hw_profile hw;
    int fits;
    int peer;                // a --peer plan (the sim check skips peers, as --batch auto does)
    char profile_path[4096]; // the profile's file ("" for measured or no --hardware)
} mt_plan_built;

// Builds the plan of o (o->hardware: the profile, or none: this machine). *out is
// the caller's to cJSON_Delete; built may be NULL. Errors: one line (mt_last_error).
mt_status mt_plan_build(const mt_options *o, cJSON **out, mt_plan_built *built);

// plan_ranks.c: the "ranks" object of `plan --gpus N --hosts H`; the "tokens_per_day" search (in->eng.B
// rows per GPU), which writes the GPUs and hosts it chose (the last compared when none reaches target).
void mt_plan_ranks_json(cJSON *j, const mt_plan_ranks *r);
mt_status mt_plan_tokens_per_day(const mt_config *c, const mt_plan_input *in, const mt_hw_profile *hw, double target,
                                 cJSON *j, int *gpus, int *hosts);

// plan_summary.c: the plan's object as a few lines for a person (plan on a terminal).
void mt_plan_print_summary(FILE *f, const cJSON *j);

// `plan --compare A,B,...` (plan_compare.c): the exit status.
int mt_cmd_plan_compare(mt_options *o);

#endif
