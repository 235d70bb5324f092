#!/usr/bin/env bash
# The Python side is packages (harness, baselines, ci; megatrain.tools) run as modules from
# the repo root: no file edits sys.path (a .py file, or Python inside a shell test or a doc),
# the module graph has no circle (imports inside functions count: a circle dodged that way is
# still one), every module imports alone in a fresh interpreter, and no command line runs one
# of those modules by its path (`python3 -m harness.sweep.run`, never the file harness/sweep/run.py).
. "$(dirname "$0")/lib.sh" python3
python3 - > "$tmp/out" 2>&1 <<'PY'
import ast, os, re, subprocess, sys

TOPS = ("harness", "baselines", "ci", "megatrain")
files = subprocess.run(["git", "ls-files", "-z"], capture_output=True, text=True).stdout.split("\0")
py = [f for f in files if f.endswith(".py")]
bad = 0

def say(msg):
    global bad
    bad += 1
    print(msg)

# 1. sys.path edits: in Python's syntax tree, and as text anywhere (code in strings, shell, docs)
EDIT = re.compile("sys" + r"\.path\s*(\.\s*(insert|append|extend|remove)\b|(\[[^\]]*\])?\s*\+?=(?!=))|site\.addsitedir")
for f in files:
    if not f or "/data/" in f or not os.path.isfile(f):
        continue
    try:
        text = open(f, encoding="utf-8").read()
    except UnicodeDecodeError:
        continue
    for n, line in enumerate(text.splitlines(), 1):
        if EDIT.search(line):
            say(f"{f}:{n}: edits sys.path: {line.strip()[:100]}")
for f in py:
    for node in ast.walk(ast.parse(open(f).read(), f)):
        if isinstance(node, ast.ImportFrom) and node.module == "sys" and any(a.name == "path" for a in node.names):
            say(f"{f}:{node.lineno}: imports sys.path by name")

# 2. the module graph of the packages: every import, at the top or inside a function
def module_of(f):
    parts = f[:-3].split("/")
    return parts[:-1] if parts[-1] == "__init__" else parts
mods = {".".join(module_of(f)): f for f in py if f.split("/")[0] in TOPS and "/tests/" not in f}
def target(name):
    return name if name in mods else None
edges = {m: set() for m in mods}
for m, f in mods.items():
    pkg = module_of(f) if f.endswith("__init__.py") else module_of(f)[:-1]
    for node in ast.walk(ast.parse(open(f).read(), f)):
        got = []
        if isinstance(node, ast.Import):
            got = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (pkg[:len(pkg) - node.level + 1] if node.level else []) + (node.module.split(".") if node.module else [])
            b = ".".join(base)
            got = [b + "." + a.name if target(b + "." + a.name) else b for a in node.names]
        for g in got:  # a bare name of a module beside this one: the old script-directory import
            g = g if target(g) or not target(".".join(pkg + [g])) else ".".join(pkg + [g])
            if target(g) and g != m:
                edges[m].add(g)
index, low, stack, on, sccs = {}, {}, [], set(), []
def visit(v):  # Tarjan's strongly connected components
    index[v] = low[v] = len(index)
    stack.append(v); on.add(v)
    for w in sorted(edges[v]):
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        c = []
        while True:
            w = stack.pop(); on.discard(w); c.append(w)
            if w == v:
                break
        sccs.append(sorted(c))
sys.setrecursionlimit(10000)
for v in sorted(edges):
    if v not in index:
        visit(v)
for c in sccs:
    if len(c) > 1:
        say("import circle: " + " <-> ".join(c))
print(f"{len(mods)} modules, {sum(len(e) for e in edges.values())} imports between them")

# 3. each module alone, in a fresh interpreter from the repo root (third-party absentees skipped)
for m in sorted(mods):
    r = subprocess.run([sys.executable, "-c", f"import {m}"], capture_output=True, text=True)
    if r.returncode:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        miss = re.match(r"ModuleNotFoundError: No module named '([\w.]+)'", last)
        if miss and miss.group(1).split(".")[0] not in TOPS:
            print(f"skipped {m}: {last}")
        else:
            say(f"{m} does not import: {last}")

# 4. no command runs a module of the packages by its path
RUN = re.compile(r"(python3?|\$\{?PY\}?\"?)\s+\"?((harness|baselines/peers|ci|megatrain/tools)/[\w/]+)\.py\b")
for f in files:
    if not f or "/data/" in f or f.endswith((".jsonl", ".json")) or not os.path.isfile(f):
        continue
    try:
        text = open(f, encoding="utf-8").read()
    except UnicodeDecodeError:
        continue
    for n, line in enumerate(text.splitlines(), 1):
        for mo in RUN.finditer(line):
            if mo.group(2).replace("/", ".") in mods and not mo.group(2).endswith(("official_launch", "official_rehearse")):
                say(f"{f}:{n}: runs {mo.group(2)}.py by its path; HINT: python3 -m {mo.group(2).replace('/', '.')}")
sys.exit(1 if bad else 0)
PY
rc=$?
cat "$tmp/out"
[ "$rc" = 0 ] && pass "no sys.path edit, no import circle, every module imports, modules run with -m" ||
  fail "the Python packages (above)"
finish
