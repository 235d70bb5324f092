// layout.c: the unit layouts. Groups that one kernel reads as one matrix
// (QKV weights, QKV biases, gate+up) are contiguous; groups start on a
// 64-element boundary so every device view is 128-byte aligned.
#include "model/layout.h"

#include <stdio.h>
#include <string.h>

#define MT_GROUP_ALIGN 64

static size_t align_up(size_t x) { return (x + MT_GROUP_ALIGN - 1) / MT_GROUP_ALIGN * MT_GROUP_ALIGN; }

// Appends a view at *cursor; group_start aligns the cursor first.
static void add(mt_unit_layout *u, mt_tensor_id id, const char *suffix, int64_t d0, int64_t d1, size_t *cursor,
                int group_start) {
    mt_tensor_slot *v = &u->t[id];
    if (group_start) *cursor = align_up(*cursor);
    v->present = 1;
    v->suffix = suffix;
    v->ndim = d1 > 0 ? 2 : 1;
    v->shape[0] = d0;
    v->shape[1] = d1 > 0 ? d1 : 0;
    v->numel = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    v->offset = *cursor;
    *cursor += v->numel;
}

void mt_layout_build(const mt_config *c, mt_unit_layout *embed, mt_unit_layout *layer, mt_unit_layout *head) {
    const int64_t C = c->hidden_size, F = c->intermediate_size, V = c->vocab_size;
    const int64_t QD = (int64_t)c->num_heads * c->head_dim, KD = (int64_t)c->num_kv_heads * c->head_dim;
    size_t cur;

    memset(embed, 0, sizeof *embed);
    embed->kind = MT_UNIT_EMBED;
    cur = 0;
    add(embed, MT_T_EMBED, "model.embed_tokens.weight", V, C, &cur, 1);
    embed->numel = align_up(cur);

    memset(layer, 0, sizeof *layer);
    layer->kind = MT_UNIT_LAYER;
    cur = 0;
    add(layer, MT_T_LN1, "input_layernorm.weight", C, 0, &cur, 1);
    add(layer, MT_T_Q, "self_attn.q_proj.weight", QD, C, &cur, 1);
    add(layer, MT_T_K, "self_attn.k_proj.weight", KD, C, &cur, 0);
    add(layer, MT_T_V, "self_attn.v_proj.weight", KD, C, &cur, 0);
    if (c->attention_bias) {
        add(layer, MT_T_QB, "self_attn.q_proj.bias", QD, 0, &cur, 1);
        add(layer, MT_T_KB, "self_attn.k_proj.bias", KD, 0, &cur, 0);
        add(layer, MT_T_VB, "self_attn.v_proj.bias", KD, 0, &cur, 0);
    }
    if (c->qk_norm) {
        add(layer, MT_T_QNORM, "self_attn.q_norm.weight", c->head_dim, 0, &cur, 1);
        add(layer, MT_T_KNORM, "self_attn.k_norm.weight", c->head_dim, 0, &cur, 1);
    }
    add(layer, MT_T_O, "self_attn.o_proj.weight", C, QD, &cur, 1);
    add(layer, MT_T_LN2, "post_attention_layernorm.weight", C, 0, &cur, 1);
    add(layer, MT_T_GATE, "mlp.gate_proj.weight", F, C, &cur, 1);
    add(layer, MT_T_UP, "mlp.up_proj.weight", F, C, &cur, 0);
    add(layer, MT_T_DOWN, "mlp.down_proj.weight", C, F, &cur, 1);
    layer->numel = align_up(cur);

    memset(head, 0, sizeof *head);
    head->kind = MT_UNIT_HEAD;
    cur = 0;
    add(head, MT_T_NORM, "model.norm.weight", C, 0, &cur, 1);
    if (!c->tie_word_embeddings) add(head, MT_T_LM_HEAD, "lm_head.weight", V, C, &cur, 1);
    head->numel = align_up(cur);
}

// Each piece starts at a group's first tensor and runs to the next group.
int mt_layout_submodules(const mt_unit_layout *l, size_t bounds[MT_MAX_SUBMODULES + 1]) {
    static const mt_tensor_id starts[] = {MT_T_Q, MT_T_QB,  MT_T_QNORM, MT_T_KNORM,
                                          MT_T_O, MT_T_LN2, MT_T_GATE,  MT_T_DOWN};
    int n = 0;
    bounds[n++] = 0;
    for (size_t i = 0; i < sizeof starts / sizeof *starts; i++)
        if (l->t[starts[i]].present) bounds[n++] = l->t[starts[i]].offset;
    bounds[n] = l->numel;
    return n;
}

void mt_layout_hf_name(const mt_unit_layout *u, mt_tensor_id id, int layer, char *out, size_t cap) {
    if (u->kind == MT_UNIT_LAYER) snprintf(out, cap, "model.layers.%d.%s", layer, u->t[id].suffix);
    else snprintf(out, cap, "%s", u->t[id].suffix);
}
