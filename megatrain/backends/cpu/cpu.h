// cpu.h: what only the cpu backend offers (backends/cpu/cpu_backend.c).
#ifndef MT_CPU_H
#define MT_CPU_H

#include "backend/backend.h"

// The cpu backend directly (the registry's "cpu" row creates it by name).
mt_status mt_backend_cpu_create(mt_dtype act_dtype, mt_backend **out);
unsigned mt_backend_cpu_caps(void); // its ops table's caps

#endif
