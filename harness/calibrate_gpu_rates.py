"""calibrate_gpu_rates.py: the optional measured GPU rates of a hardware profile from
mt-microbench rows (calibrate_profile.py writes them; experiments/hardware/README.md has the keys,
megatrain/backends/sim/sim.h how the sim prices with them):

gpu.gemm_bwd_efficiency   gemm_bwd/cuda/bf16/<N>/<IC>/<OC>/<flags>, counter tflops (4*N*IC*OC per
                          call: dinp and dW). Each shape's efficiency e_k = tflops / (peak_tflops.bf16
                          x the sim's size factor at (N, IC, OC)), the factor gemm_efficiency is
                          divided by too (both products have W = N*IC*OC and the same smallest
                          dimension). The key is the one efficiency at which the sim prices every
                          measured shape in their measured total time: sum(a_k) / sum(a_k / e_k),
                          a_k = 4*N*IC*OC / factor_k. Capped at 1.
gpu.kernel_gbps.<kernel>  kernel/cuda/bf16/<kernel>/<R>/<D>, counter sim_gbps (the sim's byte count
                          of one call per second), at the largest R*D measured. rope_bwd, unless
                          measured itself, is derived from rope_fwd: one kernel (cuda_rope.cu
                          rope<DIR>), run in place both ways.
gpu.attention_work_tflops.<kernel>
                          attention/cuda/bf16/<B>/<T>/<NH>/<NKV>, counter tflops (causal forward +
                          backward), the implementation in the row's label: one point
                          [B*NH*T^2, tflops] per row (the median where two rows have one work).

A row of these families that is malformed (its arguments, a missing counter or label, a kernel
the profile has no key for) raises RowError: one line, the bench named. Rows with
error_occurred never get here (calibrate_profile.Runs sets them aside).
"""
import re
import statistics

# megatrain/model/hardware_rates.c kernel_names: the kernels the sim prices by bytes
# (harness/tests/test_calibrate_profile.sh checks the two lists agree).
KERNELS = ("embedding_fwd", "embedding_bwd", "rmsnorm_fwd", "rmsnorm_bwd", "add_rmsnorm_fwd", "rmsnorm_bwd_add",
           "qk_norm_fwd", "qk_norm_bwd", "rope_fwd", "rope_bwd", "swiglu_fwd", "swiglu_bwd", "add", "xent_fwd_bwd",
           "cast")
ATTN_MAX_POINTS = 16  # model/hardware_profile.h MT_HW_ATTN_POINTS
NAME = re.compile(r"^[a-z0-9_]+$")


class RowError(Exception):
    pass


def _rows(runs, prefix):
    """The base names under prefix/ of every non-error row, split at '/'."""
    return sorted(n for n in runs.names() if n.startswith(prefix + "/"))


def _positive(runs, name, counter):
    v = runs.value(name, counter)
    if v is None or not v > 0:
        raise RowError("%s: expected a positive counter '%s' (an mt-microbench row of another version?)"
                       % (name, counter))
    return v


def _ints(name, parts, n, form):
    if len(parts) != n or not all(p.isdigit() and int(p) > 0 for p in parts[:n]):
        raise RowError("%s: expected %s" % (name, form))
    return tuple(int(p) for p in parts)


def _other_dtypes(runs, fam, notes):
    for n in _rows(runs, fam + "/cuda"):
        if not n.startswith(fam + "/cuda/bf16/"):
            notes.append("%s: not bf16, not a profile figure (the sim prices its measured rates at bf16)" % n)


