"""Results rows: the schema, JSON Lines in and out, the filters every reader applies."""
import json
import os

from . import safepath, schema
from .schema import ENV_KEYS, RESULT_KEYS, RESULTS_SCHEMA, RowsError  # noqa: F401 (the schema, here since before)

# results/ files that are not results rows (their own schema, their own writer and test):
# the claims, figures and filing leave them alone.
SIDE_FILES = {"cpu_optimizers.jsonl": "megatrain.cpu_optimizers/1",  # baselines/peers/cpu_optimizers.py
              "peer_hooks.jsonl": "megatrain.peer_hooks/1"}  # baselines/peers/stage3_hooks.py


# ---------------------------------------------------------------- JSON Lines
def load_jsonl(path, shape=None):
    """Objects of a JSON Lines file ([] when it does not exist), strictly parsed
    (schema.loads: no NaN or Infinity); with shape ("results", "baseline") each is also a
    good results row (schema.row_problems). A bad line raises RowsError naming file:line."""
    rows = []
    if not os.path.exists(path):
        return rows
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise RowsError(f"{path}: cannot read ({e.strerror})")
    # a file of rows is UTF-8 without a byte-order mark, one row a line ('\r\n' ends and
    # empty lines are tolerated: they change no row); a row cut short by an interrupted
    # writer does not parse and is refused like any bad line
    if data.startswith(b"\xef\xbb\xbf"):
        raise RowsError(f"{path}:1: starts with a UTF-8 byte-order mark (not JSON Lines); HINT: save it without one")
    lines = data.split(b"\n")
    for n, raw in enumerate(lines, 1):
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError as e:
            raise RowsError(f"{path}:{n}: not UTF-8 text ({e.reason} at byte {e.start})")
        if not line:
            continue
        cut = " (the last line has no end: a row cut short?)" if n == len(lines) else ""
        try:
            r = schema.parse_line(line, f"{path}:{n}")
        except RowsError as e:
            raise RowsError(f"{e}{cut}")
        side = SIDE_FILES.get(os.path.basename(path)) if not shape else None
        if shape:
            schema.check_row(r, f"{path}:{n}", shape)
        elif side:  # a side file's rows, by its own schema
            bad = schema.side_row_problems(r, side)
            if bad:
                raise RowsError(f"{path}:{n}: {'; '.join(bad)}")
        elif not isinstance(r, dict):
            raise RowsError(f"{path}:{n}: a JSON {type(r).__name__}, not an object")
        rows.append(r)
    return rows


def load_rows(path, shape="results"):
    """The results rows of a file, each checked (schema.row_problems); load_jsonl."""
    return load_jsonl(path, shape)


def load_results_files(results_dir):
    """{file name: rows} of every results/*.jsonl (baselines/ and SIDE_FILES excluded)."""
    out = {}
    if os.path.isdir(results_dir):
        for name in sorted(os.listdir(results_dir)):
            if name.endswith(".jsonl") and name not in SIDE_FILES:
                out[name] = load_rows(os.path.join(results_dir, name))
    return out


def load_results(results_dir):
    """All rows of every results/*.jsonl (baselines/ and SIDE_FILES excluded), in file order."""
    return [r for rows in load_results_files(results_dir).values() for r in rows]


def dumps_line(row, compact=True, shape=None, where="a row to write"):
    """One JSON line of `row`, as strict as the readers: never NaN or Infinity (ValueError,
    which RowsError is), and with `shape` ("results", "baseline") a row the row check
    accepts, so that no writer emits a row a reader would refuse."""
    if shape:
        schema.check_row(row, where, shape)
    sep = (",", ":") if compact else None
    try:
        return json.dumps(row, separators=sep, allow_nan=False) + "\n"
    except ValueError as e:
        raise RowsError(f"{where}: {e} (NaN and Infinity are not JSON figures)")


def write_jsonl(path, rows, compact=True, shape=None):
    """Replaces `path` with `rows`, one JSON line each, atomically (safepath.write_bytes: a
    temp file beside the target, then one rename: an interrupted run leaves the old file
    whole, and the file keeps its mode). compact: no spaces after ',' and ':' (the sweep's
    files); else json.dumps' default (the peers'). Every row is checked first (dumps_line):
    a bad one raises RowsError and nothing is written."""
    side = SIDE_FILES.get(os.path.basename(path)) if not shape else None
    for i, r in enumerate(rows if side else (), 1):  # a side file's rows by their own schema
        bad = schema.side_row_problems(r, side)
        if bad:
            raise RowsError(f"{path}: row {i}: {'; '.join(bad)}")
    text = "".join(dumps_line(r, compact, shape, f"{path}: row {i}") for i, r in enumerate(rows, 1))
    safepath.write_bytes(path, text.encode())


def append_jsonl(path, row, shape=None):
    """Appends one compact line (dumps_line: checked first); a single write() of a complete
    line, so concurrent appenders never interleave within a row."""
    line = dumps_line(row, True, shape, f"{path}: the row to append").encode()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- filters
def ok(r, need="tokens_per_s"):
    """A row with a timing: no error, step_ms set, and the figure `need` computed; never a
    row timed with per-phase synchronizes (timing "phases", resultslib/timing.py): its step
    times carry the timers' cost, so no ratio or figure is taken from it."""
    return "error" not in r and r.get("timing") != "phases" and r.get("step_ms") and r.get(need) is not None


def field(r, path):
    """A (dotted) field of a row: field(r, "env.gpu_name"); None where absent."""
    v = r
    for part in path.split("."):
        if not isinstance(v, dict):
            return None
        v = v.get(part)
    return v


def matches(r, where):
    """Whether a row has every field of `where` (dotted keys; a list value: any of them)."""
    for k, want in (where or {}).items():
        v = field(r, k)
        if (v not in want) if isinstance(want, list) else (v != want):
            return False
    return True


def tree_state(r):
    """'clean', 'dirty' or 'unknown': the git state of the tree that made the row."""
    d = (r.get("env") or {}).get("git_dirty")
    return "clean" if d is False else "dirty" if d is True else "unknown"


def row_label(m):
    """A row's configuration in one line (model, system, batch, length, precision; depth and
    variant where set), as the sim and peer checks name it."""
    return (f"{m['model']} {m['system']} b{m['batch']} T{m['seq_len']} {m['precision']}"
            + (f" L{m['layers_run']}" if m.get("layers_run") != m.get("layers_model") else "")
            + (f" {m['variant']}" if m.get("variant") else ""))
