// backend_registry.h: the backends compiled into this binary, one row each (backend_impl.h:
// mt_backend_entry), in backend_registry.c. The floor above the backends: the CLI (--backend),
// the planner and the tests find backends only here; the engine is handed created ones.
#ifndef MT_BACKEND_REGISTRY_H
#define MT_BACKEND_REGISTRY_H

#include "backend/backend_impl.h"

int mt_backend_count(void);                         // rows in the table
const mt_backend_entry *mt_backend_at(int i);       // row i, 0 <= i < mt_backend_count()
const mt_backend_entry *mt_backend_find(const char *name); // NULL when not compiled in
// MT_OK for "auto" or a row's name; else the error a --backend NAME gets: compiled out
// (cuda without nvcc) or unknown, listing the names there are.
mt_status mt_backend_check_name(const char *name);
// Creates a backend by name ("auto" = the first row with a device that is available,
// else cpu), with its arguments (a: NULL for f32 activations and no profile).
mt_status mt_backend_create_with(const char *name, const mt_backend_args *a, mt_backend **out);
// The devices a backend by name offers one process (--gpus): cuda the visible GPUs,
// cpu MT_CPU_DEVICES instances, others 1; 0 for an unknown name.
int mt_backend_device_count(const char *name);
// Creates a backend by name ("cpu", "cuda", "sim", "auto" = best present).
mt_status mt_backend_create(const char *name, mt_dtype act_dtype, mt_backend **out);
// Names of backends compiled into this binary, e.g. {"cpu","cuda","sim"}; returns count.
int mt_backend_list(const char **names, int max);
// The capabilities of a backend by name, before creating it (0 for an unknown or absent one;
// "auto" is the one it would pick).
unsigned mt_backend_caps_of(const char *name);

// Names of the attention implementations compiled in, e.g. {"native","cudnn"}; returns count.
int mt_attention_list(const char **names, int max);


#endif
