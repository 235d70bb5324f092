// test_safetensors.c: safetensors write/read roundtrips (F32, BF16, F32 stored as
// BF16, sharded), and every malformed input: each must fail with one line that
// names the file, never crash. MT_TEST_LARGE=1 adds a > 2 GiB tensor roundtrip.
#define _POSIX_C_SOURCE 200809L // ftruncate, pwrite under -std=c11

#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "tests/test_util.h"

// A safetensors file with a hand-written header and `data_len` bytes of data.
static const char *make_st(const char *name, const char *header, size_t data_len) {
    const char *path = mt_test_path(name);
    size_t hlen = strlen(header);
    unsigned char *buf = calloc(1, 8 + hlen + data_len);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, header, hlen);
    mt_test_write_bytes(path, buf, 8 + hlen + data_len);
    free(buf);
    return path;
}

static int exists(const char *path) { return access(path, F_OK) == 0; }

// Opening `path` must fail with a one-line error that contains `needle` (a file name).
static void expect_open_fail(const char *path, const char *needle, const char *what) {
    mt_safetensors *st = (mt_safetensors *)1;
    mt_status s = mt_st_open(path, &st);
    const char *e = mt_last_error();
    CHECK(s != MT_OK, "%s: open should fail", what);
    CHECK(st == NULL, "%s: handle should be NULL on failure", what);
    CHECK(strstr(e, needle) != NULL, "%s: error should name %s: %s", what, needle, e);
    CHECK(strchr(e, '\n') == NULL, "%s: error should be one line: %s", what, e);
    if (getenv("MT_TEST_VERBOSE")) fprintf(stderr, "  %-34s -> %s\n", what, e);
    if (s == MT_OK) mt_st_close(st);
}

static void expect_bad(const char *name, const char *header, size_t data_len, const char *what) {
    expect_open_fail(make_st(name, header, data_len), name, what);
}

// ----------------------------------------------------------------------------

