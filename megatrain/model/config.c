// config.c: HF config.json <-> mt_config for Llama 1/2/3, Qwen2/2.5 and Qwen3.
// Defaults follow transformers' config classes, so a config HF accepts loads the
// same model here. Every error is one line: "<path>: <field>: <what is wrong>".
#define _POSIX_C_SOURCE 200809L // pread, fsync, O_CLOEXEC under -std=c11
#include "model/config.h"

#include "core/file_io.h"
#include "core/json_edit.h"
#include "core/json_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MT_CONFIG_MAX_BYTES ((long)16 << 20)

const char *mt_arch_model_type(mt_arch a) {
    switch (a) {
    case MT_ARCH_LLAMA: return "llama";
    case MT_ARCH_QWEN2: return "qwen2";
    case MT_ARCH_QWEN3: return "qwen3";
    }
    return "?";
}

static const char *arch_class(mt_arch a) {
    switch (a) {
    case MT_ARCH_LLAMA: return "LlamaForCausalLM";
    case MT_ARCH_QWEN2: return "Qwen2ForCausalLM";
    case MT_ARCH_QWEN3: return "Qwen3ForCausalLM";
    }
    return "?";
}

// ----------------------------------------------------------------------------
// typed field readers: absent or null leaves *out at its default

static const char *json_type(const cJSON *v) {
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "null";
}

static const cJSON *field(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNull(v) ? NULL : v;
}

static mt_status missing(const char *path, const char *ctx, const char *key) {
    return mt_fail(MT_ERR_FORMAT, "%s: %s%s: required field is missing or null", path, ctx, key);
}

static mt_status int_value(const char *path, const char *ctx, const char *key, const cJSON *v, int *out) {
    if (!cJSON_IsNumber(v))
        return mt_fail(MT_ERR_FORMAT, "%s: %s%s: expected an integer, found %s", path, ctx, key, json_type(v));
    double d = v->valuedouble;
    if (d != floor(d) || d < INT_MIN || d > INT_MAX)
        return mt_fail(MT_ERR_FORMAT, "%s: %s%s: %g is not an integer in int range", path, ctx, key, d);
    *out = (int)d;
    return MT_OK;
}

static mt_status get_int(const char *path, const char *ctx, const cJSON *o, const char *key, int required, int *out) {
    const cJSON *v = field(o, key);
    if (!v) return required ? missing(path, ctx, key) : MT_OK;
    return int_value(path, ctx, key, v, out);
}

static mt_status get_double(const char *path, const char *ctx, const cJSON *o, const char *key, int required,
                            double *out) {
    const cJSON *v = field(o, key);
    if (!v) return required ? missing(path, ctx, key) : MT_OK;
    if (!cJSON_IsNumber(v))
        return mt_fail(MT_ERR_FORMAT, "%s: %s%s: expected a number, found %s", path, ctx, key, json_type(v));
    *out = v->valuedouble;
    return MT_OK;
}

static mt_status get_bool(const char *path, const cJSON *o, const char *key, int *out) {
    const cJSON *v = field(o, key);
    if (!v) return MT_OK;
    if (!cJSON_IsBool(v))
        return mt_fail(MT_ERR_FORMAT, "%s: %s: expected true or false, found %s", path, key, json_type(v));
    *out = cJSON_IsTrue(v);
    return MT_OK;
}

static mt_status get_string(const char *path, const char *ctx, const cJSON *o, const char *key, const char **out) {
    const cJSON *v = field(o, key);
    if (!v) return MT_OK;
    if (!cJSON_IsString(v))
        return mt_fail(MT_ERR_FORMAT, "%s: %s%s: expected a string, found %s", path, ctx, key, json_type(v));
    *out = v->valuestring;
    return MT_OK;
}

