#!/usr/bin/env python3
"""megatrain.tools.tokenize: text files -> the flat little-endian uint32 token file `megatrain train --data` reads.

  python3 -m megatrain.tools.tokenize --model HF_DIR --out tokens.bin a.txt b.txt ...
  python3 -m megatrain.tools.tokenize --bytes --out tokens.bin a.txt      # byte-level ids 0..255

With --model, the HF tokenizer in HF_DIR (tokenizer.json etc., loaded offline with
`transformers`) encodes each file as one document followed by the model's EOS token
(config.json's eos_token_id) when it has one. Every id is checked against the model's
vocab_size, as megatrain checks it. The output is written to OUT.tmp and renamed.
Run from the repo root (or with PYTHONPATH=<repo>): megatrain/ and megatrain/tools/ are
namespace packages, so that harness.resultslib imports as it does everywhere.
"""
import argparse
import array
import json
import os
import sys

# the path checks every script around the binary shares (harness/resultslib/safepath.py)
from harness.resultslib import safepath


def fail(msg):
    print(f"tokenize: {msg}", file=sys.stderr)
    sys.exit(1)


def encoder(args):
    if args.bytes:
        return (lambda text: list(text.encode("utf-8"))), None, 256
    cfg_path = os.path.join(args.model, "config.json")
    try:
        with open(cfg_path) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{cfg_path}: {e}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        fail("--model needs the `transformers` package (pip install transformers); --bytes needs nothing")
    try:
        tok = AutoTokenizer.from_pretrained(args.model)
    except Exception as e:  # noqa: BLE001 - any load failure is one line for the user
        fail(f"{args.model}: cannot load a tokenizer: {e}")
    eos = cfg.get("eos_token_id")
    if isinstance(eos, list):
        eos = eos[0] if eos else None
    return (lambda text: tok.encode(text, add_special_tokens=False)), eos, int(cfg["vocab_size"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", help="HF model directory with a tokenizer and config.json")
    src.add_argument("--bytes", action="store_true", help="byte-level tokens (vocab 256)")
    p.add_argument("--out", required=True, help="output token file")
    p.add_argument("files", nargs="+", help="UTF-8 text files, one document each")
    args = p.parse_args()
    try:  # never written over a text it reads (the same file, a hard or a soft link to it), nor into the model
        safepath.refuse_own_input(args.out, args.files + [args.model])
    except safepath.PathError as e:
        fail(str(e))
    encode, eos, vocab = encoder(args)
    ids = array.array("I")
    for path in args.files:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            fail(f"{path}: {e}")
        ids.extend(encode(text))
        if eos is not None:
            ids.append(eos)
        print(f"tokenize: {path}: {len(ids)} tokens so far", file=sys.stderr)
    bad = next((i for i, t in enumerate(ids) if t >= vocab), None)
    if bad is not None:
        fail(f"token id {ids[bad]} at index {bad} is >= vocab_size {vocab}")
    if sys.byteorder != "little":
        ids.byteswap()
    try:
        safepath.write_bytes(args.out, ids.tobytes())
    except (OSError, safepath.PathError) as e:
        fail(f"{args.out}: {e}")
    print(f"tokenize: wrote {len(ids)} tokens to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
