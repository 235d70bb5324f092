"""Paths taken from data (a row's `trace` or `experiment`, a manifest's `part` or `tag`, an
archive's member), checked as names before anything is joined, read or written with them.

A name is one plain component: letters, digits, '.', '_', '-', starting with a letter or
digit (so never '', '.', '..' or a hidden file). A relative path is names joined by '/'.
`inside(root, rel)` is the path under root, refused unless it resolves inside root: no
absolute path, no '..', and no symlink (in root or on the way) that leads out of it.
`refuse_own_input(out, inputs)` stops a tool writing over a file it reads (the same path,
a hard link or a symlink to it) or into a folder it reads. `write_bytes`/`copy_file` replace a file atomically
(a temp file beside it, then one rename, which replaces a symlink rather than follow it).
"""
import os
import re
import stat
import tempfile

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class PathError(ValueError):
    """A path from data that is not a plain name, or leads out of its root: one line."""


def name(s, what="name"):
    """s itself when it is one plain component (NAME), else PathError."""
    if not isinstance(s, str) or not NAME.match(s):
        raise PathError(f"{what} {s!r} is not a plain name (letters, digits, '.', '_', '-'; no '/', no leading '.')")
    return s


def relative(rel, what="path", any_names=False):
    """rel itself when it is names joined by '/' (no absolute path, '..' or '.'), else
    PathError. any_names: a component may be any other name (an archive's member: a log
    with a space, a hidden file), still never '', '.' or '..'."""
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\0" in rel:
        raise PathError(f"{what} {rel!r} is not a relative path")
    for part in rel.split("/"):
        if any_names and part not in ("", ".", ".."):
            continue
        name(part, f"{what} {rel!r}: component")
    return rel


def _within(path, root):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def inside(root, rel, what="path"):
    """os.path.join(root, rel) after checking rel (relative()) and that it resolves inside
    root, every symlink on the way followed (one pointing out of root is refused)."""
    relative(rel, what)
    real_root = os.path.realpath(root)
    path = os.path.join(root, rel)
    if not _within(os.path.realpath(path), real_root):
        raise PathError(f"{what} {rel!r} leads out of {root} (a symlink on the way)")
    return path


def same_file(a, b):
    """Whether a and b are one file: the same path once symlinks are resolved, or a hard link."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def refuse_own_input(out, inputs, what="--out", out_is_dir=False):
    """PathError when `out` is one of `inputs` (same path, a hard or a soft link to one), lies
    inside an input that is a folder (a file among those the tool reads), or, for a tool that
    fills the folder `out` (out_is_dir: it replaces or removes files there), holds an input."""
    real_out = os.path.realpath(out)
    for i in inputs:
        if not i:
            continue
        if same_file(out, i):
            raise PathError(f"{what} {out} is the input {i} (the same file or a link to it): "
                            f"it would be overwritten; HINT: write elsewhere")
        real_in = os.path.realpath(i)
        if os.path.isdir(i) and _within(real_out, real_in):
            raise PathError(f"{what} {out} lies inside the input folder {i}: it would be written among "
                            f"what is read; HINT: write elsewhere")
        if out_is_dir and _within(real_in, real_out):
            raise PathError(f"{what} {out} holds the input {i}: the folder's files are replaced; "
                            f"HINT: write elsewhere")


def _mode_for(path):
    """The mode a replaced file keeps (its user's), else what a new file gets under the umask."""
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def write_bytes(path, data):
    """Replaces path with data atomically: a temp file beside it, then one rename (a
    symlink at path is replaced, never followed)."""
    if os.path.isdir(path) and not os.path.islink(path):
        raise PathError(f"{path} is a folder, not a file to write")
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def copy_file(src, dest):
    """Copies src's bytes over dest atomically (write_bytes); src is read, not linked."""
    with open(src, "rb") as f:
        write_bytes(dest, f.read())


def copy_into(src, root, rel, what="path"):
    """Copies src to root/rel once rel is checked to stay inside root (inside())."""
    dest = inside(root, rel, what)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    dest = inside(root, rel, what)  # again: the folder made just now may not be a link out
    copy_file(src, dest)
    return dest


__all__ = ["NAME", "PathError", "name", "relative", "inside", "same_file", "refuse_own_input",
           "write_bytes", "copy_file", "copy_into"]
