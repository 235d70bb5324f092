// test_config.c: HF config.json parsing for Llama 1/2/3(.1/.2), Qwen2.5 and Qwen3
// (real configs, every field checked), parameter counts against the published
// totals, save -> load roundtrips, and every bad config failing with one line that
// names the file and the field.
#define _POSIX_C_SOURCE 200809L // access under -std=c11

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/config.h"
#include "tests/test_util.h"

static int load_ok(const char *name, const char *text, mt_config *c) {
    mt_status s = mt_config_load(mt_test_write_tmp(name, text), c);
    CHECK(s == MT_OK, "%s: %s", name, mt_last_error());
    return s == MT_OK;
}

// ----------------------------------------------------------------------------
// real configs (as published on the HF hub)

static const char *LLAMA3_8B =
    "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"attention_bias\": false,\n"
    "  \"attention_dropout\": 0.0,\n  \"bos_token_id\": 128000,\n  \"eos_token_id\": 128001,\n"
    "  \"hidden_act\": \"silu\",\n  \"hidden_size\": 4096,\n  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 14336,\n  \"max_position_embeddings\": 8192,\n  \"model_type\": \"llama\",\n"
    "  \"num_attention_heads\": 32,\n  \"num_hidden_layers\": 32,\n  \"num_key_value_heads\": 8,\n"
    "  \"pretraining_tp\": 1,\n  \"rms_norm_eps\": 1e-05,\n  \"rope_scaling\": null,\n"
    "  \"rope_theta\": 500000.0,\n  \"tie_word_embeddings\": false,\n  \"torch_dtype\": \"bfloat16\",\n"
    "  \"transformers_version\": \"4.40.0.dev0\",\n  \"use_cache\": true,\n  \"vocab_size\": 128256\n}\n";

static const char *LLAMA31_8B =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
    " \"bos_token_id\": 128000, \"eos_token_id\": [128001, 128008, 128009], \"hidden_act\": \"silu\","
    " \"hidden_size\": 4096, \"initializer_range\": 0.02, \"intermediate_size\": 14336,"
    " \"max_position_embeddings\": 131072, \"mlp_bias\": false, \"model_type\": \"llama\","
    " \"num_attention_heads\": 32, \"num_hidden_layers\": 32, \"num_key_value_heads\": 8,"
    " \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, \"rope_scaling\": {\"factor\": 8.0,"
    " \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192,"
    " \"rope_type\": \"llama3\"}, \"rope_theta\": 500000.0, \"tie_word_embeddings\": false,"
    " \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.43.0.dev0\", \"use_cache\": true,"
    " \"vocab_size\": 128256}";

// Llama 3.2 1B, with the older "type" spelling of rope_type.
static const char *LLAMA32_1B =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"bos_token_id\": 128000, \"eos_token_id\": 128001,"
    " \"head_dim\": 64, \"hidden_act\": \"silu\", \"hidden_size\": 2048, \"intermediate_size\": 8192,"
    " \"max_position_embeddings\": 131072, \"mlp_bias\": false, \"model_type\": \"llama\","
    " \"num_attention_heads\": 32, \"num_hidden_layers\": 16, \"num_key_value_heads\": 8,"
    " \"rms_norm_eps\": 1e-05, \"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0,"
    " \"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192, \"type\": \"llama3\"},"
    " \"rope_theta\": 500000.0, \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
    " \"vocab_size\": 128256}";

static const char *LLAMA2_7B =
    "{\"_name_or_path\": \"meta-llama/Llama-2-7b-hf\", \"architectures\": [\"LlamaForCausalLM\"],"
    " \"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\", \"hidden_size\": 4096,"
    " \"initializer_range\": 0.02, \"intermediate_size\": 11008, \"max_position_embeddings\": 4096,"
    " \"model_type\": \"llama\", \"num_attention_heads\": 32, \"num_hidden_layers\": 32,"
    " \"num_key_value_heads\": 32, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null,"
    " \"tie_word_embeddings\": false, \"torch_dtype\": \"float16\", \"transformers_version\": \"4.31.0.dev0\","
    " \"use_cache\": true, \"vocab_size\": 32000}";

