// dataloader.h: token streams and llm.c-convention batching. Each micro-batch
// reads the next B*T+1 tokens; row j's inputs are tokens [jT, jT+T) of that
// window and its targets the same shifted by one; the cursor advances by B*T
// and restarts at 0 when fewer than B*T+1 tokens remain.
#ifndef MT_DATALOADER_H
#define MT_DATALOADER_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef struct {
    uint32_t *tokens;
    size_t n;
    size_t cursor;
    char source[512]; // file path as given, "synthetic" or "embedded"
    // What identifies the tokens, so a resume can tell it reads what the run read:
    // a file's absolute path, and for a file or the embedded corpus the CRC-32 of
    // the ids as little-endian uint32 (for a file: the file's own CRC-32).
    char path[4096];  // absolute path of a file ("" otherwise)
    int has_crc;      // crc32 is set (a file, the embedded corpus; synthetic ids come from the seed)
    uint32_t crc32;
} mt_data;

// Reads a flat little-endian uint32 file; checks size, ids < vocab, and length >= B*T+1.
mt_status mt_data_open_file(mt_data *d, const char *path, int vocab, int B, int T);
// Deterministic pseudo-random ids in [0, vocab) from seed (n tokens).
mt_status mt_data_synthetic(mt_data *d, unsigned long long seed, int vocab, size_t n);
// Byte-level tokens of a text (the embedded corpus).
mt_status mt_data_from_bytes(mt_data *d, const unsigned char *bytes, size_t n, const char *source);
// Fills inputs/targets (B*T each) and advances the cursor.
void mt_data_next(mt_data *d, int B, int T, int32_t *inputs, int32_t *targets);
void mt_data_free(mt_data *d);

// The embedded default corpus (KJV Genesis, bytes).
extern const unsigned char mt_corpus_kjv[];
extern const size_t mt_corpus_kjv_len;

#endif
