// sim_band.h: how far to trust the sim on a profile: the error band read from
// results/sim_validation.json (schema megatrain.sim_validation/1, written by the
// harness from the sim's projections beside measured runs). A profile that was
// validated gets its own worst error; one whose GPU was validated under another
// profile gets that band, marked grown (its host was never measured); any other
// is unvalidated. `plan --compare` puts one band on each column.
#ifndef MT_SIM_BAND_H
#define MT_SIM_BAND_H

#include <stddef.h>

#include "core/status.h"

#define MT_SIM_VALIDATION_SCHEMA "megatrain.sim_validation/1"
#define MT_SIM_VALIDATION_MAX 64 // validated profiles a file may hold

typedef enum { MT_BAND_VALIDATED, MT_BAND_GROWN, MT_BAND_UNVALIDATED } mt_band_kind;

typedef struct {
    char profile[64], gpu[128];
    int n;                       // measured configurations
    double worst_abs_err, median_abs_err, within; // fractions: |sim - measured| / measured
} mt_sim_validated;

typedef struct {
    char path[4096];             // the file read; "" when there was none
    int n;
    mt_sim_validated p[MT_SIM_VALIDATION_MAX];
    char growth[512];            // the file's sentence on how the band grows off a validated machine
} mt_sim_validation;

typedef struct {
    mt_band_kind kind;
    const char *kind_name;       // "validated", "grown", "unvalidated"
    const mt_sim_validated *from; // the validated profile the band comes from (NULL: unvalidated)
    char text[160];              // one phrase: "±16% (worst of 14 measured configs)"
    char cell[32];               // the same, short enough for a table cell: "±16% (n=14)"
    char why[1024];              // grown and unvalidated: why, in a sentence
} mt_sim_band;

// Reads the validation file: $MT_SIM_VALIDATION when set (it must exist), else
// results/sim_validation.json under the working directory or the source tree.
// No file is not an error (v->path is "", every band unvalidated); a malformed
// one is, naming the file and the key.
mt_status mt_sim_validation_load(mt_sim_validation *v);
// The band of a profile, by its name and its GPU's name (mt_hw_profile.name, .gpu_name).
void mt_sim_band_of(const mt_sim_validation *v, const char *profile, const char *gpu, mt_sim_band *out);

#endif
