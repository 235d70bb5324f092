"""pack.py: what a part made, packed into at most 8 files in $OUT, and the check of it.

The device tool brings back at most 8 files from $OUT, each at most 16 MiB and 64 MiB in
all, no deeper than $OUT/a/b/file, named in letters, digits, '.', '_' and '-'. A part
leaves four (five when its traces need their own archive), flat in $OUT:
  PART-results.tar.gz  rows/ (results rows by experiment, traces/, env_TAG.json,
                       microbench_TAG.json), profile/ (the calibrated hardware profile),
                       labs/ (kernel-lab JSON lines), sweeps/ (dry run only: its small sweeps)
  PART-traces.tar.gz   rows/traces/, only when the results archive would pass 15 MiB
  PART-logs.tar.gz     logs/: each step's log (a log over 2 MiB keeps its first and last MiB),
                       nvidia-smi, free -g
  PART-summary.txt     what stdout showed: each step's status, rows, copy rates
  PART-manifest.json   part, dry run or not, machine, git sha, steps with status and seconds,
                       the files with their bytes and sha256
`check` reads such a folder back: the limits above, the manifest, and every results row
through file_rows.py's checks (schema, env keys, min <= median <= max, its sweep's keys,
bound to this call: its id, its configuration listed in the manifest).
"""
import hashlib
import io
import json
import os
import re
import sys
import tarfile

from harness.sweep import common, file_rows, sweeps
from harness.sweep.common import resultslib, safepath

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

MAX_FILES, MAX_FILE, MAX_TOTAL = 8, 16 << 20, 64 << 20
SOFT_FILE = 15 << 20          # what a part aims under, so a file never meets the hard limit
LOG_CAP = 2 << 20             # a longer log keeps its first and last MiB
NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def capped(path):
    data = open(path, "rb").read()
    if len(data) <= LOG_CAP:
        return data
    half = LOG_CAP // 2
    return data[:half] + f"\n[... {len(data) - LOG_CAP} bytes left out by the campaign's pack ...]\n".encode() + data[-half:]


def add_tree(tf, root, arc, skip=None, cap=False):
    for d, _, files in os.walk(root):
        for f in sorted(files):
            p = os.path.join(d, f)
            rel = os.path.join(arc, os.path.relpath(p, root))
            if skip and skip(rel):
                continue
            data = capped(p) if cap else open(p, "rb").read()
            info = tarfile.TarInfo(rel)
            info.size, info.mtime, info.mode = len(data), int(os.path.getmtime(p)), 0o644
            tf.addfile(info, io.BytesIO(data))


def tar(path, members):
    """members: [(dir, arcname, skip, cap)]; replaces PATH (gzip) whole: written beside it
    under a hidden name, then renamed (an interrupted pack leaves no half archive)."""
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    try:
        with tarfile.open(tmp, "w:gz") as tf:
            for root, arc, skip, cap in members:
                if os.path.isdir(root):
                    add_tree(tf, root, arc, skip, cap)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def pack(ctx, summary_text, manifest):
    """Writes the part's files into ctx.out; returns the manifest (with the files)."""
    os.makedirs(ctx.out, exist_ok=True)
    P = ctx.part["name"]
    w = ctx.path
    res = os.path.join(ctx.out, f"{P}-results.tar.gz")
    members = [(w("rows"), "rows", None, False), (w("profile"), "profile", None, False),
               (w("labs"), "labs", None, False)]
    if ctx.dry:
        members.append((w("sweeps"), "sweeps", None, False))
    tar(res, members)
    notes = []
    if os.path.getsize(res) > SOFT_FILE:  # the traces go to an archive of their own
        is_trace = lambda rel: rel.startswith("rows/traces/")  # noqa: E731
        tar(res, [(r, a, is_trace, c) for r, a, _, c in members])
        tr = os.path.join(ctx.out, f"{P}-traces.tar.gz")
        tar(tr, [(w("rows", "traces"), "rows/traces", None, False)])
        if os.path.getsize(tr) > SOFT_FILE:
            os.remove(tr)
            notes.append("the traces passed 15 MiB compressed and were left out")
    tar(os.path.join(ctx.out, f"{P}-logs.tar.gz"), [(w("logs"), "logs", None, True)])
    safepath.write_bytes(os.path.join(ctx.out, f"{P}-summary.txt"),
                         (summary_text + "".join(f"pack: {n}\n" for n in notes)).encode())
    files = sorted(f for f in os.listdir(ctx.out) if f.startswith(P + "-") and not f.endswith("-manifest.json"))
    manifest["files"] = [{"name": f, "bytes": os.path.getsize(os.path.join(ctx.out, f)),
                          "sha256": sha256(os.path.join(ctx.out, f))} for f in files]
    manifest["pack_notes"] = notes
    safepath.write_bytes(os.path.join(ctx.out, f"{P}-manifest.json"), json.dumps(manifest, indent=1).encode())
    return manifest


