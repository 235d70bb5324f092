// train_state.h: DIR/train_state.json, the part of a checkpoint that is not
// tensors: step, data cursor, RNG seed and the hyper-parameters of the run.
// Loading checks every field as the command line checks the option it stands
// for (mt_options_set): a saved state is input like any other.
#ifndef MT_TRAIN_STATE_H
#define MT_TRAIN_STATE_H

#include <stddef.h>

#include "cli/options.h"

typedef struct {
    int step;           // optimizer steps completed
    size_t data_cursor;
    int skipped_steps;  // steps skipped for a non-finite gradient (Adam counts step - skipped_steps updates)
    char data[512];     // data source ("synthetic", "embedded" or a path)
    char *strings[8];   // owned copies of the string options applied from the file
} mt_train_state;

// Writes DIR/train_state.json (temp + rename) from the state and the options in force.
mt_status mt_train_state_save(const char *dir, const mt_train_state *s, const mt_options *o);
// Reads and validates DIR/train_state.json; options not given explicitly take the
// saved values (--steps included: a resume continues to the saved total by default).
// Errors name the file and the field: "ckpt/train_state.json: hparams.beta2: must be in [0, 1), got 7".
mt_status mt_train_state_load(const char *dir, mt_train_state *s, mt_options *o);
void mt_train_state_free(mt_train_state *s);

#endif