// bos/eos ids: an int, a list of ints (the first is kept), or null.
static mt_status get_token_id(const char *path, const cJSON *o, const char *key, int *out) {
    const cJSON *v = field(o, key);
    *out = -1;
    if (!v) return MT_OK;
    if (cJSON_IsArray(v)) {
        for (const cJSON *e = v->child; e; e = e->next) {
            int id = -1;
            MT_TRY(int_value(path, "", key, e, &id));
            if (e == v->child) *out = id;
        }
        return MT_OK;
    }
    if (!cJSON_IsNumber(v))
        return mt_fail(MT_ERR_FORMAT, "%s: %s: expected an integer, a list of integers or null, found %s", path, key,
                       json_type(v));
    return int_value(path, "", key, v, out);
}

// ----------------------------------------------------------------------------
// parsing

// rope_scaling (or transformers v5's rope_parameters): none, "default" or "llama3".
static mt_status parse_rope(const char *path, const char *ctx, const cJSON *rs, mt_config *c) {
    if (!cJSON_IsObject(rs))
        return mt_fail(MT_ERR_FORMAT, "%s: %.*s: expected an object or null, found %s", path, (int)strlen(ctx) - 1,
                       ctx, json_type(rs));
    const char *type = NULL;
    MT_TRY(get_string(path, ctx, rs, "rope_type", &type));
    if (!type) MT_TRY(get_string(path, ctx, rs, "type", &type));
    if (!type) return mt_fail(MT_ERR_FORMAT, "%s: %srope_type: required field is missing", path, ctx);
    if (strcmp(type, "default") == 0) return MT_OK;
    if (strcmp(type, "llama3") != 0)
        return mt_fail(MT_ERR_UNSUPPORTED, "%s: %srope_type: \"%s\" is not supported (only \"llama3\" or none)", path,
                       ctx, type);
    c->rope_llama3 = 1;
    MT_TRY(get_double(path, ctx, rs, "factor", 1, &c->rope_factor));
    MT_TRY(get_double(path, ctx, rs, "low_freq_factor", 1, &c->rope_low_freq_factor));
    MT_TRY(get_double(path, ctx, rs, "high_freq_factor", 1, &c->rope_high_freq_factor));
    MT_TRY(get_int(path, ctx, rs, "original_max_position_embeddings", 1, &c->rope_original_max_pos));
    return MT_OK;
}

static mt_status parse_dtype(const char *path, const cJSON *root, mt_config *c) {
    const char *key = field(root, "torch_dtype") ? "torch_dtype" : "dtype";
    const char *s = NULL;
    MT_TRY(get_string(path, "", root, key, &s));
    c->torch_dtype = MT_F32; // transformers loads fp32 when nothing is declared
    if (!s) return MT_OK;
    if (strcmp(s, "bfloat16") == 0) c->torch_dtype = MT_BF16;
    else if (strcmp(s, "float32") == 0 || strcmp(s, "float") == 0) c->torch_dtype = MT_F32;
    // A float16 checkpoint is still a 16-bit model: its F16 tensors are widened on read
    // and it trains in bf16 (paper) or from an f32 copy (mixed, fp32); a save says which.
    else if (strcmp(s, "float16") == 0 || strcmp(s, "half") == 0) c->torch_dtype = MT_BF16;
    else
        return mt_fail(MT_ERR_UNSUPPORTED, "%s: %s: \"%s\" is not supported (bfloat16, float32 or float16)", path, key,
                       s);
    return MT_OK;
}

