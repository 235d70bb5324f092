#!/usr/bin/env python3
"""docs.py: the figures README.md and REPRODUCE.md quote, generated from results/.

    python3 -m harness.sweep.docs --check   (exit 1 and a diff when a block is stale)
    python3 -m harness.sweep.docs --write   (rewrites the blocks; reproduce.sh ends with it)
    options: --results DIR (results), --docs FILE... (README.md REPRODUCE.md), --allow-dirty

A generated block sits between two marker lines in the document:
    <!-- generated:NAME (harness/sweep/docs.py from results/; do not edit) -->
    ...
    <!-- end generated:NAME -->
and is rendered from the result files by the function of that NAME below. Only rows
the claims table takes are used (clean tree, sweep entry still there), so a figure in
a document is always one a current results file holds. A CTest test runs --check.
"""
import argparse
import difflib
import glob
import json
import os
import re
import sys

from . import claims, common, trust
from .common import REPO, die

BEGIN = re.compile(r"^( *)<!-- generated:([a-z0-9-]+) \(harness/sweep/docs\.py from results/; do not edit\) -->$")


def end_marker(name):
    return f"<!-- end generated:{name} -->"


def rel(path):
    return os.path.relpath(path, REPO)


def fmt_ms(s):
    return f"{s['median']:.0f} ms (min {s['min']:.0f}, max {s['max']:.0f}, n {s['n']})"


def host(env):
    return f"{env.get('cpu_model') or 'CPU'}, {env.get('cpu_cores')} cores"


def machine(env):
    """A short name for the machine a row was measured on."""
    if env.get("gpu_name"):
        return env["gpu_name"]
    return host(env) + " (CPU backend)"


def load(rows):
    """The host load the measured rows ran under (other jobs share a small machine)."""
    ls = [x for r in rows for x in (r.get("host_load") or []) if x is not None]
    if not ls:
        return ""
    cores = (rows[0].get("env") or {}).get("cpu_cores")
    return (f", 1-minute load average {min(ls):.1f}–{max(ls):.1f}"
            + (f" on {cores} cores" if cores else "") + " during the run")


class Ctx:
    def __init__(self, results, allow_dirty):
        self.results = results
        rows = trust.trusted(common.load_results(results), allow_dirty, "docs")
        self.with_failed = rows  # the claims table shows a failed configuration where its figure would be
        self.rows = [r for r in rows if "error" not in r]
        self.by = {}
        for r in self.rows:
            self.by.setdefault(r["experiment"], []).append(r)
        self.allow_dirty = allow_dirty

    def side(self, pattern):
        """Clean side files (microbench_*.json, reproduce_*.json): (path, data, env)."""
        out = []
        for p in sorted(glob.glob(os.path.join(self.results, pattern))):
            d = common.load_json(p)
            if not isinstance(d, dict):
                die(f"{p}: not a JSON object")
            env = d.get("env") or (d.get("context") or {}).get("mt_env") or {}
            if isinstance(env, str):
                env = json.loads(env)
            if env.get("git_dirty") is False or self.allow_dirty:
                out.append((p, d, env))
            else:
                print(f"docs: left out {rel(p)}: made from a dirty or unknown tree", file=sys.stderr)
        return out