def gemm_bwd(runs, peak, size_factor, notes):
    """(efficiency, how) from gemm_bwd/cuda/bf16 rows, or None without any."""
    _other_dtypes(runs, "gemm_bwd", notes)
    form = "gemm_bwd/cuda/bf16/<N>/<IC>/<OC>/<flags> (positive N, IC, OC)"
    shapes = {}
    for name in _rows(runs, "gemm_bwd/cuda/bf16"):
        parts = name.split("/")[3:]
        if len(parts) != 4 or not parts[3].isdigit():
            raise RowError("%s: expected %s" % (name, form))
        N, IC, OC = _ints(name, parts[:3], 3, form)
        shapes[name] = (N, IC, OC, _positive(runs, name, "tflops"))
    if not shapes:
        return None
    num = den = 0.0
    for name, (N, IC, OC, tf) in shapes.items():
        f = size_factor((N, IC, OC))
        e = tf / (peak * f)
        a = 4.0 * N * IC * OC / f
        num, den = num + a, den + a / e
        notes.append("%s: %.1f TFLOP/s = %.3f of the bf16 peak, %.4f after the sim's size factor %.4f"
                     % (name, tf, tf / peak, e, f))
    eff = num / den
    how = ("%s: the one efficiency pricing these backward GEMMs (dinp + dW) in their measured total time, "
           "through the sim's size factor, / peak_tflops.bf16 %g" % (", ".join(sorted(shapes)), peak))
    if eff > 1.0:
        how += " (%.3f, capped at 1)" % eff
        eff = 1.0
    return eff, how


def kernels(runs, notes):
    """{kernel: (gbps, bench name, derived-from or None)} from kernel/cuda/bf16 rows."""
    _other_dtypes(runs, "kernel", notes)
    form = "kernel/cuda/bf16/<kernel>/<R>/<D> (positive R, D)"
    by = {}
    for name in _rows(runs, "kernel/cuda/bf16"):
        parts = name.split("/")[3:]
        if len(parts) != 3:
            raise RowError("%s: expected %s" % (name, form))
        k = parts[0]
        if k not in KERNELS:
            raise RowError("%s: no profile key gpu.kernel_gbps.%s (kernels the sim prices by bytes: %s)"
                           % (name, k, ", ".join(KERNELS)))
        R, D = _ints(name, parts[1:], 2, form)
        by.setdefault(k, []).append((R * D, name, _positive(runs, name, "sim_gbps")))
    out = {}
    for k, rows in sorted(by.items()):
        rows.sort()
        _, name, gbps = rows[-1]
        for _, other, g in rows[:-1]:
            notes.append("%s: %.0f GB/s (the profile takes %s, the largest)" % (other, g, name))
        out[k] = (gbps, name, None)
    if "rope_fwd" in out and "rope_bwd" not in out:
        out["rope_bwd"] = (out["rope_fwd"][0], out["rope_fwd"][1], "rope_fwd")
    return out


def attention_work(runs, notes):
    """{kernel: ([[B*NH*T^2, tflops], ...], [bench names])} from attention/cuda/bf16 rows."""
    _other_dtypes(runs, "attention", notes)
    form = "attention/cuda/bf16/<B>/<T>/<NH>/<NKV> (positive)"
    pts, names = {}, {}
    for name in _rows(runs, "attention/cuda/bf16"):
        B, T, NH, _ = _ints(name, name.split("/")[3:], 4, form)
        tf = _positive(runs, name, "tflops")
        label = runs.label(name)
        if not isinstance(label, str) or not NAME.match(label):
            raise RowError("%s: expected a label naming the implementation (cudnn, native), found %r" % (name, label))
        pts.setdefault(label, {}).setdefault(B * NH * T * T, []).append(tf)
        names.setdefault(label, []).append(name)
    out = {}
    for k, by_work in sorted(pts.items()):
        table = [[w, round(statistics.median(v), 2)] for w, v in sorted(by_work.items())]
        if len(table) > ATTN_MAX_POINTS:
            raise RowError("attention/cuda/bf16 (%s): %d works measured, the profile holds at most %d"
                           % (k, len(table), ATTN_MAX_POINTS))
        for w, v in sorted(by_work.items()):
            if len(v) > 1:
                notes.append("attention %s: %d shapes of work %d: the median of %s TFLOP/s" % (k, len(v), w, v))
        out[k] = (table, sorted(names[k]))
    return out