static mt_status parse_config(const char *path, const cJSON *root, mt_config *c) {
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(root)) return mt_fail(MT_ERR_FORMAT, "%s: top level is not a JSON object", path);

    const char *mt = NULL;
    MT_TRY(get_string(path, "", root, "model_type", &mt));
    if (!mt) return missing(path, "", "model_type");
    if (strcmp(mt, "llama") == 0) c->arch = MT_ARCH_LLAMA;
    else if (strcmp(mt, "qwen2") == 0) c->arch = MT_ARCH_QWEN2;
    else if (strcmp(mt, "qwen3") == 0) c->arch = MT_ARCH_QWEN3;
    else
        return mt_fail(MT_ERR_UNSUPPORTED, "%s: model_type: \"%s\" is not supported (llama, qwen2, qwen3)", path, mt);

    MT_TRY(get_int(path, "", root, "vocab_size", 1, &c->vocab_size));
    MT_TRY(get_int(path, "", root, "hidden_size", 1, &c->hidden_size));
    MT_TRY(get_int(path, "", root, "intermediate_size", 1, &c->intermediate_size));
    MT_TRY(get_int(path, "", root, "num_hidden_layers", 1, &c->num_layers));
    MT_TRY(get_int(path, "", root, "num_attention_heads", 1, &c->num_heads));
    c->num_kv_heads = c->num_heads; // Llama 1 has no GQA field
    MT_TRY(get_int(path, "", root, "num_key_value_heads", 0, &c->num_kv_heads));
    c->head_dim = 0;
    MT_TRY(get_int(path, "", root, "head_dim", 0, &c->head_dim));
    if (!field(root, "head_dim")) {
        if (c->num_heads > 0 && c->hidden_size > 0 && c->hidden_size % c->num_heads != 0)
            return mt_fail(MT_ERR_SHAPE, "%s: num_attention_heads: %d does not divide hidden_size (%d)", path,
                           c->num_heads, c->hidden_size);
        c->head_dim = c->num_heads > 0 ? c->hidden_size / c->num_heads : 0;
    }
    c->max_position_embeddings = c->arch == MT_ARCH_LLAMA ? 2048 : 32768;
    MT_TRY(get_int(path, "", root, "max_position_embeddings", 0, &c->max_position_embeddings));
    double eps = 1e-6;
    MT_TRY(get_double(path, "", root, "rms_norm_eps", 0, &eps));
    c->rms_norm_eps = (float)eps;

    const cJSON *rp = field(root, "rope_parameters"); // transformers >= 5 layout
    c->rope_theta = 10000.0;
    MT_TRY(get_double(path, "", root, "rope_theta", 0, &c->rope_theta));
    if (rp && cJSON_IsObject(rp)) MT_TRY(get_double(path, "rope_parameters.", rp, "rope_theta", 0, &c->rope_theta));
    const cJSON *rs = field(root, "rope_scaling");
    if (rs) MT_TRY(parse_rope(path, "rope_scaling.", rs, c));
    else if (rp) MT_TRY(parse_rope(path, "rope_parameters.", rp, c));

    MT_TRY(get_bool(path, root, "tie_word_embeddings", &c->tie_word_embeddings));
    MT_TRY(get_bool(path, root, "attention_bias", &c->attention_bias));
    if (c->arch == MT_ARCH_QWEN2) c->attention_bias = 1; // Qwen2 q/k/v always carry a bias
    c->qk_norm = c->arch == MT_ARCH_QWEN3;
    int mlp_bias = 0;
    MT_TRY(get_bool(path, root, "mlp_bias", &mlp_bias));
    if (mlp_bias) return mt_fail(MT_ERR_UNSUPPORTED, "%s: mlp_bias: true is not supported", path);
    int swa = 0; // Qwen sliding-window attention: not implemented by our attention kernels
    MT_TRY(get_bool(path, root, "use_sliding_window", &swa));
    if (swa) return mt_fail(MT_ERR_UNSUPPORTED, "%s: use_sliding_window: true is not supported", path);
    const char *act = NULL;
    MT_TRY(get_string(path, "", root, "hidden_act", &act));
    if (act && strcmp(act, "silu") != 0)
        return mt_fail(MT_ERR_UNSUPPORTED, "%s: hidden_act: \"%s\" is not supported (only silu)", path, act);
    MT_TRY(parse_dtype(path, root, c));
    MT_TRY(get_token_id(path, root, "bos_token_id", &c->bos_token_id));
    MT_TRY(get_token_id(path, root, "eos_token_id", &c->eos_token_id));
    return mt_config_validate(c, path);
}

