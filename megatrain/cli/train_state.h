// train_state.h: DIR/train_state.json, the part of a checkpoint that is not
// tensors: step, data cursor, RNG seed and the hyper-parameters of the run.
// Loading checks every field as the command line checks the option it stands
// for (mt_options_set): a saved state is input like any other.
#ifndef MT_TRAIN_STATE_H
#define MT_TRAIN_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "cli/options.h"

#include "data/dataloader.h"

typedef struct {
    int step;           // optimizer steps completed
    size_t data_cursor;
    int skipped_steps;  // steps skipped for a non-finite gradient (Adam counts step - skipped_steps updates)
    char data[4096];    // data source ("synthetic", "embedded" or a file's absolute path; as typed before version 3)
    // What identifies the data (version 3): its length and the CRC-32 of its ids (mt_data).
    int data_id;        // data_tokens and data_crc32 are recorded
    size_t data_tokens;
    uint32_t data_crc32;
    unsigned long long seed; // the run's seed (synthetic data is drawn from it)
    int version;        // of the file read
    char *strings[8];   // owned copies of the string options applied from the file
} mt_train_state;

// The state's data fields from the data the run reads (its absolute path, length and CRC-32).
void mt_train_state_set_data(mt_train_state *s, const mt_data *d);
// Writes DIR/train_state.json (temp + rename) from the state and the options in force.
mt_status mt_train_state_save(const char *dir, const mt_train_state *s, const mt_options *o);
// A resume reads exactly the tokens the run read: `d` (opened from --data, or from
// the path the state records) must have the recorded length and CRC-32, else the
// resume is refused naming the path the checkpoint recorded. Then d's cursor is set
// to the saved one. A version 2 state recorded only the path as typed: it resumes on
// a file only where --data names it again (it cannot be checked).
mt_status mt_train_state_resume_data(const char *dir, const mt_train_state *s, const mt_options *o, mt_data *d);
// Reads and validates DIR/train_state.json; options not given explicitly take the
// saved values (--steps included: a resume continues to the saved total by default).
// Errors name the file and the field: "ckpt/train_state.json: hparams.beta2: must be in [0, 1), got 7".
mt_status mt_train_state_load(const char *dir, mt_train_state *s, mt_options *o);
void mt_train_state_free(mt_train_state *s);

#endif
