"""Starts the official examples/sft/train.py, with SDPA taught the one thing its
single-GPU path needs from flash_attention_2 (megatrain_official.py runs this file).

    MT_OFFICIAL_SDPA_2D=1 python3 official_launch.py TRAIN_PY --config YAML

(MT_OFFICIAL_SDPA_2D unset or 0: train.py runs with nothing changed.) MT_OFFICIAL_WORD_TOKENIZER=1
loads our word-level tokenizer as what it is (install_word_tokenizer says why).

Why: at the pinned commit, CPUMasterModel._forward_and_backward_single_gpu (infinity/
model/cpu_master.py) hands each decoder layer the batch's 2-D [B, T] padding mask as
`attention_mask`. flash_attention_2 (what every official config asks for) reads such a
mask as padding and stays causal. SDPA, the only fast attention on a machine without
the flash-attn package, cannot: torch's scaled_dot_product_attention would broadcast the
[B, T] integer mask against [B, H, T, T] (an error for B != T) and, with a mask given,
transformers turns is_causal off. (Only the multi-GPU worker converts the mask to 4-D.)

What the wrapper does, and only when the mask is 2-D: checks once per mask tensor that
it is all ones (our rows are never padded: official_files writes exactly T tokens per
sample; a padded batch is an error, not silently mis-attended), then calls transformers'
own SDPA function with no mask, so it runs causal, as flash_attention_2 would, on
PyTorch's flash kernel. 4-D masks and every other call pass through unchanged. The
official code itself is run as it is (runpy), from its own tree. This file runs by its path,
not as a module of baselines.peers: it imports nothing of ours.
"""

import os
import runpy
import sys


def install_sdpa_2d_mask() -> None:
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    sdpa = ALL_ATTENTION_FUNCTIONS["sdpa"]
    checked = {}

    def sdpa_2d_mask(module, query, key, value, attention_mask, *args, **kwargs):
        if attention_mask is not None and attention_mask.dim() == 2:
            k = (attention_mask.data_ptr(), tuple(attention_mask.shape))
            if k not in checked:  # one host sync per step's mask, not per layer
                if len(checked) > 64:
                    checked.clear()
                checked[k] = bool(attention_mask.bool().all())
            if not checked[k]:
                # Say which rows and where, so a lease's log tells why (seen once on the H200,
                # 2026-11-26; the same files give unpadded rows on the CPU here).
                try:
                    m = attention_mask.bool()
                    rows = [(r, int(m[r].sum()), int((~m[r]).nonzero()[0])) for r in range(m.shape[0])
                            if not bool(m[r].all())]
                except Exception as e:  # a stand-in mask (tests), or anything else: the error still stands
                    rows = "not read (%s)" % type(e).__name__
                raise RuntimeError("official_launch: a padded batch reached SDPA with a 2-D mask %s; rows (row, "
                                   "real tokens, first padded position): %s; only unpadded rows are supported "
                                   "without flash-attn" % (tuple(attention_mask.shape), rows[:8]))
            attention_mask = None
        return sdpa(module, query, key, value, attention_mask, *args, **kwargs)

    ALL_ATTENTION_FUNCTIONS["sdpa"] = sdpa_2d_mask


def is_word_tokenizer(path) -> bool:
    """Whether `path` holds the word-level tokenizer official_files writes ("t<i>" is id i)."""
    import json
    tj = os.path.join(str(path), "tokenizer.json")
    if not os.path.isfile(tj):
        return False
    try:
        with open(tj) as f:
            model = json.load(f).get("model") or {}
    except (OSError, ValueError):
        return False
    return model.get("type") == "WordLevel" and model.get("unk_token") == "t0"


def install_word_tokenizer() -> None:
    """AutoTokenizer.from_pretrained on a model directory whose config.json says qwen2
    builds transformers' Qwen2Tokenizer, which ignores our tokenizer.json's word-level
    model and pre-tokenizer: every row came out as padding (mask all zeros, seen on the
    H200 on 2026-11-26 as "a padded batch reached SDPA"). For our word tokenizer, build
    PreTrainedTokenizerFast from its tokenizer.json and tokenizer_config.json instead,
    which gives back exactly our ids; any other directory loads as before."""
    import json
    from transformers import AutoTokenizer, PreTrainedTokenizerFast
    original = AutoTokenizer.from_pretrained

    def from_pretrained(path, *args, **kwargs):
        if not is_word_tokenizer(path):
            return original(path, *args, **kwargs)
        with open(os.path.join(str(path), "tokenizer_config.json")) as f:
            cfg = json.load(f)
        tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(str(path), "tokenizer.json"),
                                      unk_token=cfg["unk_token"], eos_token=cfg["eos_token"],
                                      pad_token=cfg["pad_token"], model_max_length=cfg["model_max_length"])
        tok.chat_template = cfg["chat_template"]
        return tok

    AutoTokenizer.from_pretrained = from_pretrained


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: official_launch.py TRAIN_PY [its arguments]")
    train_py = os.path.abspath(sys.argv[1])
    if os.environ.get("MT_OFFICIAL_WORD_TOKENIZER") == "1":
        install_word_tokenizer()
    if os.environ.get("MT_OFFICIAL_SDPA_2D") == "1":
        install_sdpa_2d_mask()
    sys.argv = [train_py] + sys.argv[2:]
    # No sys.path entry for train.py's folder: it imports nothing beside itself (infinity comes
    # from the official tree on PYTHONPATH: megatrain_official.child_env).
    runpy.run_path(train_py, run_name="__main__")


if __name__ == "__main__":
    main()
