// json_edit.h: changing one top-level field of a JSON object's text and leaving
// every other byte as it was. A config.json read and written back through cJSON
// would lose how its numbers were written ("rope_theta": 500000.0 comes back as
// 500000, an int to Python) and the order and layout of its fields; an edit of
// the text keeps them.
#ifndef MT_JSON_EDIT_H
#define MT_JSON_EDIT_H

#include <stddef.h>

#include "core/status.h"

// Where the value of top-level key `key` lies in `text` (a JSON object that
// already parsed, e.g. through mt_json_parse): [*begin, *end). 0 when absent.
int mt_json_top_value_span(const char *text, const char *key, size_t *begin, size_t *end);
// A copy of `text` (the caller frees it) with the value of top-level `key`
// replaced by `value_json` (JSON text, e.g. "\"bfloat16\""), or with the pair
// added as the object's last member when the key is absent.
mt_status mt_json_set_top(const char *text, const char *key, const char *value_json, char **out);

#endif