# ---------------------------------------------------------------- blocks
def block_measured(ctx):
    lines = ["| what | value | how obtained |", "|---|---|---|"]
    for r in ctx.by.get("default_cpu", []):
        s = r["step_ms"]
        lines.append(f"| `build/bin/megatrain` with no arguments: a tiny Llama ({r['params'] / 1e6:.2f}M params) on the "
                     f"embedded KJV corpus as bytes, {r['steps_run']} steps | loss {r['loss_first']:.2f} at step 1 → "
                     f"{r['loss_last']:.2f} at step {r['steps_run']}; {r['wall_s']:.0f} s wall; step {fmt_ms(s)} | "
                     f"measured, {machine(r['env'])}{load([r])}, "
                     f"`{rel(os.path.join(ctx.results, 'default_cpu.jsonl'))}` |")
    for p, d, env in ctx.side("microbench_*.json"):
        b = {x["name"].split("/real_time")[0]: x for x in d.get("benchmarks", [])}
        a, t = b.get("adamw/fp32/16777216"), b.get("triad/16777216")
        if not a or not t:
            continue
        l3 = [c["size"] for c in (d["context"].get("caches") or []) if c.get("level") == 3]
        cache = (f"; the machine reports a {l3[0] / 2**20:.0f} MiB L3, so part of the 16M-parameter working set "
                 f"may be cache-resident") if l3 else ""
        la = (d["context"].get("load_avg") or [None])[0]
        la = f", 1-minute load average {la:.1f} at the start" if la is not None else ""
        lines.append(f"| Host AdamW, fp32 ({a.get('bytes_per_param', 28):.0f} B/param moved), 16M params | "
                     f"{a['bytes_per_second'] / 1e9:.1f} GB/s = {a['params_per_s'] / 1e9:.2f} G params/s vs STREAM "
                     f"triad {t['bytes_per_second'] / 1e9:.1f} GB/s in the same run "
                     f"({a['bytes_per_second'] / t['bytes_per_second']:.1f}×) | measured, {machine(env)}{la}, "
                     f"`mt-microbench` (Google Benchmark, mean over {a['iterations']} iteration(s)), "
                     f"`{rel(p)}`{cache} |")
    opt = os.path.join(ctx.results, "cpu_optimizers.jsonl")  # baselines/peers/cpu_optimizers.py
    rows = {r["impl"]: r for r in common.load_jsonl(opt)
            if (r.get("env") or {}).get("git_dirty") is False or ctx.allow_dirty} if os.path.exists(opt) else {}
    if len(rows) == 4:
        names = (("megatrain_adamw", "ours"), ("deepspeed_cpu_adam", "DeepSpeedCPUAdam"),
                 ("torch_adamw_fused", "torch fused"), ("torch_adamw_foreach", "torch foreach"))
        r0 = rows["megatrain_adamw"]
        la = r0["env"].get("load_avg_1min") or []
        la = f", 1-minute load average {min(la):.1f}–{max(la):.1f} during the run" if la else ""
        lines.append(f"| Host AdamW implementations, fp32, {r0['n_params'] / 2**20:.0f}M params, {r0['threads']} threads, "
                     f"{r0['repeats']} interleaved rounds with the STREAM triad | "
                     + ", ".join(f"{w} {rows[k]['params_per_s'] / 1e6:.0f}" for k, w in names) + " M params/s = "
                     + ", ".join(f"{rows[k]['ratio_to_triad']:.2f}" for k, _ in names)
                     + f"× the triad's {r0['triad_gb_s']:.1f} GB/s (at 28 B/param) | measured, {host(r0['env'])} (CPU only), DeepSpeed "
                       f"{r0['env'].get('deepspeed')}, torch {r0['env'].get('torch')}{la}, medians over rounds, "
                       f"`baselines/peers/cpu_optimizers.py`, `{rel(opt)}` |")
    hk = os.path.join(ctx.results, "peer_hooks.jsonl")  # baselines/peers/stage3_hooks.py
    rows = {(r["system"], r["pass"]): r for r in common.load_jsonl(hk)
            if (r.get("env") or {}).get("git_dirty") is False or ctx.allow_dirty} if os.path.exists(hk) else {}
    if len(rows) == 4:
        ds, fs = rows[("deepspeed-zero3", "fwd_bwd")], rows[("fsdp2-offload", "fwd_bwd")]
        dsf, fsf = rows[("deepspeed-zero3", "fwd")], rows[("fsdp2-offload", "fwd")]
        rng = lambda r: f"{r['fetch_overhead_ms_range'][0]:.2f}–{r['fetch_overhead_ms_range'][1]:.2f}"  # noqa: E731
        la = ds["env"].get("load_avg_1min") or []
        la = f", 1-minute load average {min(la):.1f}–{max(la):.1f} during the run" if la else ""
        lines.append(f"| Peers' host hook time per fetch, forward + backward (tiny Llama, every layer checkpointed, "
                     f"against plain torch; per layer from depths {ds['model']['depths'][0]} and "
                     f"{ds['model']['depths'][1]}; {ds['rounds']} interleaved rounds) | DeepSpeed ZeRO-3 "
                     f"(offload_param cpu) {ds['fetch_overhead_ms']:.3f} ms per submodule fetch ({rng(ds)}; "
                     f"{ds['ms_per_call']:.3f} ms per `fetch_sub_module` call, {ds['calls_per_layer']:.0f} a layer), "
                     f"FSDP2 (CPUOffloadPolicy) {fs['fetch_overhead_ms']:.3f} ms per layer fetch ({rng(fs)}); "
                     f"forward only {dsf['fetch_overhead_ms']:.3f} and {fsf['fetch_overhead_ms']:.3f} | measured, "
                     f"{host(ds['env'])} (CPU only), DeepSpeed {ds['env'].get('deepspeed')} on its CPU accelerator, "
                     f"torch {ds['env'].get('torch')}{la}, medians over rounds; the peer models' hook time "
                     f"(`baselines/PEERS.md`), `baselines/peers/stage3_hooks.py`, `{rel(hk)}` |")
    for r in ctx.by.get("extrapolation_cpu", []):
        f, E = r["fit"], r["step_ms"]["err_frac"]
        chk = f.get("check")
        if chk and chk.get("depth") == r["layers_model"]:
            meas, where, rows_load = chk["measured_ms"], "measured in the same interleaved rounds", [r]
        else:
            m = [x for x in ctx.by.get("c2_cpu", []) if x["system"] == r["system"] and x["batch"] == r["batch"]]
            if not m:
                continue
            meas, where, rows_load = m[0]["step_ms"]["median"], "measured in c2_cpu", [r, m[0]]
        err = r["step_ms"]["median"] / meas - 1
        rounds = f.get("rounds", 1)
        lines.append(f"| Depth extrapolation, {r['system']} ({r['model']}, batch {r['batch']}): fit on "
                     f"{' and '.join(map(str, f['depths']))} layers, reported at {r['layers_model']} | "
                     f"{r['step_ms']['median']:.0f} ms ±{100 * E:.0f}% (held-out {f['holdout']['depth']} layers: "
                     f"{100 * f['holdout']['err_frac']:+.0f}%) vs {meas:.0f} ms {where} at "
                     f"{r['layers_model']}: {100 * err:+.0f}%, {'inside' if abs(err) <= E else 'OUTSIDE'} the bar | "
                     f"extrapolated and measured, {rounds} interleaved round(s), "
                     f"{machine(r['env'])}{load(rows_load)} |")
    return "\n".join(lines)


