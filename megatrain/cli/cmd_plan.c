// cmd_plan.c: `megatrain plan`: one JSON object on stdout with the memory a
// configuration needs (host, pinned, GPU), whether it fits the machine, and,
// with --hardware, the predicted step time. Not fitting is a result (exit 0,
// "fits": false, "short": what is missing); bad input is one stderr line.
// The planner plans (planner/plan_build.h); --compare (plan_compare.c) plans once per profile.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/commands.h"
#include "cli/plan_request.h"
#include "cli/run_setup.h"

static int fail(mt_status s) {
    fprintf(stderr, "megatrain: error: %s\n", mt_last_error());
    return s == MT_ERR_ARG ? 2 : 1;
}

int mt_cmd_plan(mt_options *o) {
    if (o->compare) return mt_cmd_plan_compare(o);
    cJSON *j;
    mt_plan_built built;
    mt_status s = mt_plan_of_options(o, &j, &built);
    mt_plan_built_free(&built);
    if (s) return fail(s);
    if (!mt_json_on_stdout(o)) { // a person reads stdout: the summary (the JSON: --json, or a pipe)
        mt_plan_print_summary(stdout, j);
        cJSON_Delete(j);
        return 0;
    }
    char *txt = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!txt) return fail(mt_fail(MT_ERR_MEMORY, "plan: cannot format the JSON output"));
    printf("%s\n", txt);
    free(txt);
    return 0;
}