mt_status mt_config_load(const char *path, mt_config *out) {
    if (!path || !out) return mt_fail(MT_ERR_ARG, "mt_config_load: NULL argument");
    char *text;
    size_t len;
    MT_TRY(mt_file_read_text(path, "an HF config.json", MT_CONFIG_MAX_BYTES, &text, &len));
    cJSON *root;
    mt_status s = mt_json_parse(path, text, len, &root);
    if (s != MT_OK) {
        free(text);
        return s;
    }
    mt_config c;
    s = parse_config(path, root, &c);
    cJSON_Delete(root);
    if (s != MT_OK) {
        free(text);
        return s;
    }
    c.source_json = text; // kept as written, for the save (mt_config_save)
    *out = c;
    return MT_OK;
}

void mt_config_release(mt_config *c) {
    if (!c) return;
    free(c->source_json);
    c->source_json = NULL;
}

// ----------------------------------------------------------------------------
// validation and parameter counts

static mt_status positive(const char *what, const char *key, double v) {
    if (v > 0 && isfinite(v)) return MT_OK;
    return mt_fail(MT_ERR_SHAPE, "%s: %s: must be > 0 (got %g)", what, key, v);
}

// The largest model whose byte counts stay exact: at most 18 host bytes per
// parameter (mixed precision) plus page padding must fit a signed 64-bit count.
#define MT_MAX_PARAMS (1LL << 58)

// a * b and a + b in 64 bits, or an error naming the config fields involved.
static mt_status mul(const char *what, const char *fields, long long a, long long b, long long *out) {
    if (__builtin_mul_overflow(a, b, out))
        return mt_fail(MT_ERR_SHAPE, "%s: %s: %lld x %lld overflows 64-bit sizes", what, fields, a, b);
    return MT_OK;
}
static mt_status add(const char *what, const char *fields, long long a, long long b, long long *out) {
    if (__builtin_add_overflow(a, b, out))
        return mt_fail(MT_ERR_SHAPE, "%s: %s: %lld + %lld overflows 64-bit sizes", what, fields, a, b);
    return MT_OK;
}

// mt_config_params_per_layer / _total with every product and sum checked, so
// they (and every byte count derived from them) can be computed unchecked.
static mt_status check_sizes(const mt_config *c, const char *what) {
    long long C = c->hidden_size, q = (long long)c->num_heads * c->head_dim,
              kv = (long long)c->num_kv_heads * c->head_dim;
    long long qc, kvc, fc, vc, layer = 2 * C, total;
    MT_TRY(mul(what, "num_attention_heads x head_dim x hidden_size", q, C, &qc));
    MT_TRY(mul(what, "num_key_value_heads x head_dim x hidden_size", kv, C, &kvc));
    MT_TRY(mul(what, "intermediate_size x hidden_size", c->intermediate_size, C, &fc));
    MT_TRY(mul(what, "vocab_size x hidden_size", c->vocab_size, C, &vc));
    MT_TRY(mul(what, "3 x intermediate_size x hidden_size (the MLP)", fc, 3, &fc));
    MT_TRY(mul(what, "2 x num_attention_heads x head_dim x hidden_size (q and o)", qc, 2, &qc));
    MT_TRY(mul(what, "2 x num_key_value_heads x head_dim x hidden_size (k and v)", kvc, 2, &kvc));
    const char *sum = "hidden_size, intermediate_size, heads x head_dim: one layer's parameters";
    MT_TRY(add(what, sum, layer, qc, &layer));
    MT_TRY(add(what, sum, layer, kvc, &layer));
    MT_TRY(add(what, sum, layer, fc, &layer));
    MT_TRY(add(what, sum, layer, q + 2 * kv + 2LL * c->head_dim, &layer)); // biases, q/k norms: each < 2^31
    MT_TRY(mul(what, "num_hidden_layers x the layer's parameters", layer, c->num_layers, &total));
    MT_TRY(mul(what, "vocab_size x hidden_size (embedding and head)", vc, c->tie_word_embeddings ? 1 : 2, &vc));
    MT_TRY(add(what, "vocab_size: the embedding's parameters", total, vc + C, &total));
    if (total > MT_MAX_PARAMS)
        return mt_fail(MT_ERR_SHAPE,
                       "%s: the sizes (hidden_size %d, intermediate_size %d, num_hidden_layers %d, "
                       "vocab_size %d) give %lld parameters, beyond the 2^58 whose byte counts fit 64 bits",
                       what, c->hidden_size, c->intermediate_size, c->num_layers, c->vocab_size, total);
    return MT_OK;
}

