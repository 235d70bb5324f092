// io_paths.h: before any work, every output path is checked against the inputs
// and against the other outputs (by device and inode where the file exists, by
// resolved path where it does not), and checked writable and of a kind the
// option writes (core/out_file.h): an output never overwrites an input, never
// replaces a device node or a link, and a typo in --trace fails before training.
#ifndef MT_IO_PATHS_H
#define MT_IO_PATHS_H

#include "cli/options.h"

// For train and eval. Inputs: --model (the directory's files), --config,
// --data, --resume (its files), --hardware's file; outputs: --log, --trace (and
// its .ops.json under sim), --dump-grads, --save (the directory and the files a
// checkpoint writes into it). --save onto the --resume directory is the one
// overwrite allowed: that is what resuming in place means.
mt_status mt_check_io_paths(const mt_options *o);

#endif
