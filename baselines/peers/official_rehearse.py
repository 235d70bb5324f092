"""The official examples/sft/train.py's path up to its CUDA engine, on the CPU, run by
official_launch.py in train.py's place (megatrain_official.py --cpu-rehearsal):

    official_launch.py official_rehearse.py --config YAML --expect IDS.json

In train.py's order and with the official code's own functions: its config loader on our
YAML, the tokenizer (AutoTokenizer, through the launcher's word-tokenizer loader), the
model (from_pretrained with the YAML's attn_implementation), its ChatDataset, collate_fn
and DataLoader, then one forward and backward of the first batch the way
CPUMasterModel._forward_and_backward_single_gpu drives the layers (its component discovery
and layer kwargs: the 2-D padding mask handed to every layer, through the launcher's SDPA
wrapper), its chunked next-token loss, clip_grad_norm_ and a torch AdamW step. What runs
only on a GPU (CPUMasterModel's pinned flats, streams and slabs, DeepSpeedCPUAdam's op) is
the one piece left out. Checks, each a line of the JSON printed last:
  ids        the batch holds exactly the rows we wrote (IDS.json), B x T, unpadded;
  mask       the attention mask is all ones, labels equal the ids (train_on_prompt);
  causal     positions before the one changed keep their hidden states bitwise (the 2-D
             mask ran causal) while the changed position's differs;
  loss       finite, and equal to the HF model's own causal loss within 2e-2;
  grads      finite and not all zero; the AdamW step moves the weights.
Exit 0 when every check holds, 1 otherwise (the JSON says which).
"""

import argparse
import json
import math
import sys


def layer_outputs(comp, kw_of, batch, layers, seen=None):
    """The final norm's output of the official layer loop over batch["input_ids"] (seen: gets the
    names of the keyword arguments each layer was given)."""
    import torch
    ids, mask = batch["input_ids"], batch["attention_mask"]
    B, T = ids.shape
    hidden = comp["embedding"](ids)
    position_ids = torch.arange(T).unsqueeze(0).expand(B, -1)
    pe = None
    if comp["rotary_emb"] is not None:  # as the official code: one row of positions, cast to the dtype
        cos, sin = comp["rotary_emb"](hidden, position_ids[:1])
        pe = (cos.to(hidden.dtype), sin.to(hidden.dtype))
    kwargs = kw_of(mask, torch.arange(T), position_ids, pe)
    if seen is not None:
        seen[:] = sorted(kwargs) + (["attention_mask: 2-D"] if kwargs["attention_mask"].dim() == 2 else [])
    for layer in layers:
        out = layer(hidden, **kwargs)
        hidden = out[0] if isinstance(out, tuple) else out
    return comp["norm"](hidden) if comp["norm"] is not None else hidden


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--expect", required=True, help="JSON: the first batch's rows of ids, as written")
    a = ap.parse_args()
    import types

    import torch
    from torch.utils.data import DataLoader
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from infinity import ChatDataset, collate_fn
    from infinity.config import get_num_workers, load_training_config, load_yaml_config
    from infinity.model.cpu_master import CPUMasterModel, _discover_model_components, _introspect_layer_forward

    config = load_training_config(a.config)
    num_workers = get_num_workers(load_yaml_config(a.config))
    torch.manual_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(config.model_name, trust_remote_code=config.trust_remote_code)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    AutoConfig.from_pretrained(config.model_name, trust_remote_code=config.trust_remote_code)
    hf = AutoModelForCausalLM.from_pretrained(config.model_name, torch_dtype=config.dtype, device_map="cpu",
                                              trust_remote_code=config.trust_remote_code,
                                              attn_implementation=config.attn_implementation)
    attn = getattr(hf.config, "_attn_implementation", "unknown")
    dataset = ChatDataset(tokenizer, config.max_seq_len, dataset_name=config.dataset_name,
                          dataset_dir=config.dataset_dir, system_prompt=config.system_prompt or None,
                          train_on_prompt=config.train_on_prompt, processor=None)
    batch = next(iter(DataLoader(dataset, batch_size=config.batch_size, collate_fn=collate_fn,
                                 num_workers=num_workers)))
    with open(a.expect) as f:
        want = torch.tensor(json.load(f), dtype=batch["input_ids"].dtype)
    checks = {}
    ids, mask = batch["input_ids"], batch["attention_mask"]
    checks["ids"] = tuple(ids.shape) == tuple(want.shape) and bool((ids == want).all())
    checks["mask"] = mask.dim() == 2 and bool(mask.bool().all()) and bool((batch["labels"] == ids).all())

    comp = _discover_model_components(hf)
    layers = list(comp["layers"])
    accepts = _introspect_layer_forward(layers[0])
    shim = types.SimpleNamespace(layer_accepts_position_embeddings="position_embeddings" in accepts,
                                 layer_accepts_position_ids="position_ids" in accepts,
                                 layer_accepts_cache_position="cache_position" in accepts)
    kw_of = lambda *args: CPUMasterModel._build_layer_kwargs(shim, *args)  # noqa: E731

    # causal: change the last token of row 0; every earlier position keeps its output bitwise
    with torch.no_grad():
        h0 = layer_outputs(comp, kw_of, batch, layers)
        other = dict(batch, input_ids=ids.clone())
        other["input_ids"][0, -1] = (ids[0, -1] + 1) % hf.config.vocab_size
        h1 = layer_outputs(comp, kw_of, other, layers)
    checks["causal"] = bool((h0[0, :-1] == h1[0, :-1]).all()) and not bool((h0[0, -1] == h1[0, -1]).all())

    # the official loss: next-token CE over the valid labels, mean over them
    seen = []
    hidden = layer_outputs(comp, kw_of, batch, layers, seen)
    logits = comp["lm_head"](hidden[:, :-1]).float()
    y = batch["labels"][:, 1:]
    valid = y != -100
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                                             ignore_index=-100, reduction="sum") / valid.sum()
    loss.backward()
    with torch.no_grad():
        ref = float(hf(input_ids=ids, labels=batch["labels"]).loss)
    checks["loss"] = math.isfinite(float(loss)) and abs(float(loss) - ref) <= 2e-2 * abs(ref)
    params = [p for p in hf.parameters() if p.requires_grad]
    grads = [p.grad for p in params if p.grad is not None]
    checks["grads"] = bool(grads) and all(bool(torch.isfinite(g).all()) for g in grads) and \
        any(bool((g != 0).any()) for g in grads)
    before = params[0].detach().clone()
    torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
    torch.optim.AdamW(params, lr=config.learning_rate, betas=(config.beta1, config.beta2), eps=config.eps,
                      weight_decay=config.weight_decay).step()
    checks["grads"] = checks["grads"] and not bool((params[0].detach() == before).all())
    print(json.dumps({"rehearsal": "official", "attention_impl": attn, "batch": list(ids.shape),
                      "loss": float(loss), "hf_loss": ref, "layers": len(layers),
                      "layer_kwargs": seen, "checks": checks}), flush=True)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