# ---------------------------------------------------------------- reading back
def _safe_name(m):
    name = m.name.rstrip("/")
    while name.startswith("./"):  # `tar -C DIR -czf X .` writes ./rows/...
        name = name[2:]
    if name in ("", "."):
        return m.isdir()
    try:
        safepath.relative(name, "member", any_names=True)
        return m.isfile() or m.isdir()
    except safepath.PathError:
        return False


def safe_members(tf):
    """The members, each a file or folder whose name is a relative path of plain names
    (safepath: no absolute path, no '..'); ValueError naming the first few that are not."""
    bad = [m.name for m in tf.getmembers() if not _safe_name(m)]
    if bad:
        raise ValueError(f"unsafe member(s) {bad[:3]}")
    return tf.getmembers()


def extract(path, dest):
    with tarfile.open(path) as tf:
        tf.extractall(dest, members=safe_members(tf))


def check(out_dir, tmp):
    """Problems with a part's folder as the device tool would bring it back ([] if none)."""
    p = []
    entries = []
    for d, dirs, files in os.walk(out_dir):
        depth = os.path.relpath(d, out_dir).count(os.sep) + (0 if d == out_dir else 1)
        for f in files:
            entries.append((os.path.join(d, f), depth))
        for x in dirs:
            if not NAME.match(x):
                p.append(f"folder name {x!r} has characters the device tool does not bring back")
    if len(entries) > MAX_FILES:
        p.append(f"{len(entries)} files (at most {MAX_FILES} come back)")
    total = 0
    for path, depth in entries:
        n = os.path.getsize(path)
        total += n
        name = os.path.basename(path)
        if depth > 2:
            p.append(f"{path}: deeper than $OUT/a/b/file")
        if not NAME.match(name):
            p.append(f"{name}: characters other than letters, digits, '.', '_', '-'")
        if n > MAX_FILE:
            p.append(f"{name}: {n} bytes (over 16 MiB)")
    if total > MAX_TOTAL:
        p.append(f"{total} bytes in all (over 64 MiB)")
    mans = [e for e, _ in entries if e.endswith("-manifest.json")]
    if len(mans) != 1:
        return p + [f"{len(mans)} manifests (one expected)"]
    try:
        with open(mans[0]) as f:
            man = resultslib.schema.loads(f.read())
        if not isinstance(man, dict) or not isinstance(man.get("files", []), list):
            raise ValueError("not a manifest object")
        P = safepath.name(man.get("part"), "part")
        safepath.name(man.get("tag") or P, "tag")
    except ValueError as e:  # a bad name (safepath.PathError) included
        return p + [f"{mans[0]}: {e}"]
    for need in ("results.tar.gz", "logs.tar.gz", "summary.txt"):
        if not os.path.exists(os.path.join(out_dir, f"{P}-{need}")):
            p.append(f"{P}-{need} missing")
    for f in man["files"]:
        try:
            fp = safepath.inside(out_dir, safepath.name(f.get("name") if isinstance(f, dict) else f, "file"), "file")
        except safepath.PathError as e:
            p.append(f"manifest: {e}")
            continue
        if not os.path.exists(fp) or os.path.getsize(fp) != f.get("bytes") or sha256(fp) != f.get("sha256"):
            p.append(f"{f['name']}: not as the manifest lists it")
    if p:
        return p
    res = os.path.join(tmp, "res")
    try:
        extract(os.path.join(out_dir, f"{P}-results.tar.gz"), res)
        extract(os.path.join(out_dir, f"{P}-logs.tar.gz"), os.path.join(tmp, "logs"))
    except (tarfile.TarError, ValueError, OSError) as e:
        return p + [f"an archive does not read back: {e}"]
    if man.get("dry_run"):
        sweeps.set_dir(os.path.join(res, "sweeps"))
    table = sweeps.by_experiment()
    rows_dir = os.path.join(res, "rows")
    by_exp = {}
    for f in sorted(os.listdir(rows_dir)) if os.path.isdir(rows_dir) else []:
        if f.endswith(".jsonl"):
            try:
                rows = resultslib.load_jsonl(os.path.join(rows_dir, f))
            except resultslib.RowsError as e:
                p.append(str(e))
                continue
            for n, r in enumerate(rows, 1):
                q = file_rows.row_problems(r, man.get("dry_run", False), False, table)
                p += [f"rows/{f}:{n}: {x}" for x in q]
                if q:
                    continue
                by_exp.setdefault(r.get("experiment"), []).append(r)
                # each row carries this call's id, and the manifest lists its configuration as made
                for q in file_rows.binding_problems(r, {man.get("call_id"): (man, mans[0])}, dry_ok=True):
                    p.append(f"rows/{f}:{n}: {q}")
                if r.get("trace") and not os.path.exists(common.trace_path(rows_dir, r)) and \
                        not os.path.exists(os.path.join(out_dir, f"{P}-traces.tar.gz")):
                    p.append(f"rows/{f}:{n}: its trace {r['trace']} is not packed")
    for st in man.get("steps", []):
        if st["kind"] == "sweep" and st["status"] == "ok":
            rows = by_exp.get(st["name"], [])
            if not rows:
                p.append(f"sweep step {st['name']} ok but no rows of experiment {st['name']}")
            errs = [r for r in rows if "error" in r]
            if errs:
                p.append(f"sweep step {st['name']} ok but {len(errs)} error row(s): {errs[0]['error'][:120]}")
        if st["kind"] == "machine" and st["status"] == "ok":
            envs = [f for f in os.listdir(rows_dir) if f.startswith("env_")] if os.path.isdir(rows_dir) else []
            if not envs:
                p.append("machine step ok but no env_*.json")
        if st["kind"] == "microbench" and st["status"] == "ok":
            if not any(f.startswith("microbench_") for f in os.listdir(rows_dir)):
                p.append(f"{st['name']} ok but no microbench_*.json")
    return p


