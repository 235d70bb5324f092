// safetensors.h: reading HF safetensors files (F32, BF16 and F16, converted on
// read to F32 or BF16) and writing them (F32 and BF16; F16 for test fixtures),
// one file or sharded the HF way (model-00001-of-0000N.safetensors beside
// model.safetensors.index.json).
// Reading validates every header field against the file: header length, JSON,
// dtype names, shapes vs byte sizes, offsets inside the data buffer, no gaps or
// overlaps, and that the tensors cover the buffer exactly.
#ifndef MT_SAFETENSORS_H
#define MT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/dtype.h"
#include "core/status.h"

#define MT_ST_MAX_DIMS 8

typedef struct {
    char *name;               // HF tensor name
    mt_dtype dtype;
    int ndim;
    int64_t shape[MT_ST_MAX_DIMS];
    size_t numel;
    size_t offset;            // absolute byte offset in its file
    size_t nbytes;
    int file;                 // index of the shard holding it
} mt_st_tensor;

typedef struct mt_safetensors mt_safetensors;

// Opens `path`: a .safetensors file, a model.safetensors.index.json, or an HF
// directory (model.safetensors, else model.safetensors.index.json).
mt_status mt_st_open(const char *path, mt_safetensors **out);
void mt_st_close(mt_safetensors *st);
int mt_st_count(const mt_safetensors *st);
const mt_st_tensor *mt_st_get(const mt_safetensors *st, int i);
const mt_st_tensor *mt_st_find(const mt_safetensors *st, const char *name); // NULL if absent
// Checks `t` has exactly this shape; error names the file, tensor, expected and found shapes.
mt_status mt_st_expect_shape(const mt_safetensors *st, const mt_st_tensor *t, int ndim, const int64_t *shape);
// Reads the tensor into dst, converting to dst_dtype (F32 or BF16; from F32, BF16 or F16).
mt_status mt_st_read(const mt_safetensors *st, const mt_st_tensor *t, void *dst, mt_dtype dst_dtype);
// The same, and *crc = CRC-32 (zlib's) of the tensor's bytes as stored in the file.
mt_status mt_st_read_sum(const mt_safetensors *st, const mt_st_tensor *t, void *dst, mt_dtype dst_dtype,
                         uint32_t *crc);
const char *mt_st_path(const mt_safetensors *st, int file); // file name for error messages
// What was opened: the .safetensors file, or the index of a sharded set (for
// messages about the set as a whole: a missing or an unused tensor).
const char *mt_st_source(const mt_safetensors *st);

// One tensor to write; data is in `dtype` and is written as `file_dtype`.
typedef struct {
    const char *name;
    mt_dtype dtype;      // type of `data` in memory
    mt_dtype file_dtype; // type written to the file
    int ndim;
    int64_t shape[MT_ST_MAX_DIMS];
    const void *data;
    // Optional (NULL: data is complete): called just before the entry's data is written, to
    // complete it (another host holds part of it), and just after, to let it go again.
    mt_status (*fetch)(const void *ctx, const void *data, size_t numel);
    void (*drop)(const void *ctx, const void *data, size_t numel);
    const void *ctx;
} mt_st_entry;

// Writes one .safetensors file (to path.<pid>.tmp, fsync, rename to path, fsync the
// directory); __metadata__.format is "pt". Never leaves a partial file under `path`.
mt_status mt_st_write(const char *path, const mt_st_entry *entries, int n);
// The same, and crcs[i] = CRC-32 (zlib's) of entry i's bytes as written (file dtype).
mt_status mt_st_write_sums(const char *path, const mt_st_entry *entries, int n, uint32_t *crcs);

// Exact size of the file mt_st_write would write for these entries (header included).
mt_status mt_st_file_bytes(const mt_st_entry *entries, int n, size_t *bytes);

// ---- sharded writing, HF's layout (safetensors_shards.c) ----
// Entries split into shards as transformers' save_pretrained splits a state dict:
// in order, a shard closes when the next tensor would take its tensor bytes past
// max_bytes; a tensor larger than max_bytes is a shard of its own.
typedef struct {
    int n_shards;
    int *shard_of;      // per entry
    size_t *file_bytes; // per shard: the file's exact size
    size_t total_size;  // all tensor bytes: the index's metadata.total_size
    size_t index_bytes; // size of STEM.safetensors.index.json (0: one shard, no index)
} mt_st_shard_plan;

mt_status mt_st_shard_plan_make(const mt_st_entry *entries, int n, size_t max_bytes, const char *stem,
                                mt_st_shard_plan *out);
void mt_st_shard_plan_free(mt_st_shard_plan *p);
// Shard i (0-based) of n: "STEM.safetensors" when n is 1, else HF's
// "STEM-%05d-of-%05d.safetensors" (1-based).
void mt_st_shard_name(const char *stem, int i, int n, char *out, size_t cap);
// Writes every shard of the plan into DIR (each as mt_st_write: temp, fsync, rename)
// and, with more than one, STEM.safetensors.index.json: {"metadata": {"total_size"},
// "weight_map": {tensor: shard file}}, the file transformers reads. crcs as mt_st_write_sums.
mt_status mt_st_write_sharded(const char *dir, const char *stem, const mt_st_entry *entries, int n,
                              const mt_st_shard_plan *plan, uint32_t *crcs);
// Its parts, for writers that divide the shards among themselves (engine/host_shard_save.c):
// shard k of the plan alone (crcs: of its entries, by entry index), and the index (nothing
// with one shard).
mt_status mt_st_write_shard(const char *dir, const char *stem, const mt_st_entry *entries, int n,
                            const mt_st_shard_plan *plan, int k, uint32_t *crcs);
mt_status mt_st_write_index(const char *dir, const char *stem, const mt_st_entry *entries, int n,
                            const mt_st_shard_plan *plan);
// Opens DIR/STEM.safetensors, else DIR/STEM.safetensors.index.json.
mt_status mt_st_open_stem(const char *dir, const char *stem, mt_safetensors **out);

#endif
