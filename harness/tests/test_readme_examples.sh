#!/usr/bin/env bash
# README's examples stay true (issue 40): every command in the code blocks of "Two commands"
# and "Try it" runs (exit 0; stdout JSON lines, the keys README lists for a step, the steps its
# comment says, one JSON line per --compare profile, the --trace files; a train with --steps N,
# on a pty: N short step lines and a summary, no JSON), unless the comment
# line above its block names it as not run (a build, a model directory, or minutes). Every
# block under a `<!-- example: run and compared ... -->` line in README.md and docs/*.md runs
# its `$ ` command and its stderr must be the block's lines, character for character.
# MT_DOCS_ROOT=DIR reads the documents from another tree (how the test was shown to fail);
# MT_EXAMPLES_WRITE=1 rewrites each shown output with what its command prints now.
. "$(dirname "$0")/lib.sh" python3 bins
# What README says does not depend on the architecture, and the 150-step default run alone
# takes over ten minutes under qemu-user: the native suite checks it.
if [ -n "${MT_EMULATED:-}" ]; then echo "skipped: README's examples are checked by the native suite"; exit 77; fi
MT_DOCS_ROOT=${MT_DOCS_ROOT:-$PWD} python3 - "$tmp" <<'PY'
import glob, json, os, re, shlex, shutil, subprocess, sys

tmp, repo, docs = sys.argv[1], os.getcwd(), os.environ["MT_DOCS_ROOT"]
fails = []
def fail(msg):
    fails.append(msg); print("FAIL " + msg)
def ok(msg):
    print("ok   " + msg)

# the commands run as a newcomer types them, from a directory like the repository's root
work = os.path.join(tmp, "w")
os.makedirs(os.path.join(work, "build"))
os.symlink(os.environ["MT_BIN"], os.path.join(work, "build", "bin"))
for d in ("experiments", "results", "megatrain"):
    os.symlink(os.path.join(repo, d), os.path.join(work, d))

def run(cmd):
    return subprocess.run(["bash", "-c", cmd], cwd=work, capture_output=True, text=True, timeout=600)

