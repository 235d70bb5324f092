// env.h: environment variables parsed as strictly as options. A variable unset or set
// empty takes the default; any other value the parser cannot read is an error naming
// the variable and the value (never atoi's silent 0).
#ifndef MT_ENV_H
#define MT_ENV_H

#include <stdint.h>

#include "core/status.h"

// A whole decimal number in lo..hi (no sign, no spaces, no suffix).
mt_status mt_env_u64(const char *name, uint64_t lo, uint64_t hi, uint64_t dflt, uint64_t *out);
// 1, true, yes, on / 0, false, no, off.
mt_status mt_env_bool(const char *name, int dflt, int *out);
// One of names[0..n-1] exactly: *out is its index (dflt when unset).
mt_status mt_env_choice(const char *name, const char *const *names, int n, int dflt, int *out);
// Any text (a path, a library name): *out is NULL when unset or empty; control characters are refused.
mt_status mt_env_text(const char *name, const char **out);
// mt_env_bool with default 0, for hooks read where no status can go: a bad value reads
// as 0 here (the CLI has refused it before anything runs: cli/env_check.c).
int mt_env_flag(const char *name);

#endif
