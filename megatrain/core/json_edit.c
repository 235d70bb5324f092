// json_edit.c: a scanner over the text of a JSON object that already parsed
// (so it only tracks strings and nesting), and the splice of one value.
#include "core/json_edit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t skip_ws(const char *t, size_t i) {
    while (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r') i++;
    return i;
}

// t[i] is the opening quote: the index after the closing one.
static size_t skip_string(const char *t, size_t i) {
    for (i++; t[i] && t[i] != '"'; i++)
        if (t[i] == '\\' && t[i + 1]) i++;
    return t[i] ? i + 1 : i;
}

// Any value starting at t[i]: the index after it.
static size_t skip_value(const char *t, size_t i) {
    if (t[i] == '"') return skip_string(t, i);
    if (t[i] == '{' || t[i] == '[') {
        int depth = 0;
        while (t[i]) {
            if (t[i] == '"') {
                i = skip_string(t, i);
                continue;
            }
            if (t[i] == '{' || t[i] == '[') depth++;
            if ((t[i] == '}' || t[i] == ']') && --depth == 0) return i + 1;
            i++;
        }
        return i;
    }
    while (t[i] && !strchr(",}] \t\r\n", t[i])) i++; // number, true, false, null
    return i;
}

int mt_json_top_value_span(const char *text, const char *key, size_t *begin, size_t *end) {
    size_t i = skip_ws(text, 0), klen = strlen(key);
    if (text[i] != '{') return 0;
    i = skip_ws(text, i + 1);
    while (text[i] == '"') {
        size_t k0 = i + 1, k1 = skip_string(text, i) - 1; // the key's bytes, quotes excluded
        i = skip_ws(text, k1 + 1);
        if (text[i] != ':') return 0;
        i = skip_ws(text, i + 1);
        size_t v0 = i, v1 = skip_value(text, i);
        // Keys are compared as written: the keys megatrain edits need no escapes.
        if (k1 - k0 == klen && !memcmp(text + k0, key, klen)) {
            *begin = v0;
            *end = v1;
            return 1;
        }
        i = skip_ws(text, v1);
        if (text[i] != ',') return 0;
        i = skip_ws(text, i + 1);
    }
    return 0;
}

mt_status mt_json_set_top(const char *text, const char *key, const char *value_json, char **out) {
    size_t n = strlen(text), b, e;
    *out = NULL;
    if (mt_json_top_value_span(text, key, &b, &e)) {
        size_t vlen = strlen(value_json);
        char *s = malloc(n - (e - b) + vlen + 1);
        if (!s) return mt_fail(MT_ERR_MEMORY, "out of memory editing JSON");
        memcpy(s, text, b);
        memcpy(s + b, value_json, vlen);
        memcpy(s + b + vlen, text + e, n - e + 1);
        *out = s;
        return MT_OK;
    }
    // Absent: insert before the object's closing brace, after its last member if any.
    size_t close = n;
    while (close > 0 && text[close - 1] != '}') close--;
    if (close == 0) return mt_fail(MT_ERR_FORMAT, "JSON text is not an object");
    close--;
    size_t last = close;
    while (last > 0 && strchr(" \t\r\n", text[last - 1])) last--;
    int empty = text[last - 1] == '{';
    size_t need = n + strlen(key) + strlen(value_json) + 16;
    char *s = malloc(need);
    if (!s) return mt_fail(MT_ERR_MEMORY, "out of memory editing JSON");
    int k = snprintf(s, need, "%.*s%s\n  \"%s\": %s\n%s", (int)last, text, empty ? "" : ",", key, value_json,
                     text + close);
    if (k < 0 || (size_t)k >= need) {
        free(s);
        return mt_fail(MT_ERR_MEMORY, "JSON edit overflow");
    }
    *out = s;
    return MT_OK;
}
