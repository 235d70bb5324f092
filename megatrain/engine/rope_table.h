// rope_table.h: RoPE cos/sin tables (T, HD/2) for positions 0..T-1, as HF
// computes them (inv_freq in f32, llama3 frequency scaling when configured).
#ifndef MT_ROPE_TABLE_H
#define MT_ROPE_TABLE_H

#include "model/config.h"

void mt_rope_tables(const mt_config *c, int T, float *cos_out, float *sin_out);

#endif