// Llama 1: no num_key_value_heads, no rope_theta, no torch_dtype, no bos/eos.
static const char *LLAMA1_7B =
    "{\"architectures\": [\"LLaMAForCausalLM\"], \"hidden_act\": \"silu\", \"hidden_size\": 4096,"
    " \"intermediate_size\": 11008, \"initializer_range\": 0.02, \"max_sequence_length\": 2048,"
    " \"model_type\": \"llama\", \"num_attention_heads\": 32, \"num_hidden_layers\": 32,"
    " \"pad_token_id\": -1, \"rms_norm_eps\": 1e-06, \"use_cache\": true, \"vocab_size\": 32000}";

static const char *QWEN25_7B =
    "{\n  \"architectures\": [\"Qwen2ForCausalLM\"],\n  \"attention_dropout\": 0.0,\n"
    "  \"bos_token_id\": 151643,\n  \"eos_token_id\": 151643,\n  \"hidden_act\": \"silu\",\n"
    "  \"hidden_size\": 3584,\n  \"initializer_range\": 0.02,\n  \"intermediate_size\": 18944,\n"
    "  \"max_position_embeddings\": 131072,\n  \"max_window_layers\": 28,\n  \"model_type\": \"qwen2\",\n"
    "  \"num_attention_heads\": 28,\n  \"num_hidden_layers\": 28,\n  \"num_key_value_heads\": 4,\n"
    "  \"rms_norm_eps\": 1e-06,\n  \"rope_theta\": 1000000.0,\n  \"sliding_window\": 131072,\n"
    "  \"tie_word_embeddings\": false,\n  \"torch_dtype\": \"bfloat16\",\n"
    "  \"transformers_version\": \"4.43.1\",\n  \"use_cache\": true,\n  \"use_sliding_window\": false,\n"
    "  \"vocab_size\": 152064\n}\n";

static const char *QWEN3_06B =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
    " \"bos_token_id\": 151643, \"eos_token_id\": 151645, \"head_dim\": 128, \"hidden_act\": \"silu\","
    " \"hidden_size\": 1024, \"initializer_range\": 0.02, \"intermediate_size\": 3072,"
    " \"max_position_embeddings\": 40960, \"max_window_layers\": 28, \"model_type\": \"qwen3\","
    " \"num_attention_heads\": 16, \"num_hidden_layers\": 28, \"num_key_value_heads\": 8,"
    " \"rms_norm_eps\": 1e-06, \"rope_scaling\": null, \"rope_theta\": 1000000, \"sliding_window\": null,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.51.0\","
    " \"use_cache\": true, \"use_sliding_window\": false, \"vocab_size\": 151936}";

// transformers >= 5 spelling: "dtype" and "rope_parameters".
static const char *QWEN3_V5 =
    "{\"model_type\": \"qwen3\", \"vocab_size\": 1000, \"hidden_size\": 64, \"intermediate_size\": 96,"
    " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 32,"
    " \"attention_bias\": true, \"dtype\": \"float32\", \"bos_token_id\": null,"
    " \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 5000.0}}";

