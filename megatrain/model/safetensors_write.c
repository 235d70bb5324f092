// safetensors_write.c: writes one .safetensors file, converting each tensor to its
// file dtype on the fly through a small buffer, and takes each tensor's CRC-32 of
// the bytes written. The file goes to "<path>.<pid>.tmp", is fsynced and renamed,
// so `path` only ever holds a complete file.
#define _POSIX_C_SOURCE 200809L // pread, fsync, O_CLOEXEC under -std=c11
#include "model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/file_io.h"

#define MT_ST_IO_CHUNK ((size_t)1 << 30)
#define MT_ST_CONVERT_ELEMS ((size_t)1 << 20)

// Growable string for the header. The header is written by hand, not by cJSON,
// because cJSON prints integers above 2^31 through "%g" and offsets of large
// files could come out in exponent form, which safetensors readers reject.
typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap <= b->len + (size_t)n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

// JSON string escaping for tensor names.
static void sb_json_string(strbuf *b, const char *s) {
    sb_printf(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') sb_printf(b, "\\%c", *c);
        else if (*c < 0x20) sb_printf(b, "\\u%04x", *c);
        else sb_printf(b, "%c", *c);
    }
    sb_printf(b, "\"");
}

static mt_status write_full(int fd, const void *buf, size_t n, const char *path) {
    const char *p = buf;
    while (n > 0) {
        size_t want = n < MT_ST_IO_CHUNK ? n : MT_ST_IO_CHUNK;
        ssize_t w = write(fd, p, want);
        if (w < 0) {
            if (errno == EINTR) continue;
            return mt_fail(MT_ERR_IO, "%s: write failed: %s", path, mt_write_strerror(errno));
        }
        p += w;
        n -= (size_t)w;
    }
    return MT_OK;
}