# ---------------------------------------------------------------- summaries
def copy_rates(microbench_json):
    """One line per pinned/pageable copy direction at the largest size measured (GB/s)."""
    try:
        bs = resultslib.load_json(microbench_json).get("benchmarks", [])
    except ValueError as e:  # resultslib.RowsError: unreadable, not strict JSON, not an object
        return [f"microbench: no JSON ({e})"]
    if not isinstance(bs, list) or not all(isinstance(b, dict) for b in bs):
        return ["microbench: benchmarks is not a list of objects"]
    best = {}
    for b in bs:
        m = re.match(r"^copy/cuda/(pinned|pageable)/(h2d|d2h|bidir)/(\d+)", b.get("name", ""))
        if m and not b.get("error_occurred") and "gbps" in b:
            k = (m.group(1), m.group(2))
            if int(m.group(3)) >= best.get(k, (0, None))[0]:
                best[k] = (int(m.group(3)), b)
    out = []
    for (mode, d), (size, b) in sorted(best.items()):
        extra = f" (h2d {b['h2d_gbps']:.1f}, d2h {b['d2h_gbps']:.1f})" if d == "bidir" and "h2d_gbps" in b else ""
        out.append(f"copy {mode} {d} {size >> 20} MiB: {b['gbps']:.1f} GB/s{extra}")
    names = [b.get("name", "") for b in bs]
    return out or [f"microbench: {len(names)} benchmark(s), no CUDA copies (no GPU)"]


def row_lines(jsonl):
    out = []
    try:
        rows = resultslib.load_jsonl(jsonl)
    except resultslib.RowsError as e:
        return [f"unreadable rows: {e}"]
    for n, r in enumerate(rows, 1):
        bad = resultslib.row_problems(r)
        if bad:  # the summary says so, and --check refuses the part
            out.append(f"{jsonl}:{n}: not a results row: {'; '.join(bad)}"[:300])
            continue
        lab = (f"{r.get('model')} {r.get('system')} b{r.get('batch')} T{r.get('seq_len')} {r.get('precision')} "
               f"L{r.get('layers_run')}/{r.get('layers_model')}" + (f" {r['variant']}" if r.get("variant") else ""))
        if "error" in r:
            out.append(f"{lab}: ERROR {str(r['error'])[:160]}")
            continue
        s = r.get("step_ms") or {}
        if not s:
            out.append(f"{lab}: no timing")
            continue
        f = lambda v, fmt: (fmt % v) if isinstance(v, (int, float)) else "-"  # noqa: E731
        out.append(f"{lab} [{r['mode']}]: step {s['median']:.0f} ms ({s['min']:.0f}..{s['max']:.0f}), "
                   f"{f(r.get('tflops'), '%.1f')} TFLOPS, mfu {f(r.get('mfu'), '%.3f')}, "
                   f"busy {f(r.get('gpu_busy_frac'), '%.2f')}, h2d {f(r.get('h2d_gbps'), '%.1f')} GB/s, "
                   f"host {f((r.get('peak_host_bytes') or 0) / 2**30, '%.1f')} GiB"
                   # where the step goes (peers' phases, megatrain's optimizer) and the time before it
                   + (f"; fwd {f(r.get('fwd_ms'), '%.0f')} bwd {f(r.get('bwd_ms'), '%.0f')} ms"
                      if r.get("fwd_ms") is not None else "")
                   + (f"; optimizer {r['optimizer_ms']:.0f} ms" if isinstance(r.get("optimizer_ms"), (int, float)) else "")
                   + (f"; setup {r['setup_s']:.1f} s" if isinstance(r.get("setup_s"), (int, float)) else "")
                   + (f"; startup {r['startup_s']:.1f} s" if isinstance(r.get("startup_s"), (int, float)) else "")
                   + (f"; wall {r['wall_s']:.0f} s" if isinstance(r.get("wall_s"), (int, float)) else ""))
    return out
