"""Hardware profiles (experiments/hardware/NAME.json, schema megatrain.hardware/1) by
name, and by the GPU of a machine.

A profile that describes a machine a GPU runs in lists the strings of the GPU's name it
matches in `gpu.name_match` (experiments/hardware/README.md); the C planner's `--hardware
measured` reads the same key (megatrain/planner/measured_profile.c). A GPU name picks the
first profile, in name order, with one of its strings in the name; "*" marks the profile
taken when none matches, where a caller asks for one (fallback=True).
"""
import functools
import os

from . import safepath, schema

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANY = "*"


def hardware_dir():
    """$MT_HARDWARE_DIR (tests), else experiments/hardware."""
    return os.environ.get("MT_HARDWARE_DIR") or os.path.join(REPO, "experiments", "hardware")


def hardware_profile(name):
    """The parsed experiments/hardware/NAME.json (or a path ending in .json), None if absent.
    NAME is a plain name (safepath.PathError otherwise: '../x' never leaves the folder); the
    file is read strictly (schema.RowsError naming it when it is not a JSON object)."""
    if not name or name == "measured":
        return None
    if name.endswith(".json"):  # a path the user gave, as megatrain --hardware takes one
        path = name
    else:
        path = os.path.join(hardware_dir(), safepath.name(name, "hardware profile") + ".json")
    if not os.path.exists(path):
        return None
    return schema.load_json(path)


def profiles():
    """{name: gpu.name_match} of every profile that has the key, in name order."""
    return _profiles(hardware_dir())


@functools.lru_cache(maxsize=None)
def _profiles(d):
    out = {}
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if f.endswith(".json"):
            m = (schema.load_json(os.path.join(d, f)).get("gpu") or {}).get("name_match")
            if m:
                out[f[:-len(".json")]] = list(m)
    return out


def profile_of_gpu(gpu_name, fallback=False):
    """The profile of the machine with this GPU (gpu.name_match); with fallback, the
    profile marked "*" where none matches (no GPU at all included), else None."""
    table = profiles()
    g = gpu_name or ""
    for name, match in table.items():
        if any(m != ANY and m in g for m in match):
            return name
    if fallback:
        for name, match in table.items():
            if ANY in match:
                return name
    return None


def same_gpu(proj, meas):
    """A projection pairs with a measurement when its profile is the measured machine's."""
    hw = proj.get("hardware") or ""
    if meas.get("backend") == "cpu":
        return hw.startswith("cpu")
    return bool(hw) and hw == profile_of_gpu((meas.get("env") or {}).get("gpu_name"))
