// dataloader.c: token files, synthetic tokens, the embedded corpus, batching.
#include "data/dataloader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "core/file_io.h"

// CRC-32 (zlib's) of the ids as little-endian uint32: the file's bytes on every host we build for.
static uint32_t tokens_crc(const uint32_t *t, size_t n) {
    return (uint32_t)crc32_z(crc32_z(0, Z_NULL, 0), (const unsigned char *)t, n * 4);
}

mt_status mt_data_open_file(mt_data *d, const char *path, int vocab, int B, int T) {
    memset(d, 0, sizeof *d);
    snprintf(d->source, sizeof d->source, "%s", path);
    struct stat sb;
    int fd;
    MT_TRY(mt_file_open_regular(path, "a token file (--data)", &fd, &sb));
    mt_status bad = MT_OK;
    size_t n = (size_t)sb.st_size / 4, need = (size_t)B * T + 1;
    if (sb.st_size % 4 != 0)
        bad = mt_fail(MT_ERR_FORMAT, "%s: size %lld bytes is not a multiple of 4 (expected flat uint32 token ids)",
                      path, (long long)sb.st_size);
    else if (n < need)
        bad = mt_fail(MT_ERR_FORMAT, "%s: %zu tokens, fewer than one batch needs (batch x seq-len + 1 = %zu)", path, n,
                      need);
    FILE *f = bad == MT_OK ? fdopen(fd, "rb") : NULL;
    if (!f) {
        close(fd);
        return bad != MT_OK ? bad : mt_fail(MT_ERR_IO, "%s: cannot open data file: %s", path, strerror(errno));
    }
    d->tokens = malloc(n * 4);
    if (!d->tokens) {
        fclose(f);
        return mt_fail(MT_ERR_MEMORY, "%s: cannot allocate %zu bytes for the tokens", path, n * 4);
    }
    size_t got = fread(d->tokens, 4, n, f);
    fclose(f);
    if (got != n) {
        mt_data_free(d);
        return mt_fail(MT_ERR_IO, "%s: short read (%zu of %zu tokens)", path, got, n);
    }
    for (size_t i = 0; i < n; i++) { // the file is little-endian; so is every host we build for
        if (d->tokens[i] >= (uint32_t)vocab) {
            uint32_t bad = d->tokens[i];
            mt_data_free(d);
            return mt_fail(MT_ERR_FORMAT, "%s: token id %u at index %zu is >= vocab_size %d", path, bad, i, vocab);
        }
    }
    d->n = n;
    d->crc32 = tokens_crc(d->tokens, n);
    d->has_crc = 1;
    if (!realpath(path, d->path)) snprintf(d->path, sizeof d->path, "%s", path); // opened, so it resolves
    return MT_OK;
}

mt_status mt_data_synthetic(mt_data *d, unsigned long long seed, int vocab, size_t n) {
    memset(d, 0, sizeof *d);
    snprintf(d->source, sizeof d->source, "synthetic");
    d->tokens = malloc(n * 4);
    if (!d->tokens) return mt_fail(MT_ERR_MEMORY, "synthetic data: cannot allocate %zu tokens", n);
    unsigned long long s = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        d->tokens[i] = (uint32_t)((s * 2685821657736338717ull >> 33) % (unsigned)vocab);
    }
    d->n = n;
    return MT_OK;
}

mt_status mt_data_from_bytes(mt_data *d, const unsigned char *bytes, size_t n, const char *source) {
    memset(d, 0, sizeof *d);
    snprintf(d->source, sizeof d->source, "%s", source);
    d->tokens = malloc(n * 4);
    if (!d->tokens) return mt_fail(MT_ERR_MEMORY, "%s: cannot allocate %zu tokens", source, n);
    for (size_t i = 0; i < n; i++) d->tokens[i] = bytes[i];
    d->n = n;
    d->crc32 = tokens_crc(d->tokens, n);
    d->has_crc = 1;
    return MT_OK;
}

void mt_data_next(mt_data *d, int B, int T, int32_t *inputs, int32_t *targets) {
    size_t bt = (size_t)B * T;
    if (d->cursor + bt + 1 > d->n) d->cursor = 0;
    const uint32_t *w = d->tokens + d->cursor;
    for (size_t i = 0; i < bt; i++) {
        inputs[i] = (int32_t)w[i];
        targets[i] = (int32_t)w[i + 1];
    }
    d->cursor += bt;
}

void mt_data_free(mt_data *d) {
    free(d->tokens);
    d->tokens = NULL;
    d->n = 0;
}