static void test_llama(void) {
    mt_config c;
    if (load_ok("llama3_8b.json", LLAMA3_8B, &c)) {
        CHECK(c.arch == MT_ARCH_LLAMA, "arch");
        CHECK(c.vocab_size == 128256 && c.hidden_size == 4096 && c.intermediate_size == 14336, "sizes");
        CHECK(c.num_layers == 32 && c.num_heads == 32 && c.num_kv_heads == 8 && c.head_dim == 128, "heads");
        CHECK(c.max_position_embeddings == 8192, "max pos");
        CHECK(c.rms_norm_eps == 1e-5f && c.rope_theta == 500000.0, "eps %g theta %g", c.rms_norm_eps, c.rope_theta);
        CHECK(!c.tie_word_embeddings && !c.attention_bias && !c.qk_norm && !c.rope_llama3, "flags");
        CHECK(c.torch_dtype == MT_BF16 && c.bos_token_id == 128000 && c.eos_token_id == 128001, "dtype/tokens");
        CHECK(mt_config_params_total(&c) == 8030261248LL, "Llama-3-8B params %lld", mt_config_params_total(&c));
        CHECK(mt_config_params_per_layer(&c) == 218112000LL, "per layer %lld", mt_config_params_per_layer(&c));
    }
    if (load_ok("llama31_8b.json", LLAMA31_8B, &c)) {
        CHECK(c.rope_llama3 && c.rope_factor == 8.0 && c.rope_low_freq_factor == 1.0 &&
                  c.rope_high_freq_factor == 4.0 && c.rope_original_max_pos == 8192,
              "llama3 rope scaling");
        CHECK(c.max_position_embeddings == 131072 && c.eos_token_id == 128001, "3.1 max pos / eos list");
        CHECK(mt_config_params_total(&c) == 8030261248LL, "Llama-3.1-8B params");
    }
    if (load_ok("llama32_1b.json", LLAMA32_1B, &c)) {
        CHECK(c.rope_llama3 && c.rope_factor == 32.0, "rope \"type\" spelling");
        CHECK(c.tie_word_embeddings && c.head_dim == 64 && c.num_layers == 16, "3.2 fields");
        // Llama-3.2-1B: 1,235,814,400 parameters (tied head counted once).
        CHECK(mt_config_params_total(&c) == 1235814400LL, "Llama-3.2-1B params %lld", mt_config_params_total(&c));
    }
    if (load_ok("llama2_7b.json", LLAMA2_7B, &c)) {
        CHECK(c.rope_theta == 10000.0 && c.num_kv_heads == 32 && c.max_position_embeddings == 4096, "llama2 defaults");
        CHECK(c.torch_dtype == MT_BF16, "float16 is trained as bf16");
        CHECK(c.bos_token_id == 1 && c.eos_token_id == 2 && c.vocab_size == 32000, "llama2 tokens");
        CHECK(mt_config_params_total(&c) == 6738415616LL, "Llama-2-7B params %lld", mt_config_params_total(&c));
    }
    if (load_ok("llama1_7b.json", LLAMA1_7B, &c)) {
        CHECK(c.num_kv_heads == 32 && c.head_dim == 128, "kv heads default to heads");
        CHECK(c.max_position_embeddings == 2048 && c.rms_norm_eps == 1e-6f, "llama1 defaults");
        CHECK(c.torch_dtype == MT_F32 && c.bos_token_id == -1 && c.eos_token_id == -1, "absent dtype / tokens");
    }
}

static void test_qwen(void) {
    mt_config c;
    if (load_ok("qwen25_7b.json", QWEN25_7B, &c)) {
        CHECK(c.arch == MT_ARCH_QWEN2 && c.attention_bias == 1 && c.qk_norm == 0, "qwen2 bias");
        CHECK(c.vocab_size == 152064 && c.hidden_size == 3584 && c.intermediate_size == 18944, "sizes");
        CHECK(c.num_layers == 28 && c.num_heads == 28 && c.num_kv_heads == 4 && c.head_dim == 128, "heads");
        CHECK(c.rope_theta == 1e6 && c.rms_norm_eps == 1e-6f && c.max_position_embeddings == 131072, "rope/eps");
        CHECK(!c.tie_word_embeddings && c.bos_token_id == 151643 && c.eos_token_id == 151643, "tie/tokens");
        CHECK(mt_config_params_total(&c) == 7615616512LL, "Qwen2.5-7B params %lld", mt_config_params_total(&c));
    }
    if (load_ok("qwen3_06b.json", QWEN3_06B, &c)) {
        CHECK(c.arch == MT_ARCH_QWEN3 && c.qk_norm == 1 && c.attention_bias == 0, "qwen3 flags");
        CHECK(c.head_dim == 128 && c.hidden_size == 1024 && c.num_heads == 16, "explicit head_dim != C/NH");
        CHECK(c.tie_word_embeddings && c.rope_theta == 1e6 && c.max_position_embeddings == 40960, "qwen3 fields");
        CHECK(c.eos_token_id == 151645 && c.torch_dtype == MT_BF16, "qwen3 tokens/dtype");
        // Qwen3-0.6B: 596,049,920 parameters (0.44B non-embedding, tied).
        CHECK(mt_config_params_total(&c) == 596049920LL, "Qwen3-0.6B params %lld", mt_config_params_total(&c));
    }
    if (load_ok("qwen3_v5.json", QWEN3_V5, &c)) {
        CHECK(c.attention_bias == 1 && c.rope_theta == 5000.0 && !c.rope_llama3, "v5 rope_parameters");
        CHECK(c.torch_dtype == MT_F32 && c.bos_token_id == -1, "v5 dtype / null bos");
        CHECK(c.max_position_embeddings == 32768 && c.rms_norm_eps == 1e-6f, "qwen defaults");
        // per layer: 2*64 + q 128*64 + kv 2*64*64 + o 64*128 + bias 128+2*64 + qk 64 + mlp 3*96*64
        CHECK(mt_config_params_per_layer(&c) == 128 + 8192 + 8192 + 8192 + 256 + 64 + 18432, "per layer %lld",
              mt_config_params_per_layer(&c));
    }
}

