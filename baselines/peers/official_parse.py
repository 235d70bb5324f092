#!/usr/bin/env python3
"""Turns the log of an official MegaTrain run into one results row (our schema).

    python3 baselines/peers/official_parse.py --log run.log --config CFG.json \
        --batch B --seq-len T [--layers N] [--warmup 2] [--out results/x.jsonl]

We do not know the official code's output format beyond what shared/REFERENCE.md
says (it reports TFLOPS = 6 x all params x batch x padded seq / full step wall
time), so the parser is deliberately narrow and says what it found:

  * a step time: on one line, a word "step" or "iter" and a time given as
    `time[:=] X` / `step_time[:=] X` / `X s/it` / `X ms`, the unit ms or s
    (a bare number after "time" is read as seconds), one value per line;
  * a TFLOPS figure: `TFLOPS[:=] X` or `X TFLOPS` on the same or any line.

The first --warmup step times are dropped; median/min/max of the rest (at least
one) make step_ms, and tflops/mfu are recomputed with OUR formula from N_all of
--config (depth --layers), so the row is comparable with ours. If no step time
is found but TFLOPS figures are, step times are derived from them with the same
formula (said on stderr). Nothing found: exit 1 with one line.
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import PeerError  # noqa: E402

PROG = "official_parse"

_NUM = r"([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"
_STEP_WORD = re.compile(r"(?<![a-z])(step|iter|iteration)(?![a-z])", re.I)
_TIME_PATTERNS = [
    re.compile(r"\b(?:step[_ ]?time|iter(?:ation)?[_ ]?time|time(?:/step)?)\s*[:=]?\s*" + _NUM + r"\s*(ms|s|sec|seconds)?\b", re.I),
    re.compile(_NUM + r"\s*(s|ms)/it\b", re.I),
]
_TFLOPS_PATTERNS = [
    re.compile(r"\btflops\s*[:=]?\s*" + _NUM, re.I),
    re.compile(_NUM + r"\s*tflops", re.I),
]


def parse_log(text: str) -> dict:
    """{"step_s": [...], "tflops": [...]} in order of appearance."""
    steps, tfl = [], []
    for line in text.splitlines():
        for p in _TFLOPS_PATTERNS:
            m = p.search(line)
            if m:
                tfl.append(float(m.group(1)))
                break
        if not _STEP_WORD.search(line):
            continue
        for p in _TIME_PATTERNS:
            m = p.search(line)
            if m:
                v = float(m.group(1))
                unit = (m.group(2) or "s").lower()
                steps.append(v / 1000.0 if unit == "ms" else v)
                break
    return {"step_s": steps, "tflops": tfl}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog=PROG)
    ap.add_argument("--log", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--warmup", type=int, default=common.MIN_WARMUP)
    ap.add_argument("--precision", default="paper",
                    help="what the official code keeps: bf16 weights+grads, fp32 moments (REFERENCE.md)")
    ap.add_argument("--experiment", default="peers")
    ap.add_argument("--system", default="megatrain_official")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    try:
        with open(a.log, errors="replace") as f:
            text = f.read()
    except OSError as e:
        raise PeerError("%s: cannot read log (%s)" % (a.log, e.strerror))
    spec = common.load_config(a.config, a.layers)
    n_params = common.count_params_meta(spec)
    got = parse_log(text)
    steps = got["step_s"]
    if not steps and got["tflops"]:
        tokens = a.batch * a.seq_len
        steps = [6.0 * n_params * tokens / (t * 1e12) for t in got["tflops"] if t > 0]
        print("%s: no step times in %s; derived %d from its TFLOPS with 6*N*tokens" % (PROG, a.log, len(steps)),
              file=sys.stderr)
    if not steps:
        raise PeerError("%s: found neither step times nor TFLOPS figures" % a.log)
    timed = steps[a.warmup:] if len(steps) > a.warmup else []
    if not timed:
        raise PeerError("%s: %d step time(s), none left after %d warm-up" % (a.log, len(steps), a.warmup))
    if len(timed) < common.MIN_STEPS:
        print("%s: only %d timed steps (DESIGN.md asks for >= %d)" % (PROG, len(timed), common.MIN_STEPS),
              file=sys.stderr)
    row = common.make_row(
        experiment=a.experiment, system=a.system, model=spec.name, params=n_params,
        layers_run=spec.layers_run, layers_model=spec.layers_model, batch=a.batch, seq_len=a.seq_len,
        precision=a.precision, step_times_s=timed, peak_gpu=None, peak_host=None,
        env=common.collect_env())
    if a.out:
        common.append_jsonl(a.out, row)
    print(common.json.dumps(row))
    if got["tflops"]:
        print("%s: the log's own TFLOPS (median of reported) %.1f vs ours %.1f"
              % (PROG, sorted(got["tflops"])[len(got["tflops"]) // 2], row["tflops"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    common.main_guard(main, PROG)