static void test_roundtrip(void) {
    float a[15], b[7], c[1] = {3.25f};
    static float huge[(1 << 20) * 2 + 7]; // crosses the 1M-element conversion chunk
    uint16_t h[6];
    mt_test_fill_uniform(a, 15, 1, -2, 2);
    mt_test_fill_uniform(b, 7, 2, -1, 1);
    mt_test_fill_uniform(huge, sizeof huge / 4, 3, -100, 100);
    for (int i = 0; i < 6; i++) h[i] = mt_f32_to_bf16((float)i * 0.37f - 1.0f);
    mt_st_entry es[] = {
        {.name = "bf16.w", .dtype = MT_BF16, .file_dtype = MT_BF16, .ndim = 2, .shape = {2, 3}, .data = h},
        {.name = "a.weight", .dtype = MT_F32, .file_dtype = MT_F32, .ndim = 2, .shape = {3, 5}, .data = a},
        {.name = "b.as_bf16", .dtype = MT_F32, .file_dtype = MT_BF16, .ndim = 1, .shape = {7}, .data = b},
        {.name = "scalar", .dtype = MT_F32, .file_dtype = MT_F32, .ndim = 0, .data = c},
        {.name = "empty", .dtype = MT_F32, .file_dtype = MT_BF16, .ndim = 2, .shape = {0, 4}, .data = NULL},
        {.name = "huge", .dtype = MT_F32, .file_dtype = MT_BF16, .ndim = 1, .shape = {sizeof huge / 4}, .data = huge},
        {.name = "quote\"name\\x", .dtype = MT_BF16, .file_dtype = MT_F32, .ndim = 1, .shape = {6}, .data = h},
    };
    int n = (int)(sizeof es / sizeof es[0]);
    const char *path = mt_test_path("rt.safetensors");
    mt_status s = mt_st_write(path, es, n);
    CHECK(s == MT_OK, "write: %s", mt_last_error());
    CHECK(!exists(mt_test_path("rt.safetensors.tmp")), "tmp file left behind");

    // Header: padded to 8 bytes, carries __metadata__.format = pt.
    FILE *f = fopen(path, "rb");
    unsigned char lb[8] = {0};
    CHECK(f && fread(lb, 1, 8, f) == 8, "read header length");
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | lb[i];
    CHECK(hlen % 8 == 0, "header length %llu not a multiple of 8", (unsigned long long)hlen);
    char *hdr = calloc(1, (size_t)hlen + 1);
    CHECK(f && fread(hdr, 1, (size_t)hlen, f) == hlen, "read header");
    CHECK(strstr(hdr, "\"__metadata__\":{\"format\":\"pt\"}") != NULL, "metadata missing: %s", hdr);
    free(hdr);
    if (f) fclose(f);

    mt_safetensors *st = NULL;
    s = mt_st_open(path, &st);
    CHECK(s == MT_OK, "open: %s", mt_last_error());
    if (s != MT_OK) return;
    CHECK(mt_st_count(st) == n, "count %d", mt_st_count(st));
    for (int i = 0; i < mt_st_count(st); i++) {
        const mt_st_tensor *t = mt_st_get(st, i);
        CHECK(t->offset % mt_dtype_size(t->dtype) == 0, "'%s' misaligned at %zu", t->name, t->offset);
    }
    CHECK(mt_st_get(st, n) == NULL && mt_st_get(st, -1) == NULL, "get out of range");
    CHECK(mt_st_find(st, "nope") == NULL, "find absent");

    const mt_st_tensor *t = mt_st_find(st, "a.weight");
    CHECK(t && t->dtype == MT_F32 && t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == 5 && t->numel == 15 &&
              t->nbytes == 60,
          "a.weight meta");
    if (t) {
        float got[15];
        uint16_t got16[15];
        CHECK(mt_st_read(st, t, got, MT_F32) == MT_OK, "read a: %s", mt_last_error());
        CHECK(memcmp(got, a, sizeof a) == 0, "a roundtrip exact");
        CHECK(mt_st_read(st, t, got16, MT_BF16) == MT_OK, "read a as bf16");
        int ok = 1;
        for (int i = 0; i < 15; i++) ok &= got16[i] == mt_f32_to_bf16(a[i]);
        CHECK(ok, "a -> bf16 rounds to nearest even");
        int64_t good[2] = {3, 5}, bad[2] = {5, 3};
        CHECK(mt_st_expect_shape(st, t, 2, good) == MT_OK, "expect_shape ok");
        CHECK(mt_st_expect_shape(st, t, 2, bad) == MT_ERR_SHAPE, "expect_shape mismatch");
        CHECK(strstr(mt_last_error(), "rt.safetensors") && strstr(mt_last_error(), "a.weight") &&
                  strstr(mt_last_error(), "[5, 3]") && strstr(mt_last_error(), "[3, 5]"),
              "expect_shape message: %s", mt_last_error());
        CHECK(mt_st_expect_shape(st, t, 1, good) == MT_ERR_SHAPE, "expect_shape ndim mismatch");
    }
    t = mt_st_find(st, "bf16.w");
    CHECK(t && t->dtype == MT_BF16, "bf16.w meta");
    if (t) {
        uint16_t got16[6];
        float got[6];
        CHECK(mt_st_read(st, t, got16, MT_BF16) == MT_OK && memcmp(got16, h, sizeof h) == 0, "bf16 exact");
        CHECK(mt_st_read(st, t, got, MT_F32) == MT_OK, "bf16 -> f32");
        int ok = 1;
        for (int i = 0; i < 6; i++) ok &= got[i] == mt_bf16_to_f32(h[i]);
        CHECK(ok, "bf16 widened exactly");
    }
    t = mt_st_find(st, "b.as_bf16");
    CHECK(t && t->dtype == MT_BF16 && t->nbytes == 14, "b stored as bf16");
    if (t) {
        float got[7];
        CHECK(mt_st_read(st, t, got, MT_F32) == MT_OK, "read b");
        int ok = 1;
        for (int i = 0; i < 7; i++) ok &= got[i] == mt_bf16_to_f32(mt_f32_to_bf16(b[i]));
        CHECK(ok, "f32 written as bf16 is rounded once");
    }
    t = mt_st_find(st, "scalar");
    CHECK(t && t->ndim == 0 && t->numel == 1, "scalar meta");
    if (t) {
        float got = 0;
        CHECK(mt_st_read(st, t, &got, MT_F32) == MT_OK && got == 3.25f, "scalar value");
    }
    t = mt_st_find(st, "empty");
    CHECK(t && t->numel == 0 && t->nbytes == 0 && t->shape[0] == 0 && t->shape[1] == 4, "empty meta");
    if (t)
        CHECK(mt_st_read(st, t, NULL, MT_F32) == MT_OK, "read empty");
    t = mt_st_find(st, "huge");
    CHECK(t && t->dtype == MT_BF16 && t->numel == sizeof huge / 4, "huge meta");
    if (t) {
        float *got = malloc(sizeof huge);
        CHECK(mt_st_read(st, t, got, MT_F32) == MT_OK, "read huge");
        size_t bad = 0;
        for (size_t i = 0; i < t->numel; i++) bad += got[i] != mt_bf16_to_f32(mt_f32_to_bf16(huge[i]));
        CHECK(bad == 0, "huge: %zu wrong elements", bad);
        uint16_t *g16 = malloc(t->numel * 2);
        CHECK(mt_st_read(st, t, g16, MT_BF16) == MT_OK, "read huge bf16");
        bad = 0;
        for (size_t i = 0; i < t->numel; i++) bad += g16[i] != mt_f32_to_bf16(huge[i]);
        CHECK(bad == 0, "huge bf16: %zu wrong elements", bad);
        free(g16);
        free(got);
    }
    t = mt_st_find(st, "quote\"name\\x");
    CHECK(t && t->dtype == MT_F32, "escaped name");
    if (t) {
        float got[6];
        CHECK(mt_st_read(st, t, got, MT_F32) == MT_OK && got[5] == mt_bf16_to_f32(h[5]), "escaped name data");
    }
    mt_st_close(st);

    // A directory holding model.safetensors opens it.
    mkdir(mt_test_path("dir1"), 0755);
    CHECK(mt_st_write(mt_test_path("dir1/model.safetensors"), es, 2) == MT_OK, "write dir1: %s", mt_last_error());
    s = mt_st_open(mt_test_path("dir1"), &st);
    CHECK(s == MT_OK && mt_st_count(st) == 2, "open dir: %s", mt_last_error());
    if (s == MT_OK) mt_st_close(st);

    // Zero tensors is a valid (header-only) file.
    CHECK(mt_st_write(mt_test_path("none.safetensors"), NULL, 0) == MT_OK, "write empty file");
    s = mt_st_open(mt_test_path("none.safetensors"), &st);
    CHECK(s == MT_OK && mt_st_count(st) == 0, "open empty: %s", mt_last_error());
    if (s == MT_OK) mt_st_close(st);
}

