// env.c: the one parser behind every environment variable megatrain reads (env.h).
#include "core/env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The value as it can go in a one-line message: printable ASCII, at most 80 bytes.
static const char *shown(const char *v, char *buf, size_t cap) {
    size_t i = 0;
    for (; v[i] && i + 4 < cap && i < 80; i++) buf[i] = (v[i] >= 0x20 && v[i] < 0x7f) ? v[i] : '?';
    snprintf(buf + i, cap - i, "%s", v[i] ? "..." : "");
    return buf;
}

static const char *value_of(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

mt_status mt_env_u64(const char *name, uint64_t lo, uint64_t hi, uint64_t dflt, uint64_t *out) {
    *out = dflt;
    const char *v = value_of(name);
    if (!v) return MT_OK;
    char buf[96], *end = NULL;
    errno = 0;
    unsigned long long x = v[0] >= '0' && v[0] <= '9' ? strtoull(v, &end, 10) : 0;
    if (!end || *end || errno == ERANGE || x < lo || x > hi)
        return mt_fail(MT_ERR_ARG, "%s=%s: expected a whole number in %llu..%llu. HINT: unset it for the default", name,
                       shown(v, buf, sizeof buf), (unsigned long long)lo, (unsigned long long)hi);
    *out = x;
    return MT_OK;
}

mt_status mt_env_bool(const char *name, int dflt, int *out) {
    static const char *const names[] = {"0", "false", "no", "off", "1", "true", "yes", "on"};
    int i;
    MT_TRY(mt_env_choice(name, names, 8, -1, &i));
    *out = i < 0 ? dflt : i >= 4;
    return MT_OK;
}

mt_status mt_env_choice(const char *name, const char *const *names, int n, int dflt, int *out) {
    *out = dflt;
    const char *v = value_of(name);
    if (!v) return MT_OK;
    for (int i = 0; i < n; i++)
        if (!strcmp(v, names[i])) return *out = i, MT_OK;
    char list[256] = "", buf[96];
    for (int i = 0; i < n; i++) {
        size_t k = strlen(list);
        snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", names[i]);
    }
    return mt_fail(MT_ERR_ARG, "%s=%s: expected one of %s. HINT: unset it for the default", name,
                   shown(v, buf, sizeof buf), list);
}

mt_status mt_env_text(const char *name, const char **out) {
    *out = NULL;
    const char *v = value_of(name);
    if (!v) return MT_OK;
    char buf[96];
    for (const char *c = v; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return mt_fail(MT_ERR_ARG, "%s=%s: holds a control character", name, shown(v, buf, sizeof buf));
    *out = v;
    return MT_OK;
}

int mt_env_flag(const char *name) {
    int b = 0;
    return mt_env_bool(name, 0, &b) == MT_OK && b;
}