mt_status mt_config_validate(const mt_config *c, const char *what) {
    if (!what) what = "config";
    if (!c) return mt_fail(MT_ERR_ARG, "%s: NULL config", what);
    if (c->arch != MT_ARCH_LLAMA && c->arch != MT_ARCH_QWEN2 && c->arch != MT_ARCH_QWEN3)
        return mt_fail(MT_ERR_ARG, "%s: model_type: invalid architecture %d", what, (int)c->arch);
    MT_TRY(positive(what, "vocab_size", c->vocab_size));
    MT_TRY(positive(what, "hidden_size", c->hidden_size));
    MT_TRY(positive(what, "intermediate_size", c->intermediate_size));
    MT_TRY(positive(what, "num_hidden_layers", c->num_layers));
    MT_TRY(positive(what, "num_attention_heads", c->num_heads));
    MT_TRY(positive(what, "num_key_value_heads", c->num_kv_heads));
    MT_TRY(positive(what, "head_dim", c->head_dim));
    MT_TRY(positive(what, "max_position_embeddings", c->max_position_embeddings));
    MT_TRY(positive(what, "rms_norm_eps", c->rms_norm_eps));
    MT_TRY(positive(what, "rope_theta", c->rope_theta));
    if (c->num_heads % c->num_kv_heads != 0)
        return mt_fail(MT_ERR_SHAPE, "%s: num_key_value_heads: %d does not divide num_attention_heads (%d)", what,
                       c->num_kv_heads, c->num_heads);
    if (c->head_dim % 2 != 0)
        return mt_fail(MT_ERR_SHAPE, "%s: head_dim: %d is odd (RoPE rotates pairs of dimensions)", what, c->head_dim);
    // Kernels index rows of q/kv projections with int.
    if ((long long)c->num_heads * c->head_dim > INT_MAX)
        return mt_fail(MT_ERR_SHAPE, "%s: num_attention_heads x head_dim: %lld is too large", what,
                       (long long)c->num_heads * c->head_dim);
    if (c->rope_llama3) {
        MT_TRY(positive(what, "rope_scaling.factor", c->rope_factor));
        MT_TRY(positive(what, "rope_scaling.low_freq_factor", c->rope_low_freq_factor));
        MT_TRY(positive(what, "rope_scaling.original_max_position_embeddings", c->rope_original_max_pos));
        if (!(c->rope_high_freq_factor > c->rope_low_freq_factor) || !isfinite(c->rope_high_freq_factor))
            return mt_fail(MT_ERR_SHAPE, "%s: rope_scaling.high_freq_factor: %g must exceed low_freq_factor (%g)",
                           what, c->rope_high_freq_factor, c->rope_low_freq_factor);
    }
    if (c->torch_dtype != MT_F32 && c->torch_dtype != MT_BF16)
        return mt_fail(MT_ERR_ARG, "%s: torch_dtype: invalid value %d", what, (int)c->torch_dtype);
    return check_sizes(c, what);
}