// The file shrinks after open: a read must fail cleanly, naming the file.
static void test_truncated_after_open(void) {
    float x[64];
    mt_test_fill_uniform(x, 64, 9, 0, 1);
    mt_st_entry e = {.name = "x", .dtype = MT_F32, .file_dtype = MT_F32, .ndim = 1, .shape = {64}, .data = x};
    const char *path = mt_test_path("shrink.safetensors");
    CHECK(mt_st_write(path, &e, 1) == MT_OK, "write: %s", mt_last_error());
    mt_safetensors *st = NULL;
    CHECK(mt_st_open(path, &st) == MT_OK, "open: %s", mt_last_error());
    if (!st) return;
    struct stat sb;
    stat(path, &sb);
    CHECK(truncate(path, sb.st_size - 100) == 0, "truncate");
    float got[64];
    mt_status s = mt_st_read(st, mt_st_find(st, "x"), got, MT_F32);
    CHECK(s != MT_OK && strstr(mt_last_error(), "shrink.safetensors"), "read of shrunk file: %s", mt_last_error());
    mt_st_close(st);
}

static void test_sharded(void) {
    float a[4] = {1, 2, 3, 4}, b[3] = {5, 6, 7}, c[2] = {8, 9};
    mkdir(mt_test_path("sh"), 0755);
    mt_st_entry s1[] = {
        {.name = "model.embed_tokens.weight", .dtype = MT_F32, .file_dtype = MT_F32, .ndim = 2, .shape = {2, 2}, .data = a},
        {.name = "model.norm.weight", .dtype = MT_F32, .file_dtype = MT_BF16, .ndim = 1, .shape = {3}, .data = b},
    };
    mt_st_entry s2[] = {
        {.name = "lm_head.weight", .dtype = MT_F32, .file_dtype = MT_F32, .ndim = 1, .shape = {2}, .data = c},
    };
    CHECK(mt_st_write(mt_test_path("sh/model-00001-of-00002.safetensors"), s1, 2) == MT_OK, "shard1: %s", mt_last_error());
    CHECK(mt_st_write(mt_test_path("sh/model-00002-of-00002.safetensors"), s2, 1) == MT_OK, "shard2: %s", mt_last_error());
    mt_test_write_text(mt_test_path("sh/model.safetensors.index.json"),
               "{\"metadata\": {\"total_size\": 30}, \"weight_map\": {\n"
               "  \"lm_head.weight\": \"model-00002-of-00002.safetensors\",\n"
               "  \"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\",\n"
               "  \"model.norm.weight\": \"model-00001-of-00002.safetensors\"}}\n");
    const char *opens[2] = {mt_test_path("sh/model.safetensors.index.json"), mt_test_path("sh")};
    for (int k = 0; k < 2; k++) {
        mt_safetensors *st = NULL;
        mt_status s = mt_st_open(opens[k], &st);
        CHECK(s == MT_OK, "open sharded %s: %s", opens[k], mt_last_error());
        if (s != MT_OK) continue;
        CHECK(mt_st_count(st) == 3, "sharded count %d", mt_st_count(st));
        const mt_st_tensor *t1 = mt_st_find(st, "model.norm.weight"), *t2 = mt_st_find(st, "lm_head.weight");
        CHECK(t1 && t2 && t1->file != t2->file, "tensors in different shards");
        if (t1 && t2) {
            CHECK(strstr(mt_st_path(st, t1->file), "model-00001-of-00002.safetensors") != NULL, "shard path 1");
            CHECK(strstr(mt_st_path(st, t2->file), "model-00002-of-00002.safetensors") != NULL, "shard path 2");
            float g1[3], g2[2];
            CHECK(mt_st_read(st, t1, g1, MT_F32) == MT_OK && g1[0] == 5 && g1[2] == 7, "read shard1");
            CHECK(mt_st_read(st, t2, g2, MT_F32) == MT_OK && g2[0] == 8 && g2[1] == 9, "read shard2");
        }
        mt_st_close(st);
    }

    // Broken indexes.
    mt_test_write_text(mt_test_path("sh/missing_shard.index.json"),
               "{\"weight_map\": {\"lm_head.weight\": \"model-00009-of-00009.safetensors\"}}");
    expect_open_fail(mt_test_path("sh/missing_shard.index.json"), "model-00009-of-00009.safetensors", "missing shard");
    mt_test_write_text(mt_test_path("sh/missing_tensor.index.json"),
               "{\"weight_map\": {\"lm_head.weight\": \"model-00002-of-00002.safetensors\","
               " \"model.layers.0.ghost\": \"model-00002-of-00002.safetensors\"}}");
    expect_open_fail(mt_test_path("sh/missing_tensor.index.json"), "missing_tensor.index.json", "tensor missing from shard");
    CHECK(strstr(mt_last_error(), "model.layers.0.ghost") != NULL, "names the tensor: %s", mt_last_error());
    mt_test_write_text(mt_test_path("sh/wrong_shard.index.json"),
               "{\"weight_map\": {\"lm_head.weight\": \"model-00001-of-00002.safetensors\","
               " \"model.norm.weight\": \"model-00002-of-00002.safetensors\"}}");
    expect_open_fail(mt_test_path("sh/wrong_shard.index.json"), "wrong_shard.index.json", "tensor in another shard");
    CHECK(mt_st_write(mt_test_path("sh/dup.safetensors"), s2, 1) == MT_OK, "dup shard");
    mt_test_write_text(mt_test_path("sh/dup.index.json"),
               "{\"weight_map\": {\"lm_head.weight\": \"model-00002-of-00002.safetensors\","
               " \"x\": \"dup.safetensors\"}}");
    expect_open_fail(mt_test_path("sh/dup.index.json"), "dup.index.json", "tensor in two shards");
    CHECK(strstr(mt_last_error(), "lm_head.weight") != NULL, "names the tensor: %s", mt_last_error());
    mt_test_write_text(mt_test_path("sh/emptymap.index.json"), "{\"metadata\": {}, \"weight_map\": {}}");
    expect_open_fail(mt_test_path("sh/emptymap.index.json"), "emptymap.index.json", "index with an empty weight_map");
    CHECK(strstr(mt_last_error(), "is empty"), "says the map is empty: %s", mt_last_error());
    mt_test_write_text(mt_test_path("sh/nomap.index.json"), "{\"metadata\": {}}");
    expect_open_fail(mt_test_path("sh/nomap.index.json"), "nomap.index.json", "index without weight_map");
    mt_test_write_text(mt_test_path("sh/badjson.index.json"), "{\"weight_map\": {");
    expect_open_fail(mt_test_path("sh/badjson.index.json"), "badjson.index.json", "index malformed JSON");
    mt_test_write_text(mt_test_path("sh/badval.index.json"), "{\"weight_map\": {\"a\": 3}}");
    expect_open_fail(mt_test_path("sh/badval.index.json"), "badval.index.json", "index non-string shard");
    mt_test_write_text(mt_test_path("sh/escape.index.json"), "{\"weight_map\": {\"a\": \"../rt.safetensors\"}}");
    expect_open_fail(mt_test_path("sh/escape.index.json"), "escape.index.json", "index shard outside the directory");
}

