#!/usr/bin/env bash
# The design lives in the repository (docs/DESIGN.md, docs/REFERENCE.md) and stays honest:
#  1. docs/DESIGN.md's "To add" lists: every file they name exists (NAME: its directory
#     does), each of the six lists names files, and the names of each kind of thing are
#     only where its "Only here:" line says, and in none of its "Naming none:" files;
#  2. every `docs/DESIGN.md#anchor` / `docs/REFERENCE.md#anchor` anywhere is a section there;
#  3. nothing outside docs/ points at the design or the figures anywhere else: no path into
#     the shared folder above the repository, no bare DESIGN.md / REFERENCE.md.
# MT_DOCS_ROOT=DIR runs the checks on another tree (how the test was shown to fail).
set -uo pipefail
cd "${MT_DOCS_ROOT:-$(dirname "$0")/../..}" || exit 1
command -v python3 >/dev/null || { echo "skipped: python3 not installed"; exit 77; }
python3 - <<'EOF'
import glob, json, os, re, subprocess, sys

fails = []
def fail(msg):
    fails.append(msg)
    print("FAIL: " + msg)

TOP = ("megatrain/", "baselines/", "experiments/", "harness/", "results/", "plots/", "ci/", "docs/")
TOP_FILES = ("README.md", "REPRODUCE.md", "CMakeLists.txt", "Makefile")

def slug(heading):  # GitHub's anchor for a heading
    h = heading.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")

def sections(path):
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", open(path).read(), re.M)}

def read(path):
    try:
        return open(path, errors="replace").read()
    except OSError:
        return ""

for d in ("docs/DESIGN.md", "docs/REFERENCE.md"):
    if not os.path.isfile(d):
        fail(f"{d} is missing")
if fails:
    sys.exit(1)

# ---- 1. the "To add" lists
design = read("docs/DESIGN.md")
m = re.search(r"^## To add\n(.*?)(?=^## |\Z)", design, re.M | re.S)
if not m:
    fail('docs/DESIGN.md has no "## To add" section')
    sys.exit(1)
subs = dict(re.findall(r"^### To add an? (.+?)\n(.*?)(?=^### |\Z)", m.group(1), re.M | re.S))
KINDS = ("backend", "schedule", "peer", "hardware profile", "experiment", "campaign part")
for k in KINDS:
    if k not in subs:
        fail(f'docs/DESIGN.md: no "### To add a(n) {k}" list')

def paths_in(text):
    out = []
    for tok in re.findall(r"`([^`\s]+)`", text):
        if tok.startswith(TOP) or tok in TOP_FILES:
            out.append(tok)
    return out

def exists(p):
    if "NAME" in p:  # the new thing: the directory it goes in must exist
        parent = p[:p.index("NAME")].rstrip("/")
        return os.path.isdir(parent)
    return os.path.exists(p.rstrip("/"))

def line_block(text, label):  # the paragraph that starts with `label`, up to a blank line or the next label
    m = re.search(rf"^{label}(.*?)(?=^\n|^Naming none:|^Only here:|\Z)", text, re.M | re.S)
    return m.group(1) if m else None

named = 0
for k, body in subs.items():
    ps = paths_in(body)
    if not ps:
        fail(f"To add a {k}: names no file")
    for p in ps:
        named += 1
        if not exists(p):
            fail(f"To add a {k}: {p} does not exist")

def sources(roots, exts, skip_tests=True):
    out = []
    for r in roots:
        for dp, dn, fn in os.walk(r):
            if skip_tests and "tests" in dp.split(os.sep):
                continue
            for f in fn:
                if f.endswith(exts):
                    out.append(os.path.join(dp, f).replace(os.sep, "/"))
    return sorted(out)

C = (".c", ".h", ".cu", ".cuh")
def quoted_names(path, pattern):
    return re.findall(pattern, read(path))

# Per kind: the names, where they may not appear except in `Only here:`, and how a use looks.
def strcmp_use(name):
    return lambda line: "strcmp" in line and f'"{name}"' in line
def quoted_use(name):
    return lambda line: f'"{name}"' in line or f"'{name}'" in line

def parts_names():
    try:
        from ci.gpu_campaign import parts
        return [p["name"] for p in parts.PARTS]
    except Exception as e:
        fail(f"ci/gpu_campaign/parts.py: cannot read PARTS ({e})")
        return []