static size_t entry_numel(const mt_st_entry *e) {
    size_t n = 1;
    for (int d = 0; d < e->ndim; d++) n *= (size_t)e->shape[d];
    return n;
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static mt_status check_entries(const char *path, const mt_st_entry *es, int n) {
    for (int i = 0; i < n; i++) {
        const mt_st_entry *e = &es[i];
        if (!e->name || !e->name[0] || strcmp(e->name, "__metadata__") == 0)
            return mt_fail(MT_ERR_ARG, "%s: entry %d: missing or reserved tensor name", path, i);
        if ((unsigned)e->dtype > MT_F16 || (unsigned)e->file_dtype > MT_F16)
            return mt_fail(MT_ERR_ARG, "%s: tensor '%s': bad dtype", path, e->name);
        if (e->ndim < 0 || e->ndim > MT_ST_MAX_DIMS)
            return mt_fail(MT_ERR_ARG, "%s: tensor '%s': %d dimensions (0..%d allowed)", path, e->name, e->ndim,
                           MT_ST_MAX_DIMS);
        size_t numel = 1;
        for (int d = 0; d < e->ndim; d++) {
            int64_t v = e->shape[d];
            if (v < 0) return mt_fail(MT_ERR_ARG, "%s: tensor '%s': negative dimension", path, e->name);
            if (v != 0 && numel > SIZE_MAX / 4 / (uint64_t)v)
                return mt_fail(MT_ERR_ARG, "%s: tensor '%s': shape overflows size_t", path, e->name);
            numel *= (size_t)v;
        }
        if (numel > 0 && !e->data) return mt_fail(MT_ERR_ARG, "%s: tensor '%s': NULL data", path, e->name);
    }
    const char **names = malloc((size_t)(n > 0 ? n : 1) * sizeof *names);
    if (!names) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    for (int i = 0; i < n; i++) names[i] = es[i].name;
    qsort(names, (size_t)n, sizeof *names, cmp_str_ptr);
    mt_status s = MT_OK;
    for (int i = 1; i < n && s == MT_OK; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            s = mt_fail(MT_ERR_ARG, "%s: tensor '%s' given twice", path, names[i]);
    free(names);
    return s;
}

// Data order: F32 tensors first, then BF16, each in the caller's order. Since the
// header is padded to 8 bytes, every tensor starts aligned to its element size
// (the reference implementation orders by alignment for the same reason).
static int *layout_order(const mt_st_entry *es, int n) {
    int *ord = calloc((size_t)(n > 0 ? n : 1), sizeof *ord);
    if (!ord) return NULL;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (es[i].file_dtype == MT_F32) ord[k++] = i;
    for (int i = 0; i < n; i++)
        if (es[i].file_dtype != MT_F32) ord[k++] = i;
    return ord;
}

static mt_status build_header(const char *path, const mt_st_entry *es, const int *ord, int n, strbuf *b) {
    sb_printf(b, "{\"__metadata__\":{\"format\":\"pt\"}");
    size_t off = 0;
    for (int k = 0; k < n; k++) {
        const mt_st_entry *e = &es[ord[k]];
        size_t nbytes = entry_numel(e) * mt_dtype_size(e->file_dtype);
        sb_printf(b, ",");
        sb_json_string(b, e->name);
        sb_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", mt_dtype_name(e->file_dtype));
        for (int d = 0; d < e->ndim; d++) sb_printf(b, "%s%" PRId64, d ? "," : "", e->shape[d]);
        sb_printf(b, "],\"data_offsets\":[%zu,%zu]}", off, off + nbytes);
        off += nbytes;
    }
    sb_printf(b, "}");
    while (b->len % 8) sb_printf(b, " ");
    if (b->oom) return mt_fail(MT_ERR_MEMORY, "%s: out of memory for the header", path);
    return MT_OK;
}

// Writes one tensor's data; *crc is the CRC-32 (zlib's) of the bytes as written.
static mt_status write_entry_data(int fd, const mt_st_entry *e, void *buf, const char *path, uint32_t *crc);

static mt_status write_entry(int fd, const mt_st_entry *e, void *buf, const char *path, uint32_t *crc) {
    size_t numel = entry_numel(e);
    if (e->fetch) MT_TRY(e->fetch(e->ctx, e->data, numel));
    mt_status s = write_entry_data(fd, e, buf, path, crc);
    if (e->drop) e->drop(e->ctx, e->data, numel);
    return s;
}

static mt_status write_entry_data(int fd, const mt_st_entry *e, void *buf, const char *path, uint32_t *crc) {
    size_t numel = entry_numel(e);
    uLong c = crc32_z(0, Z_NULL, 0);
    if (e->dtype == e->file_dtype) {
        size_t n = numel * mt_dtype_size(e->dtype);
        *crc = (uint32_t)crc32_z(c, e->data, n);
        return write_full(fd, e->data, n, path);
    }
    size_t ssz = mt_dtype_size(e->dtype), dsz = mt_dtype_size(e->file_dtype);
    for (size_t done = 0; done < numel; done += MT_ST_CONVERT_ELEMS) {
        size_t k = numel - done < MT_ST_CONVERT_ELEMS ? numel - done : MT_ST_CONVERT_ELEMS;
        mt_convert(buf, e->file_dtype, (const char *)e->data + done * ssz, e->dtype, k);
        c = crc32_z(c, buf, k * dsz);
        MT_TRY(write_full(fd, buf, k * dsz, path));
    }
    *crc = (uint32_t)c;
    return MT_OK;
}

static mt_status write_body(int fd, const char *path, const mt_st_entry *es, const int *ord, int n,
                            const strbuf *hdr, uint32_t *crcs) {
    unsigned char lb[8];
    uint64_t hlen = hdr->len;
    for (int i = 0; i < 8; i++) lb[i] = (unsigned char)(hlen >> (8 * i));
    MT_TRY(write_full(fd, lb, 8, path));
    MT_TRY(write_full(fd, hdr->p, hdr->len, path));
    void *buf = malloc(MT_ST_CONVERT_ELEMS * 4);
    if (!buf) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    mt_status s = MT_OK;
    for (int k = 0; k < n && s == MT_OK; k++) {
        uint32_t crc = 0;
        s = write_entry(fd, &es[ord[k]], buf, path, &crc);
        if (crcs) crcs[ord[k]] = crc;
    }
    free(buf);
    return s;
}

mt_status mt_st_file_bytes(const mt_st_entry *entries, int n, size_t *bytes) {
    if (n < 0 || (n > 0 && !entries) || !bytes) return mt_fail(MT_ERR_ARG, "mt_st_file_bytes: bad argument");
    MT_TRY(check_entries("safetensors size", entries, n));
    int *ord = layout_order(entries, n);
    if (!ord) return mt_fail(MT_ERR_MEMORY, "out of memory");
    strbuf hdr = {0};
    mt_status s = build_header("safetensors size", entries, ord, n, &hdr);
    size_t total = 8 + hdr.len;
    for (int i = 0; i < n; i++) total += entry_numel(&entries[i]) * mt_dtype_size(entries[i].file_dtype);
    if (s == MT_OK) *bytes = total;
    free(hdr.p);
    free(ord);
    return s;
}

mt_status mt_st_write(const char *path, const mt_st_entry *entries, int n) {
    return mt_st_write_sums(path, entries, n, NULL);
}

mt_status mt_st_write_sums(const char *path, const mt_st_entry *entries, int n, uint32_t *crcs) {
    if (!path || n < 0 || (n > 0 && !entries)) return mt_fail(MT_ERR_ARG, "mt_st_write: bad argument");
    MT_TRY(check_entries(path, entries, n));
    int *ord = layout_order(entries, n);
    if (!ord) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    strbuf hdr = {0};
    mt_status s = build_header(path, entries, ord, n, &hdr);

    char tmp[4200];
    if (s == MT_OK && !mt_file_tmp_name(path, tmp, sizeof tmp)) s = mt_fail(MT_ERR_ARG, "%s: path too long", path);
    int fd = -1;
    if (s == MT_OK) {
        s = mt_file_create_replacing(tmp, path, &fd); // a replaced file's mode is kept
    }
    if (s == MT_OK) s = write_body(fd, path, entries, ord, n, &hdr, crcs);
    if (s == MT_OK && fsync(fd) != 0) s = mt_fail(MT_ERR_IO, "%s: fsync failed: %s", path, mt_write_strerror(errno));
    if (fd >= 0 && close(fd) != 0 && s == MT_OK)
        s = mt_fail(MT_ERR_IO, "%s: close failed: %s", path, mt_write_strerror(errno));
    if (s == MT_OK && rename(tmp, path) != 0)
        s = mt_fail(MT_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
    if (s != MT_OK && fd >= 0) unlink(tmp);
    if (s == MT_OK) { // the rename itself must be durable too
        char dir[4200];
        mt_path_dirname(path, dir, sizeof dir);
        s = mt_fsync_dir(dir);
    }
    free(hdr.p);
    free(ord);
    return s;
}
