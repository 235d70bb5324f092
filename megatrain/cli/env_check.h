// env_check.h: the environment variables megatrain reads, checked at once (core/env.h's rules).
#ifndef MT_ENV_CHECK_H
#define MT_ENV_CHECK_H

#include "core/status.h"

// MT_OK, or MT_ERR_ARG naming the first variable whose value cannot be read, and the value.
mt_status mt_env_check_all(void);

#endif