// Every field that defines the model (and its token ids): a source config
// edited for a save must still describe exactly the model being saved.
static int same_model(const mt_config *a, const mt_config *b) {
    return a->arch == b->arch && a->vocab_size == b->vocab_size && a->hidden_size == b->hidden_size &&
           a->intermediate_size == b->intermediate_size && a->num_layers == b->num_layers &&
           a->num_heads == b->num_heads && a->num_kv_heads == b->num_kv_heads && a->head_dim == b->head_dim &&
           a->max_position_embeddings == b->max_position_embeddings && a->rms_norm_eps == b->rms_norm_eps &&
           a->rope_theta == b->rope_theta && a->tie_word_embeddings == b->tie_word_embeddings &&
           a->attention_bias == b->attention_bias && a->qk_norm == b->qk_norm && a->rope_llama3 == b->rope_llama3 &&
           (!a->rope_llama3 ||
            (a->rope_factor == b->rope_factor && a->rope_low_freq_factor == b->rope_low_freq_factor &&
             a->rope_high_freq_factor == b->rope_high_freq_factor &&
             a->rope_original_max_pos == b->rope_original_max_pos)) &&
           a->torch_dtype == b->torch_dtype && a->bos_token_id == b->bos_token_id && a->eos_token_id == b->eos_token_id;
}

long long mt_config_params_per_layer(const mt_config *c) {
    long long C = c->hidden_size, F = c->intermediate_size, HD = c->head_dim;
    long long q = (long long)c->num_heads * HD, kv = (long long)c->num_kv_heads * HD;
    long long n = 2 * C;                  // input_layernorm, post_attention_layernorm
    n += q * C + 2 * kv * C + C * q;      // q, k, v, o projections
    if (c->attention_bias) n += q + 2 * kv;
    if (c->qk_norm) n += 2 * HD;          // q_norm, k_norm (shared across heads)
    n += 3 * F * C;                       // gate, up, down
    return n;
}

long long mt_config_params_total(const mt_config *c) {
    long long VC = (long long)c->vocab_size * c->hidden_size;
    long long n = (long long)c->num_layers * mt_config_params_per_layer(c) + VC + c->hidden_size;
    if (!c->tie_word_embeddings) n += VC;
    return n;
}

// ----------------------------------------------------------------------------
// saving