def block_claims(ctx):
    return claims.render(claims.table(ctx.with_failed, results_dir=ctx.results), markdown=True).rstrip("\n")


def block_c2_batch(ctx):
    rs = ctx.by.get("c2_gh200", [])
    t = {}
    for r in rs:
        if r.get("step_ms") and not r.get("variant"):
            t.setdefault(r["batch"], {})[r["system"]] = r
    parts = []
    for b in sorted(t):
        if "megatrain" in t[b] and "zero3" in t[b]:
            parts.append(f"batch {b}: {t[b]['megatrain']['tokens_per_s'] / t[b]['zero3']['tokens_per_s']:.2f}×")
    if not parts:
        return "(no rows of c2_gh200 yet)"
    hw = rs[0].get("hardware")
    b = claims.band(rs[0], {"results_dir": ctx.results})  # each ratio's two steps carry it
    return (f"megatrain / zero3 tokens per second at equal batch, Qwen2.5-14B, projected (sim, {hw}"
            + (f"; each step {b}" if b else "") + "): " + ", ".join(parts) + " (`results/c2_gh200.jsonl`).")


def block_status(ctx):
    runs = ctx.side("reproduce_*.json")
    if not runs:
        return "(no reproduce_*.json in results/ yet: run `make reproduce`)"
    out = []
    for p, d, env in runs:
        w = int(d["wall_s"])
        out.append(f"`bash experiments/reproduce.sh` ({d['path']} path) took **{w // 60}:{w % 60:02d}** wall on "
                   f"{host(env)} at commit `{env.get('git_sha')}`, with {d['failed_steps']} failed step(s) "
                   f"(`{rel(p)}`); a clean `make build` before it adds 1–3 minutes.")
    return "\n".join(out)


