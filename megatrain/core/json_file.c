// json_file.c: cJSON plus the two checks it does not make (trailing text,
// duplicated keys), with errors that name the file and the line.
#include "core/json_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file_io.h"

static int line_of(const char *text, const char *at) {
    int line = 1;
    for (const char *p = text; at && p < at; p++) line += *p == '\n';
    return line;
}

// Depth-first: the first object holding a key twice. `prefix` builds "a.b.c".
static const cJSON *find_duplicate(const cJSON *node, char *prefix, size_t cap) {
    if (!cJSON_IsObject(node) && !cJSON_IsArray(node)) return NULL;
    size_t base = strlen(prefix);
    for (const cJSON *c = node->child; c; c = c->next) {
        if (cJSON_IsObject(node)) {
            for (const cJSON *d = node->child; d != c; d = d->next)
                if (!strcmp(d->string, c->string)) {
                    snprintf(prefix + base, cap - base, "%s%s", base ? "." : "", c->string);
                    return c;
                }
            snprintf(prefix + base, cap - base, "%s%s", base ? "." : "", c->string);
        } else {
            prefix[base] = 0;
        }
        const cJSON *dup = find_duplicate(c, prefix, cap);
        if (dup) return dup;
        prefix[base] = 0;
    }
    return NULL;
}

mt_status mt_json_parse(const char *path, const char *text, size_t len, cJSON **out) {
    *out = NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) return mt_fail(MT_ERR_FORMAT, "%s: malformed JSON near line %d", path, line_of(text, end));
    const char *p = end;
    while (p < text + len && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    if (p < text + len && *p) {
        cJSON_Delete(root);
        return mt_fail(MT_ERR_FORMAT, "%s: unexpected text after the JSON value (line %d)", path, line_of(text, p));
    }
    char key[512] = "";
    const cJSON *dup = find_duplicate(root, key, sizeof key);
    if (dup) {
        mt_status s =
            mt_fail(MT_ERR_FORMAT, "%s: key '%s' appears twice (keys of a JSON object must be unique)", path, key);
        cJSON_Delete(root);
        return s;
    }
    *out = root;
    return MT_OK;
}

mt_status mt_json_load(const char *path, const char *what, size_t max_bytes, cJSON **out) {
    char *text;
    size_t len;
    *out = NULL;
    MT_TRY(mt_file_read_text(path, what, max_bytes, &text, &len));
    mt_status s = mt_json_parse(path, text, len, out);
    free(text);
    return s;
}

void mt_json_add_exact(cJSON *o, const char *key, double v) {
    if (!isfinite(v)) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    char buf[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    cJSON_AddRawToObject(o, key, buf);
}