// ----------------------------------------------------------------------------
// save -> load

static int same_config(const mt_config *a, const mt_config *b) {
    return a->arch == b->arch && a->vocab_size == b->vocab_size && a->hidden_size == b->hidden_size &&
           a->intermediate_size == b->intermediate_size && a->num_layers == b->num_layers &&
           a->num_heads == b->num_heads && a->num_kv_heads == b->num_kv_heads && a->head_dim == b->head_dim &&
           a->max_position_embeddings == b->max_position_embeddings && a->rms_norm_eps == b->rms_norm_eps &&
           a->rope_theta == b->rope_theta && a->tie_word_embeddings == b->tie_word_embeddings &&
           a->attention_bias == b->attention_bias && a->qk_norm == b->qk_norm && a->rope_llama3 == b->rope_llama3 &&
           a->rope_factor == b->rope_factor && a->rope_low_freq_factor == b->rope_low_freq_factor &&
           a->rope_high_freq_factor == b->rope_high_freq_factor &&
           a->rope_original_max_pos == b->rope_original_max_pos && a->torch_dtype == b->torch_dtype &&
           a->bos_token_id == b->bos_token_id && a->eos_token_id == b->eos_token_id;
}

static void test_roundtrip(void) {
    const char *texts[] = {LLAMA3_8B, LLAMA31_8B, LLAMA32_1B, LLAMA2_7B, LLAMA1_7B, QWEN25_7B, QWEN3_06B, QWEN3_V5};
    for (int i = 0; i < (int)(sizeof texts / sizeof texts[0]); i++) {
        char in[32], out[32];
        snprintf(in, sizeof in, "rt_in_%d.json", i);
        snprintf(out, sizeof out, "rt_out_%d.json", i);
        mt_config a, b;
        if (!load_ok(in, texts[i], &a)) continue;
        const char *p = mt_test_path(out);
        CHECK(mt_config_save(&a, p) == MT_OK, "save %d: %s", i, mt_last_error());
        char tmp[600];
        snprintf(tmp, sizeof tmp, "%s.tmp", p);
        CHECK(access(tmp, F_OK) != 0, "tmp left behind");
        CHECK(mt_config_load(p, &b) == MT_OK, "reload %d: %s", i, mt_last_error());
        CHECK(same_config(&a, &b), "roundtrip %d differs", i);
        CHECK(mt_config_params_total(&a) == mt_config_params_total(&b), "params after roundtrip");
    }
    // A config built in code (no source text) is saved with what transformers needs to pick the class.
    mt_config c;
    int loaded = load_ok("rt_q3.json", QWEN3_06B, &c);
    mt_config built = c;
    built.source_json = NULL;
    if (loaded && mt_config_save(&built, mt_test_path("saved_q3.json")) == MT_OK) {
        FILE *f = fopen(mt_test_path("saved_q3.json"), "rb");
        char buf[4096] = {0};
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        CHECK(n > 0 && strstr(buf, "\"Qwen3ForCausalLM\"") && strstr(buf, "\"model_type\":\t\"qwen3\"") &&
                  strstr(buf, "\"head_dim\":\t128") && strstr(buf, "\"rms_norm_eps\":\t1e-06") &&
                  strstr(buf, "\"torch_dtype\":\t\"bfloat16\"") && strstr(buf, "\"hidden_act\":\t\"silu\""),
              "saved json content:\n%s", buf);
    }
    // Saving refuses an invalid config and an unwritable path, leaving nothing behind.
    c = built;
    c.num_kv_heads = 3;
    CHECK(mt_config_save(&c, mt_test_path("invalid.json")) == MT_ERR_SHAPE &&
              access(mt_test_path("invalid.json"), F_OK) != 0,
          "save invalid: %s", mt_last_error());
    c.num_kv_heads = 8;
    const char *bad = "/proc/nonexistent/config.json";
    CHECK(mt_config_save(&c, bad) == MT_ERR_IO && strstr(mt_last_error(), bad), "save unwritable: %s",
          mt_last_error());
    CHECK(access("/proc/nonexistent/config.json.tmp", F_OK) != 0, "no tmp for unwritable");
}

