"""The files the official MegaTrain code reads, written from our configuration.

Pure Python (no torch, no numpy), so the CPU tests check them here:

  * train_yaml(): the YAML examples/sft/train.py takes with --config. Its keys and
    defaults are those of infinity/config/yaml_loader.py (yaml_to_training_config) at
    the pinned commit; every value that shapes a step is set, none left to a default.
  * tokenizer_files(): a word-level tokenizer whose word "t<i>" is token id i (i < V),
    and a chat template that joins the messages' contents with spaces. train.py loads a
    tokenizer from the model directory (AutoTokenizer.from_pretrained) and the dataset
    renders each sample through the chat template; with these, the text "t5 t9 t2"
    becomes exactly ids [5, 9, 2], so the official code trains on OUR token ids.
  * dataset_files(): a LlamaFactory-style dataset_info.json plus one alpaca JSON file
    whose sample j is row j (T ids) of our llm.c batching, as words.
"""

from __future__ import annotations

import json
import os
from typing import Iterable, Sequence

DATASET_NAME = "megatrain_tokens"
DATA_FILE = "megatrain_tokens.json"


def yaml_float(x: float) -> str:
    """A float PyYAML's safe_load reads back as a float: YAML 1.1 wants a dot in the
    mantissa and a signed exponent ("1e-08" would load as a string)."""
    s = repr(float(x))
    if "e" in s:
        mant, exp = s.split("e")
        if "." not in mant:
            mant += ".0"
        if exp[0] not in "+-":
            exp = "+" + exp
        s = mant + "e" + exp
    return s


def train_yaml(*, model_dir: str, data_dir: str, batch: int, seq_len: int, steps: int,
               seed: int, lr: float, weight_decay: float, beta1: float, beta2: float,
               eps: float, clip: float, checkpoint_interval: int, optimizer: str,
               num_workers: int = 1, attn: str = "sdpa") -> str:
    """The YAML text. optimizer: "deepspeed_adam" (DeepSpeedCPUAdam when deepspeed
    imports, the paper's) or "adamw" (torch.optim.AdamW)."""
    if optimizer not in ("deepspeed_adam", "adamw"):
        raise ValueError("optimizer must be deepspeed_adam or adamw")
    # num_grad_slabs: the official default 12, or 2*K when that is larger (its own
    # warning threshold: fewer slabs than 2*checkpoint_interval may starve).
    slabs = max(12, 2 * int(checkpoint_interval))
    q = json.dumps  # a JSON string is a valid YAML scalar (paths with any character)
    lines = [
        "# written by baselines/peers/megatrain_official.py for examples/sft/train.py",
        "model:",
        "  name: %s" % q(model_dir),
        "  dtype: \"bfloat16\"",
        "  device: 0",
        "  attn_implementation: %s" % q(attn),
        "  trust_remote_code: false",
        "dataset:",
        "  name: %s" % q(DATASET_NAME),
        "  dataset_dir: %s" % q(data_dir),
        "  max_seq_len: %d" % seq_len,
        "  num_workers: %d" % num_workers,
        "  train_on_prompt: true",
        "training:",
        "  batch_size: %d" % batch,
        "  gradient_accumulation_steps: 1",
        "  num_steps: %d" % steps,
        "  learning_rate: %s" % yaml_float(lr),
        "  weight_decay: %s" % yaml_float(weight_decay),
        "  max_grad_norm: %s" % yaml_float(clip),
        "  seed: %d" % seed,
        "optimizer:",
        "  type: %s" % q(optimizer),
        "  beta1: %s" % yaml_float(beta1),
        "  beta2: %s" % yaml_float(beta2),
        "  eps: %s" % yaml_float(eps),
        "memory:",
        "  checkpoint_interval: %d" % checkpoint_interval,
        "  num_grad_slabs: %d" % slabs,
        "logging:",
        "  log_interval: 1",
        "  enable_timing: true",
        "",
    ]
    return "\n".join(lines)


CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% if not loop.last %} {% endif %}{% endfor %}"


def tokenizer_files(vocab_size: int) -> dict:
    """{file name: text} for a tokenizers WordLevel tokenizer over "t0".."t{V-1}"
    (whitespace split, no special tokens added, "t0" doubles as unk/eos/pad: no
    sample is ever padded, each is longer than seq_len)."""
    vocab = {"t%d" % i: i for i in range(int(vocab_size))}
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": None, "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None, "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "t0"},
    }
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1 << 30,
        "unk_token": "t0", "eos_token": "t0", "pad_token": "t0",
        "chat_template": CHAT_TEMPLATE,
    }
    return {"tokenizer.json": json.dumps(tok), "tokenizer_config.json": json.dumps(cfg, indent=1),
            "chat_template.jinja": CHAT_TEMPLATE}


def sample_text(ids: Sequence[int]) -> str:
    return " ".join("t%d" % int(i) for i in ids)


def dataset_files(rows: Iterable[Sequence[int]]) -> dict:
    """{file name: text}: dataset_info.json naming DATA_FILE (alpaca formatting), and
    DATA_FILE with one sample per row, its ids as the instruction (the response is
    empty: the chat template then renders exactly the row's words)."""
    samples = [{"instruction": sample_text(r), "input": "", "output": ""} for r in rows]
    info = {DATASET_NAME: {"file_name": DATA_FILE, "formatting": "alpaca",
                           "columns": {"prompt": "instruction", "query": "input", "response": "output"}}}
    return {"dataset_info.json": json.dumps(info, indent=1), DATA_FILE: json.dumps(samples)}


def write_files(directory: str, files: dict) -> None:
    os.makedirs(directory, exist_ok=True)
    for name, text in files.items():
        tmp = os.path.join(directory, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(directory, name))