def experiments():
    out = []
    for f in sorted(glob.glob("experiments/sweeps/*.json")):
        try:
            out.append(json.load(open(f))["experiment"])
        except Exception as e:
            fail(f"{f}: no experiment ({e})")
    return out

kinds = {
    "backend": (sorted(d for d in os.listdir("megatrain/backends") if os.path.isdir("megatrain/backends/" + d)),
                sources(["megatrain"], C), strcmp_use),
    "schedule": (quoted_names("megatrain/engine/schedule.c", r'\.name = "([^"]+)"'), sources(["megatrain"], C), strcmp_use),
    "peer": (quoted_names("megatrain/engine/peer.c", r'\.name = "([^"]+)"'), sources(["megatrain"], C), strcmp_use),
    "hardware profile": ([os.path.basename(f)[:-5] for f in sorted(glob.glob("experiments/hardware/*.json"))],
                         sources(["megatrain", "harness"], C), quoted_use),
    "experiment": (experiments(), [], quoted_use),
    "campaign part": (parts_names(), sources(["ci"], (".py", ".sh")), quoted_use),
}
checked = 0
for k, (names, scope, use) in kinds.items():
    body = subs.get(k, "")
    only = line_block(body, "Only here:")
    if only is None:
        fail(f'To add a {k}: no "Only here:" line')
        continue
    allowed = set(p for p in paths_in(only) if "NAME" not in p)
    for p in allowed:
        if not os.path.isfile(p):
            fail(f"To add a {k}: Only here names {p}, which is not a file")
    if not names:
        fail(f"To add a {k}: found no {k} names to check")
    none = line_block(body, "Naming none:")
    none_files = paths_in(none) if none is not None else []
    for p in none_files:
        if not os.path.isfile(p):
            fail(f"To add a {k}: Naming none names {p}, which is not a file")
    for f in list(dict.fromkeys(scope + none_files)):
        if f in allowed and f not in none_files:
            continue
        lines = read(f).splitlines()
        for n in names:
            use_fn = use(n)
            for i, line in enumerate(lines, 1):
                if use_fn(line):
                    where = "Naming none" if f in none_files else "Only here"
                    fail(f"To add a {k}: {f}:{i} names {k} '{n}' (docs/DESIGN.md's {where} says it does not): {line.strip()[:120]}")
        checked += 1

# ---- 2 and 3: every file the repository holds (tracked or new, not ignored)
try:
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], capture_output=True,
                           text=True, check=True).stdout.split("\n")
    files = [f for f in files if f and os.path.isfile(f)]
except Exception:
    files = [os.path.join(dp, f)[2:] for dp, dn, fn in os.walk(".") for f in fn
             if not dp.startswith(("./.git", "./build"))]
anchors = {"DESIGN": sections("docs/DESIGN.md"), "REFERENCE": sections("docs/REFERENCE.md")}
outside = re.compile(r"shared/(DESIGN|REFERENCE|STYLE)\.md|\.\./shared/|shared/gpu-runs|\.library/|device README|\bKINDS\.md")
bare = re.compile(r"(?<![\w/.-])(DESIGN|REFERENCE)\.md")
cited = 0
for f in files:
    if f.startswith(".git/") or f == "harness/tests/test_design_docs.sh":
        continue
    text = read(f)
    if "\0" in text[:4096]:
        continue
    for i, line in enumerate(text.splitlines(), 1):
        for m in re.finditer(r"docs/(DESIGN|REFERENCE)\.md#([A-Za-z0-9_-]*)", line):
            cited += 1
            if m.group(2) not in anchors[m.group(1)]:
                fail(f"{f}:{i}: docs/{m.group(1)}.md#{m.group(2)} is not a section of docs/{m.group(1)}.md")
        if f.startswith("docs/"):
            continue
        if outside.search(line):
            fail(f"{f}:{i}: points outside the repository for the design or a figure: {line.strip()[:140]}")
        if bare.search(line):
            fail(f"{f}:{i}: a bare DESIGN.md / REFERENCE.md (say docs/DESIGN.md#section): {line.strip()[:140]}")

print(f"{named} files named by the To-add lists, {checked} files searched for names, {cited} section citations")
if fails:
    print(f"{len(fails)} failed")
    sys.exit(1)
print("all checks passed")
EOF