// Shortest decimal that reads back to the same float / double, so "1e-05" stays "1e-05".
static cJSON *raw_float(float v) {
    char buf[48];
    for (int p = 6; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    return cJSON_CreateRaw(buf);
}

static cJSON *raw_double(double v) {
    char buf[48];
    for (int p = 15; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    // Keep it a float for Python readers ("8.0", not "8"): HF warns on an int rope factor.
    if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
    return cJSON_CreateRaw(buf);
}

static cJSON *token_id(int id) { return id >= 0 ? cJSON_CreateNumber(id) : cJSON_CreateNull(); }

static cJSON *config_json(const mt_config *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON *arch = cJSON_CreateArray();
    cJSON_AddItemToArray(arch, cJSON_CreateString(arch_class(c->arch)));
    cJSON_AddItemToObject(o, "architectures", arch);
    cJSON_AddStringToObject(o, "model_type", mt_arch_model_type(c->arch));
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(o, "hidden_size", c->hidden_size);
    cJSON_AddNumberToObject(o, "intermediate_size", c->intermediate_size);
    cJSON_AddNumberToObject(o, "num_hidden_layers", c->num_layers);
    cJSON_AddNumberToObject(o, "num_attention_heads", c->num_heads);
    cJSON_AddNumberToObject(o, "num_key_value_heads", c->num_kv_heads);
    cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
    cJSON_AddNumberToObject(o, "max_position_embeddings", c->max_position_embeddings);
    cJSON_AddItemToObject(o, "rms_norm_eps", raw_float(c->rms_norm_eps));
    cJSON_AddItemToObject(o, "rope_theta", raw_double(c->rope_theta));
    if (c->rope_llama3) {
        cJSON *rs = cJSON_CreateObject();
        cJSON_AddStringToObject(rs, "rope_type", "llama3");
        cJSON_AddItemToObject(rs, "factor", raw_double(c->rope_factor));
        cJSON_AddItemToObject(rs, "low_freq_factor", raw_double(c->rope_low_freq_factor));
        cJSON_AddItemToObject(rs, "high_freq_factor", raw_double(c->rope_high_freq_factor));
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings", c->rope_original_max_pos);
        cJSON_AddItemToObject(o, "rope_scaling", rs);
    } else {
        cJSON_AddNullToObject(o, "rope_scaling");
    }
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tie_word_embeddings);
    cJSON_AddBoolToObject(o, "attention_bias", c->attention_bias);
    cJSON_AddBoolToObject(o, "mlp_bias", 0);
    if (c->arch == MT_ARCH_QWEN2) cJSON_AddBoolToObject(o, "use_sliding_window", 0);
    cJSON_AddStringToObject(o, "hidden_act", "silu");
    cJSON_AddItemToObject(o, "initializer_range", raw_double(0.02));
    cJSON_AddBoolToObject(o, "use_cache", 0);
    cJSON_AddStringToObject(o, "torch_dtype", c->torch_dtype == MT_BF16 ? "bfloat16" : "float32");
    cJSON_AddItemToObject(o, "bos_token_id", token_id(c->bos_token_id));
    cJSON_AddItemToObject(o, "eos_token_id", token_id(c->eos_token_id));
    return o;
}

// The source text with the dtype fields set: torch_dtype (transformers 4) and/or
// dtype (transformers 5), whichever it has; torch_dtype added when it has neither.
// The result is parsed again and must describe the same model as c.
static mt_status edited_source(const mt_config *c, const char *path, char **out) {
    const char *value = c->torch_dtype == MT_BF16 ? "\"bfloat16\"" : "\"float32\"";
    size_t b, e;
    int has_torch = mt_json_top_value_span(c->source_json, "torch_dtype", &b, &e);
    int has_v5 = mt_json_top_value_span(c->source_json, "dtype", &b, &e);
    char *text = NULL, *next = NULL;
    MT_TRY(mt_json_set_top(c->source_json, has_v5 && !has_torch ? "dtype" : "torch_dtype", value, &text));
    if (has_torch && has_v5) {
        mt_status s = mt_json_set_top(text, "dtype", value, &next);
        free(text);
        MT_TRY(s);
        text = next;
    }
    cJSON *root;
    mt_status s = mt_json_parse(path, text, strlen(text), &root);
    mt_config back;
    if (s == MT_OK) {
        s = parse_config(path, root, &back);
        cJSON_Delete(root);
    }
    if (s == MT_OK && !same_model(c, &back))
        s = mt_fail(MT_ERR_ARG, "%s: the config read from its source no longer matches the model being saved", path);
    if (s != MT_OK) {
        free(text);
        return s;
    }
    *out = text;
    return MT_OK;
}

mt_status mt_config_save(const mt_config *c, const char *path) {
    if (!path) return mt_fail(MT_ERR_ARG, "mt_config_save: NULL path");
    MT_TRY(mt_config_validate(c, path));
    char *text = NULL;
    if (c->source_json) {
        MT_TRY(edited_source(c, path, &text));
    } else {
        cJSON *o = config_json(c);
        char *printed = o ? cJSON_Print(o) : NULL;
        cJSON_Delete(o);
        if (!printed) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
        text = strdup(printed);
        cJSON_free(printed);
        if (!text) return mt_fail(MT_ERR_MEMORY, "%s: out of memory", path);
    }
    size_t tlen = strlen(text);
    while (tlen > 0 && strchr(" \t\r\n", text[tlen - 1])) tlen--;
    text[tlen] = '\n'; // one final newline (a NUL or whitespace byte was there)
    mt_status s = mt_file_write_atomic(path, text, tlen + 1);
    free(text);
    return s;
}