static void test_bad_files(void) {
    const char *F32x2 = "\"dtype\":\"F32\",\"shape\":[2]";
    char hdr[512];

    expect_open_fail(mt_test_path("does_not_exist.safetensors"), "does_not_exist.safetensors", "missing file");
    mkdir(mt_test_path("emptydir"), 0755);
    expect_open_fail(mt_test_path("emptydir"), "emptydir", "directory without weights");
    mt_test_write_bytes(mt_test_path("empty.safetensors"), "", 0);
    expect_open_fail(mt_test_path("empty.safetensors"), "empty.safetensors", "empty file");
    mt_test_write_bytes(mt_test_path("short.safetensors"), "\x10\0\0\0\0", 5);
    expect_open_fail(mt_test_path("short.safetensors"), "short.safetensors", "file shorter than 8 bytes");

    // A valid file cut inside its header.
    const char *good = make_st("good.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    mt_safetensors *st = NULL;
    CHECK(mt_st_open(good, &st) == MT_OK, "hand-made good file opens: %s", mt_last_error());
    mt_st_close(st);
    CHECK(truncate(good, 20) == 0, "truncate");
    expect_open_fail(good, "good.safetensors", "truncated header");

    unsigned char huge_len[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
    mt_test_write_bytes(mt_test_path("hlen.safetensors"), huge_len, 16);
    expect_open_fail(mt_test_path("hlen.safetensors"), "hlen.safetensors", "header length beyond file");
    unsigned char zero_len[8] = {0};
    mt_test_write_bytes(mt_test_path("zlen.safetensors"), zero_len, 8);
    expect_open_fail(mt_test_path("zlen.safetensors"), "zlen.safetensors", "zero header length");

    expect_bad("malformed.safetensors", "{\"a\":{\"dtype\":\"F32\",", 0, "malformed JSON");
    expect_bad("notobj.safetensors", "[1, 2, 3]", 0, "non-object JSON");
    expect_bad("string.safetensors", "\"hello\"", 0, "string JSON");
    expect_bad("garbage.safetensors", "{}  xx", 0, "garbage after JSON");
    expect_bad("entry_notobj.safetensors", "{\"a\": 5}", 0, "entry not an object");
    expect_bad("f64.safetensors", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 16, "F64 dtype");
    CHECK(strstr(mt_last_error(), "F64") && strstr(mt_last_error(), "'a'"), "names dtype and tensor: %s",
          mt_last_error());
    expect_bad("weird_dtype.safetensors", "{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
               "unknown dtype");
    expect_bad("no_dtype.safetensors", "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "missing dtype");
    expect_bad("neg_shape.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
               "negative shape");
    expect_bad("frac_shape.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,8]}}", 8,
               "fractional shape");
    expect_bad("str_shape.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
               "string in shape");
    expect_bad("shape_notarr.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8,
               "shape not an array");
    expect_bad("dims9.safetensors",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8, "9 dims");
    expect_bad("overflow.safetensors",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 8,
               "numel overflow");
    snprintf(hdr, sizeof hdr, "{\"a\":{%s,\"data_offsets\":[0,16]}}", F32x2);
    expect_bad("outside.safetensors", hdr, 8, "offsets outside buffer");
    snprintf(hdr, sizeof hdr, "{\"a\":{%s,\"data_offsets\":[8,0]}}", F32x2);
    expect_bad("reversed.safetensors", hdr, 8, "begin > end");
    snprintf(hdr, sizeof hdr, "{\"a\":{%s,\"data_offsets\":[0]}}", F32x2);
    expect_bad("one_offset.safetensors", hdr, 8, "one offset");
    snprintf(hdr, sizeof hdr, "{\"a\":{%s,\"data_offsets\":[0,-8]}}", F32x2);
    expect_bad("neg_offset.safetensors", hdr, 8, "negative offset");
    snprintf(hdr, sizeof hdr, "{\"a\":{%s}}", F32x2);
    expect_bad("no_offsets.safetensors", hdr, 8, "missing data_offsets");
    snprintf(hdr, sizeof hdr, "{\"a\":{%s,\"data_offsets\":[0,8]},\"b\":{%s,\"data_offsets\":[4,12]}}", F32x2, F32x2);
    expect_bad("overlap.safetensors", hdr, 12, "overlapping tensors");
    snprintf(hdr, sizeof hdr, "{\"a\":{%s,\"data_offsets\":[0,8]},\"b\":{%s,\"data_offsets\":[0,8]}}", F32x2, F32x2);
    expect_bad("alias.safetensors", hdr, 8, "two tensors on the same bytes");
    snprintf(hdr, sizeof hdr, "{\"a\":{%s,\"data_offsets\":[0,8]},\"b\":{%s,\"data_offsets\":[12,20]}}", F32x2, F32x2);
    expect_bad("gap.safetensors", hdr, 20, "gap between tensors");
    snprintf(hdr, sizeof hdr, "{\"a\":{%s,\"data_offsets\":[4,12]}}", F32x2);
    expect_bad("leading_gap.safetensors", hdr, 12, "gap before first tensor");
    snprintf(hdr, sizeof hdr, "{\"a\":{%s,\"data_offsets\":[0,8]}}", F32x2);
    expect_bad("trailing.safetensors", hdr, 12, "trailing bytes");
    expect_bad("notensor_trailing.safetensors", "{}", 4, "data but no tensors");
    expect_bad("mismatch.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
               "shape vs offsets size mismatch");
    expect_bad("bf16_mismatch.safetensors", "{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
               "bf16 size mismatch");
    snprintf(hdr, sizeof hdr, "{\"a\":{%s,\"data_offsets\":[0,8]},\"a\":{%s,\"data_offsets\":[8,16]}}", F32x2, F32x2);
    expect_bad("dup_name.safetensors", hdr, 16, "duplicate tensor name");
    CHECK(strstr(mt_last_error(), "tensor 'a' appears twice"), "names the duplicate: %s", mt_last_error());
    // The same name on the same bytes: a duplicate, not an "overlap" (issue 29).
    snprintf(hdr, sizeof hdr, "{\"a\":{%s,\"data_offsets\":[0,8]},\"a\":{%s,\"data_offsets\":[0,8]}}", F32x2, F32x2);
    expect_bad("dup_alias.safetensors", hdr, 8, "duplicate tensor name, same offsets");
    CHECK(strstr(mt_last_error(), "tensor 'a' appears twice"), "a duplicate, not an overlap: %s", mt_last_error());
    // Duplicate keys are refused everywhere (README): in __metadata__ and inside an entry.
    snprintf(hdr, sizeof hdr, "{\"__metadata__\":{\"format\":\"pt\",\"format\":\"np\"},\"a\":{%s,\"data_offsets\":[0,8]}}", F32x2);
    expect_bad("meta_dup.safetensors", hdr, 8, "duplicate __metadata__ key");
    CHECK(strstr(mt_last_error(), "__metadata__.format appears twice"), "names the key: %s", mt_last_error());
    snprintf(hdr, sizeof hdr, "{\"__metadata__\":{},\"__metadata__\":{},\"a\":{%s,\"data_offsets\":[0,8]}}", F32x2);
    expect_bad("meta_twice.safetensors", hdr, 8, "__metadata__ twice");
    snprintf(hdr, sizeof hdr, "{\"a\":{\"dtype\":\"BF16\",%s,\"data_offsets\":[0,8]}}", F32x2);
    expect_bad("entry_dup.safetensors", hdr, 8, "a key twice inside an entry");
    CHECK(strstr(mt_last_error(), "\"dtype\" appears twice"), "names the key: %s", mt_last_error());
    snprintf(hdr, sizeof hdr, "{\"__metadata__\":{\"format\":3},\"a\":{%s,\"data_offsets\":[0,8]}}", F32x2);
    expect_bad("meta.safetensors", hdr, 8, "non-string metadata");
    snprintf(hdr, sizeof hdr, "{\"__metadata__\":[],\"a\":{%s,\"data_offsets\":[0,8]}}", F32x2);
    expect_bad("meta_arr.safetensors", hdr, 8, "metadata not an object");

    // Padding with spaces and a metadata map are fine.
    snprintf(hdr, sizeof hdr, "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{%s,\"data_offsets\":[0,8]}}    ", F32x2);
    const char *ok = make_st("padded.safetensors", hdr, 8);
    CHECK(mt_st_open(ok, &st) == MT_OK, "padded header opens: %s", mt_last_error());
    mt_st_close(st);
}

static void test_write_failures(void) {
    float x[4] = {0};
    mt_st_entry e = {.name = "x", .dtype = MT_F32, .file_dtype = MT_F32, .ndim = 1, .shape = {4}, .data = x};
    const char *paths[2] = {"/proc/nonexistent/x.safetensors", NULL};
    mt_test_write_text(mt_test_path("regular"), "not a directory");
    paths[1] = mt_test_path("regular/x.safetensors");
    for (int i = 0; i < 2; i++) {
        mt_status s = mt_st_write(paths[i], &e, 1);
        CHECK(s == MT_ERR_IO, "unwritable %s: %s", paths[i], mt_status_name(s));
        CHECK(strstr(mt_last_error(), paths[i]) != NULL, "error names the path: %s", mt_last_error());
        CHECK(strchr(mt_last_error(), '\n') == NULL, "one line");
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp", paths[i]);
        CHECK(!exists(paths[i]) && !exists(tmp), "no file left at %s", paths[i]);
    }
    // Bad entries are refused before anything is created.
    const char *p = mt_test_path("bad_entries.safetensors");
    mt_st_entry dup[2] = {e, e};
    CHECK(mt_st_write(p, dup, 2) == MT_ERR_ARG && strstr(mt_last_error(), "given twice"), "duplicate names: %s",
          mt_last_error());
    mt_st_entry neg = e;
    neg.shape[0] = -1;
    CHECK(mt_st_write(p, &neg, 1) == MT_ERR_ARG, "negative dim");
    mt_st_entry nodata = e;
    nodata.data = NULL;
    CHECK(mt_st_write(p, &nodata, 1) == MT_ERR_ARG, "NULL data");
    mt_st_entry dims = e;
    dims.ndim = 9;
    CHECK(mt_st_write(p, &dims, 1) == MT_ERR_ARG, "9 dims");
    mt_st_entry meta = e;
    meta.name = "__metadata__";
    CHECK(mt_st_write(p, &meta, 1) == MT_ERR_ARG, "reserved name");
    CHECK(!exists(p), "nothing written for bad entries");

    // Overwriting an existing file replaces it whole.
    const char *q = mt_test_path("replace.safetensors");
    mt_test_write_text(q, "old junk");
    CHECK(mt_st_write(q, &e, 1) == MT_OK, "overwrite: %s", mt_last_error());
    mt_safetensors *st = NULL;
    CHECK(mt_st_open(q, &st) == MT_OK, "replaced file opens: %s", mt_last_error());
    mt_st_close(st);
}

// Offsets beyond 4 GiB without using memory: a sparse file whose first tensor is 6 GiB.
static void test_large_offsets(void) {
    const char *path = mt_test_path("sparse.safetensors");
    const uint64_t big = (uint64_t)3 << 31; // 3 x 2^30 BF16 = 6 GiB
    char hdr[256];
    snprintf(hdr, sizeof hdr,
             "{\"big\":{\"dtype\":\"BF16\",\"shape\":[3,1073741824],\"data_offsets\":[0,%llu]},"
             "\"small\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[%llu,%llu]}}",
             (unsigned long long)big, (unsigned long long)big, (unsigned long long)big + 16);
    size_t hlen = strlen(hdr);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    unsigned char lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    float small[4] = {1.5f, -2.0f, 3.0f, 1e30f};
    int ok = fd >= 0 && write(fd, lb, 8) == 8 && write(fd, hdr, hlen) == (ssize_t)hlen &&
             pwrite(fd, small, 16, (off_t)(8 + hlen + big)) == 16;
    if (fd >= 0) close(fd);
    if (!ok) {
        fprintf(stderr, "test_large_offsets: skipped (filesystem refuses a sparse 6 GiB file)\n");
        unlink(path);
        return;
    }
    mt_safetensors *st = NULL;
    CHECK(mt_st_open(path, &st) == MT_OK, "open sparse: %s", mt_last_error());
    if (st) {
        const mt_st_tensor *b = mt_st_find(st, "big"), *s = mt_st_find(st, "small");
        CHECK(b && b->numel == ((size_t)3 << 30) && b->nbytes == (size_t)big, "big tensor size_t fields");
        CHECK(s && s->offset == 8 + hlen + big, "offset beyond 4 GiB");
        float got[4] = {0};
        CHECK(s && mt_st_read(st, s, got, MT_F32) == MT_OK && memcmp(got, small, 16) == 0, "read beyond 4 GiB");
        mt_st_close(st);
    }
    unlink(path);
}

// > 2 GiB tensor written and read back (opt-in: needs ~7 GiB of RAM and 2.5 GiB of disk).
static void test_large_tensor(void) {
    const char *env = getenv("MT_TEST_LARGE");
    if (!env || strcmp(env, "1") != 0) {
        fprintf(stderr, "test_large_tensor: skipped (set MT_TEST_LARGE=1)\n");
        return;
    }
    size_t n = ((size_t)5 << 27) + 3; // 640M + 3 floats = 2.5 GiB
    float *x = malloc(n * 4);
    CHECK(x != NULL, "alloc");
    if (!x) return;
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 1000003) * 0.5f;
    mt_st_entry e = {.name = "w", .dtype = MT_F32, .file_dtype = MT_F32, .ndim = 1, .shape = {(int64_t)n}, .data = x};
    const char *path = mt_test_path("large.safetensors");
    CHECK(mt_st_write(path, &e, 1) == MT_OK, "write large: %s", mt_last_error());
    mt_safetensors *st = NULL;
    CHECK(mt_st_open(path, &st) == MT_OK, "open large: %s", mt_last_error());
    if (st) {
        const mt_st_tensor *t = mt_st_find(st, "w");
        float *y = malloc(n * 4);
        CHECK(t && y && mt_st_read(st, t, y, MT_F32) == MT_OK, "read large: %s", mt_last_error());
        CHECK(y && memcmp(x, y, n * 4) == 0, "large roundtrip");
        uint16_t *h = (uint16_t *)y; // reuse: bf16 needs half the bytes
        CHECK(t && mt_st_read(st, t, h, MT_BF16) == MT_OK, "read large as bf16");
        CHECK(h[n - 1] == mt_f32_to_bf16(x[n - 1]) && h[n / 2] == mt_f32_to_bf16(x[n / 2]), "large bf16 values");
        free(y);
        mt_st_close(st);
    }
    free(x);
    unlink(path);
}

// F16 (older HF checkpoints): read into F32 exactly and into BF16 rounded once.
// The file is written byte by byte, so the check does not lean on our own f16 code.
static void test_f16(void) {
    const uint16_t bits[8] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x3555, 0x0000, 0x8400, 0x7c00};
    const float want[8] = {1.0f, -2.0f, 65504.0f, 5.9604644775390625e-8f, 0.333251953125f, 0.0f,
                           -6.103515625e-5f, INFINITY};
    const char *hdr = "{\"h\":{\"dtype\":\"F16\",\"shape\":[2,4],\"data_offsets\":[0,16]}}";
    size_t hlen = strlen(hdr);
    unsigned char buf[256] = {0};
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, hdr, hlen);
    for (int i = 0; i < 8; i++) buf[8 + hlen + 2 * i] = bits[i] & 0xff, buf[8 + hlen + 2 * i + 1] = bits[i] >> 8;
    const char *path = mt_test_write_bytes(mt_test_path("f16.safetensors"), buf, 8 + hlen + 16);
    mt_safetensors *st = NULL;
    if (mt_st_open(path, &st) != MT_OK) {
        CHECK(0, "open F16 file: %s", mt_last_error());
        return;
    }
    const mt_st_tensor *t = mt_st_find(st, "h");
    CHECK(t && t->dtype == MT_F16 && t->numel == 8 && t->nbytes == 16, "F16 tensor parsed");
    float f[8];
    uint16_t b[8];
    CHECK(t && mt_st_read(st, t, f, MT_F32) == MT_OK, "read F16 as F32: %s", mt_last_error());
    CHECK(t && mt_st_read(st, t, b, MT_BF16) == MT_OK, "read F16 as BF16: %s", mt_last_error());
    for (int i = 0; i < 8; i++) {
        CHECK(f[i] == want[i], "F16 %04x -> %.9g, expected %.9g", bits[i], f[i], want[i]);
        CHECK(b[i] == mt_f32_to_bf16(want[i]), "F16 %04x -> bf16 %04x, expected %04x", bits[i], b[i],
              mt_f32_to_bf16(want[i]));
    }
    mt_st_close(st);
    // The core helpers: exact widening, round-to-nearest-even narrowing, F16 <-> BF16 through f32.
    for (int i = 0; i < 8; i++) CHECK(mt_f32_to_f16(mt_f16_to_f32(bits[i])) == bits[i], "f16 roundtrip %04x", bits[i]);
    CHECK(mt_f32_to_f16(1.0f + 0.00048828125f) == 0x3c00 && mt_f32_to_f16(nextafterf(1.00048828125f, 2.0f)) == 0x3c01 &&
              mt_f32_to_f16(1.00146484375f) == 0x3c02,
          "f32 -> f16 rounds to nearest even");
    uint16_t conv[8];
    mt_convert(conv, MT_BF16, bits, MT_F16, 8);
    CHECK(!memcmp(conv, b, sizeof b), "mt_convert F16 -> BF16 equals the read path");
    // F16 is written too (test fixtures), and a reader of the result sees the same bits.
    mt_st_entry e = {.name = "h", .dtype = MT_F32, .file_dtype = MT_F16, .ndim = 1, .shape = {8}, .data = want};
    const char *out = mt_test_path("f16_written.safetensors");
    CHECK(mt_st_write(out, &e, 1) == MT_OK, "write F16: %s", mt_last_error());
    if (mt_st_open(out, &st) == MT_OK) {
        uint16_t back[8];
        t = mt_st_find(st, "h");
        CHECK(t && t->dtype == MT_F16 && mt_st_read(st, t, f, MT_F32) == MT_OK, "reread F16");
        for (int i = 0; i < 8; i++) back[i] = mt_f32_to_f16(f[i]);
        CHECK(!memcmp(back, bits, sizeof bits), "written F16 bits");
        mt_st_close(st);
    }
}

int main(void) {
    mt_test_tmpdir_make("mt_st");
    test_roundtrip();
    test_truncated_after_open();
    test_sharded();
    test_bad_files();
    test_write_failures();
    test_large_offsets();
    test_large_tensor();
    test_f16();
    return mt_test_finish("test_safetensors");
}
