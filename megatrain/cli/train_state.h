// train_state.h: DIR/train_state.json, the part of a checkpoint that is not
// tensors: step, data cursor, RNG seed and the hyper-parameters of the run.
#ifndef MT_TRAIN_STATE_H
#define MT_TRAIN_STATE_H

#include <stddef.h>

#include "cli/options.h"

typedef struct {
    int step;              // optimizer steps completed
    size_t data_cursor;
    char data[512];        // data source ("synthetic", "embedded" or a path)
} mt_train_state;

// Writes DIR/train_state.json (temp + rename) from the state and the options in force.
mt_status mt_train_state_save(const char *dir, const mt_train_state *s, const mt_options *o);
// Reads DIR/train_state.json; options not given explicitly take the saved values.
// `strings` receives copies of string options (owned by the caller, freed with free()).
mt_status mt_train_state_load(const char *dir, mt_train_state *s, mt_options *o, char **strings, int n_strings);

#endif
