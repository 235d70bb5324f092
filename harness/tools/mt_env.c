// mt-env: prints the results `env` block (docs/DESIGN.md#results) as one JSON line.
//   mt-env [--hardware-profile NAME] [--pretty]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

int main(int argc, char **argv) {
    const char *profile = NULL;
    int pretty = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--hardware-profile") && i + 1 < argc) profile = argv[++i];
        else if (!strcmp(argv[i], "--pretty")) pretty = 1;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: mt-env [--hardware-profile NAME] [--pretty]\n");
            return 0;
        } else {
            fprintf(stderr, "mt-env: unknown or incomplete option '%s'\nusage: mt-env [--hardware-profile NAME] [--pretty]\n",
                    argv[i]);
            return 2;
        }
    }
    cJSON *o = NULL;
    if (mt_env_collect(profile, &o) != MT_OK) {
        fprintf(stderr, "mt-env: %s\n", mt_last_error());
        return 1;
    }
    char *s = pretty ? cJSON_Print(o) : cJSON_PrintUnformatted(o);
    printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
    return 0;
}
