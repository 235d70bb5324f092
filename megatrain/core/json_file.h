// json_file.h: the one way megatrain reads a JSON file (config.json,
// train_state.json, checkpoint.json, hardware profiles): bounded read, parse,
// nothing but whitespace after the value, and no key given twice in an object.
// A duplicated key is refused, naming it, rather than silently resolved: Python's
// json keeps the last value, cJSON's lookup the first, so either choice would
// disagree with some reader of the same file.
#ifndef MT_JSON_FILE_H
#define MT_JSON_FILE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "core/status.h"

// Reads PATH (at most max_bytes; `what` names the expected content in errors) and
// parses it. Errors: "PATH: malformed JSON near line N", "PATH: unexpected text
// after the JSON value (line N)", "PATH: key 'a.b' appears twice".
mt_status mt_json_load(const char *path, const char *what, size_t max_bytes, cJSON **out);
// The same checks on text already in memory (`path` only names it in errors).
mt_status mt_json_parse(const char *path, const char *text, size_t len, cJSON **out);

// Adds `v` to object `o` as the shortest decimal that reads back as the same double
// (cJSON's own printing accepts 15 digits within an epsilon, which can lose the last
// bit, so a reader recomputing a metric from the printed inputs would differ);
// null where v is not finite, as cJSON prints it.
void mt_json_add_exact(cJSON *o, const char *key, double v);

#endif
