// commands.h: the subcommands of the megatrain CLI; each returns the exit status.
#ifndef MT_COMMANDS_H
#define MT_COMMANDS_H

#include "cli/options.h"

int mt_cmd_train(mt_options *o, int is_default);
int mt_cmd_eval(mt_options *o);
int mt_cmd_plan(mt_options *o);
int mt_cmd_version(void);

#endif
