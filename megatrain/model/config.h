// config.h: the model hyper-parameters, read from (and written to) an HF config.json.
// Supported: Llama 1/2/3 (incl. rope_scaling type "llama3"), Qwen2/2.5 (q/k/v bias),
// Qwen3 (explicit head_dim, q_norm/k_norm). Tied or untied embeddings.
#ifndef MT_CONFIG_H
#define MT_CONFIG_H

#include "core/dtype.h"
#include "core/status.h"

typedef enum { MT_ARCH_LLAMA = 0, MT_ARCH_QWEN2 = 1, MT_ARCH_QWEN3 = 2 } mt_arch;

typedef struct {
    mt_arch arch;
    int vocab_size;        // V
    int hidden_size;       // C
    int intermediate_size; // F
    int num_layers;        // L
    int num_heads;         // NH
    int num_kv_heads;      // NKV (divides NH)
    int head_dim;          // HD (config "head_dim", else C / NH)
    int max_position_embeddings;
    float rms_norm_eps;
    double rope_theta;
    int tie_word_embeddings; // lm_head shares embed_tokens
    int attention_bias;      // q/k/v projections carry a bias (Qwen2; Llama/Qwen3 "attention_bias")
    int qk_norm;             // per-head RMSNorm of q and k before RoPE (Qwen3)
    // rope_scaling {"rope_type": "llama3", ...}; rope_llama3 = 0 means none
    int rope_llama3;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max_pos;
    mt_dtype torch_dtype;    // as declared in config.json (bfloat16 or float32)
    int bos_token_id, eos_token_id; // -1 when absent (the first of a list)
    // The text of the config.json this was loaded from (NULL for a config built in
    // code). A save writes it back with only the fields megatrain owns changed, so
    // eos_token_id lists and every field megatrain does not read survive. Owned by
    // the config mt_config_load filled (mt_config_release frees it); copies borrow it.
    char *source_json;
} mt_config;

// Parses an HF config.json. Errors name the file and the field:
//   "cfg/config.json: num_attention_heads (7) does not divide hidden_size (64)".
mt_status mt_config_load(const char *path, mt_config *out);
// Frees source_json (of the config mt_config_load filled, not of a copy).
void mt_config_release(mt_config *c);
// Checks internal consistency (positive sizes, head divisibility). `what` names the source.
mt_status mt_config_validate(const mt_config *c, const char *what);
// Writes an HF-compatible config.json via temp + rename: the source config.json's
// text with torch_dtype (or transformers 5's dtype) set to c->torch_dtype, every
// other byte as it was; without a source, one built from the fields (model_type,
// architectures, ...).
mt_status mt_config_save(const mt_config *c, const char *path);

// Parameter counts (all parameters, embedding and head included; tied head counted once).
long long mt_config_params_per_layer(const mt_config *c);
long long mt_config_params_total(const mt_config *c);
const char *mt_arch_model_type(mt_arch a); // "llama", "qwen2", "qwen3"

#endif