def block_sweep_times(ctx):
    lines = ["| sweep | rows | wall time of its rows here | host that ran it | host load (1-min average) |",
             "|---|---|---|---|---|"]
    for exp, rs in ctx.by.items():
        w = sum(r.get("wall_s") or 0 for r in rs)
        ls = [x for r in rs for x in (r.get("host_load") or []) if x is not None]
        la = f"{min(ls):.1f}–{max(ls):.1f}" if ls else "-"
        lines.append(f"| `{exp}` | {len(rs)} | {w:.0f} s | {host(rs[0]['env'])} | {la} |")
    return "\n".join(lines)


BLOCKS = {"measured": block_measured, "claims": block_claims, "c2-batch": block_c2_batch,
          "status": block_status, "sweep-times": block_sweep_times}


# ---------------------------------------------------------------- documents
def regenerate(text, ctx, path):
    """The document with every generated block re-rendered."""
    lines, out, i, seen = text.split("\n"), [], 0, []
    while i < len(lines):
        out.append(lines[i])
        m = BEGIN.match(lines[i])
        i += 1
        if not m:
            continue
        indent, name = m.group(1), m.group(2)  # a block inside a list item keeps its indent
        if name not in BLOCKS:
            die(f"{path}: unknown generated block '{name}' (known: {', '.join(BLOCKS)})")
        j = i
        while j < len(lines) and lines[j] != indent + end_marker(name):
            j += 1
        if j == len(lines):
            die(f"{path}: generated block '{name}' has no line '{indent + end_marker(name)}'")
        out.extend(indent + x for x in BLOCKS[name](ctx).split("\n"))
        out.append(lines[j])
        seen.append(name)
        i = j + 1
    return "\n".join(out), seen


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", action="store_true")
    g.add_argument("--write", action="store_true")
    ap.add_argument("--results", default=os.path.join(REPO, "results"))
    ap.add_argument("--docs", nargs="+", default=[os.path.join(REPO, "README.md"), os.path.join(REPO, "REPRODUCE.md")])
    ap.add_argument("--allow-dirty", action="store_true", help="admit rows made from a dirty or unknown tree")
    args = ap.parse_args()
    if args.write:  # a doc is rewritten; never one of the rows it is made from
        for path in args.docs:
            common.not_own_input(path, glob.glob(os.path.join(args.results, "*.json*")), "--docs")
    ctx = Ctx(args.results, args.allow_dirty)
    stale = 0
    for path in args.docs:
        with open(path) as f:
            text = f.read()
        new, seen = regenerate(text, ctx, path)
        if not seen:
            die(f"{path}: no generated block")
        if new == text:
            print(f"docs: {rel(path)}: {len(seen)} generated block(s) match {rel(args.results)}/", file=sys.stderr)
            continue
        if args.write:
            common.safepath.write_bytes(path, new.encode())
            print(f"docs: {rel(path)}: rewrote {', '.join(seen)}", file=sys.stderr)
        else:
            stale += 1
            sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True),
                                                       rel(path), rel(path) + " (from results/)"))
            print(f"docs: {rel(path)}: a figure differs from {rel(args.results)}/; HINT: python3 "
                  f"harness/sweep/docs.py --write (make reproduce runs it)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