// ----------------------------------------------------------------------------
// a save writes the source config.json back: only the dtype field changes

// `text` with the first occurrence of `from` replaced by `to`, and one final newline.
static char *replaced(const char *text, const char *from, const char *to) {
    static char buf[8192];
    const char *at = from ? strstr(text, from) : NULL;
    if (!at) snprintf(buf, sizeof buf, "%s", text);
    else snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    size_t n = strlen(buf);
    while (n > 0 && buf[n - 1] == '\n') buf[--n] = 0;
    snprintf(buf + n, sizeof buf - n, "\n");
    return buf;
}

static void expect_saved(const char *name, const char *text, mt_dtype dt, const char *from, const char *to) {
    mt_config c;
    if (!load_ok(name, text, &c)) return;
    c.torch_dtype = dt;
    const char *out = mt_test_path("passthrough_out.json");
    CHECK(mt_config_save(&c, out) == MT_OK, "%s: save: %s", name, mt_last_error());
    char *got = mt_test_read_text(out);
    const char *want = replaced(text, from, to);
    CHECK(got && !strcmp(got, want), "%s: saved text differs\n--- got\n%s--- want\n%s", name, got ? got : "(none)",
          want);
    free(got);
    mt_config_release(&c);
}

static void test_passthrough(void) {
    // Unchanged dtype: byte for byte the source (eos list, 500000.0, 8.0 and fields we never read).
    expect_saved("pt_31.json", LLAMA31_8B, MT_BF16, NULL, NULL);
    expect_saved("pt_q25.json", QWEN25_7B, MT_BF16, NULL, NULL);
    // Only the dtype's value changes: a paper-precision save of an F16 model, an fp32 save of a bf16 one.
    expect_saved("pt_l2.json", LLAMA2_7B, MT_BF16, "\"torch_dtype\": \"float16\"", "\"torch_dtype\": \"bfloat16\"");
    expect_saved("pt_l3.json", LLAMA3_8B, MT_F32, "\"torch_dtype\": \"bfloat16\"", "\"torch_dtype\": \"float32\"");
    // transformers 5's "dtype" is the field set (no torch_dtype added beside it).
    expect_saved("pt_v5.json", QWEN3_V5, MT_BF16, "\"dtype\": \"float32\"", "\"dtype\": \"bfloat16\"");
    // No dtype in the source: torch_dtype is added as the last field.
    expect_saved("pt_l1.json", LLAMA1_7B, MT_F32, "\"vocab_size\": 32000}",
                 "\"vocab_size\": 32000,\n  \"torch_dtype\": \"float32\"\n}");
    // A nested "dtype" or "torch_dtype" is not the top-level one.
    const char *nested = "{\"model_type\": \"llama\", \"vocab_size\": 256, \"hidden_size\": 64,"
                         " \"intermediate_size\": 128, \"num_hidden_layers\": 2, \"num_attention_heads\": 4,"
                         " \"quantization_config\": {\"torch_dtype\": \"float16\", \"s\": \"}\\\"{\"},"
                         " \"torch_dtype\": \"float32\"}";
    expect_saved("pt_nested.json", nested, MT_BF16, "\"torch_dtype\": \"float32\"", "\"torch_dtype\": \"bfloat16\"");
    // A source that no longer describes the model is refused, and nothing is written.
    mt_config c;
    if (load_ok("pt_bad.json", LLAMA3_8B, &c)) {
        c.num_layers = 2;
        const char *out = mt_test_path("pt_bad_out.json");
        CHECK(mt_config_save(&c, out) != MT_OK && strstr(mt_last_error(), "no longer matches") &&
                  access(out, F_OK) != 0,
              "edited config with a stale source: %s", mt_last_error());
        mt_config_release(&c);
        CHECK(c.source_json == NULL, "release clears the source");
    }
}

