// layout.h: where each tensor of a model lives inside its unit's host block.
// A model is a list of units streamed as one piece each: unit 0 = embedding,
// units 1..L = transformer layers, unit L+1 = head (final norm + lm_head when
// untied). Inside a layer, q/k/v weights are adjacent (one packed QKV matrix)
// and so are gate/up (one packed GU matrix), so each costs one GEMM.
#ifndef MT_LAYOUT_H
#define MT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"

typedef enum {
    // layer tensors
    MT_T_LN1, MT_T_Q, MT_T_K, MT_T_V, MT_T_QB, MT_T_KB, MT_T_VB, MT_T_QNORM, MT_T_KNORM,
    MT_T_O, MT_T_LN2, MT_T_GATE, MT_T_UP, MT_T_DOWN,
    // embedding unit
    MT_T_EMBED,
    // head unit
    MT_T_NORM, MT_T_LM_HEAD,
    MT_T_COUNT
} mt_tensor_id;

typedef enum { MT_UNIT_EMBED = 0, MT_UNIT_LAYER = 1, MT_UNIT_HEAD = 2 } mt_unit_kind;

// Where one tensor lives in its unit's block (the same in every block of the unit:
// parameters, gradients, moments): offset, size and shape, and its HF name.
typedef struct {
    int present;
    const char *suffix;   // HF name after "model.layers.{i}." (or the full name)
    int ndim;
    int64_t shape[2];
    size_t offset;        // element offset inside the unit
    size_t numel;
} mt_tensor_slot;

typedef struct {
    mt_unit_kind kind;
    mt_tensor_slot t[MT_T_COUNT];
    size_t numel;         // elements, padded between groups
} mt_unit_layout;

// Layouts for the three unit kinds of a config (all layers share one layout).
void mt_layout_build(const mt_config *c, mt_unit_layout *embed, mt_unit_layout *layer, mt_unit_layout *head);
// Where ZeRO-3 cuts a layer into submodules (the modules whose parameters it
// fetches as one): input norm, QKV weights, QKV biases, q norm, k norm (those
// three when present), output projection, post-attention norm, gate+up, down. Writes the piece
// boundaries in elements (n + 1 of them, from 0 to layer->numel) and returns n.
#define MT_MAX_SUBMODULES 16
int mt_layout_submodules(const mt_unit_layout *layer, size_t bounds[MT_MAX_SUBMODULES + 1]);
// HF tensor name of view `id` in unit (layer index for layers, else ignored).
void mt_layout_hf_name(const mt_unit_layout *u, mt_tensor_id id, int layer, char *out, size_t cap);

#endif