def blocks(text, section):
    """(tag line or '', code lines) of each fenced block in a README ## section."""
    m = re.search(r"^## " + re.escape(section) + r"\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not m:
        fail(f"README.md has no section '## {section}'"); return []
    return re.findall(r"(?:(<!--[^\n]*-->)\n)?```\n(.*?)```", m.group(1), re.S)

def commands(code):
    """(command, its comment) of each command line; continuation lines joined."""
    out, cur, prev_comment = [], "", ""
    for line in code.split("\n"):
        if not cur and line.lstrip().startswith("#"):
            prev_comment = line; continue
        cur += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if line.endswith("\\"):
            continue
        if cur.strip():
            cmd, _, comment = cur.partition(" #")
            out.append((" ".join(cmd.split()), comment + " " + prev_comment))
        cur, prev_comment = "", ""
    return out

readme = open(os.path.join(docs, "README.md")).read()
step_keys = re.search(r"stdout carries one JSON object per step \((.*?): \[", readme, re.S)
keys = re.findall(r"[a-z_0-9]+", " ".join(re.findall(r"`([^`]*)`", step_keys.group(1)))) if step_keys else []
print("step keys README lists: " + " ".join(keys))
if not keys:
    fail("README.md no longer lists the keys of a step's JSON line ('stdout carries one JSON object per step (...)')")

def json_lines(text, what):
    rows = []
    for i, l in enumerate(text.splitlines(), 1):
        try:
            rows.append(json.loads(l))
        except ValueError:
            fail(f"{what}: stdout line {i} is not JSON: {l[:100]}"); return None
    return rows

nrun = 0
for section in ("Two commands", "Try it"):
    for tag, code in blocks(readme, section):
        m = re.match(r"<!-- not run by harness/tests/test_readme_examples\.sh \([^)]*\): (.*) -->$", tag or "")
        skip = [s.strip() for s in m.group(1).split(";")] if m else []
        for cmd, comment in commands(code):
            if any(cmd == s or cmd.startswith(s + " ") for s in skip):
                print(f"--   not run (README says so): {cmd[:90]}"); continue
            nrun += 1
            r = run(cmd)
            what = f"README '{section}': {cmd[:100]}"
            if r.returncode != 0:
                fail(f"{what}: exit {r.returncode}: {r.stderr.strip()[-300:]}"); continue
            redirect = re.search(r" > (\S+)$", cmd)
            out = open(os.path.join(work, redirect.group(1))).read() if redirect else r.stdout
            rows = json_lines(out, what)
            if not rows:
                fail(f"{what}: no JSON line on stdout") if rows is not None else None; continue
            compare = re.search(r"--compare (\S+)", cmd)
            if compare and len(rows) != len(compare.group(1).split(",")):
                fail(f"{what}: {len(rows)} JSON lines for {len(compare.group(1).split(','))} profiles")
            steps = [x for x in rows if "step" in x and "loss" in x]
            if cmd.split()[:2] == ["build/bin/megatrain"] or " train " in f" {cmd} ":
                if not steps:
                    fail(f"{what}: no step line on stdout")
                for k in keys:
                    if steps and k not in steps[-1]:
                        fail(f"{what}: the step line has no '{k}' (README lists it)")
                n = re.search(r"in (\d+) steps", comment)
                if n and steps and steps[-1]["step"] != int(n.group(1)):
                    fail(f"{what}: the last step is {steps[-1]['step']}, README says {n.group(1)}")
            trace = re.search(r"--trace (\S+)", cmd)
            for f in ([trace.group(1), trace.group(1) + ".ops.json"] if trace else []):
                try:
                    json.load(open(os.path.join(work, f)))
                except (OSError, ValueError) as e:
                    fail(f"{what}: --trace file {f}: {e}")
            ok(f"{what} ({len(rows)} JSON lines)")
            # on a terminal (a pty from `script`): a short line a step and a summary, no JSON
            nsteps = re.search(r"--steps (\d+)", cmd)
            if nsteps and " train " in f" {cmd} " and shutil.which("script") and not redirect:
                r = run(f"script -qec {shlex.quote(cmd)} /dev/null")
                tty = r.stdout.replace("\r", "").splitlines()
                lines = [l for l in tty if re.match(r"step \d+/\d+ \| loss .* \| [0-9.]+ ms \| \d+ tok/s \| \d+ TFLOPS \| ETA ", l)]
                if r.returncode != 0 or len(lines) != int(nsteps.group(1)):
                    fail(f"{what}, on a terminal: exit {r.returncode}, {len(lines)} step lines for --steps {nsteps.group(1)}")
                elif any(l.startswith("{") for l in tty) or not any(l.startswith("done: ") for l in tty):
                    fail(f"{what}, on a terminal: a JSON line, or no 'done:' summary")
                else:
                    ok(f"{what}, on a terminal: {len(lines)} step lines and a summary, no JSON")

# shown output: the block's `$ ` command, run, prints (stderr) the block's other lines
for path in [os.path.join(docs, "README.md")] + sorted(glob.glob(os.path.join(docs, "docs", "*.md"))):
    text = open(path).read()
    for code in re.findall(r"^<!-- example: run and compared by harness/tests/test_readme_examples\.sh -->\n```\n(.*?)```",
                           text, re.M | re.S):
        lines = code.rstrip("\n").split("\n")
        parts, i = [], 0
        while i < len(lines):
            parts.append(lines[i].removeprefix("$ ").rstrip("\\").strip())
            i += 1
            if not lines[i - 1].endswith("\\"):
                break
        cmd = " ".join(" ".join(parts).split())
        what = f"{os.path.relpath(path, docs)}: {cmd[:90]}"
        nrun += 1
        r = run(cmd)
        if r.returncode != 0:
            fail(f"{what}: exit {r.returncode}"); continue
        want, got = lines[i:], r.stderr.rstrip("\n").split("\n")
        if want != got and os.environ.get("MT_EXAMPLES_WRITE") == "1":
            text = text.replace(code, "\n".join(lines[:i] + got) + "\n", 1)
            open(path, "w").write(text)
            ok(f"{what}: rewrote its {len(got)} lines"); continue
        if want != got:
            diff = next(((n, w, g) for n, (w, g) in enumerate(zip(want, got)) if w != g), (min(len(want), len(got)), "", ""))
            fail(f"{what}: the output shown differs from what it prints now at line {diff[0] + 1} "
                 f"(shown {len(want)} lines, printed {len(got)}; HINT: MT_EXAMPLES_WRITE=1 bash harness/tests/test_readme_examples.sh):\n  shown:   {diff[1][:150]}\n  printed: {diff[2][:150]}")
        else:
            ok(f"{what} (its {len(want)} lines as shown)")

if nrun < 5:
    fail(f"only {nrun} examples ran (the parser finds too few commands)")
sys.exit(1 if fails else 0)
PY
rc=$?
[ "$rc" = 0 ] || { echo "FAIL: a README example is stale (see above)"; exit 1; }
echo "all checks passed"