// ----------------------------------------------------------------------------
// bad configs: a small valid llama config with one field replaced or removed

static const char *BASE_KEYS[] = {"model_type", "vocab_size", "hidden_size", "intermediate_size",
                                  "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                  "rms_norm_eps", "max_position_embeddings", "tie_word_embeddings"};
static const char *BASE_VALS[] = {"\"llama\"", "256", "64", "128", "2", "4", "2", "1e-5", "512", "false"};
#define NBASE ((int)(sizeof BASE_KEYS / sizeof BASE_KEYS[0]))

// JSON of the base config with `key` set to raw JSON `val` (NULL removes it; a new key is appended).
static void make_variant(char *buf, size_t n, const char *key, const char *val) {
    size_t k = (size_t)snprintf(buf, n, "{");
    int found = 0, first = 1;
    for (int i = 0; i < NBASE; i++) {
        const char *v = BASE_VALS[i];
        if (key && strcmp(key, BASE_KEYS[i]) == 0) {
            found = 1;
            if (!val) continue;
            v = val;
        }
        k += (size_t)snprintf(buf + k, n - k, "%s\"%s\": %s", first ? "" : ", ", BASE_KEYS[i], v);
        first = 0;
    }
    if (key && !found && val) k += (size_t)snprintf(buf + k, n - k, ", \"%s\": %s", key, val);
    snprintf(buf + k, n - k, "}\n");
}

static int nbad;

static void expect_fail_text(const char *text, const char *needle, const char *what) {
    char name[64];
    snprintf(name, sizeof name, "bad_%02d.json", nbad++);
    const char *path = mt_test_write_tmp(name, text);
    mt_config c;
    mt_status s = mt_config_load(path, &c);
    const char *e = mt_last_error();
    CHECK(s != MT_OK, "%s: should fail", what);
    CHECK(strstr(e, path) != NULL, "%s: error should name %s: %s", what, path, e);
    CHECK(!needle || strstr(e, needle), "%s: error should mention '%s': %s", what, needle, e);
    CHECK(strchr(e, '\n') == NULL, "%s: error should be one line: %s", what, e);
    if (getenv("MT_TEST_VERBOSE")) fprintf(stderr, "  %-36s -> %s\n", what, e);
}

static void expect_fail(const char *key, const char *val, const char *needle, const char *what) {
    char buf[2048];
    make_variant(buf, sizeof buf, key, val);
    expect_fail_text(buf, needle, what);
}

static void test_bad(void) {
    char buf[2048];
    mt_config c;
    make_variant(buf, sizeof buf, NULL, NULL);
    CHECK(load_ok("base.json", buf, &c), "base variant must load");

    const char *missing = mt_test_path("no_such_config.json");
    CHECK(mt_config_load(missing, &c) == MT_ERR_IO && strstr(mt_last_error(), missing), "missing file: %s",
          mt_last_error());
    CHECK(mt_config_load(mt_test_tmpdir(), &c) != MT_OK && strstr(mt_last_error(), mt_test_tmpdir()), "directory: %s",
          mt_last_error());
    expect_fail_text("{\"model_type\": \"llama\",\n \"vocab_size\": 256,\n", "line", "malformed JSON");
    expect_fail_text("", NULL, "empty file");
    expect_fail_text("[1, 2]", "object", "top-level array");
    expect_fail_text("{\"model_type\": \"llama\"} trailing", "after the JSON", "trailing garbage");

    for (int i = 0; i < 6; i++) expect_fail(BASE_KEYS[i], NULL, BASE_KEYS[i], "missing required field");
    expect_fail("vocab_size", "null", "vocab_size", "required field null");

    expect_fail("hidden_size", "\"64\"", "hidden_size", "string size");
    expect_fail("num_hidden_layers", "2.5", "num_hidden_layers", "fractional size");
    expect_fail("vocab_size", "1e12", "vocab_size", "size beyond int");
    expect_fail("num_key_value_heads", "[2]", "num_key_value_heads", "array size");
    expect_fail("tie_word_embeddings", "\"yes\"", "tie_word_embeddings", "string bool");
    expect_fail("attention_bias", "1", "attention_bias", "number bool");
    expect_fail("rms_norm_eps", "\"1e-5\"", "rms_norm_eps", "string eps");
    expect_fail("rope_theta", "true", "rope_theta", "bool theta");
    expect_fail("model_type", "3", "model_type", "numeric model_type");
    expect_fail("bos_token_id", "\"1\"", "bos_token_id", "string bos");
    expect_fail("eos_token_id", "[1, \"x\"]", "eos_token_id", "bad eos list");
    expect_fail("torch_dtype", "16", "torch_dtype", "numeric dtype");
    expect_fail("torch_dtype", "\"int8\"", "int8", "unsupported dtype");
    expect_fail("rope_scaling", "\"llama3\"", "rope_scaling", "rope_scaling string");

    expect_fail("num_attention_heads", "7", "num_attention_heads", "heads not dividing hidden");
    expect_fail("num_key_value_heads", "3", "num_key_value_heads", "kv heads not dividing heads");
    expect_fail("vocab_size", "0", "vocab_size", "zero vocab");
    expect_fail("hidden_size", "-64", "hidden_size", "negative hidden");
    expect_fail("intermediate_size", "0", "intermediate_size", "zero intermediate");
    expect_fail("num_hidden_layers", "-1", "num_hidden_layers", "negative layers");
    expect_fail("num_attention_heads", "0", "num_attention_heads", "zero heads");
    expect_fail("num_key_value_heads", "0", "num_key_value_heads", "zero kv heads");
    expect_fail("head_dim", "0", "head_dim", "zero head_dim");
    expect_fail("head_dim", "15", "head_dim", "odd head_dim");
    expect_fail("max_position_embeddings", "0", "max_position_embeddings", "zero max pos");
    expect_fail("rms_norm_eps", "0", "rms_norm_eps", "zero eps");
    expect_fail("rope_theta", "-1", "rope_theta", "negative theta");

    expect_fail("model_type", "\"mistral\"", "mistral", "unknown model_type");
    expect_fail("mlp_bias", "true", "mlp_bias", "mlp_bias true");
    expect_fail("hidden_act", "\"gelu\"", "hidden_act", "gelu");
    expect_fail("use_sliding_window", "true", "use_sliding_window", "sliding window");
    expect_fail("rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4.0}", "yarn", "yarn rope");
    expect_fail("rope_scaling", "{\"type\": \"linear\", \"factor\": 2.0}", "linear", "linear rope");
    expect_fail("rope_scaling", "{\"factor\": 2.0}", "rope_type", "rope_scaling without type");
    expect_fail("rope_scaling",
                "{\"rope_type\": \"llama3\", \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0,"
                " \"original_max_position_embeddings\": 8192}",
                "rope_scaling.factor", "llama3 without factor");
    expect_fail("rope_scaling",
                "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 4.0, \"high_freq_factor\": 1.0,"
                " \"original_max_position_embeddings\": 8192}",
                "high_freq_factor", "llama3 high <= low");

    // Fields that may be null or absent.
    make_variant(buf, sizeof buf, "rope_scaling", "null");
    CHECK(load_ok("null_rope.json", buf, &c) && !c.rope_llama3, "null rope_scaling");
    make_variant(buf, sizeof buf, "num_key_value_heads", "null");
    CHECK(load_ok("null_kv.json", buf, &c) && c.num_kv_heads == 4, "null kv heads -> heads");
    make_variant(buf, sizeof buf, "eos_token_id", "[]");
    CHECK(load_ok("empty_eos.json", buf, &c) && c.eos_token_id == -1, "empty eos list");
    make_variant(buf, sizeof buf, "head_dim", "32");
    CHECK(load_ok("explicit_hd.json", buf, &c) && c.head_dim == 32, "explicit head_dim on llama");

    // mt_config_validate on a struct built in code.
    make_variant(buf, sizeof buf, NULL, NULL);
    load_ok("base2.json", buf, &c);
    c.num_kv_heads = 0;
    CHECK(mt_config_validate(&c, "cli --config") == MT_ERR_SHAPE && strstr(mt_last_error(), "cli --config") &&
              strstr(mt_last_error(), "num_key_value_heads"),
          "validate: %s", mt_last_error());
}

int main(void) {
    mt_test_tmpdir_make("mt_cfg");
    test_llama();
    test_qwen();
    test_roundtrip();
    test_passthrough();
    test_bad();
    return mt_test_finish("test_config");
}
